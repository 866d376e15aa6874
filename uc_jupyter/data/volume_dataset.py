"""``UCVolumeDataset``: stream a volume folder's files into PyTorch through the shared local cache.

The folder is resolved and READ VOLUME-checked through the catalog and listed once, when the
dataset is created; the listing travels with the dataset to DataLoader workers (no listing storm).
Each stream (one rank's worker) takes its slice of the epoch's order (see
:mod:`uc_jupyter.data.partition`), fetches ahead with a small thread pool and yields local paths.

A local (``file://``) volume is listed and read without following symbolic links (see
:mod:`uc_jupyter.data.local_volume`): a path the dataset yields leads, when it is yielded, to a
regular file inside the volume, or lies in the cache.

Example:
    >>> from uc_jupyter.data import UCVolumeDataset
    >>> ds = UCVolumeDataset("/Volumes/main/ml/images", recursive=True, shuffle=True)  # doctest: +SKIP
    >>> next(iter(ds))                                                                 # doctest: +SKIP
    '/root/.uc_jupyter/cache/pins/4242/0.circle_00417.png'
"""

from __future__ import annotations

import contextlib
import gc
import os
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal, overload

import numpy as np
import numpy.typing as npt
import torch.utils.data

from uc_jupyter.catalog import Catalog, get_catalog
from uc_jupyter.catalog import storage as st
from uc_jupyter.data import consumer
from uc_jupyter.data import options as opt
from uc_jupyter.data.cache import CachedFile, FileCache
from uc_jupyter.data.decode import DecodeError, built_in, decoder_name, decodes_images, is_image_file, reads_files
from uc_jupyter.data.downloads import MAX_PREFETCH, Downloads, Wanted
from uc_jupyter.data.local_downloads import LocalDownloads
from uc_jupyter.data.local_volume import LocalVolume
from uc_jupyter.data.partition import OnUneven
from uc_jupyter.data.prefetch import Prefetcher
from uc_jupyter.data.remote import Listing, RemoteFile, RetryPolicy, VolumeReadError, list_volume
from uc_jupyter.data.renewal import Renewal, RenewingDownloads
from uc_jupyter.data.stats import DatasetStats, StreamCounters
from uc_jupyter.data.storage import VolumeStorage, open_storage
from uc_jupyter.data.stream import PartitionedDataset
from uc_jupyter.telemetry import producer

__all__ = ["UCVolumeDataset"]

CacheMode = Literal["auto", "always", "never"]


class UCVolumeDataset(PartitionedDataset):
    """A torch ``IterableDataset`` over the files of a ``/Volumes/...`` folder, yielding local paths.

    Args:
        path: a ``/Volumes/<catalog>/<schema>/<volume>/<folder>`` path (READ VOLUME is checked).
        recursive: include sub-folders.
        include, exclude: glob patterns on the path below ``path`` (e.g. ``"*.png"``); files left
            out are counted in ``skipped``.
        shuffle, seed: one permutation per epoch from ``(seed, epoch)``, the same on every rank.
        cache: ``"auto"`` reads local ``file://`` volumes in place and caches everything else;
            ``"always"`` / ``"never"`` force either way.
        cache_dir, cache_max_bytes, min_free_bytes: the shared cache (see :class:`FileCache`); or
            ``cache_dir=FileCache(...)`` to read through that one, with all its settings.
        prefetch: downloads kept in flight per stream (default: adapts to latency and pace).
        on_uneven: ``"pad"`` (every rank yields the same count), ``"drop"`` or ``"allow"``.
        transform: applied to each local path in the stream; the file may vanish after it returns.
            The built-in decoders (:func:`~uc_jupyter.data.decode_image` ...) read a local volume's
            file through the descriptor the dataset checked instead (see below). With
            ``decode_image`` only image files are listed (unless ``include`` is given). A transform
            that fails raises :class:`~uc_jupyter.data.decode.DecodeError` naming the file's
            ``/Volumes`` path and the transform.
        label_by: ``"folder"`` yields ``(item, label)`` with labels numbering the first-level
            sub-folders in sorted order (``self.classes`` names them); files beside them are skipped.
        retry: how transient storage errors are retried (:class:`~uc_jupyter.data.remote.RetryPolicy`).
        pin_window: files handed out that stay pinned while the cache has room, for a consumer
            that does not report its batches (see below).
        catalog: the catalog to resolve ``path`` with (default :func:`get_catalog`).
        clock: epoch seconds, for when vended credentials are due (tests pass their own).

    Vended credentials (a :class:`~uc_jupyter.catalog.rest.RestCatalog`) expire: before each pass,
    and before each batch of downloads, a dataset whose credentials are within the vended cache's
    margin of their expiry resolves ``path`` again (as the principal that made it, in each worker
    through ``catalog``, or :func:`get_catalog` after a spawn) and reads on with the new ones. A
    revoked grant therefore ends its reads at the next renewal. Embedded catalogs' options do not
    expire and are never asked for again.

    How long a yielded path stays valid (remote volumes, and local ones read through the cache;
    a path read in place is the volume's own file): until the consumer has moved past the batch
    that holds it. Iterated by :class:`~uc_jupyter.data.DataLoader`, that is until the training
    loop asks for the next batch (or the pass ends, or another pass begins), whatever the batch
    size, ``num_workers`` (0 included), ``prefetch_factor`` and ``collate_fn``, whether the file is
    kept in the cache or streamed past a full one: the loader tells each stream which of its
    batches the loop has moved past, and a file still in use is never released. The last batches
    of a pass stay valid until the next pass begins (or the process ends). Iterated directly, a
    path is valid until the next item is asked for. torch's own DataLoader does not say which
    batches the loop holds: files then stay pinned for the last ``pin_window`` handed out while
    the budget has room, and under budget pressure only until the next item is asked for. The
    budget must hold the files in use at once. Without workers that is ``batch_size`` files, and
    a stream that cannot fit the files of its batch still in use plus the next one raises
    :class:`~uc_jupyter.data.cache.CacheBudgetError` at once. With workers, the batches in flight
    and what an idle worker still pins count too: ``(2 * prefetch_factor * num_workers + 1) *
    batch_size + num_workers`` files always sufficed in the tests; with much less than
    ``(prefetch_factor * num_workers + 1) * batch_size`` the workers can wait on each other until
    the cache gives up (``CacheBudgetError`` after its ``wait_seconds``).

    Local volumes: the dataset reads the regular files of the volume and never follows a symbolic
    link inside it. Listings skip symlinks (one warning says how many), a folder reached through
    one is refused, and each file is checked when it is yielded (a regular file of the listed size,
    no symlink on its way from the volume's root), so a symlink swapped in after the listing fails
    with :class:`~uc_jupyter.data.remote.VolumeReadError` instead of being read. Read in place
    (``cache="auto"``), a yielded path is checked when it is yielded: a consumer that opens it
    later reads whatever is at that path then. ``cache="always"`` rules that out (the copy in the
    cache is taken through the checked descriptor), and so does a built-in decoder (it reads
    through that descriptor).

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
        cache_dir: str | os.PathLike[str] | FileCache | None = None,
        cache_max_bytes: int | None = None,
        min_free_bytes: int | None = None,
        prefetch: int | None = None,
        on_uneven: OnUneven = "pad",
        transform: Callable[[str], Any] | None = None,
        label_by: Literal["folder"] | None = None,
        retry: RetryPolicy | None = None,
        pin_window: int = 512,
        catalog: Catalog | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(shuffle=shuffle, seed=seed, on_uneven=on_uneven)
        # Every option checked before the catalog is asked: a bad value is the same error for anyone.
        recursive = opt.flag("recursive", recursive)
        self.include = opt.globs("include", include, allow_empty=False)
        self.exclude = opt.globs("exclude", exclude)
        cache = opt.choice("cache", cache, ("auto", "always", "never"))
        cache_max_bytes = opt.maybe_whole_number("cache_max_bytes", cache_max_bytes, minimum=1)
        min_free_bytes = opt.maybe_whole_number("min_free_bytes", min_free_bytes)
        if cache_dir is not None and not isinstance(cache_dir, (str, os.PathLike, FileCache)):
            raise TypeError(f"invalid cache_dir {cache_dir!r}: give a folder path (a str), a FileCache or None")
        if isinstance(cache_dir, FileCache) and (cache_max_bytes is not None or min_free_bytes is not None):
            raise ValueError(
                "invalid cache_max_bytes/min_free_bytes with cache_dir=FileCache(...): "
                "they are the FileCache's own; set them there"
            )
        prefetch = opt.maybe_whole_number("prefetch", prefetch, minimum=1)
        self.pin_window = opt.whole_number("pin_window", pin_window, minimum=1)
        self.transform = opt.function("transform", transform)
        clock = opt.function("clock", clock) or time.time
        if label_by is not None:
            opt.choice("label_by", label_by, ("folder",))
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise TypeError(f"invalid retry {retry!r}: give a RetryPolicy or None")
        resolving = catalog or get_catalog()
        resolved = resolving.resolve_volume_path(path)
        self._local = st.is_local(resolved.url)
        # Local files have no keys to renew; remote ones renew theirs as whoever made the dataset.
        self._renewal = Renewal(None if self._local else resolved.expires_at, clock=clock)
        self._principal = resolving.current_principal() if self._renewal.due is not None else None
        self._catalog: Catalog | None = catalog
        self._path = resolved.volume_path
        # Local volumes: every listing, check and read walks from the volume's root, no symlink followed.
        self._volume: LocalVolume | None = LocalVolume.of(resolved) if self._local else None
        # Remote volumes: one storage (client, credentials, retries) chosen here, for the listing
        # and this process's downloads; workers make theirs from the options (see _storage_now).
        self._url = resolved.url
        self._storage_options = resolved.storage_options
        self._storage: tuple[int, VolumeStorage] | None = None
        self._inherited: VolumeStorage | None = None
        # Images are decoded from image files only, unless include= says which files to read.
        images = decodes_images(self.transform) and not self.include
        self.listing: Listing = list_volume(
            resolved,
            recursive=recursive,
            include=include,
            exclude=exclude,
            local=self._volume,
            storage=None if self._local else self._storage_now(),
            keep=is_image_file if images else None,
            kept="image files" if images else "matching files",
        )
        self.recursive = recursive
        self._root = resolved.path.rstrip("/")
        # Local volumes are read where they lie unless "always"; remote ones always go through
        # the cache, which with "never" only streams files through (nothing is kept).
        self.in_place = self._local and cache != "always"
        self._keep = cache != "never"
        self.prefetch = prefetch
        self.classes: tuple[str, ...] = ()
        self._label_index: dict[str, int] = {}
        self._labelled = label_by is not None
        if self._labelled:
            # Like an image-folder dataset: files beside the class folders (labels.csv) are skipped.
            self._keep_only(
                lambda relative: "/" in relative, "class folders: label_by='folder' reads <folder>/<class>/<file>"
            )
        self.retry = retry or RetryPolicy()
        self._cache_budget = (cache_max_bytes, min_free_bytes)
        self._cache_dir = cache_dir
        self._cache: FileCache | None = None
        if not self.in_place:
            # Opened here, once: DataLoader workers inherit it, instead of each checking the index's
            # schema and reclaiming dead processes' leftovers on every epoch's start.
            self._file_cache()
        self._lingering: list[CachedFile] = []
        # The cache keys of every file, made once here and shipped to workers (32 bytes a file).
        self._digests: bytes | None = None if self.in_place else _digests(self.listing)

    @property
    def cache(self) -> FileCache | None:
        """The shared cache this dataset reads through, or None when it reads its files in place.

        Example:
            >>> UCVolumeDataset("/Volumes/main/ml/images").cache.stats().resident_bytes  # doctest: +SKIP
            0
        """
        return None if self.in_place else self._file_cache()

    @property
    def skipped(self) -> int:
        """Files of the folder left out: not matching ``include``/``exclude``, not images for
        :func:`~uc_jupyter.data.decode_image`, or beside the class folders of ``label_by``."""
        return self.listing.skipped

    def _keep_only(self, keep: Callable[[str], bool], what: str) -> None:
        """Narrow the listing to the files whose path below the folder ``keep`` accepts (the rest
        count as skipped); ``what`` says what was kept, for the error when nothing is left."""
        listing = self.listing.only(lambda f: keep(f.relative))
        if not listing.files:
            deeper = "" if self.recursive else "; add recursive=True (--recursive) to read its sub-folders"
            raise ValueError(f"{listing.volume_path} holds no {what}{deeper}")
        self.listing = listing
        if self._labelled:  # labels number the class folders that hold files still read
            self.classes = tuple(sorted({f.relative.split("/", 1)[0] for f in listing.files}))
            self._label_index = {name: i for i, name in enumerate(self.classes)}
        if getattr(self, "_digests", None) is not None:  # made at the end of __init__; a copy has them
            self._digests = _digests(listing)

    def __getstate__(self) -> dict[str, Any]:  # for spawn/forkserver DataLoader workers and ranks
        state = super().__getstate__()
        state["_storage"] = None  # clients and their connections stay in their process
        state["_inherited"] = None
        state["_catalog"] = None  # a catalog holds connections and locks: a spawned worker uses get_catalog()
        state["_lingering"] = []
        return state

    # ---------------------------------------------------------------- PartitionedDataset
    def _item_count(self) -> int:
        return len(self.listing.files)

    def _skipped_count(self) -> int:
        return self.listing.skipped

    def _identity(self) -> tuple[str, str]:
        return self.listing.volume_path, self.listing.digest

    def _stream(self, positions: npt.NDArray[np.int64], counters: StreamCounters, stream: str) -> Iterator[Any]:
        _freeze_inherited()
        indices: list[int] = positions.tolist()  # plain ints: indexing with numpy's costs more per file
        if self.in_place:
            return self._read_in_place(indices, counters, stream)
        return self._read_cached(indices, counters, stream)

    def stats(self) -> DatasetStats:
        """Counters of the streams run in this process, and the shared cache's fill."""
        cache = None if self.in_place else self._file_cache().stats()
        return DatasetStats(
            streams=self.stream_stats(),
            cache=cache,
            listed_files=len(self.listing.files),
            listed_bytes=self.listing.total_bytes,
            skipped_files=self.listing.skipped,
        )

    # ---------------------------------------------------------------- internals
    def _storage_now(self) -> VolumeStorage:
        """The volume's storage with the options held now, one per process (clients do not
        survive a fork; a forked worker makes its own, see :mod:`uc_jupyter.data.storage.objects`)."""
        if self._storage is None or self._storage[0] != os.getpid():
            if self._storage is not None:
                # The parent's, kept (never used) so a forked worker does not garbage-collect an
                # async client on its own event loop (which prints a "different loop" traceback).
                self._inherited = self._storage[1]
            made = open_storage(self._url, self._storage_options, where=self._path)
            self._storage = (os.getpid(), made)
        return self._storage[1]

    def _file_cache(self) -> FileCache:
        if self._cache is None:
            given = self._cache_dir
            if isinstance(given, FileCache):
                self._cache = given
            else:
                max_bytes, min_free_bytes = self._cache_budget
                self._cache = FileCache(given, max_bytes=max_bytes, min_free_bytes=min_free_bytes)
        return self._cache

    def _deliver(self, path: str, remote: RemoteFile) -> Any:
        transform = self.transform
        if transform is None:
            item: Any = path
        else:
            try:
                item = transform(path)
            except Exception as exc:
                raise self._decode_failure(path, remote, exc) from (None if built_in(transform) else exc)
        if self.classes:
            return item, self._label_index[remote.relative.split("/", 1)[0]]
        return item

    def _read_in_place(self, indices: list[int], counters: StreamCounters, stream: str) -> Iterator[Any]:
        """Each file checked as it is yielded (see the class docstring); a decoder that can read an
        open file reads it through the checked descriptor, never by path."""
        files, root, volume = self.listing.files, self._root, self._volume
        assert volume is not None, "only local volumes are read in place"
        transform, count = self.transform, self._count_file
        through_descriptor = transform is not None and reads_files(transform)
        decode: Callable[[Any], Any] = str if transform is None else transform  # called through_descriptor only
        quiet = transform is not None and built_in(transform)
        check, open_checked = volume.check, volume.open
        for index in indices:
            remote = files[index]
            if through_descriptor:
                with open(open_checked(remote.relative, remote.size), "rb") as handle:
                    try:
                        item = decode(handle)
                    except Exception as exc:
                        raise self._decode_failure(handle, remote, exc) from (None if quiet else exc)
                if self.classes:
                    item = item, self._label_index[remote.relative.split("/", 1)[0]]
            else:
                check(remote.relative, remote.size)
                item = self._deliver(f"{root}/{remote.relative}", remote)
            count(counters, stream, remote.size, downloaded=False, resident=True)
            yield item
        producer.notify(final=True)

    def _decode_failure(self, source: Any, remote: RemoteFile, exc: Exception) -> DecodeError:
        """What a failed ``transform(source)`` raises: the file's /Volumes path and the transform,
        never the cache's path. Raised ``from None`` for the built-in decoders (Pillow's frames tell
        nothing) and from the error for a transform of one's own (its frames are its bug)."""
        where = f"{self.listing.volume_path}/{remote.relative}"
        detail = str(exc).splitlines()[0] if str(exc) else ""
        # The message often repeats what it was given (a cache path, a descriptor's repr): the
        # /Volumes path leads the line already.
        detail = " ".join(detail.replace(repr(source), "").replace(str(source), where).split())
        name = decoder_name(self.transform) if self.transform is not None else "the transform"
        return DecodeError(f"{where}: {name} could not decode it ({type(exc).__name__}: {detail})")

    def _read_cached(self, indices: list[int], counters: StreamCounters, stream: str) -> Iterator[Any]:
        cache = self._file_cache()
        for leftover in self._lingering:  # the previous pass's last files: its consumer moved on
            cache.release(leftover)
        self._lingering = []
        fetch = Prefetcher(
            cache,
            self._downloads(counters),
            group=f"{self.listing.url}#{self.listing.digest}",
            keep=self._keep,
            window=self.pin_window,
            prefetch=self.prefetch,
            hold=self.transform is None,  # a transform is done with the path when it returns
            # Looked up here, as the pass starts (inside the loop's next() without workers).
            consumer=consumer.of(self),
        )
        plain = self.transform is None and not self.classes  # the item is the path itself
        handed_over, count = fetch.delivered, self._count_file
        try:
            with contextlib.closing(fetch.run(_WantedFiles(self, indices))) as delivered:
                # The prefetcher first: its end (not the list's) must be reached for it to finish.
                for got, index in zip(delivered, indices, strict=True):
                    try:
                        item = got.path if plain else self._deliver(got.path, self.listing.files[index])
                    finally:
                        handed_over(got)
                    count(counters, stream, got.size, downloaded=got.downloaded, resident=got.resident)
                    yield item
            producer.notify(final=True)
        finally:
            fetch.downloads.close()
            self._lingering = fetch.lingering

    def _wanted(self, indices: list[int]) -> list[Wanted]:
        """What the prefetcher needs of the listing's files at ``indices`` (made as the window
        reaches them, a few at a time: this runs per file of every pass)."""
        if self._digests is None:  # a dataset made to read in place, read through the cache after all
            self._digests = _digests(self.listing)
        files, digests, root, where = self.listing.files, self._digests, self._root, self.listing.volume_path
        local = self._volume is not None  # a local file is copied by its position in the listing (LocalDownloads)
        wanted = []
        for index in indices:
            remote = files[index]
            relative = remote.relative
            key = digests[32 * index : 32 * index + 32].hex()
            name = relative[relative.rfind("/") + 1 :]
            source = str(index) if local else f"{root}/{relative}"
            wanted.append(Wanted(key, remote.size, name, source, f"{where}/{relative}"))
        return wanted

    def _renew(self) -> bool:
        """Resolve the folder again when its options are due (:mod:`uc_jupyter.data.renewal`) and use
        the new ones from then on; True when it did."""
        if not self._renewal.is_due():
            return False
        catalog = self._catalog or get_catalog()
        assert self._principal is not None, "a dataset with options that expire knows who made it"
        with catalog.as_principal(self._principal):
            resolved = catalog.resolve_volume_path(self._path)
        if resolved.url != self._url:  # dropped and made again elsewhere: the listing is not of it
            raise VolumeReadError(
                f"{self._path} now lies at {resolved.url}, not at {self._url} where it was listed; "
                "make the dataset again"
            )
        self._storage_options = resolved.storage_options
        self._renewal = Renewal(resolved.expires_at, clock=self._renewal.clock)
        # The next downloads get a storage with the new options; the old one ends with the pass
        # (RenewingDownloads closes the downloads that hold it).
        self._storage = None
        return True

    def _downloads(self, counters: StreamCounters) -> Downloads:
        """Copies through checked descriptors for local volumes, else the volume's storage
        (:mod:`uc_jupyter.data.storage`). Options that expire are renewed as the pass starts and
        before each batch of downloads."""
        threads = MAX_PREFETCH if self.prefetch is None else self.prefetch
        if self._volume is not None:
            return LocalDownloads(self._volume, self.listing.files, threads=min(threads, 16))
        if self._renewal.due is None:
            return self._remote_downloads(counters, threads)
        self._renew()
        return RenewingDownloads(lambda: self._remote_downloads(counters, threads), self._renew)

    def _remote_downloads(self, counters: StreamCounters, threads: int) -> Downloads:
        """The downloads of a remote volume with the options held now."""

        def on_retry() -> None:
            self._count(counters, retries=1)

        return self._storage_now().downloads(self.retry, on_retry=on_retry, threads=threads)


class _WantedFiles(Sequence[Wanted]):
    """A stream's files as the prefetcher sees them, made one by one as its window advances (so the
    first file does not wait for keys and paths of the whole stream)."""

    def __init__(self, dataset: UCVolumeDataset, positions: list[int]) -> None:
        self._dataset, self._positions = dataset, positions

    def __len__(self) -> int:
        return len(self._positions)

    @overload
    def __getitem__(self, item: int) -> Wanted: ...

    @overload
    def __getitem__(self, item: slice) -> Sequence[Wanted]: ...

    def __getitem__(self, item: int | slice) -> Wanted | Sequence[Wanted]:
        if isinstance(item, slice):
            return self._dataset._wanted(self._positions[item])
        return self._dataset._wanted([self._positions[item]])[0]


_FROZEN_IN: int | None = None  # the DataLoader worker process that froze what it inherited


def _freeze_inherited() -> None:
    """In a DataLoader worker, once: move every object it started with (torch's modules, the
    listing, the dataset) out of the cyclic garbage collector's reach (:func:`gc.freeze`). A pass
    allocates a few objects per file, so the collector runs often, and each full collection walked
    all of them: measured at issue 16's conditions (3,000 files, 2 workers, back to back), client
    CPU per file 0.61-0.64 ms without, 0.46-0.51 ms with. Not in the training process itself
    (its objects are the user's); cycles already unreachable then are kept for the worker's life."""
    global _FROZEN_IN
    if os.getpid() == _FROZEN_IN or torch.utils.data.get_worker_info() is None:
        return
    _FROZEN_IN = os.getpid()
    gc.freeze()


def _digests(listing: Listing) -> bytes:
    """The cache key of each listed file, as 32 raw bytes each."""
    return b"".join(FileCache.key_digest(f"{listing.url}/{f.relative}", f.size, f.version) for f in listing.files)
