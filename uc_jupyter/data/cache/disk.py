"""What the cache takes on disk: the bytes a file costs once written, and what the cache's own index
and folders take beside its files. Admission holds a budget of at least :data:`DISK_BUDGET_MIN` to
these, so that the cache folder's real disk use (``du``), index and folders included, stays within it.

Measured in the half-cache scenario (files of about 18 KiB, a budget of half the data, 2 DataLoader
workers), the files' listed bytes stayed within the budget while the folder took 1.5 to 1.7 times it: the
index's write-ahead log grew to 4 MB (SQLite checkpoints at 1000 pages and never shrinks the file),
the 256 object folders took 1 MB, and each file a whole number of 4 KiB blocks (about 10% more for
such files). So a file is charged its blocks plus its share of folder and index (:func:`charge`), the
log is kept short (:data:`PRAGMAS`), and the index and folders are measured at every admission and
taken off the budget (:func:`structure`).

A budget under :data:`DISK_BUDGET_MIN` cannot hold the index and folders (about 1.5 MB) and still
leave room for files: it bounds the files' listed bytes only, as small test caches use it.

Example:
    >>> charge(1, block=4096), charge(4096, block=4096), charge(4097, block=4096)
    (4608, 4608, 8704)
    >>> charge(0, block=4096)
    512
"""

from __future__ import annotations

import contextlib
import os

__all__ = ["DISK_BUDGET_MIN", "PER_FILE", "PRAGMAS", "allocation_unit", "charge", "structure"]

DISK_BUDGET_MIN = 8 << 20  # budgets from here on are the disk (see the module docstring)
# Per file, beside its blocks: its name in its folder (76 bytes on ext4 for a 64-character key and
# an extension; a folder grows by whole blocks, the first of which structure() counts) and its rows
# in the index (about 450 bytes with their index entries) until the index's size is measured again.
PER_FILE = 512
_PAGE = 4096  # SQLite's page size for new databases
_WAL_PAGES = 64  # the log is checkpointed once it holds this many pages...
_WAL_LIMIT = _WAL_PAGES * _PAGE  # ...and cut back to this size when it is reset
# The log between two checkpoints: the pages before the checkpoint plus one transaction (a batch of
# reservations or entries writes a few pages; one rebuilding the index writes more, and is measured).
_WAL_ALLOWANCE = 2 * _WAL_LIMIT
_SHM = 32 << 10  # the log's shared-memory index: 32 KiB per 4096 pages of log
_PREFIXES = 256  # objects/00 .. objects/ff, made as needed: all counted from the start
# The index is not synced to the disk: a checkpoint every 64 pages synced the log and the database,
# about 2 ms each here, inside the transaction that ran it and holding the index's write lock, so
# every stream of every process waited on the disk several times a second (a cold epoch of 3,000
# small files took 0.83 of the synced index's time: benchmarks/cache_index_sync.py). A process that
# dies loses nothing (its writes are in the kernel's page cache); an index damaged by a crash of the
# whole machine is found at its next use and rebuilt from the cached files (data/cache/index.py),
# which are not synced either: what a cache loses is files downloaded again.
PRAGMAS = (
    f"PRAGMA wal_autocheckpoint = {_WAL_PAGES}",
    f"PRAGMA journal_size_limit = {_WAL_LIMIT}",
    "PRAGMA synchronous = OFF",
)


def allocation_unit(path: str) -> int:
    """The file system's allocation unit under ``path`` (its fragment size), in bytes."""
    found = os.statvfs(path)
    return int(found.f_frsize or found.f_bsize or _PAGE)


def charge(size: int, *, block: int) -> int:
    """What a file of ``size`` bytes costs the budget: its whole blocks and :data:`PER_FILE`."""
    return -(-size // block) * block + PER_FILE


def structure(base: str, *, block: int) -> int:
    """The disk the cache folder ``base`` takes beside its files' blocks, measured now: the index,
    its log (at least what it may grow to before the next checkpoint) and shared memory, the marker
    files and the folders (every object folder counted as made). About 20 system calls."""
    total = block * (1 + _PREFIXES)  # the folder itself, and objects/xx
    wal = shm = 0
    with os.scandir(base) as entries:
        for entry in entries:
            try:
                found = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            used = max(found.st_blocks * 512, -(-found.st_size // block) * block)
            if entry.name.endswith("-wal"):
                wal = used
            elif entry.name.endswith("-shm"):
                shm = used
            else:  # the markers, objects/, tmp/ and stream/
                total += used
    with contextlib.suppress(FileNotFoundError), os.scandir(f"{base}/stream") as streams:
        total += block * sum(1 for _ in streams)  # one folder per process streaming files
    return total + max(wal, _WAL_ALLOWANCE) + max(shm, _SHM)
