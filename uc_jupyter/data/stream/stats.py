"""The counters of data streams: one shape, :class:`StreamCounters`, from which the frozen
:class:`StreamStats` (``dataset.stats()``) and the telemetry :class:`~uc_jupyter.telemetry.model.Sample`
(widgets, MLflow, ``loader.stats()``) are derived, each in one method here.

A stream mutates its counters under its dataset's lock (per file: plain attribute increments); what
leaves the stream is a frozen copy, and what leaves the process is a ``Sample``.

Example:
    >>> counters = StreamCounters(rank=0, worker=1, files=3, hits=2, misses=1, streamed=1)
    >>> stats = counters.freeze()
    >>> stats.files, stats.streamed
    (3, 1)
    >>> sample = stats.sample(seq=7, time=1.5, cache=None)
    >>> sample.producer, sample.files, sample.hits, sample.seq
    ((0, 1), 3, 2, 7)
"""

from __future__ import annotations

from dataclasses import astuple, dataclass, field, replace

from uc_jupyter.data.cache import CacheStats
from uc_jupyter.telemetry.model import Sample

__all__ = ["DatasetStats", "StreamCounters", "StreamStats"]


@dataclass(slots=True)
class StreamCounters:
    """One stream's cumulative counters, mutated in place under its dataset's lock.

    The fields are :class:`StreamStats`'s, in the same order (a test holds them equal); read them
    through :meth:`freeze`, never while the stream runs without the lock.
    """

    rank: int
    worker: int
    epoch: int = 0
    files: int = 0
    bytes: int = 0
    hits: int = 0
    misses: int = 0
    bytes_downloaded: int = 0
    streamed: int = 0
    retries: int = 0
    padded: int = 0
    dropped: int = 0
    shard_size: int = 0
    skipped: int = 0
    resumed_epoch: int = -1
    reads: int = 0
    read_seconds: float = 0.0
    answered: int = 0
    answer_seconds: float = 0.0
    # A Mix's stream: samples of each source so far, the source's own epoch of its latest one, the
    # seconds its stages took to make them, and the sources' names (set once per pass).
    source_samples: list[int] = field(default_factory=list)
    source_epochs: list[int] = field(default_factory=list)
    source_seconds: list[float] = field(default_factory=list)
    source_names: tuple[str, ...] = ()

    def known_shard(self, size: int) -> None:
        """A pass that started while its items arrive: its shard is known to be at least ``size``."""
        self.shard_size = max(self.shard_size, size)

    def freeze(self) -> StreamStats:
        """A frozen copy (call it under the lock the counters are mutated under)."""
        frozen = StreamStats(*astuple(self))
        return replace(
            frozen,
            source_samples=tuple(self.source_samples),
            source_epochs=tuple(self.source_epochs),
            source_seconds=tuple(self.source_seconds),
        )


@dataclass(frozen=True)
class StreamStats:
    """Cumulative counters of one stream (one rank's DataLoader worker) since it was created."""

    rank: int
    worker: int
    epoch: int = 0
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
    resumed_epoch: int = -1  # the epoch this stream's current pass resumed mid-way (from a checkpoint); -1: it did not
    # Its downloads (those the fetch-ahead window started): how many, the seconds they took, and of
    # those the store told the time to first byte of, how many and the seconds they waited for it.
    reads: int = 0
    read_seconds: float = 0.0
    answered: int = 0
    answer_seconds: float = 0.0
    source_samples: tuple[int, ...] = ()  # a Mix's stream: samples of each of its sources
    source_epochs: tuple[int, ...] = ()  # a Mix's stream: each source's own epoch of its latest sample
    source_seconds: tuple[float, ...] = ()  # a Mix's stream: seconds each source's stages took to make its samples
    source_names: tuple[str, ...] = ()  # a Mix's stream: its sources' names (volume paths, table names)

    def sample(self, *, seq: int, time: float, cache: CacheStats | None) -> Sample:
        """This stream's telemetry sample at ``time``, with the shared ``cache``'s fill (None: no cache).

        The one mapping from stream counters to telemetry: a counter the telemetry model has goes
        across here, the others (``epoch``) stay the dataset's own.
        """
        return Sample(
            rank=self.rank,
            worker=self.worker,
            seq=seq,
            time=time,
            files=self.files,
            bytes=self.bytes,
            hits=self.hits,
            misses=self.misses,
            bytes_downloaded=self.bytes_downloaded,
            streamed=self.streamed,
            retries=self.retries,
            shard_size=self.shard_size,
            skipped=self.skipped,
            padded=self.padded,
            dropped=self.dropped,
            resumed_epoch=self.resumed_epoch,
            reads=self.reads,
            read_seconds=self.read_seconds,
            answered=self.answered,
            answer_seconds=self.answer_seconds,
            source_samples=self.source_samples,
            source_epochs=self.source_epochs,
            source_seconds=self.source_seconds,
            source_names=self.source_names,
            cache_used_bytes=cache.used_bytes if cache else 0,
            cache_max_bytes=cache.max_bytes if cache else 0,
            cache_evictions=cache.evictions if cache else 0,
        )


@dataclass(frozen=True)
class DatasetStats:
    """The streams run in this process plus the shared cache's fill (None when reading in place)."""

    streams: tuple[StreamStats, ...] = ()
    cache: CacheStats | None = None
    listed_files: int = 0
    listed_bytes: int = 0
    skipped_files: int = 0  # found in the folder but left out (include/exclude, not images, beside classes)
