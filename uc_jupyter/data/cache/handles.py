"""What the cache hands out: pinned files, tickets for downloads, and its fill.

Example:
    >>> stats = CacheStats("/c", resident_bytes=600, in_flight_bytes=200, max_bytes=1000,
    ...                    free_disk_bytes=10**9, min_free_bytes=0, entries=6, evictions=0)
    >>> stats.used_bytes, stats.fill
    (800, 0.8)
"""

from __future__ import annotations

from dataclasses import dataclass

from uc_jupyter.data.cache.pins import Pin

__all__ = ["CacheStats", "CachedFile", "Ticket"]


@dataclass(frozen=True)
class CachedFile:
    """A file handed out by the cache; ``path`` stays valid until :meth:`FileCache.release` (and
    after it, for a resident file, until the file is evicted)."""

    key: str
    path: str
    size: int
    resident: bool  # False: streamed past a full cache, deleted on release
    downloaded: bool  # True when this call fetched it
    reservation: int | None = None  # the budget a streamed file holds
    pin: Pin | None = None  # the share lock that keeps a resident file from eviction


@dataclass(frozen=True)
class Ticket:
    """Room reserved for one download (see :meth:`FileCache.reserve`): write the file to ``tmp``,
    then hand the ticket to :meth:`FileCache.finish`, or to :meth:`FileCache.abort` on failure."""

    key: str
    size: int
    name: str
    group: str
    resident: bool  # False: the file will be streamed through, not kept
    reservation: int
    tmp: str


@dataclass(frozen=True)
class CacheStats:
    """The cache's fill, shared by every process using it."""

    root: str
    resident_bytes: int  # files kept for reuse
    in_flight_bytes: int  # downloads under way and files streamed past a full cache
    max_bytes: int
    free_disk_bytes: int
    min_free_bytes: int
    entries: int
    evictions: int
    # The folder's disk use as admission counts it (files in whole blocks with their share of folder
    # and index, plus the index, its log and the folders as measured); the budget when it is the disk.
    disk_bytes: int = 0

    @property
    def used_bytes(self) -> int:
        return self.resident_bytes + self.in_flight_bytes

    @property
    def fill(self) -> float:
        """Used bytes over the budget, 0.0 to 1.0."""
        return self.used_bytes / self.max_bytes if self.max_bytes else 0.0
