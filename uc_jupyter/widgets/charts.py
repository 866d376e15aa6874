"""Dashboard charts: pure functions from a telemetry Snapshot to PNG bytes.

Each chart is drawn on its own ``matplotlib.figure.Figure`` with the Agg canvas: no pyplot (whose
global figure registry leaks figures and whose backend switch would change the user's plots) and no
global ``rcParams`` changes. Figures are sized for a notebook's output area (the two side by side
fill about 920 px, and wrap below each other when narrower), with fixed margins instead of a
layout engine: 9-point tick labels and 10-point titles at 100 dpi, axes labelled with their units,
legends above the plotting area (never over bars or lines), shard bars labelled by rank and worker.

Cost (measured by hand, not by a test, at these sizes: median of 10 renders, 2 shared cores at load
average 2.7, matplotlib 3.11): a shard chart of 6 streams takes about 23 ms to build, draw and encode,
the two-panel latency chart with 100 history points about 53 ms (an earlier, busier measurement at
the old 80 dpi sizes read 50 and 95 ms); the PNG encoding itself is a few ms of that. Drawing text
(tick labels, titles, legends) dominates, hence few ticks, no minor ticks, and the dashboard
rendering a chart at most once a second.

Example:
    >>> from uc_jupyter.telemetry.model import Histogram, Sample, Snapshot
    >>> loop = Sample(rank=0, worker=-1, seq=1, time=1.0, batches=3, fetch=Histogram.of([0.01, 0.02, 0.5]))
    >>> worker = Sample(rank=0, worker=0, seq=1, time=1.0, shard_size=100)
    >>> snap = Snapshot({(0, -1): loop, (0, 0): worker}, time=1.0)
    >>> shard_chart(snap)[:8] == b"\\x89PNG\\r\\n\\x1a\\n", latency_chart(snap)[:4] == b"\\x89PNG"
    (True, True)
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullLocator

from uc_jupyter.telemetry.model import BUCKET_BOUNDS, Histogram, Snapshot
from uc_jupyter.widgets.view import HistoryPoint, shard_report

__all__ = ["COLORS", "DPI", "LATENCY_SIZE", "SHARD_SIZE", "latency_chart", "pass_times", "shard_chart"]

SHARD_SIZE = (3.4, 2.8)  # inches; with the latency chart 920 px wide, inside a notebook's output area
LATENCY_SIZE = (5.8, 2.8)  # two panels side by side
DPI = 100
COLORS = {
    "failed": "#c62828",
    "normal": "#4c72b0",
    "uneven": "#dd8452",  # the warning colour
    "empty": "#c44e52",
    "fetch": "#dd8452",
    "compute": "#4c72b0",
    "p50": "#2f2f2f",
    "p95": "#8c564b",
    "p99": "#c44e52",
}
_FONT = 9  # tick labels and legends; titles one point larger
_STEP = BUCKET_BOUNDS[1] / BUCKET_BOUNDS[0]  # ratio between neighbouring bucket bounds
_MAX_BARS = 64  # beyond this many (rank, worker) streams, one bar per rank stays readable


def _tick_seconds(value: float, _: object = None) -> str:
    """Tick labels are compact: '10 ms', not format_seconds' '10.0 ms'."""
    if value <= 0:
        return "0"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if value >= scale * 0.999:
            return f"{value / scale:.3g} {unit}"
    return f"{value / 1e-9:.3g} ns"


def shard_chart(snapshot: Snapshot, *, size: tuple[float, float] = SHARD_SIZE, dpi: int = DPI) -> bytes:
    """Items per epoch of every ``(rank, worker)`` stream as bars grouped by rank, as PNG bytes.

    Each bar is labelled with its worker ("w0") and each group with its rank. Bars of a rank whose
    count differs from the largest rank's are drawn in the warning colour, empty streams in red (see
    :class:`uc_jupyter.widgets.view.ShardReport`). With more than 64 streams, one bar per rank.
    """
    report = shard_report(snapshot)
    figure, ax = _figure(size, dpi)
    figure.subplots_adjust(left=0.17, right=0.97, bottom=0.24, top=0.88)
    ax.set_title("shard sizes", fontsize=_FONT + 1)
    if not report.ranks:
        _empty(ax, "no shard telemetry yet")
        return _png(figure)
    per_worker = len(report.workers) <= _MAX_BARS
    positions: list[float] = []
    heights: list[int] = []
    colors: list[str] = []
    labels: list[str] = []
    groups: list[tuple[float, int]] = []
    x = 0.0
    for rank, total in report.ranks.items():
        streams = [(w, n) for (r, w), n in report.workers.items() if r == rank] if per_worker else [(-1, total)]
        start = x
        for worker, size_ in streams:
            positions.append(x)
            heights.append(size_)
            labels.append(f"w{worker}" if worker >= 0 else "")
            if size_ == 0 or total == 0:
                colors.append(COLORS["empty"])
            elif rank in report.flagged_ranks:
                colors.append(COLORS["uneven"])
            else:
                colors.append(COLORS["normal"])
            x += 1.0
        groups.append(((start + x - 1.0) / 2, rank))
        x += 0.6  # a gap between ranks
    ax.bar(positions, heights, width=0.9, color=colors)
    if per_worker and len(positions) <= 16:
        # Workers under their bars, ranks under their groups.
        ax.set_xticks(positions, labels)
        for middle, rank in groups:
            under = ax.get_xaxis_transform()  # x in data, y in axes units: below the tick labels
            ax.text(middle, -0.2, f"rank {rank}", transform=under, ha="center", va="top", fontsize=_FONT)
    else:
        shown = groups if len(groups) <= 8 else groups[:: math.ceil(len(groups) / 8)]
        ax.set_xticks([m for m, _ in shown], [f"rank {r}" if len(groups) <= 8 else str(r) for _, r in shown])
        ax.set_xlabel("rank" + (" (workers side by side)" if per_worker else ""), fontsize=_FONT)
    if report.flagged_ranks or report.empty_workers:
        ranks = sorted({*report.flagged_ranks, *(r for r, _ in report.empty_workers)})
        listed = ", ".join(map(str, ranks[:4])) + (", ..." if len(ranks) > 4 else "")
        title = f"shard sizes: uneven or empty (rank{'s' if len(ranks) > 1 else ''} {listed})"
        ax.set_title(title, fontsize=_FONT + 1, color=COLORS["uneven"])
    ax.set_ylabel("items per epoch" + ("" if per_worker else " (per rank)"), fontsize=_FONT)
    ax.set_ylim(0, max(max(heights), 1) * 1.12)
    ax.yaxis.set_major_locator(MaxNLocator(4, integer=True))
    return _png(figure)


def latency_chart(
    snapshot: Snapshot,
    history: Sequence[HistoryPoint] = (),
    *,
    scope: str = "",
    size: tuple[float, float] = LATENCY_SIZE,
    dpi: int = DPI,
) -> bytes:
    """Batch fetch latency as PNG bytes: the fetch histogram with p50/p95/p99 (left), and the recent
    mean fetch vs compute time per window from ``history`` (right), so input-bound loops stand out.
    ``scope`` ("epoch 2") names what the histogram counts in its title."""
    figure = Figure(figsize=size, dpi=dpi)
    FigureCanvasAgg(figure)
    left, right = figure.subplots(1, 2, width_ratios=(1.3, 1.0))  # the wider one holds the legend's row
    figure.subplots_adjust(left=0.09, right=0.98, bottom=0.2, top=0.88, wspace=0.28)
    for ax in (left, right):
        _plain_ticks(ax)
    _histogram(left, snapshot.fetch, scope)
    _timeline(right, history)
    return _png(figure)


def _histogram(ax: Axes, fetch: Histogram, scope: str) -> None:
    ax.set_title("wait for each batch" + (f", {scope}" if scope else ""), fontsize=_FONT + 1)
    used = [i for i, c in enumerate(fetch.counts) if c]
    if not used:
        _empty(ax, "no batches yet")
        return
    first, last = max(used[0] - 1, 0), min(used[-1] + 1, len(fetch.counts) - 1)
    lows = [_bucket_low(i) for i in range(first, last + 1)]
    widths = [_bucket_low(i) * _STEP - low for i, low in zip(range(first, last + 1), lows, strict=True)]
    ax.bar(lows, fetch.counts[first : last + 1], width=widths, align="edge", color=COLORS["fetch"])
    ax.set_xscale("log")
    ax.set_xlim(lows[0], lows[-1] * _STEP)  # an empty bucket either side, so a lone bar is not the whole width
    ax.xaxis.set_major_locator(LogLocator(numticks=5))
    ax.xaxis.set_minor_locator(NullLocator())  # minor ticks cost more to draw than the rest of the chart
    ax.xaxis.set_major_formatter(FuncFormatter(_tick_seconds))
    for name, q, style in (("p50", 0.5, "-"), ("p95", 0.95, "--"), ("p99", 0.99, ":")):
        value = fetch.quantile(q)
        # The lines stop below the legend's row, the bars below the lines (ylim headroom). The values
        # are in the dashboard's latency line: names alone keep the legend inside the panel.
        ax.axvline(value, ymax=0.8, color=COLORS[name], linestyle=style, linewidth=1, label=name)
    ax.legend(fontsize=_FONT - 1, frameon=False, loc="upper center", ncols=3, handlelength=1.5, columnspacing=1.0)
    ax.set_xlabel("wait in next() (log scale)", fontsize=_FONT)
    ax.set_ylabel("batches", fontsize=_FONT)
    ax.yaxis.set_major_locator(MaxNLocator(4, integer=True))
    ax.set_ylim(0, max(fetch.counts) * 1.45)


def pass_times(history: Sequence[HistoryPoint]) -> tuple[list[float], list[tuple[float, str]]]:
    """Each point's time on the passes' own clock (the time between passes left out: a point that
    opens a pass sits where the pass before ended), and where each pass after the first begins.

    Example:
        >>> points = [HistoryPoint(10.0, 0.1, 0.1, 2, "epoch 0"), HistoryPoint(11.0, 0.1, 0.1, 2, "epoch 0"),
        ...           HistoryPoint(600.0, 0.1, 0.1, 2, "epoch 1"), HistoryPoint(601.5, 0.1, 0.1, 2, "epoch 1")]
        >>> pass_times(points)
        ([0.0, 1.0, 1.0, 2.5], [(1.0, 'epoch 1')])
    """
    times: list[float] = []
    starts: list[tuple[float, str]] = []
    for index, point in enumerate(history):
        if index == 0:
            times.append(0.0)
        elif point.pass_label != history[index - 1].pass_label:  # a new pass: its idle gap left out
            times.append(times[-1])
            starts.append((times[-1], point.pass_label))
        else:
            times.append(times[-1] + point.time - history[index - 1].time)
    return times, starts


def _timeline(ax: Axes, history: Sequence[HistoryPoint]) -> None:
    ax.set_title("wait vs compute (mean)", fontsize=_FONT + 1)
    if not history:
        _empty(ax, "collecting...")
        return
    times, starts = pass_times(history)
    for at, _label in starts:  # where each pass begins (the legend's row stays clear of them)
        ax.axvline(at, ymax=0.8, color="gray", linestyle=":", linewidth=1)
    marker = "o" if len(history) < 3 else None  # a lone point has no line to show
    ax.plot(times, [p.fetch for p in history], color=COLORS["fetch"], marker=marker, markersize=3, label="wait")
    ax.plot(times, [p.compute for p in history], color=COLORS["compute"], marker=marker, markersize=3, label="compute")
    ax.yaxis.set_major_formatter(FuncFormatter(_tick_seconds))
    top = max(max(p.fetch for p in history), max(p.compute for p in history))
    ax.set_ylim(0, top * 1.35 if top > 0 else 1e-3)  # headroom for the legend above the lines
    ax.set_xlim(0, max(times[-1], 1.0))
    ax.set_xlabel(
        "seconds of the passes (dotted: a pass begins)" if starts else "seconds since the first batch", fontsize=_FONT
    )
    ax.legend(fontsize=_FONT - 1, frameon=False, loc="upper center", ncols=2)


def _bucket_low(index: int) -> float:
    """The lower bound of histogram bucket ``index`` (the first bucket is drawn one step wide)."""
    return BUCKET_BOUNDS[index - 1] if index > 0 else BUCKET_BOUNDS[0] / _STEP


def _figure(size: tuple[float, float], dpi: int) -> tuple[Figure, Axes]:
    figure = Figure(figsize=size, dpi=dpi)
    FigureCanvasAgg(figure)  # attaches itself to the figure; no global backend involved
    ax = figure.subplots()
    _plain_ticks(ax)
    return figure, ax


def _plain_ticks(ax: Axes) -> None:
    """Few, small ticks: tick creation and text layout are most of a chart's drawing time."""
    ax.tick_params(labelsize=_FONT)
    ax.xaxis.set_major_locator(MaxNLocator(5))
    ax.yaxis.set_major_locator(MaxNLocator(4))


def _empty(ax: Axes, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", fontsize=_FONT + 1, color="gray", transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])


def _png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=figure.dpi)
    return buffer.getvalue()
