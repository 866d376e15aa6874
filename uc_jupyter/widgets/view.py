"""What the dashboard shows, derived from telemetry Snapshots: texts, flags and chart inputs. Pure, no I/O.

Kept apart from the widgets and the charts so that the text fallback (:func:`summary`) needs neither
ipywidgets nor matplotlib, and so that the dashboard can tell an unchanged snapshot by comparing two
:class:`DashboardView` values instead of the snapshots themselves (whose times always differ).

Example:
    >>> from uc_jupyter.telemetry.model import Histogram, Sample, Snapshot
    >>> loop = Sample(rank=0, worker=-1, seq=1, time=10.0, started=0.0, batches=4, samples=256,
    ...               fetch=Histogram.of([0.2] * 4), between=Histogram.of([0.05] * 3))
    >>> shards = {(0, w): Sample(rank=0, worker=w, seq=1, time=10.0, shard_size=n) for w, n in [(0, 40), (1, 0)]}
    >>> snap = Snapshot({(0, -1): loop, **shards}, time=10.0)
    >>> shard_report(snap).empty_workers
    ((0, 1),)
    >>> print(summary(snap, title="epoch 0"))  # doctest: +NORMALIZE_WHITESPACE
    epoch 0: 4 batches, 256 samples at 25.6 samples/s; fetch p50 205 ms, p95 234 ms, p99 236 ms;
    input-bound: the loop waited for data 84% of the time; no shared cache (files read in place);
    shards: 1 rank x 2 workers, 40 items; empty: rank 0 worker 1.
"""

from __future__ import annotations

from dataclasses import dataclass

from uc_jupyter.telemetry.model import Histogram, Snapshot

__all__ = [
    "INPUT_BOUND_SHARE",
    "DashboardView",
    "HistoryPoint",
    "ShardReport",
    "fetch_share",
    "format_bytes",
    "format_seconds",
    "shard_report",
    "summary",
    "window",
]

# The loop is input-bound when it spends more of its time waiting in next() than computing.
INPUT_BOUND_SHARE = 0.5


def format_seconds(seconds: float) -> str:
    """A duration with three significant digits and a unit a person reads at a glance.

    Example:
        >>> format_seconds(0.000_85), format_seconds(0.0123), format_seconds(2.5), format_seconds(0)
        ('850 us', '12.3 ms', '2.50 s', '0 s')
    """
    if seconds <= 0:
        return "0 s"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{_three_digits(seconds / scale)} {unit}"
    return f"{_three_digits(seconds / 1e-9)} ns"


def format_bytes(count: float) -> str:
    """A byte count in decimal units (as the rest of the project prints them).

    Example:
        >>> format_bytes(0), format_bytes(1234), format_bytes(12_345_678), format_bytes(3e12)
        ('0 B', '1.23 kB', '12.3 MB', '3.00 TB')
    """
    if count < 1000:
        return f"{int(count)} B"
    for unit in ("kB", "MB", "GB", "TB"):
        count /= 1000
        if count < 1000 or unit == "TB":
            return f"{_three_digits(count)} {unit}"
    raise AssertionError("unreachable")  # pragma: no cover


def _three_digits(value: float) -> str:
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


@dataclass(frozen=True)
class HistoryPoint:
    """Mean fetch and compute time of the batches delivered between two snapshots, at ``time``."""

    time: float
    fetch: float  # mean seconds the loop waited in next()
    compute: float  # mean seconds between next() calls
    batches: int


def window(previous: Snapshot | None, current: Snapshot) -> HistoryPoint | None:
    """The batches ``current`` has beyond ``previous`` as one :class:`HistoryPoint`; None when none arrived.

    Snapshots carry cumulative histograms, so the window is their difference. A producer that
    restarted (a new DataLoader, a restarted rank) counts from zero again; then the window is what the
    current snapshot holds, rather than a negative difference.

    Example:
        >>> from uc_jupyter.telemetry.model import Histogram, Sample, Snapshot
        >>> def snap(t, fetch):
        ...     loop = Sample(rank=0, worker=-1, seq=1, time=t, fetch=Histogram.of(fetch), between=Histogram.of(fetch))
        ...     return Snapshot({(0, -1): loop}, time=t)
        >>> window(snap(1.0, [0.1]), snap(2.0, [0.1, 0.3, 0.5]))
        HistoryPoint(time=2.0, fetch=0.4, compute=0.4, batches=2)
        >>> window(snap(1.0, [0.1]), snap(2.0, [0.1])) is None
        True
    """
    fetch, between = current.fetch, current.between
    if previous is not None:
        fetch_delta, between_delta = fetch.minus(previous.fetch), between.minus(previous.between)
        if _is_whole(fetch_delta) and _is_whole(between_delta):
            fetch, between = fetch_delta, between_delta
    if fetch.count == 0:
        return None
    return HistoryPoint(time=current.time, fetch=fetch.mean, compute=between.mean, batches=fetch.count)


def _is_whole(histogram: Histogram) -> bool:
    return all(c >= 0 for c in histogram.counts) and histogram.total >= 0


def fetch_share(snapshot: Snapshot) -> float | None:
    """The share of the loop's time spent waiting for data (0..1); None before any time was measured."""
    waited, computed = snapshot.fetch.total, snapshot.between.total
    return waited / (waited + computed) if waited + computed > 0 else None


@dataclass(frozen=True)
class ShardReport:
    """Items per epoch of every rank and ``(rank, worker)`` stream, and which of them look wrong.

    A rank is flagged when its count differs from the largest rank's (with ``on_uneven="allow"`` the
    ranks of a DDP job then run different numbers of steps, and the job hangs or skews) or is zero; a
    worker is flagged when it has nothing to deliver. Workers of one rank differing by an item or two
    are normal and not flagged.
    """

    ranks: dict[int, int]
    workers: dict[tuple[int, int], int]
    flagged_ranks: tuple[int, ...]
    empty_workers: tuple[tuple[int, int], ...]

    @property
    def text(self) -> str:
        """One line: the grid and its sizes, and what is flagged."""
        if not self.ranks:
            return "shards: no shard telemetry yet"
        per_rank = {sum(1 for r, _ in self.workers if r == rank) for rank in self.ranks}
        workers = f" x {per_rank.pop()} workers" if len(per_rank) == 1 else ""
        ranks = f"{len(self.ranks)} rank{'s' if len(self.ranks) > 1 else ''}{workers}"
        sizes = sorted(set(self.ranks.values()))
        if len(sizes) == 1:
            line = f"shards: {ranks}, {sizes[0]:,} items" + (" each" if len(self.ranks) > 1 else "")
        else:
            line = f"shards: {ranks}, {sizes[0]:,} to {sizes[-1]:,} items"
        largest = max(self.ranks.values())
        uneven = [r for r in self.flagged_ranks if self.ranks[r]]
        empty = [r for r in self.flagged_ranks if not self.ranks[r]]
        if uneven:
            line += "; uneven: " + ", ".join(f"rank {r} has {self.ranks[r]:,}" for r in uneven) + f" of {largest:,}"
        if empty:
            line += "; empty: " + ", ".join(f"rank {r}" for r in empty)
        lone = [w for w in self.empty_workers if w[0] not in empty]
        if lone:
            line += ("; " if uneven or empty else "; empty: ") + ", ".join(f"rank {r} worker {w}" for r, w in lone)
        return line


def shard_report(snapshot: Snapshot) -> ShardReport:
    """The :class:`ShardReport` of ``snapshot`` (only producers that published shard telemetry)."""
    ranks = snapshot.shard_sizes()
    workers = snapshot.worker_shard_sizes()
    largest = max(ranks.values(), default=0)
    flagged = tuple(rank for rank, size in ranks.items() if size != largest or size == 0)
    empty = tuple(key for key, size in workers.items() if size == 0)
    return ShardReport(ranks, workers, flagged, empty)


@dataclass(frozen=True)
class DashboardView:
    """Everything the dashboard displays; two equal views send nothing to the browser.

    ``shard_key`` and ``latency_key`` are the inputs of the two charts, so a chart is re-rendered
    only when what it draws changed (PNG encoding is the expensive part of a redraw).
    """

    cache_value: int
    cache_max: int
    cache_text: str
    throughput_text: str
    latency_text: str
    hint_text: str
    input_bound: bool
    shard_text: str
    flagged_ranks: tuple[int, ...]
    shard_key: tuple[tuple[tuple[int, int], int], ...]
    latency_key: tuple[tuple[int, ...], tuple[HistoryPoint, ...]]

    @classmethod
    def of(cls, snapshot: Snapshot, history: tuple[HistoryPoint, ...] = ()) -> DashboardView:
        shards = shard_report(snapshot)
        share = fetch_share(snapshot)
        return cls(
            cache_value=snapshot.cache_used_bytes,
            cache_max=snapshot.cache_max_bytes,
            cache_text=_cache_text(snapshot),
            throughput_text=_throughput_text(snapshot),
            latency_text=_latency_text(snapshot),
            hint_text=_hint_text(share),
            input_bound=share is not None and share > INPUT_BOUND_SHARE,
            shard_text=shards.text,
            flagged_ranks=shards.flagged_ranks,
            shard_key=tuple(shards.workers.items()),
            latency_key=(snapshot.fetch.counts, history),
        )


def _cache_text(snapshot: Snapshot) -> str:
    if not snapshot.cache_max_bytes:
        return "no shared cache (files read in place)"
    used, budget = snapshot.cache_used_bytes, snapshot.cache_max_bytes
    evictions = snapshot.cache_evictions
    return (
        f"cache {format_bytes(used)} of {format_bytes(budget)} ({used / budget:.0%}), "
        f"hit rate {snapshot.hit_rate:.0%}, {evictions:,} eviction{'' if evictions == 1 else 's'}"
    )


def _throughput_text(snapshot: Snapshot) -> str:
    return (
        f"{snapshot.batches:,} batches, {snapshot.samples_delivered:,} samples "
        f"at {_three_digits(snapshot.samples_per_second)} samples/s"
    )


def _latency_text(snapshot: Snapshot) -> str:
    if snapshot.fetch.count == 0:
        return "fetch: no batches yet"
    p = snapshot.percentiles()
    return f"fetch p50 {format_seconds(p['p50'])}, p95 {format_seconds(p['p95'])}, p99 {format_seconds(p['p99'])}"


def _hint_text(share: float | None) -> str:
    if share is None:
        return ""
    if share > INPUT_BOUND_SHARE:
        return f"input-bound: the loop waited for data {share:.0%} of the time"
    return f"compute-bound: the loop waited for data {share:.0%} of the time"


def summary(snapshot: Snapshot, *, title: str = "") -> str:
    """The dashboard as one plain-text paragraph, for where widgets cannot render (a terminal, a log).

    See the module's example.
    """
    view = DashboardView.of(snapshot)
    parts = [view.throughput_text, view.latency_text, view.hint_text, view.cache_text, view.shard_text]
    text = "; ".join(part for part in parts if part) + "."
    return f"{title}: {text}" if title else text[0].upper() + text[1:]
