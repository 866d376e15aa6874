"""One persistent, bounded local file cache per machine, shared by every worker, rank and kernel,
and trusting none of its own files.

Layout under ``root`` (default ``$UC_JUPYTER_HOME/cache``; folders 0700, files 0600)::

    .uc_jupyter       the marker: a uc_jupyter cache (the catalog refuses storage over it)
    FORMAT            the layout's version: a cache of an older format is emptied, not misread
    index.db          entries (key, size, group, checksum, fingerprint), groups' last use,
                      reservations, the byte ledger (SQLite, WAL)
    objects/ab/<key>  resident files, each sealed (an extended attribute, see integrity)
    tmp/              partial downloads: ``<key>.<pid>.<n>``, renamed into place when complete
    stream/<pid>/     files streamed past a full cache, deleted on release

One concept per module: :mod:`~uc_jupyter.data.cache.layout` (the folder: object paths, format,
marker, modes, refusing a folder that is not a cache), :mod:`~uc_jupyter.data.cache.pins` (share
locks that keep handed-out files from eviction), :mod:`~uc_jupyter.data.cache.integrity`
(checksums, fingerprints, seals), :mod:`~uc_jupyter.data.cache.checks` (what a hit checks before a
file is served), :mod:`~uc_jupyter.data.cache.ledger` (the index's tables: entries, reservations,
bytes, rebuild), :mod:`~uc_jupyter.data.cache.index` (transactions, batched bookkeeping, recovery),
:mod:`~uc_jupyter.data.cache.disk` (what files, index and folders take on disk),
:mod:`~uc_jupyter.data.cache.admission` (room within the budget, eviction),
:mod:`~uc_jupyter.data.cache.streams` (whose a stream folder is), :mod:`~uc_jupyter.data.cache.leftovers`
(what dead processes left, taken back), and :mod:`~uc_jupyter.data.cache.filecache` (:class:`FileCache`,
which joins them).

Why it is built this way:

- A hit costs an open, a share lock (``flock``), an ``fstat`` and one ``fgetxattr`` of the object,
  and no index access. The lock pins the file: eviction takes an exclusive lock without waiting and
  skips files it cannot lock, so the path handed out stays valid until ``release`` (or until the
  pinning process ends).
- A hit is checked, not trusted: each object was hashed (SHA-256) when its download was put in
  place, and the hit proves it unchanged since, by its seal, else by the fingerprint in the index,
  else by hashing it again (:mod:`~uc_jupyter.data.cache.checks`). A truncated, overwritten or
  replaced object is a miss with one :class:`CacheIntegrityWarning`: it is removed and its bytes
  leave the ledger. A file nobody downloaded (planted under a key's name) has no record and is
  never served.
- One download per key, across processes, without a lock file per key: a resident download is
  reserved in the index under its key (the *claim*); a second asker waits for the claimant's copy.
  The claim is given up only when the object is entered into the index (finished downloads are
  entered in batches, within a quarter of a second), so an asker sees one or the other. A dead
  claimant's claim is taken back and its finished object adopted (checked at its first hit).
- Downloads go to ``tmp/`` and are renamed into place, so a reader never sees a partial file, even
  after ``kill -9``; the dead process's temporary files and reservations are reclaimed later.
- The byte budget and the free-disk floor are checked, under the index's write lock, *before* a
  download starts, with the download's size reserved; they are never crossed. A budget of 8 MiB or
  more is the folder's disk use as ``du`` counts it (:mod:`~uc_jupyter.data.cache.disk`): files in
  whole blocks, partial downloads and streamed files included, and the index, its write-ahead log
  (kept short) and the folders, measured at each admission, taken off the budget first. A budget too small
  for the data in flight streams files through one by one instead of waiting (see
  :mod:`~uc_jupyter.data.cache.admission`); a single file larger than the budget is refused at
  once, and a full disk is reported within seconds.
- Eviction knows scans: files of the requesting group (one dataset's listing) never evict each
  other. Once the budget is full, the group keeps its resident set and further files stream through
  ``stream/``, so every later epoch re-downloads only what does not fit (an LRU cache would evict
  each file just before the scan comes back to it and re-download nearly everything). Files of
  other groups not used for ``grace_seconds`` are evicted, the least recently used group first.
- The folder is the cache's alone: a folder holding other files is refused, never emptied; a lost
  or damaged index is rebuilt empty, with a warning: the checksums that proved the objects' bytes
  went with it, so the objects are removed (nothing is orphaned on disk, nothing unproven is served)
  and download again when next read; one a reader holds pinned is removed at its next hit.

Example:
    >>> import tempfile, pathlib
    >>> cache = FileCache(tempfile.mkdtemp(), max_bytes=1 << 20, min_free_bytes=0)  # doctest: +SKIP
    >>> key = FileCache.key("s3://b/a.txt", size=5, version="etag1")
    >>> got = cache.get(key, 5, lambda tmp: pathlib.Path(tmp).write_bytes(b"hello"), group="demo")  # doctest: +SKIP
    >>> pathlib.Path(got.path).read_bytes(), got.downloaded                                       # doctest: +SKIP
    (b'hello', True)
    >>> cache.release(got)                                                                        # doctest: +SKIP
"""

from __future__ import annotations

from uc_jupyter.data.cache.errors import CacheBudgetError, CacheIntegrityWarning, NotACacheFolder
from uc_jupyter.data.cache.filecache import FileCache, default_cache_dir
from uc_jupyter.data.cache.handles import CachedFile, CacheStats, Ticket

__all__ = [
    "CacheBudgetError",
    "CacheIntegrityWarning",
    "CacheStats",
    "CachedFile",
    "FileCache",
    "NotACacheFolder",
    "Ticket",
    "default_cache_dir",
]
