"""``UCVolumeDataset``: stream a volume folder's files into PyTorch through the shared local cache.

The folder is resolved and READ VOLUME-checked through the catalog and listed once, when the
dataset is created; the listing travels with the dataset to DataLoader workers (no listing storm).
Each stream (one rank's worker) takes its slice of the epoch's order (see
:mod:`uc_jupyter.data.partition`), fetches ahead with a small thread pool and yields local paths.

Example:
    >>> from uc_jupyter.data import UCVolumeDataset
    >>> ds = UCVolumeDataset("/Volumes/main/ml/images", recursive=True, shuffle=True)  # doctest: +SKIP
    >>> next(iter(ds))                                                                 # doctest: +SKIP
    '/root/.uc_jupyter/cache/pins/4242/0.circle_00417.png'
"""

from __future__ import annotations

import collections
import concurrent.futures as cf
import contextlib
import math
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt

from uc_jupyter.catalog import Catalog, get_catalog
from uc_jupyter.catalog import storage as st
from uc_jupyter.data.cache import CachedFile, FileCache
from uc_jupyter.data.partition import OnUneven
from uc_jupyter.data.remote import Listing, RemoteFile, RetryPolicy, fetch_file, list_volume
from uc_jupyter.data.stats import DatasetStats
from uc_jupyter.data.stream import PartitionedDataset, _Counters
from uc_jupyter.telemetry import producer

if TYPE_CHECKING:
    import fsspec

__all__ = ["UCVolumeDataset"]

CacheMode = Literal["auto", "always", "never"]
_MAX_PREFETCH = 64


class UCVolumeDataset(PartitionedDataset):
    """A torch ``IterableDataset`` over the files of a ``/Volumes/...`` folder, yielding local paths.

    Args:
        path: a ``/Volumes/<catalog>/<schema>/<volume>/<folder>`` path (READ VOLUME is checked).
        recursive: include sub-folders.
        include, exclude: glob patterns on the path below ``path`` (e.g. ``"*.png"``).
        shuffle, seed: one permutation per epoch from ``(seed, epoch)``, the same on every rank.
        cache: ``"auto"`` reads local ``file://`` volumes in place and caches everything else;
            ``"always"`` / ``"never"`` force either way.
        cache_dir, cache_max_bytes, min_free_bytes: the shared cache (see :class:`FileCache`).
        prefetch: downloads kept in flight per stream (default: adapts to latency and pace).
        on_uneven: ``"pad"`` (every rank yields the same count), ``"drop"`` or ``"allow"``.
        transform: applied to each local path in the stream; the file may vanish after it returns.
        label_by: ``"folder"`` yields ``(item, label)`` with labels numbering the first-level
            sub-folders in sorted order (``self.classes`` names them); files beside them are skipped.
        catalog: the catalog to resolve ``path`` with (default :func:`get_catalog`).

    Example:
        >>> ds = UCVolumeDataset("/Volumes/main/ml/images/circle")  # doctest: +SKIP
        >>> len(ds), ds.listing.total_bytes                           # doctest: +SKIP
        (1000, 231456)
    """

    def __init__(
        self,
        path: str,
        *,
        recursive: bool = False,
        include: str | Sequence[str] | None = None,
        exclude: str | Sequence[str] | None = None,
        shuffle: bool = False,
        seed: int = 0,
        cache: CacheMode = "auto",
        cache_dir: str | os.PathLike[str] | None = None,
        cache_max_bytes: int | None = None,
        min_free_bytes: int | None = None,
        prefetch: int | None = None,
        on_uneven: OnUneven = "pad",
        transform: Callable[[str], Any] | None = None,
        label_by: Literal["folder"] | None = None,
        retry: RetryPolicy | None = None,
        pin_window: int = 512,
        catalog: Catalog | None = None,
    ) -> None:
        super().__init__(shuffle=shuffle, seed=seed, on_uneven=on_uneven)
        if cache not in ("auto", "always", "never"):
            raise ValueError(f"invalid cache {cache!r}: use 'auto', 'always' or 'never'")
        if prefetch is not None and (not isinstance(prefetch, int) or prefetch < 1):
            raise ValueError(f"invalid prefetch {prefetch!r}: give a positive number of files")
        if pin_window < 1:
            raise ValueError(f"invalid pin_window {pin_window!r}: give a positive number of files")
        resolved = (catalog or get_catalog()).resolve_volume_path(path)
        self.listing: Listing = list_volume(resolved, recursive=recursive, include=include, exclude=exclude)
        self._root = resolved.path.rstrip("/")
        self._url = resolved.url
        # Kept so a forked DataLoader worker does not garbage-collect the parent's async client on
        # its own event loop (which prints a "different loop" traceback); never pickled.
        self._parent_fs: fsspec.AbstractFileSystem | None = resolved.fs
        self._storage_options = resolved.storage_options
        self._local = st.is_local(resolved.url)
        # Local volumes are read where they lie unless "always"; remote ones always go through
        # the cache, which with "never" only streams files through (nothing is kept).
        self.in_place = self._local and cache != "always"
        self._keep = cache != "never"
        self.prefetch = prefetch
        self.transform = transform
        self.classes: tuple[str, ...] = ()
        if label_by is not None:
            if label_by != "folder":
                raise ValueError(f"invalid label_by {label_by!r}: use 'folder' or None")
            # Like an image-folder dataset: files beside the class folders (labels.csv) are skipped.
            self.listing = self.listing.only(lambda f: "/" in f.relative)
            if not self.listing.files:
                raise ValueError(
                    f"{self.listing.volume_path} has no class folders; label_by='folder' reads <folder>/<class>/<file>"
                )
            self.classes = tuple(sorted({f.relative.split("/", 1)[0] for f in self.listing.files}))
        self._label_index = {name: i for i, name in enumerate(self.classes)}
        self.retry = retry or RetryPolicy()
        self.pin_window = pin_window
        self._cache_budget = (cache_max_bytes, min_free_bytes)
        self._cache_dir = cache_dir
        self._cache: FileCache | None = None
        self._lingering: list[CachedFile] = []
        self._fs: tuple[int, fsspec.AbstractFileSystem] | None = None

    def __getstate__(self) -> dict[str, Any]:  # for spawn/forkserver DataLoader workers and ranks
        state = super().__getstate__()
        state["_fs"] = None
        state["_parent_fs"] = None
        state["_lingering"] = []
        return state

    # ---------------------------------------------------------------- PartitionedDataset
    def _item_count(self) -> int:
        return len(self.listing.files)

    def _identity(self) -> tuple[str, str]:
        return self.listing.volume_path, self.listing.digest

    def _stream(self, positions: npt.NDArray[np.int64], counters: _Counters, stream: str) -> Iterator[Any]:
        files = [self.listing.files[i] for i in positions]
        if self.in_place:
            return self._read_in_place(files, counters, stream)
        return self._read_cached(files, counters, stream)

    def stats(self) -> DatasetStats:
        """Counters of the streams run in this process, and the shared cache's fill."""
        cache = None if self.in_place else self._file_cache().stats()
        return DatasetStats(
            streams=self.stream_stats(),
            cache=cache,
            listed_files=len(self.listing.files),
            listed_bytes=self.listing.total_bytes,
        )

    # ---------------------------------------------------------------- internals
    def _filesystem(self) -> fsspec.AbstractFileSystem:
        # One filesystem object per process: async filesystems do not survive a fork.
        if self._fs is None or self._fs[0] != os.getpid():
            import fsspec.core

            fs, _ = fsspec.core.url_to_fs(
                self._url, skip_instance_cache=True, **_with_pool(self._url, self._storage_options)
            )
            self._fs = (os.getpid(), fs)
        return self._fs[1]

    def _file_cache(self) -> FileCache:
        if self._cache is None:
            max_bytes, min_free_bytes = self._cache_budget
            self._cache = FileCache(self._cache_dir, max_bytes=max_bytes, min_free_bytes=min_free_bytes)
        return self._cache

    def _deliver(self, path: str, remote: RemoteFile) -> Any:
        item = self.transform(path) if self.transform is not None else path
        if self.classes:
            return item, self._label_index[remote.relative.split("/", 1)[0]]
        return item

    def _read_in_place(self, files: list[RemoteFile], counters: _Counters, stream: str) -> Iterator[Any]:
        for remote in files:
            item = self._deliver(f"{self._root}/{remote.relative}", remote)
            self._count(counters, stream, delivered=1, files=1, bytes=remote.size, hits=1)
            yield item
        producer.notify(final=True)

    def _read_cached(self, files: list[RemoteFile], counters: _Counters, stream: str) -> Iterator[Any]:
        cache = self._file_cache()
        fs = self._filesystem()
        group = f"{self.listing.url}#{self.listing.digest}"
        pace = _Pace(self.prefetch)
        held = _Held(cache, self.pin_window)
        for leftover in self._lingering:  # the previous pass's last files: its consumer moved on
            cache.release(leftover)
        self._lingering = []
        pending: collections.deque[tuple[RemoteFile, cf.Future[CachedFile]]] = collections.deque()
        todo = iter(enumerate(files))
        turns = _Turnstile()

        def cache_key(remote: RemoteFile) -> str:
            return FileCache.key(f"{self.listing.url}/{remote.relative}", remote.size, remote.version)

        def fetch_one(position: int, remote: RemoteFile) -> CachedFile:
            started = time.perf_counter()

            def download(tmp: str) -> None:
                fetch_file(
                    fs,
                    f"{self._root}/{remote.relative}",
                    tmp,
                    volume_path=f"{self.listing.volume_path}/{remote.relative}",
                    policy=self.retry,
                    on_retry=lambda: self._count(counters, retries=1),
                )

            got = cache.get(
                cache_key(remote),
                remote.size,
                download,
                group=group,
                name=_base_name(remote),
                keep=self._keep,
                relieve=held.relieve,
                reserve_turn=lambda: turns.turn(position),
            )
            if got.downloaded:
                pace.fetched(time.perf_counter() - started)
                self._count(counters, misses=1, bytes_downloaded=got.size, streamed=0 if got.resident else 1)
            else:
                self._count(counters, hits=1)
            return got

        def submit(position: int, remote: RemoteFile) -> cf.Future[CachedFile]:
            # A hit costs two system calls: take it here rather than a trip through the pool.
            hit = cache.lookup(cache_key(remote), remote.size, name=_base_name(remote))
            if hit is None:
                return pool.submit(turns.passing(position, fetch_one), position, remote)
            turns.done(position)
            self._count(counters, hits=1)
            done: cf.Future[CachedFile] = cf.Future()
            done.set_result(hit)
            return done

        pool = cf.ThreadPoolExecutor(max_workers=_MAX_PREFETCH if self.prefetch is None else self.prefetch)
        finished = False
        try:
            while True:
                while len(pending) < pace.depth():
                    position, remote = next(todo, (-1, None))
                    if remote is None:
                        break
                    pending.append((remote, submit(position, remote)))
                if not pending:
                    finished = True
                    producer.notify(final=True)
                    return
                remote, future = pending.popleft()
                got = future.result()
                try:
                    item = self._deliver(got.path, remote)
                finally:
                    if self.transform is not None:
                        cache.release(got)
                    else:
                        held.add(got)
                self._count(counters, stream, delivered=1, files=1, bytes=got.size)
                pace.consumed()
                yield item
        finally:
            for _, future in pending:
                future.cancel()
            pool.shutdown(wait=True)
            for _, future in pending:
                if not future.cancelled() and future.exception() is None:
                    cache.release(future.result())
            if finished:
                # The last paths may still sit in a batch the consumer has not reached (a DataLoader
                # hands batches on after the stream ends): keep them until the next pass, or until
                # this process ends and another one reclaims them.
                self._lingering = held.take_all()
            else:
                held.release_all()  # the consumer stopped early: it moved on


class _Turnstile:
    """Lets a stream's downloads reserve cache budget in delivery order.

    Reservations out of order could deadlock: files later in the stream, finished but not yet
    consumed, could hold the budget the file the consumer waits for needs. In order, the head of
    the stream always gets its reservation first, and everything it waits for is released as
    consumers move on. Hits reserve nothing and never wait.
    """

    def __init__(self) -> None:
        self._done: set[int] = set()
        self._next = 0
        self._changed = threading.Condition()

    @contextlib.contextmanager
    def turn(self, position: int) -> Iterator[None]:
        """Wait until every earlier position is done, then mark this one done on leaving."""
        with self._changed:
            self._changed.wait_for(lambda: self._next >= position)
        try:
            yield
        finally:
            self.done(position)

    def done(self, position: int) -> None:
        with self._changed:
            if position < self._next or position in self._done:
                return
            self._done.add(position)
            while self._next in self._done:
                self._done.remove(self._next)
                self._next += 1
            self._changed.notify_all()

    def passing(self, position: int, fetch: Callable[[int, RemoteFile], CachedFile]) -> Callable[..., CachedFile]:
        """``fetch`` that marks ``position`` done however it ends (a hit never takes its turn)."""

        def run(*args: Any) -> CachedFile:
            try:
                return fetch(*args)
            finally:
                self.done(position)

        return run


class _Held:
    """Files handed out and still pinned, so their paths stay valid while the consumer (a collate
    function, the training loop) uses them: the last ``window`` items. Under budget pressure the
    cache asks to ``relieve`` it: the oldest half of the streamed files is released early, since
    they hold budget that files in flight need (resident pins hold none)."""

    def __init__(self, cache: FileCache, window: int) -> None:
        self._cache, self._window = cache, window
        self._files: collections.deque[CachedFile] = collections.deque()
        self._lock = threading.Lock()

    def add(self, got: CachedFile) -> None:
        with self._lock:
            self._files.append(got)
            expired = [self._files.popleft() for _ in range(len(self._files) - self._window)]
        for old in expired:
            self._cache.release(old)

    def relieve(self) -> None:
        with self._lock:
            streamed = [f for f in self._files if not f.resident]
            early = streamed[: max(1, len(streamed) // 2)] if streamed else []
            for f in early:
                self._files.remove(f)
        for f in early:
            self._cache.release(f)

    def take_all(self) -> list[CachedFile]:
        with self._lock:
            files, self._files = list(self._files), collections.deque()
        return files

    def release_all(self) -> None:
        for f in self.take_all():
            self._cache.release(f)


class _Pace:
    """How many downloads to keep in flight: enough to cover one download's latency at the pace the
    consumer takes items (Little's law), between 4 and 64, unless fixed by ``prefetch=``."""

    def __init__(self, fixed: int | None) -> None:
        self.fixed = fixed
        self.fetch_seconds = 0.0
        self.consume_seconds = 0.0
        self._last = time.perf_counter()

    def fetched(self, seconds: float) -> None:
        self.fetch_seconds = seconds if not self.fetch_seconds else 0.9 * self.fetch_seconds + 0.1 * seconds

    def consumed(self) -> None:
        now = time.perf_counter()
        interval, self._last = now - self._last, now
        self.consume_seconds = interval if not self.consume_seconds else 0.9 * self.consume_seconds + 0.1 * interval

    def depth(self) -> int:
        if self.fixed is not None:
            return self.fixed
        if not self.fetch_seconds:
            return 16
        wanted = math.ceil(self.fetch_seconds / max(self.consume_seconds, 1e-4)) + 2
        return max(4, min(_MAX_PREFETCH, wanted))


def _base_name(remote: RemoteFile) -> str:
    return remote.relative.rsplit("/", 1)[-1]


def _with_pool(url: str, options: dict[str, Any]) -> dict[str, Any]:
    """S3 clients allow 10 connections by default, which caps a stream at 10 requests in flight;
    raise that to the prefetch ceiling unless the volume's options say otherwise."""
    if not url.startswith(("s3://", "s3a://")):
        return options
    config = dict(options.get("config_kwargs") or {})
    config.setdefault("max_pool_connections", _MAX_PREFETCH)
    return {**options, "config_kwargs": config}
