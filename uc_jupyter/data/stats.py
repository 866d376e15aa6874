"""Plain, frozen statistics of data streams, read by widgets, MLflow and ``dataset.stats()``."""

from __future__ import annotations

from dataclasses import dataclass

from uc_jupyter.data.cache import CacheStats

__all__ = ["DatasetStats", "StreamStats"]


@dataclass(frozen=True)
class StreamStats:
    """Cumulative counters of one stream (one rank's DataLoader worker) since it was created."""

    rank: int
    worker: int
    epoch: int
    files: int = 0  # items delivered
    bytes: int = 0  # bytes of the delivered items
    hits: int = 0  # served from the cache (or read in place)
    misses: int = 0  # fetched from storage
    bytes_downloaded: int = 0
    streamed: int = 0  # misses that did not fit the cache and were streamed through it
    retries: int = 0
    padded: int = 0  # repeated items that even out this rank (on_uneven="pad")
    dropped: int = 0  # items trimmed from this rank (on_uneven="drop")
    shard_size: int = 0  # items this stream delivers per epoch
    skipped: int = 0  # this stream's share of the files left out by the filters (they sum to the dataset's)


@dataclass(frozen=True)
class DatasetStats:
    """The streams run in this process plus the shared cache's fill (None when reading in place)."""

    streams: tuple[StreamStats, ...] = ()
    cache: CacheStats | None = None
    listed_files: int = 0
    listed_bytes: int = 0
    skipped_files: int = 0  # found in the folder but left out (include/exclude, not images, beside classes)
