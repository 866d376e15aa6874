"""The telemetry model: cumulative samples from producers, and immutable snapshots. Pure, no I/O.

Every producer (a DataLoader worker, a training loop, a rank) keeps cumulative counters and now and
then publishes them as a :class:`Sample`; because samples are cumulative, a dropped one loses
nothing, the next carries everything. A consumer keeps the newest sample per producer ``(rank,
worker)`` and builds a :class:`Snapshot`, from which widgets, MLflow and ``loader.stats()`` read
totals, rates and latency percentiles.

Latencies go into a :class:`Histogram` with fixed log-spaced buckets (8 per decade from 10 us to
1000 s), so histograms from different producers add up and percentiles need no raw values.

Example:
    >>> h = Histogram.of([0.010, 0.012, 0.011, 0.5])
    >>> h.count, round(h.quantile(0.5), 4) < 0.02, h.quantile(0.99) > 0.3
    (4, True, True)
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

__all__ = [
    "BUCKET_BOUNDS",
    "EXPOSED_STAGES",
    "MADE_STAGES",
    "MAIN_WORKER",
    "Histogram",
    "Sample",
    "Snapshot",
    "wait_share",
    "waits_most",
]

_PER_DECADE = 8
# Upper bounds of the buckets, in seconds; one more bucket above the last bound catches the rest.
BUCKET_BOUNDS: tuple[float, ...] = tuple(10 ** (-5 + i / _PER_DECADE) for i in range(8 * _PER_DECADE + 1))
MAIN_WORKER = -1  # the ``worker`` of a sample from the training loop itself
# The stages that make a batch, timed where they run (uc_jupyter.data.stream.stages), in the order of
# ``Sample.made``; and where the loop's steady-state waits went, in the order of ``Sample.exposed``:
# the making stages, the transfer from a worker to the loop (pinning included), and the rest (a
# worker still busy with an earlier batch, or the loader's own work).
MADE_STAGES = ("fetch", "decode", "collate")
EXPOSED_STAGES = (*MADE_STAGES, "transfer", "other")


def waits_most(waits: Mapping[int, float]) -> int:
    """The rank whose wait is largest (the lowest such rank on a tie): under DDP it sets the step.

    Example:
        >>> waits_most({0: 0.1, 1: 0.4, 2: 0.4})
        1
    """
    return max(waits, key=lambda rank: (waits[rank], -rank))


def wait_share(waited: float, computed: float) -> float | None:
    """The share of a loop's time spent waiting for data (0..1); None before any time was measured.

    Example:
        >>> wait_share(3.0, 1.0), wait_share(0.0, 0.0)
        (0.75, None)
    """
    return waited / (waited + computed) if waited + computed > 0 else None


@dataclass(frozen=True)
class Histogram:
    """Counts per fixed log-spaced bucket, plus the exact sum and sum of squares."""

    counts: tuple[int, ...] = (0,) * (len(BUCKET_BOUNDS) + 1)
    total: float = 0.0
    squares: float = 0.0

    @staticmethod
    def bucket(seconds: float) -> int:
        return bisect.bisect_left(BUCKET_BOUNDS, seconds)

    @classmethod
    def of(cls, values: Iterable[float]) -> Histogram:
        counts = [0] * (len(BUCKET_BOUNDS) + 1)
        total = squares = 0.0
        for v in values:
            counts[cls.bucket(v)] += 1
            total += v
            squares += v * v
        return cls(tuple(counts), total, squares)

    @property
    def count(self) -> int:
        return sum(self.counts)

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count else 0.0

    @property
    def variance(self) -> float:
        """Population variance of the recorded values."""
        n = self.count
        return max(0.0, self.squares / n - (self.total / n) ** 2) if n else 0.0

    def __repr__(self) -> str:
        """Its count and where its values lie, not its 65 buckets.

        Example:
            >>> Histogram.of([0.010, 0.012, 0.011, 0.5]), Histogram()
            (Histogram(4 values, mean 0.133 s, p50 0.0115 s, p99 0.556 s), Histogram(empty))
        """
        if not self.count:
            return "Histogram(empty)"
        p50, p99 = self.quantile(0.5), self.quantile(0.99)
        return f"Histogram({self.count:,} values, mean {self.mean:.3g} s, p50 {p50:.3g} s, p99 {p99:.3g} s)"

    def merged(self, other: Histogram) -> Histogram:
        return Histogram(
            tuple(a + b for a, b in zip(self.counts, other.counts, strict=True)),
            self.total + other.total,
            self.squares + other.squares,
        )

    def minus(self, earlier: Histogram) -> Histogram:
        """What was recorded since ``earlier`` (a previous state of the same cumulative histogram)."""
        return Histogram(
            tuple(a - b for a, b in zip(self.counts, earlier.counts, strict=True)),
            self.total - earlier.total,
            self.squares - earlier.squares,
        )

    def quantile(self, q: float) -> float:
        """The ``q`` quantile (0..1), interpolated geometrically inside its bucket; 0.0 when empty."""
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"quantile must be between 0 and 1, got {q}")
        n = self.count
        if n == 0:
            return 0.0
        rank = q * n
        seen = 0
        for index, c in enumerate(self.counts):
            if c and seen + c >= rank:
                low = BUCKET_BOUNDS[index - 1] if index > 0 else BUCKET_BOUNDS[0] / 10 ** (1 / _PER_DECADE)
                high = BUCKET_BOUNDS[index] if index < len(BUCKET_BOUNDS) else low * 10 ** (1 / _PER_DECADE)
                fraction = (rank - seen) / c
                # Clamped: exp/log may round one ulp past the bucket's bound, breaking monotonicity.
                return float(min(high, max(low, low * math.exp(math.log(high / low) * fraction))))
            seen += c
        return BUCKET_BOUNDS[-1]


@dataclass(frozen=True)
class Sample:
    """Cumulative counters of one producer ``(rank, worker)`` at time ``time`` (seconds).

    ``seq`` grows with every sample of a producer, so the newest one wins whatever order samples
    arrive in. Workers fill the cache and shard fields; the training loop (``worker=MAIN_WORKER``)
    fills the batch timing fields.
    """

    rank: int
    worker: int
    seq: int
    time: float
    batches: int = 0
    samples: int = 0
    fetch: Histogram = field(default_factory=Histogram)  # time the loop waited in next()
    between: Histogram = field(default_factory=Histogram)  # time between next() calls (compute)
    # The loop's start-up, apart from its steady state: seconds its passes spent in iter() before any
    # batch was asked (workers starting), and seconds they waited for their first batch (listing, first
    # files; part of ``fetch`` too).
    setup: float = 0.0
    first_waits: float = 0.0
    worker_starts: int = 0  # the loop's sample: passes that started worker processes
    persistent_workers: bool = False  # the loop's sample: its workers outlive a pass (started once)
    files: int = 0
    bytes: int = 0
    hits: int = 0
    misses: int = 0
    bytes_downloaded: int = 0
    streamed: int = 0  # misses not kept in the cache (cache="never", or no room): streamed through it
    retries: int = 0
    shard_size: int = 0
    skipped: int = 0  # files of the shard left out because they do not match (not images, include/exclude)
    padded: int = 0
    dropped: int = 0
    resumed_epoch: int = -1  # a stream's: the epoch its current pass resumed mid-way from a checkpoint; -1: none
    # A stream's downloads: how many and their seconds; of those whose time to first byte the store
    # told, how many and the seconds they waited for it (uc_jupyter.widgets.reads judges them).
    reads: int = 0
    read_seconds: float = 0.0
    answered: int = 0
    answer_seconds: float = 0.0
    queue_depth: int = 0  # the loop's sample: batches requested from workers, not yet delivered
    worker_queue_depths: tuple[int, ...] = ()  # the loop's sample: the same per worker
    cache_used_bytes: int = 0
    cache_max_bytes: int = 0
    cache_evictions: int = 0  # files the shared cache has evicted since it was made (all its users)
    started: float = 0.0  # when this producer began, for rates
    cpu_seconds: float = 0.0  # a worker process's: CPU seconds it used since ``started`` (reading, decoding, collating)
    # The loop's sample: seconds the batches it received took to make, per MADE_STAGES (summed over
    # the processes that made them), the seconds pinning them took, and its steady-state waits split
    # per EXPOSED_STAGES (they add up to the exposed wait's seconds).
    made: tuple[float, ...] = (0.0,) * len(MADE_STAGES)
    pinned: float = 0.0
    exposed: tuple[float, ...] = (0.0,) * len(EXPOSED_STAGES)
    # A Mix's stream: samples of each of its sources, each source's own epoch of its latest one, the
    # seconds each source's stages (fetch, decode) took to make its samples, and the sources' names.
    source_samples: tuple[int, ...] = ()
    source_epochs: tuple[int, ...] = ()
    source_seconds: tuple[float, ...] = ()
    source_names: tuple[str, ...] = ()

    @property
    def producer(self) -> tuple[int, int]:
        return (self.rank, self.worker)

    @property
    def exposed_wait(self) -> float | None:
        """The loop's sample: the share of its steady-state time (start-up left out) it waited for data.

        Example:
            >>> loop = Sample(rank=0, worker=-1, seq=1, time=9.0, fetch=Histogram.of([2.0, 0.5, 0.5]),
            ...               between=Histogram.of([1.0, 1.0]), setup=0.4, first_waits=2.0)
            >>> loop.exposed_wait, loop.startup
            (0.3333333333333333, 2.4)
        """
        return wait_share(max(0.0, self.fetch.total - self.first_waits), self.between.total)

    def exposed_by_stage(self) -> dict[str, float]:
        """The loop's sample: the share of its steady-state wait each stage caused (empty before any).

        Example:
            >>> loop = Sample(rank=0, worker=-1, seq=1, time=9.0, exposed=(1.5, 0.5, 0.0, 0.0, 0.0))
            >>> loop.exposed_by_stage()
            {'fetch': 0.75, 'decode': 0.25, 'collate': 0.0, 'transfer': 0.0, 'other': 0.0}
        """
        total = sum(self.exposed)
        if total <= 0:
            return {}
        return {stage: seconds / total for stage, seconds in zip(EXPOSED_STAGES, self.exposed, strict=True)}

    def bound_stage(self) -> str:
        """The loop's sample: the stage that caused most of its steady-state wait ('' before any).

        Example:
            >>> Sample(rank=0, worker=-1, seq=1, time=9.0, exposed=(0.5, 1.5, 0.0, 0.1, 0.0)).bound_stage()
            'decode'
        """
        shares = self.exposed_by_stage()
        return max(shares, key=shares.__getitem__) if shares else ""

    @property
    def startup(self) -> float:
        """Seconds the loop's passes took to start: iter() and the wait for each pass's first batch."""
        return self.setup + self.first_waits

    def advanced(self, **changes: object) -> Sample:
        """A copy with ``seq`` increased and ``changes`` applied."""
        return replace(self, seq=self.seq + 1, **changes)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Snapshot:
    """The newest sample of every producer, and totals derived from them."""

    samples: Mapping[tuple[int, int], Sample]
    time: float

    def __repr__(self) -> str:
        """One line: what was delivered, the exposed wait (and whose, with several ranks), the cache.

        Example:
            >>> loop = Sample(rank=0, worker=-1, seq=1, time=4.0, batches=10, samples=320,
            ...               fetch=Histogram.of([0.1] * 10), between=Histogram.of([0.3] * 9))
            >>> Snapshot({(0, -1): loop}, time=4.0)
            Snapshot(1 rank: 10 batches, 320 samples at 80 samples/s, exposed wait 27%)
        """
        ranks, rate = len(self.loops()), self.samples_per_second
        said = [f"{self.batches:,} batches, {self.samples_delivered:,} samples at {rate:,.0f} samples/s"]
        waits = self.exposed_waits()
        if waits:
            worst = waits_most(waits)
            said.append(f"exposed wait {waits[worst]:.0%}" + (f" (rank {worst})" if ranks > 1 else ""))
        if self.cache_max_bytes and self.hits + self.misses:  # files read in place have no cache to hit
            said.append(f"hit rate {self.hit_rate:.0%}")
        return f"Snapshot({ranks} rank{'' if ranks == 1 else 's'}: {', '.join(said)})"

    @property
    def ranks(self) -> tuple[int, ...]:
        return tuple(sorted({rank for rank, _ in self.samples}))

    def _all(self) -> Iterable[Sample]:
        return self.samples.values()

    def loops(self) -> dict[int, Sample]:
        """Each rank's training-loop sample, once it has delivered a batch, by rank."""
        return {s.rank: s for _, s in sorted(self.samples.items()) if s.worker == MAIN_WORKER and s.batches}

    def exposed_waits(self) -> dict[int, float]:
        """Per rank, the share of its steady-state loop time spent waiting for data (ranks with one
        measured yet: a pass's first batch is start-up, not steady state)."""
        shares = {rank: loop.exposed_wait for rank, loop in self.loops().items()}
        return {rank: share for rank, share in shares.items() if share is not None}

    @property
    def exposed_wait(self) -> float | None:
        """The job's exposed wait: the largest rank's (under DDP the rank that waits most sets the step).

        Example:
            >>> def loop(rank, wait):
            ...     return Sample(rank=rank, worker=-1, seq=1, time=1.0, batches=3,
            ...                   fetch=Histogram.of([wait] * 3), between=Histogram.of([0.1] * 2))
            >>> snap = Snapshot({(0, -1): loop(0, 0.01), (1, -1): loop(1, 0.1)}, time=1.0)
            >>> round(snap.exposed_wait, 2), {r: round(s, 2) for r, s in snap.exposed_waits().items()}
            (0.6, {0: 0.13, 1: 0.6})
        """
        return max(self.exposed_waits().values(), default=None)

    def worker_cpu_share(self, rank: int) -> float | None:
        """The share of their time ``rank``'s worker processes spent on CPU (reading, decoding,
        collating); the rest they waited (for storage, or idle when nothing was asked). None without
        worker processes (the loop's own process loads the data).

        Example:
            >>> worker = Sample(rank=0, worker=0, seq=1, time=10.0, started=2.0, cpu_seconds=6.0)
            >>> Snapshot({(0, 0): worker}, time=10.0).worker_cpu_share(0)
            0.75
        """
        workers = [s for s in self._all() if s.rank == rank and s.worker != MAIN_WORKER and s.started > 0]
        wall = sum(s.time - s.started for s in workers)
        return min(1.0, sum(s.cpu_seconds for s in workers) / wall) if wall > 0 else None

    @property
    def fetch(self) -> Histogram:
        """Batch fetch latency over every rank's training loop."""
        total = Histogram()
        for s in self._all():
            total = total.merged(s.fetch)
        return total

    @property
    def between(self) -> Histogram:
        total = Histogram()
        for s in self._all():
            total = total.merged(s.between)
        return total

    @property
    def batches(self) -> int:
        return sum(s.batches for s in self._all())

    @property
    def samples_delivered(self) -> int:
        return sum(s.samples for s in self._all())

    @property
    def samples_per_second(self) -> float:
        loops = [s for s in self._all() if s.worker == MAIN_WORKER and s.samples]
        elapsed = max((s.time - s.started for s in loops), default=0.0)
        return sum(s.samples for s in loops) / elapsed if elapsed > 0 else 0.0

    @property
    def hits(self) -> int:
        return sum(s.hits for s in self._all())

    @property
    def source_samples(self) -> tuple[int, ...]:
        """A Mix's samples of each source, over every stream (empty for a single dataset).

        Example:
            >>> worker = lambda w, counts: Sample(rank=0, worker=w, seq=1, time=1.0, source_samples=counts)
            >>> Snapshot({(0, 0): worker(0, (3, 1)), (0, 1): worker(1, (2, 2))}, 1.0).source_samples
            (5, 3)
        """
        counts = [s.source_samples for s in self._all() if s.source_samples]
        return tuple(sum(column) for column in zip(*counts, strict=True)) if counts else ()

    @property
    def source_epochs(self) -> tuple[int, ...]:
        """A Mix's sources: the latest own epoch any stream has read of each (empty for a single dataset)."""
        epochs = [s.source_epochs for s in self._all() if s.source_epochs]
        return tuple(max(column) for column in zip(*epochs, strict=True)) if epochs else ()

    @property
    def source_seconds(self) -> tuple[float, ...]:
        """A Mix's sources: the seconds each one's stages took to make its samples, over every stream.

        Example:
            >>> worker = lambda w, seconds: Sample(rank=0, worker=w, seq=1, time=1.0, source_seconds=seconds)
            >>> Snapshot({(0, 0): worker(0, (0.5, 2.0)), (0, 1): worker(1, (0.25, 1.0))}, 1.0).source_seconds
            (0.75, 3.0)
        """
        seconds = [s.source_seconds for s in self._all() if s.source_seconds]
        return tuple(sum(column) for column in zip(*seconds, strict=True)) if seconds else ()

    @property
    def source_names(self) -> tuple[str, ...]:
        """A Mix's sources' names (volume paths, table names) as its streams tell them; empty for a
        single dataset."""
        return next((s.source_names for s in self._all() if s.source_names), ())

    def of_rank(self, rank: int) -> Snapshot:
        """The samples of rank ``rank`` alone (its loop and its streams), at the same time.

        Example:
            >>> loops = {(r, -1): Sample(rank=r, worker=-1, seq=1, time=1.0, batches=r + 1) for r in (0, 1)}
            >>> Snapshot(loops, 1.0).of_rank(1).batches
            2
        """
        return Snapshot({key: s for key, s in self.samples.items() if s.rank == rank}, self.time)

    @property
    def misses(self) -> int:
        return sum(s.misses for s in self._all())

    @property
    def hit_rate(self) -> float:
        looked = self.hits + self.misses
        return self.hits / looked if looked else 0.0

    @property
    def bytes_downloaded(self) -> int:
        return sum(s.bytes_downloaded for s in self._all())

    @property
    def skipped(self) -> int:
        """Files the workers left out of their shards (not matching the decoder, include or exclude)."""
        return sum(s.skipped for s in self._all())

    def _newest_cache_sample(self) -> Sample | None:
        """The newest sample that saw the shared cache: its counters are the cache's, not a producer's."""
        return max((s for s in self._all() if s.cache_max_bytes), key=lambda s: s.time, default=None)

    @property
    def cache_used_bytes(self) -> int:
        """The shared cache's fill as last seen by any producer."""
        newest = self._newest_cache_sample()
        return newest.cache_used_bytes if newest else 0

    @property
    def cache_evictions(self) -> int:
        """The shared cache's evictions as last seen by any producer (the same sample as the fill)."""
        newest = self._newest_cache_sample()
        return newest.cache_evictions if newest else 0

    @property
    def cache_max_bytes(self) -> int:
        return max((s.cache_max_bytes for s in self._all()), default=0)

    def shard_sizes(self) -> dict[int, int]:
        """Items per epoch each rank delivers (over its workers)."""
        sizes: dict[int, int] = {}
        for s in self._all():
            if s.worker != MAIN_WORKER:
                sizes[s.rank] = sizes.get(s.rank, 0) + s.shard_size
        return dict(sorted(sizes.items()))

    def worker_shard_sizes(self) -> dict[tuple[int, int], int]:
        return {k: s.shard_size for k, s in sorted(self.samples.items()) if s.worker != MAIN_WORKER}

    @property
    def resumed_epochs(self) -> tuple[int, ...]:
        """The epochs that streams report their current pass resumed mid-way (from a checkpoint), sorted.

        Example:
            >>> fresh, resumed = Sample(rank=0, worker=0, seq=1, time=1.0), Sample(rank=1, worker=0, seq=1, time=1.0)
            >>> Snapshot({(0, 0): fresh, (1, 0): replace(resumed, resumed_epoch=3)}, time=1.0).resumed_epochs
            (3,)
        """
        return tuple(sorted({s.resumed_epoch for s in self._all() if s.resumed_epoch >= 0}))

    def queue_depths(self) -> dict[tuple[int, int], int]:
        """Batches each ``(rank, worker)`` has been asked for and not yet delivered."""
        depths: dict[tuple[int, int], int] = {}
        for s in self._all():
            for worker, depth in enumerate(s.worker_queue_depths):
                depths[(s.rank, worker)] = depth
        return dict(sorted(depths.items()))

    def percentiles(self) -> dict[str, float]:
        fetch = self.fetch
        return {"p50": fetch.quantile(0.5), "p95": fetch.quantile(0.95), "p99": fetch.quantile(0.99)}
