"""What the dashboard shows, derived from telemetry Snapshots: texts, flags and chart inputs. Pure, no I/O.

Kept apart from the widgets and the charts so that the text fallback (:func:`summary`) needs neither
ipywidgets nor matplotlib, and so that the dashboard can tell an unchanged snapshot by comparing two
:class:`DashboardView` values instead of the snapshots themselves (whose times always differ).

The main figures are the current pass's own (labelled with it, "epoch 2: ..."); the epochs table
(:mod:`uc_jupyter.widgets.passes`) holds every pass and the cumulative row; the verdict and the
recommendations come from :mod:`uc_jupyter.widgets.advice`.

Example:
    >>> from uc_jupyter.telemetry.model import Histogram, Sample, Snapshot
    >>> loop = Sample(rank=0, worker=-1, seq=1, time=10.0, started=0.0, batches=4, samples=256,
    ...               fetch=Histogram.of([0.2] * 4), between=Histogram.of([0.05] * 3))
    >>> shards = {(0, w): Sample(rank=0, worker=w, seq=1, time=10.0, shard_size=n) for w, n in [(0, 40), (1, 0)]}
    >>> snap = Snapshot({(0, -1): loop, **shards}, time=10.0)
    >>> shard_report(snap).empty_workers
    ((0, 1),)
    >>> print(summary(snap, title="DataLoader"))  # doctest: +NORMALIZE_WHITESPACE
    DataLoader: 4 batches, 256 samples at 25.6 samples/s; fetch p50 205 ms, p95 234 ms, p99 236 ms;
    input-bound: the loop waited for data 84% of the time (over 10%: data loading holds training back);
    to do: raise num_workers to 4: data loads inside the training loop, between its steps;
    no shared cache (files read in place);
    shards: 1 rank x 2 workers, 40 items; empty: rank 0 worker 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from uc_jupyter.telemetry.model import Histogram, Snapshot
from uc_jupyter.widgets.advice import INPUT_BOUND_SHARE, advise, skipped_text, verdict
from uc_jupyter.widgets.passes import EpochRow, PassRecord, epoch_rows
from uc_jupyter.widgets.ranks import RankRow, rank_rows, ranks_text
from uc_jupyter.widgets.sources import sources_text
from uc_jupyter.widgets.units import format_bytes, format_seconds, three_digits

__all__ = [
    "INPUT_BOUND_SHARE",
    "DashboardView",
    "HistoryPoint",
    "ShardReport",
    "fetch_share",
    "format_bytes",
    "format_seconds",
    "scoped",
    "shard_report",
    "summary",
    "view_text",
    "window",
]


@dataclass(frozen=True)
class HistoryPoint:
    """Mean fetch and compute time of the batches delivered between two snapshots, at ``time``."""

    time: float
    fetch: float  # mean seconds the loop waited in next()
    compute: float  # mean seconds between next() calls
    batches: int
    pass_label: str = ""  # the pass it belongs to ("epoch 1"): the timeline marks where passes begin


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
        HistoryPoint(time=2.0, fetch=0.4, compute=0.4, batches=2, pass_label='')
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
    """The share of the loop's steady-state time spent waiting for data (0..1), of the rank that waits
    most; None before any time was measured."""
    return snapshot.exposed_wait


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
        count = per_rank.pop() if len(per_rank) == 1 else 0
        workers = f" x {count} worker{'' if count == 1 else 's'}" if count else ""
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

    scope: str  # the pass the main figures (throughput, latency, verdict) are of ("epoch 2"), '' without passes
    status_text: str  # "epoch 2: running: 40/94 batches, about 5.40 s left", "epoch 1: failed: ValueError: ..."
    failed: bool
    verdict_text: str
    input_bound: bool
    advice: tuple[str, ...]
    cache_value: int
    cache_max: int
    cache_text: str
    throughput_text: str
    latency_text: str
    skipped_text: str
    sources_text: str  # a Mix's: each source by name, its share of the samples, epoch and wait ('' otherwise)
    shard_text: str
    flagged_ranks: tuple[int, ...]
    epochs: tuple[EpochRow, ...]
    ranks: tuple[RankRow, ...]  # the current pass, a row per rank (several ranks only)
    shard_key: tuple[tuple[tuple[int, int], int], ...]
    latency_key: tuple[tuple[int, ...], tuple[HistoryPoint, ...]]

    @classmethod
    def of(
        cls,
        snapshot: Snapshot,
        history: tuple[HistoryPoint, ...] = (),
        passes: Sequence[PassRecord] = (),
        *,
        cpus: int | None = None,
    ) -> DashboardView:
        """The view of ``snapshot`` (cumulative) with ``passes`` of the loader, the last one current."""
        current = passes[-1] if passes else None
        figures = current.figures(snapshot) if current is not None else snapshot
        scope = current.shown_label(snapshot) if current is not None else ""
        shards = shard_report(snapshot)
        judged = verdict(figures, scope=scope)
        rows = rank_rows(figures)
        return cls(
            scope=scope,
            status_text=scoped(scope, current.progress(snapshot)) if current is not None else "",
            failed=current is not None and current.state == "failed",
            verdict_text=judged.text,
            input_bound=judged.input_bound,
            advice=advise(figures, cpus=cpus),
            cache_value=snapshot.cache_used_bytes,
            cache_max=snapshot.cache_max_bytes,
            cache_text=_cache_text(snapshot, figures),
            throughput_text=_throughput_text(figures),
            latency_text=_latency_text(figures),
            skipped_text=skipped_text(snapshot),
            sources_text=sources_text(snapshot),
            shard_text=shards.text,
            flagged_ranks=shards.flagged_ranks,
            epochs=epoch_rows(passes, snapshot),
            ranks=rows if len(rows) > 1 else (),
            shard_key=tuple(shards.workers.items()),
            latency_key=(figures.fetch.counts, history),
        )


def scoped(scope: str, text: str) -> str:
    """``text`` labelled with what it counts: 'epoch 2: 38 batches, ...' ('' scope: as it is)."""
    return f"{scope}: {text}" if scope else text


def _cache_text(snapshot: Snapshot, figures: Snapshot) -> str:
    """The cache's fill (the cache's own, shared) and the hit rate of ``figures`` (this pass's)."""
    if not snapshot.cache_max_bytes:
        return "no shared cache (files read in place)"
    used, budget = snapshot.cache_used_bytes, snapshot.cache_max_bytes
    evictions = figures.cache_evictions
    return (
        f"cache {format_bytes(used)} of {format_bytes(budget)} ({used / budget:.0%}), "
        f"hit rate {figures.hit_rate:.0%}, {evictions:,} eviction{'' if evictions == 1 else 's'}"
    )


def _throughput_text(snapshot: Snapshot) -> str:
    return (
        f"{snapshot.batches:,} batches, {snapshot.samples_delivered:,} samples "
        f"at {three_digits(snapshot.samples_per_second)} samples/s"
    )


def _latency_text(snapshot: Snapshot) -> str:
    if snapshot.fetch.count == 0:
        return "fetch: no batches yet"
    p = snapshot.percentiles()
    return f"fetch p50 {format_seconds(p['p50'])}, p95 {format_seconds(p['p95'])}, p99 {format_seconds(p['p99'])}"


def view_text(view: DashboardView) -> str:
    """A :class:`DashboardView` as one plain-text paragraph (no epochs table)."""
    advice = "to do: " + "; ".join(view.advice) if view.advice else ""
    # A pass that ended early says so first; a running or finished one needs no word.
    said = view.status_text.removeprefix(f"{view.scope}: ") if view.scope else view.status_text
    status = "" if said.startswith("running") or said == "done" else view.status_text
    parts = [
        status,
        scoped(view.scope, view.throughput_text),
        view.latency_text,
        view.verdict_text,
        advice,
        view.cache_text,
        ranks_text(view.ranks),
        view.shard_text,
        view.skipped_text,
        view.sources_text,
    ]
    return "; ".join(part for part in parts if part) + "."


def summary(snapshot: Snapshot, *, title: str = "", passes: Sequence[PassRecord] = (), cpus: int | None = None) -> str:
    """The dashboard as one plain-text paragraph, for where widgets cannot render (a terminal, a log).

    See the module's example.
    """
    text = view_text(DashboardView.of(snapshot, passes=passes, cpus=cpus))
    return f"{title}: {text}" if title else text[0].upper() + text[1:]
