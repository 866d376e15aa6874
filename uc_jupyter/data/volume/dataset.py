"""``UCVolumeDataset``: stream a volume folder's files into PyTorch through the shared local cache.

The folder is resolved and READ VOLUME-checked through the catalog and listed once, when the
dataset is created; the listing travels with the dataset to DataLoader workers (no listing storm).
Unshuffled over a remote volume, the dataset is made once the first file is listed and its passes
start while the listing goes on (:mod:`uc_jupyter.data.volume.growing_listing`).
Each stream (one rank's worker) takes its slice of the epoch's order (see
:mod:`uc_jupyter.data.stream.partition`), fetches ahead with a small thread pool and yields local paths.

A local (``file://``) volume is listed and read without following symbolic links (see
:mod:`uc_jupyter.storage.local_volume`): a path the dataset yields leads, when it is yielded, to a
regular file inside the volume, or lies in the cache.

Example:
    >>> from uc_jupyter.data import UCVolumeDataset
    >>> ds = UCVolumeDataset("/Volumes/main/ml/images", recursive=True, shuffle=True)  # doctest: +SKIP
    >>> next(iter(ds))                                                                 # doctest: +SKIP
    '/root/.uc_jupyter/cache/pins/4242/0.circle_00417.png'
"""

from __future__ import annotations

import functools
import hashlib
import os
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from uc_jupyter import options as opt
from uc_jupyter.catalog import Catalog, get_catalog
from uc_jupyter.data.cache import CachedFile, FileCache
from uc_jupyter.data.stream import loop_progress as consumer
from uc_jupyter.data.stream.partition import OnUneven, StreamPositions
from uc_jupyter.data.stream.partitioned import PartitionedDataset
from uc_jupyter.data.stream.renewal import Renewal, RenewingDownloads, renew
from uc_jupyter.data.stream.stats import DatasetStats, StreamCounters
from uc_jupyter.data.volume.committed import is_export
from uc_jupyter.data.volume.decode import Decoding, decodes_images, is_image_file
from uc_jupyter.data.volume.files_at_once import check_files_at_once
from uc_jupyter.data.volume.growing_listing import GrowingListing
from uc_jupyter.data.volume.handed_out import Count, Held
from uc_jupyter.data.volume.in_place import read_in_place
from uc_jupyter.data.volume.listing import Listing, RemoteFile, file_filter, list_volume
from uc_jupyter.data.volume.prefetch import Prefetcher
from uc_jupyter.data.volume.share import stream_share
from uc_jupyter.data.volume.window_files import ListingKeys, WantedFiles
from uc_jupyter.storage import urls as st
from uc_jupyter.storage.downloads import MAX_PREFETCH, Downloads, LazyDownloads
from uc_jupyter.storage.errors import VolumeReadError
from uc_jupyter.storage.local_storage import LocalStorage
from uc_jupyter.storage.local_volume import LocalVolume
from uc_jupyter.storage.reads import VolumeStorage, open_storage
from uc_jupyter.storage.retry import RetryPolicy
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
        shuffle, seed: one permutation per epoch from ``(seed, epoch)``, the same on every rank (of
            the whole listing: the constructor waits for it; without shuffle, a remote folder's
            first pass starts on its first page, see the module docstring).
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
            that fails raises :class:`~uc_jupyter.data.volume.decode.DecodeError` naming the file's
            ``/Volumes`` path and the transform.
        label_by: ``"folder"`` yields ``(item, label)`` with labels numbering the first-level
            sub-folders in sorted order (``self.classes`` names them); files beside them are skipped.
        retry: how transient storage errors are retried (:class:`~uc_jupyter.storage.retry.RetryPolicy`).
        pin_window: files handed out that stay pinned while the cache has room, for a consumer
            that does not report its batches (see below).
        catalog: the catalog to resolve ``path`` with (default :func:`get_catalog`).
        clock: epoch seconds, for when vended credentials are due (tests pass their own).

    Vended credentials (a :class:`~uc_jupyter.catalog.rest.client.RestCatalog`) expire: before each pass,
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
    :class:`~uc_jupyter.data.cache.CacheBudgetError` at once. A :class:`~uc_jupyter.data.DataLoader`
    whose budget cannot hold a batch in each worker and the loop's (``batch_size * (num_workers +
    1)`` files, ``batch_size`` without workers) is refused when it is made
    (:meth:`check_files_at_once`). Above that, a budget smaller than every batch torch asks for
    streams: each worker pins files only within its share of the budget (split evenly between the
    workers of the ranks on this machine, :mod:`~uc_jupyter.data.volume.share`) and waits for the
    loop to move past one of its batches when the share is full, so no worker takes the room of the
    batch the loop waits for; a batch larger than a share is ``CacheBudgetError`` at once, naming
    the numbers. Such a tight budget keeps nothing resident. With a transform each file is let go once its
    item is made, and files stream through one at a time whatever the budget.

    Local volumes: the dataset reads the regular files of the volume and never follows a symbolic
    link inside it. Listings skip symlinks (one warning says how many), a folder reached through
    one is refused, and each file is checked when it is yielded (a regular file of the listed size,
    no symlink on its way from the volume's root), so a symlink swapped in after the listing fails
    with :class:`~uc_jupyter.storage.errors.VolumeReadError` instead of being read. Read in place
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
        local = st.is_local(resolved.url)
        # Local files have no keys to renew; remote ones renew theirs as whoever made the dataset.
        self._renewal = Renewal(None if local else resolved.expires_at, clock=clock)
        self._principal = resolving.current_principal() if self._renewal.due is not None else None
        self._catalog: Catalog | None = catalog
        self._path = resolved.volume_path
        # One storage (client, credentials, retries; for a local volume, walks from the volume's root
        # that follow no symlink) chosen here, for the listing and this process's downloads; workers
        # make theirs from the options (see _storage_now).
        self._url, self._volume_url = resolved.url, resolved.volume.storage_location
        self._storage_options = resolved.storage_options
        self._storage: tuple[int, VolumeStorage] | None = None
        self._inherited: VolumeStorage | None = None
        storage = self._storage_now()
        # A local volume's files are also checked and opened where they lie (read in place).
        self._volume: LocalVolume | None = storage.volume if isinstance(storage, LocalStorage) else None
        # Images are decoded from image files only, unless include= says which files to read.
        images = decodes_images(self.transform) and not self.include
        self._listing: Listing | None = None
        self._growing: GrowingListing | None = None
        streams = recursive and not shuffle and label_by is None and getattr(storage, "in_key_order", False)
        if streams and not is_export(resolved, storage):  # an export is listed whole, from its manifest
            # An unshuffled pass reads in the listing's order: it can start on the first page.
            self._growing = GrowingListing(
                storage.pages(recursive=True),
                file_filter(self.include, self.exclude, is_image_file if images else None),
                where=resolved.volume_path,
                url=resolved.url,
            ).first("image files" if images else ("matching files" if self.include or self.exclude else "files"))
        else:
            self._listing = list_volume(
                resolved,
                recursive=recursive,
                include=include,
                exclude=exclude,
                storage=storage,
                keep=is_image_file if images else None,
                kept="image files" if images else "matching files",
            )
        self.recursive = recursive
        self._root = resolved.path.rstrip("/")
        # Local volumes are read where they lie unless "always"; remote ones always go through
        # the cache, which with "never" only streams files through (nothing is kept).
        self.in_place = local and cache != "always"
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
        # The cache keys of every file, made once here and shipped to workers (32 bytes a file);
        # those of a listing still arriving as the streams reach them.
        self._keys = ListingKeys(self._url)
        if not self.in_place and self._listing is not None:
            self._keys.upto(self._listing.files, len(self._listing.files))
        # The cache group: the same for every dataset of this folder and selection, in every run and on
        # every rank (a listing still arriving has no digest yet; a hit keeps a file's first group).
        selection = repr((recursive, self.include, self.exclude, images, label_by))
        self._group = f"{self._url}#{hashlib.sha256(selection.encode()).hexdigest()[:16]}"

    def __repr__(self) -> str:
        """What it reads and how, without waiting for a listing still arriving.

        Example: ``UCVolumeDataset('/Volumes/main/ml/images', 1,000 files, shuffled, cached)``.
        """
        files = "listing" if self._listing is None else f"{len(self._listing.files):,} files"
        order = "shuffled" if self.shuffle else "in order"
        how = "read in place" if self.in_place else "cached" if self._keep else "streamed, not cached"
        return f"UCVolumeDataset({self._path!r}, {files}, {order}, {how})"

    @property
    def listing(self) -> Listing:
        """The folder's files (waits for the end of a listing still arriving)."""
        if self._listing is None:
            assert self._growing is not None, "a dataset has a listing or one arriving"
            self._listing, self._growing = self._growing.final(), None
        return self._listing

    @property
    def volume_path(self) -> str:
        """The ``/Volumes`` folder this dataset reads."""
        return self._path

    def _files(self) -> Sequence[RemoteFile]:
        """The files listed so far (all of them once the listing has ended), without waiting."""
        growing = self._growing  # first: `listing` sets _listing before it lets go of _growing
        listing = self._listing
        if listing is not None:
            return listing.files
        assert growing is not None
        return growing.files

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

    def check_files_at_once(self, need: tuple[int, str], most: tuple[int, str]) -> None:
        """Refuse a loader that needs room for ``need`` of this dataset's paths at once, and may hold
        up to ``most`` (each: the count, and how it comes about), when the cache budget cannot hold
        the files it needs (:mod:`~uc_jupyter.data.volume.files_at_once`); a DataLoader asks as it is
        made. Files read in place take no budget, and a transform lets go of each file once its item
        is made.

        Raises:
            CacheBudgetError: one line with the numbers and what to change.

        Example:
            >>> ds.check_files_at_once((3, "batch_size 1 x (2 workers + 1)"), (5, "..."))  # doctest: +SKIP
        """
        if self.in_place or self.transform is not None:
            return
        listed_all = self._arriving() is None  # first: a listing that ends meanwhile is judged as arriving
        sizes = [f.size for f in self._files()]  # those listed so far: never waits for a listing arriving
        max_bytes = self._file_cache().max_bytes
        check_files_at_once(max_bytes, sizes, need, most, listed_all=listed_all, where=self._path)

    def _keep_only(self, keep: Callable[[str], bool], what: str) -> None:
        """Narrow the listing to the files whose path below the folder ``keep`` accepts (the rest
        count as skipped); ``what`` says what was kept, for the error when nothing is left."""
        listing = self.listing.only(lambda f: keep(f.relative))
        if not listing.files:
            deeper = "" if self.recursive else "; add recursive=True (--recursive) to read its sub-folders"
            raise ValueError(f"{listing.volume_path} holds no {what}{deeper}")
        self._listing = listing
        if self._labelled:  # labels number the class folders that hold files still read
            self.classes = tuple(sorted({f.relative.split("/", 1)[0] for f in listing.files}))
            self._label_index = {name: i for i, name in enumerate(self.classes)}
        if hasattr(self, "_keys"):  # made at the end of __init__; a copy has them
            self._keys = ListingKeys(self._url)
            self._keys.upto(listing.files, len(listing.files))

    def __getstate__(self) -> dict[str, Any]:  # for spawn/forkserver DataLoader workers and ranks
        self.listing  # noqa: B018  (a listing still arriving travels whole: wait for its end)
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

    def _arriving(self) -> GrowingListing | None:
        growing = self._growing
        if growing is not None and growing.total() is not None:
            self.listing  # noqa: B018  (it has ended: keep the whole listing, drop its reader)
            return None
        return growing

    def _stream(
        self, positions: npt.NDArray[np.int64] | StreamPositions, counters: StreamCounters, stream: str
    ) -> Iterator[Any]:
        # Plain ints: indexing with numpy's costs more per file.
        indices: Sequence[int] = positions.tolist() if isinstance(positions, np.ndarray) else positions
        decoding = Decoding(self.transform, self._path, self._label_index)
        count = functools.partial(self._count_file, counters, stream)
        if self.in_place:
            assert self._volume is not None, "only local volumes are read in place"
            stages = consumer.of(self).stages
            return read_in_place(self.listing.files, indices, self._volume, self._root, decoding, count, stages)
        return self._read_cached(indices, counters, decoding, count)

    def sample_structure(self) -> str:
        """``"file paths"`` or ``"decoded items"``, ``" with labels"`` when labelled by folder."""
        made = "file paths" if self.transform is None else "decoded items"
        return f"{made} with labels" if self._labelled else made

    def stats(self) -> DatasetStats:
        """Counters of the streams run in this process, and the shared cache's fill."""
        cache = None if self.in_place else self._file_cache().stats()
        listing = self._listing
        files = self._files()  # so far, while the listing still arrives
        return DatasetStats(
            streams=self.stream_stats(),
            cache=cache,
            listed_files=len(files),
            listed_bytes=listing.total_bytes if listing is not None else sum(f.size for f in files),
            skipped_files=self._listing.skipped if self._listing is not None else 0,
        )

    # ---------------------------------------------------------------- internals
    def _storage_now(self) -> VolumeStorage:
        """The volume's storage with the options held now, one per process (clients do not
        survive a fork; a forked worker makes its own, see :mod:`uc_jupyter.storage.objects`)."""
        if self._storage is None or self._storage[0] != os.getpid():
            if self._storage is not None:
                # The parent's, kept (never used) so a forked worker does not garbage-collect an
                # async client on its own event loop (which prints a "different loop" traceback).
                self._inherited = self._storage[1]
            made = open_storage(self._url, self._storage_options, where=self._path, root=self._volume_url)
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

    def _read_cached(
        self, indices: Sequence[int], counters: StreamCounters, decoding: Decoding, count: Count
    ) -> Iterator[Any]:
        """The pass as a chain of stages, made as it starts: select (the files at ``indices``, with
        their cache keys) -> fetch or hit (the fetch-ahead window over the cache, runs of pinned
        files) -> hand out (each file's item, decoded by the transform if any, counted, kept pinned
        while the consumer may use it). torch's collate is the next; each boundary is where a stage's
        time can be taken.

        Built when the pass starts (``iter``), it fails at the pass's first item, as a pass built
        lazily would: a persistent DataLoader worker starts each epoch's pass outside torch's error
        handling, and an error raised there (a renewal the catalog refuses) would end the worker
        instead of reaching the loop as one line."""
        try:
            cache = self._file_cache()
            for leftover in self._lingering:  # the previous pass's last files: its consumer moved on
                cache.release(leftover)
            self._lingering = []
            # The consumer of this pass (the loader binds it while torch starts the stream).
            using = consumer.of(self)
            listed = self._listing.total_bytes if self._listing is not None else None  # None: still arriving
            held = Held(cache, self.pin_window, using, hold=self.transform is None)
            fetch = Prefetcher(
                cache,
                self._downloads(counters),
                group=self._group,
                keep=self._keep,
                window=self.pin_window,
                prefetch=self.prefetch,
                consumer=using,
                relieve=held.relieve,
                on_read=functools.partial(self._count_read, counters),
                share=stream_share(cache.max_bytes, using, holds=self.transform is None, listed_bytes=listed),
            )
        except Exception as exc:
            return _fails(exc)
        files = self._files()  # a listing still arriving: the list that grows
        wanted = WantedFiles(files, self._keys, indices, root=self._root, where=self._path)
        plain = self.transform is None and not self.classes  # the item is the path itself

        def deliver(path: str, index: int) -> Any:
            return decoding(path, files[index].relative)

        def ended(lingering: list[CachedFile], completed: bool) -> None:
            fetch.downloads.close()
            # The last paths may still sit in a batch the consumer has not reached (a DataLoader
            # hands batches on after the stream ends, and a loop that stopped early may still hold
            # one): kept until the next pass, or until this process ends (its pins go with it).
            self._lingering = lingering
            if completed:
                if isinstance(indices, StreamPositions):
                    self._arrived(indices, counters)
                producer.notify(final=True)

        return held.hand_out(fetch.run(wanted), indices, None if plain else deliver, count, ended)

    def _renew(self) -> bool:
        """Resolve the folder again when its options are due (:mod:`uc_jupyter.data.stream.renewal`) and use
        the new ones from then on; True when it did."""
        renewed = renew(
            self._renewal,
            self._catalog or get_catalog(),
            self._principal,
            lambda catalog: catalog.resolve_volume_path(self._path),
            lambda resolved: resolved.url,
            what=self._path,
            was=self._url,
            error=VolumeReadError,
        )
        if renewed is None:
            return False
        resolved, self._renewal = renewed
        self._storage_options = resolved.storage_options
        # The next downloads get a storage with the new options; the old one ends with the pass
        # (RenewingDownloads closes the downloads that hold it).
        self._storage = None
        return True

    def _downloads(self, counters: StreamCounters) -> Downloads:
        """The downloads of the volume's storage (:mod:`uc_jupyter.storage.reads`; a local volume's
        are copies through checked descriptors), made at the pass's first miss (a pass of hits makes
        none). Options that expire are renewed as the pass starts and before each batch of downloads."""
        threads = MAX_PREFETCH if self.prefetch is None else self.prefetch
        if self._renewal.due is None:
            return LazyDownloads(lambda: self._storage_downloads(counters, threads))
        self._renew()
        return LazyDownloads(lambda: RenewingDownloads(lambda: self._storage_downloads(counters, threads), self._renew))

    def _storage_downloads(self, counters: StreamCounters, threads: int) -> Downloads:
        """The downloads of the volume's storage with the options held now."""

        def on_retry() -> None:
            self._count(counters, retries=1)

        return self._storage_now().downloads(self.retry, on_retry=on_retry, threads=threads)


def _fails(error: Exception) -> Iterator[Any]:
    """A pass that could not start: it raises ``error`` when its first item is asked for."""
    raise error
    yield  # a generator: the raise waits for the first next()
