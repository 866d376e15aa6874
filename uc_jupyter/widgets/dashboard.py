"""``LoaderDashboard``: live ipywidgets view of a loader's passes (verdict, advice, epochs, cache, shards, latency).

One dashboard serves a loader over its passes in a cell: :meth:`LoaderDashboard.begin_pass` and
:meth:`LoaderDashboard.end_pass` mark where each pass starts and how it ended (done, stopped early,
failed: shown in red), and the figures at the top are the current pass's own, labelled with it;
the epochs table has a row per pass and one for all of them.

The dashboard is an adapter: :mod:`uc_jupyter.widgets.view` derives every text and flag, and
:mod:`uc_jupyter.widgets.charts` draws the PNGs; this module only moves them into widgets, and
decides when. Every widget trait change is a message to the browser, so :meth:`LoaderDashboard.update`

- redraws at most 4 times a second (``max_redraws`` per second of the injectable ``clock``); a
  snapshot arriving sooner is kept and drawn by the next update or :meth:`LoaderDashboard.flush`,
- sends nothing for a snapshot that shows the same as the last one drawn (same :class:`DashboardView`)
  once its charts are current,
- re-renders a chart only when its inputs changed, and at most once a second (``chart_interval``:
  a chart costs 40-100 ms of CPU in the kernel; the texts keep the 4 per second),
- groups the changes of each widget into one message.

Widgets belong to the kernel process; calling ``update`` from another process (a DataLoader worker,
a rank) raises. Threads of the kernel process may call it (a lock keeps redraws whole).

Example:
    >>> from uc_jupyter.widgets import LoaderDashboard  # doctest: +SKIP
    >>> dashboard = LoaderDashboard(title="training")   # doctest: +SKIP
    >>> display(dashboard)                              # doctest: +SKIP
    >>> dashboard.begin_pass("epoch 0", loader.stats()) # doctest: +SKIP
    >>> for batch in loader:                            # doctest: +SKIP
    ...     dashboard.update(loader.stats())            # cheap when throttled or unchanged
    >>> dashboard.end_pass(loader.stats())              # doctest: +SKIP
"""

from __future__ import annotations

import html
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import ipywidgets as widgets  # type: ignore[import-untyped]

from uc_jupyter.processes import usable_cpus
from uc_jupyter.telemetry.model import Snapshot
from uc_jupyter.telemetry.watch import Headroom
from uc_jupyter.widgets.charts import COLORS, latency_chart, shard_chart
from uc_jupyter.widgets.headroom_action import HeadroomAction
from uc_jupyter.widgets.passes import CUMULATIVE, EpochRow, PassRecord, PassState, error_line, forget_snapshots
from uc_jupyter.widgets.ranks import RankRow
from uc_jupyter.widgets.units import format_bytes, format_seconds, three_digits
from uc_jupyter.widgets.view import DashboardView, HistoryPoint, scoped, view_text, window

__all__ = ["LoaderDashboard"]


class LoaderDashboard:
    """The verdict, what to change, per-epoch figures, cache fill, shard sizes and fetch latency, live.

    Args:
        title: shown above the dashboard.
        clock: seconds, for the redraw throttle (inject a fake one in tests).
        max_redraws: redraws per second at most.
        chart_interval: seconds between two renderings of one chart at least (texts are not held back).
        history: how many (time, fetch, compute) windows the time series keeps.
        cpus: the CPUs a rank's workers may use, for the num_workers advice (None: this process's).
        headroom: the loader's ``headroom(step)``, offered under the advice as a *Measure headroom*
            action (:mod:`uc_jupyter.widgets.headroom_action`); None: a dashboard without it (ranks).
        namespace: where that action looks up the step's name (the notebook's variables).

    Attributes:
        widget: the ipywidgets ``VBox`` to display (``display(dashboard)`` works too).
        title: the ``HTML`` widget with the title.
        status_label, verdict_label, advice_label, cache_bar, cache_label, throughput_label,
        latency_label, epochs_table, shard_label, skipped_label, sources_label: the parts.
        headroom_action: the :class:`~uc_jupyter.widgets.headroom_action.HeadroomAction`, or None.
        shard_image, latency_image: ``ipywidgets.Image`` widgets holding the charts' PNGs.
        flagged_ranks: ranks whose shard is uneven or empty in the last drawn snapshot.
        redraws: how many updates changed what is shown.

    Example:
        >>> dashboard = LoaderDashboard(title="DataLoader", clock=lambda: 0.0)  # doctest: +SKIP
        >>> dashboard.update(snapshot)  # True: drawn                          # doctest: +SKIP
        >>> dashboard.update(snapshot)  # False: unchanged, nothing sent        # doctest: +SKIP
    """

    def __init__(
        self,
        *,
        title: str = "uc_jupyter data loading",
        clock: Callable[[], float] = time.monotonic,
        max_redraws: float = 4.0,
        chart_interval: float = 1.0,
        history: int = 240,
        cpus: int | None = None,
        headroom: Headroom | None = None,
        namespace: Callable[[], Mapping[str, Any]] = dict,
    ) -> None:
        if max_redraws <= 0:
            raise ValueError(f"max_redraws must be positive, got {max_redraws}")
        self._clock = clock
        self._min_gap = 1.0 / max_redraws
        self._chart_gap = chart_interval
        self._cpus = cpus if cpus is not None else usable_cpus()
        self._chart_keys: dict[str, object] = {}
        self._chart_times: dict[str, float] = {}
        self._pid = os.getpid()
        self._lock = threading.RLock()  # end_pass draws under it, through update
        self._history: deque[HistoryPoint] = deque(maxlen=history)
        self._passes: list[PassRecord] = []
        self._view: DashboardView | None = None
        self._drawn: Snapshot | None = None
        self._last_redraw: float | None = None
        self._pending: Snapshot | None = None
        self.redraws = 0
        self.flagged_ranks: tuple[int, ...] = ()

        self.title = widgets.HTML(f"<b>{html.escape(title)}</b>")
        self.status_label = widgets.HTML("")
        self.verdict_label = widgets.HTML("")
        self.advice_label = widgets.HTML("")
        self.cache_bar = widgets.FloatProgress(value=0.0, min=0.0, max=1.0, description="cache")
        self.cache_label = widgets.Label("")
        self.throughput_label = widgets.Label("")
        self.latency_label = widgets.Label("")
        self.epochs_table = widgets.HTML("")
        self.ranks_table = widgets.HTML("")
        self.shard_label = widgets.HTML("")
        self.skipped_label = widgets.Label("")
        self.sources_label = widgets.Label("")  # a Mix's sources: shares and epochs
        self.shard_image = widgets.Image(format="png")
        self.latency_image = widgets.Image(format="png")
        charts = widgets.Box([self.shard_image, self.latency_image], layout=widgets.Layout(flex_flow="row wrap"))
        self.headroom_action = HeadroomAction(headroom, namespace=namespace) if headroom is not None else None
        actions = [self.headroom_action.widget] if self.headroom_action is not None else []
        self.widget = widgets.VBox(
            [
                self.title,
                self.status_label,
                self.verdict_label,
                self.advice_label,
                *actions,
                self.throughput_label,
                self.latency_label,
                widgets.HBox([self.cache_bar, self.cache_label]),
                self.epochs_table,
                self.ranks_table,
                self.shard_label,
                self.skipped_label,
                self.sources_label,
                charts,
            ]
        )

    @property
    def history(self) -> tuple[HistoryPoint, ...]:
        """The windows the latency time series shows, oldest first."""
        return tuple(self._history)

    @property
    def passes(self) -> tuple[PassRecord, ...]:
        """Every pass begun on this dashboard, oldest first; the last is the one shown on top."""
        with self._lock:
            return tuple(self._passes)

    def begin_pass(
        self, label: str, start: Snapshot | None, *, epoch: int | None = None, total: int | None = None
    ) -> None:
        """A new pass (``label``: "epoch 2", ``epoch``: 2) whose own figures count from ``start`` (None: from zero).

        A pass still running is marked stopped where this one starts: a loop that left it (a
        ``break``, an abandoned iterator) never said so.
        """
        self._check_process()
        with self._lock:
            if self._passes and self._passes[-1].state == "running":
                self._passes[-1] = replace(self._passes[-1], end=start or self._drawn, state="stopped")
            self._passes.append(PassRecord(label, start, epoch=epoch, total=total))
            forget_snapshots(self._passes)
            if start is not None:
                self.update(start)  # throttled like any update: a pass's start costs the loop no chart

    def set_passes(self, passes: Sequence[PassRecord], snapshot: Snapshot) -> None:
        """Show ``passes`` (the last one current) as of ``snapshot``: a dashboard made after they began."""
        self._check_process()
        with self._lock:
            self._passes = list(passes)
            self.update(snapshot, force=True)

    def end_pass(self, final: Snapshot, *, error: BaseException | str | None = None, stopped: bool = False) -> None:
        """End the current pass at ``final``: done, ``stopped`` early, or failed with ``error`` (shown in red).

        Updates drawing snapshots older than ``final`` are ignored from now on (a poll that was
        under way when the pass ended).
        """
        self._check_process()
        with self._lock:
            if not self._passes:
                self._passes.append(PassRecord("", None))
            state: PassState = "failed" if error is not None else "stopped" if stopped else "done"
            reason = error if isinstance(error, str) or error is None else error_line(error)
            self._passes[-1] = replace(self._passes[-1], end=final, state=state, error=reason or "")
            self._pending = None
            self.update(final, force=True)

    def update(self, snapshot: Snapshot, *, force: bool = False) -> bool:
        """Show ``snapshot``; returns whether anything was sent to the browser.

        Within ``1 / max_redraws`` seconds of the last redraw the snapshot is only kept: a later
        update draws its own, newer one, :meth:`flush` the kept one; ``force=True`` skips that wait
        (a final update). A snapshot that shows what is already shown sends nothing either way.
        """
        self._check_process()
        with self._lock:
            ended = self._passes[-1].end if self._passes else None
            if ended is not None and snapshot.time < ended.time:
                return False  # older than the end of the pass shown: a poll that lost the race
            now = self._clock()
            if not force and self._last_redraw is not None and now - self._last_redraw < self._min_gap:
                self._pending = snapshot
                return False
            self._pending = None
            return self._draw(snapshot, now, force)

    def flush(self) -> bool:
        """Draw the snapshot a throttled :meth:`update` kept, if any; returns whether anything was sent."""
        with self._lock:
            pending, self._pending = self._pending, None
        return self.update(pending, force=True) if pending is not None else False

    def _check_process(self) -> None:
        if os.getpid() != self._pid:
            raise RuntimeError(
                f"LoaderDashboard.update called in process {os.getpid()}; widgets live in the kernel process "
                f"({self._pid}): send telemetry there (a Collector) and update the dashboard from the kernel"
            )

    def _draw(self, snapshot: Snapshot, now: float, force: bool) -> bool:
        point = window(self._drawn, snapshot)
        if point is not None:
            self._history.append(replace(point, pass_label=self._passes[-1].label if self._passes else ""))
        self._drawn = snapshot
        view = DashboardView.of(snapshot, tuple(self._history), self._passes, cpus=self._cpus)
        charts = self._due_charts(view, now, force)
        old = self._view
        if view == old and not charts:
            return False
        self._view = view
        self.flagged_ranks = view.flagged_ranks
        self.redraws += 1
        self._last_redraw = now
        # Charts first: rendering is the slow part, so the texts and images change close together.
        pngs = {name: self._render(name, snapshot, view, now) for name in charts}
        if view != old:
            self._show_texts(view)
        if "shard" in pngs:
            self.shard_image.value = pngs["shard"]
        if "latency" in pngs:
            self.latency_image.value = pngs["latency"]
        return True

    def _due_charts(self, view: DashboardView, now: float, force: bool) -> list[str]:
        """The charts whose inputs differ from what they show and that may be rendered now.

        A chart costs 40-100 ms of the kernel's CPU (and GIL, which the training loop in the same
        process needs), so one whose inputs keep changing is re-rendered at most every
        ``chart_interval`` seconds; a later update (or a forced one) renders what was deferred.
        """
        due = []
        for name, key in (("shard", view.shard_key), ("latency", view.latency_key)):
            if self._chart_keys.get(name) == key:
                continue
            rendered_at = self._chart_times.get(name)
            if force or rendered_at is None or now - rendered_at >= self._chart_gap:
                due.append(name)
        return due

    def _render(self, name: str, snapshot: Snapshot, view: DashboardView, now: float) -> bytes:
        if name == "shard":
            self._chart_keys[name] = view.shard_key
            png = shard_chart(snapshot)
        else:
            self._chart_keys[name] = view.latency_key
            figures = self._passes[-1].figures(snapshot) if self._passes else snapshot
            png = latency_chart(figures, view.latency_key[1], scope=view.scope)
        self._chart_times[name] = now
        return png

    def _show_texts(self, view: DashboardView) -> None:
        # Traitlets only notify on a real change, so unchanged parts send nothing; hold_sync makes
        # the changes of one widget a single message.
        warning = COLORS["uneven"]
        self.status_label.value = _status_html(view)
        self.verdict_label.value = _colored(view.verdict_text, warning if view.input_bound else "", bold=True)
        self.advice_label.value = _advice_html(view.advice)
        with self.cache_bar.hold_sync():
            self.cache_bar.max = float(max(view.cache_max, 1))
            self.cache_bar.value = float(min(view.cache_value, max(view.cache_max, 1)))
            self.cache_bar.bar_style = "warning" if view.cache_max and view.cache_value >= view.cache_max else ""
        self.cache_label.value = view.cache_text
        self.throughput_label.value = scoped(view.scope, view.throughput_text)
        self.latency_label.value = scoped(view.scope, view.latency_text)
        self.epochs_table.value = _epochs_html(view.epochs)
        self.ranks_table.value = _ranks_html(view.ranks)
        warn = bool(view.flagged_ranks) or "empty" in view.shard_text
        self.shard_label.value = _colored(view.shard_text, warning if warn else "")
        self.skipped_label.value = view.skipped_text
        self.sources_label.value = view.sources_text

    def text(self) -> str:
        """What is shown as one plain-text paragraph ('' before the first draw)."""
        with self._lock:
            view = self._view
        return view_text(view) if view is not None else ""

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        """Let ``display(dashboard)`` show the widget."""
        return self.widget._repr_mimebundle_(**kwargs)


def _colored(text: str, color: str, *, bold: bool = False) -> str:
    if not text:
        return ""
    escaped = html.escape(text)
    if bold:
        escaped = f"<b>{escaped}</b>"
    return f'<span style="color:{color}">{escaped}</span>' if color else escaped


def _status_html(view: DashboardView) -> str:
    if not view.status_text:
        return ""
    if view.failed:
        return _colored(view.status_text, COLORS["failed"], bold=True)
    return _colored(view.status_text, "gray")


def _advice_html(advice: tuple[str, ...]) -> str:
    if not advice:
        return ""
    items = "".join(f"<li>{html.escape(line)}</li>" for line in advice)
    return f'<ul style="margin:0 0 0 1.2em;padding:0">{items}</ul>'


_HEADER = ("", "state", "batches", "samples", "samples/s", "waited", "fetch p50", "fetch p95", "hit rate", "downloaded")


_RANK_HEADER = (
    "rank",
    "batches",
    "samples/s",
    "exposed wait",
    "wait p50",
    "wait p95",
    "wait p99",
    "workers on CPU",
    "most of the wait",
)


def _table_html(header: tuple[str, ...], rows: list[tuple[list[str], str]], left: int) -> str:
    """A small table: ``rows`` of (cells, already escaped HTML; the row's own style attribute or ''),
    its first ``left`` columns left-aligned and the figures right-aligned, as numbers read."""
    cell = 'style="padding:1px 10px 1px 0;white-space:nowrap;text-align:{align}"'

    def align(i: int) -> str:
        return cell.format(align="left" if i < left else "right")

    head = "".join(f"<th {align(i)}>{h}</th>" for i, h in enumerate(header))
    body = "".join(
        f"<tr{style}>{''.join(f'<td {align(i)}>{text}</td>' for i, text in enumerate(cells))}</tr>"
        for cells, style in rows
    )
    return (
        '<table style="border-collapse:collapse;font-size:12px;margin:4px 0">'
        f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    )


def _ranks_html(rows: tuple[RankRow, ...]) -> str:
    """The current pass, a row per rank; the straggler's row in the warning color."""
    if not rows:
        return ""
    shown = []
    for row in rows:
        values = [
            f"rank {row.rank}" + (" (straggler)" if row.straggler else ""),
            f"{row.batches:,}",
            three_digits(row.samples_per_second),
            "" if row.exposed_wait is None else f"{row.exposed_wait:.0%}",
            format_seconds(row.wait_p50),
            format_seconds(row.wait_p95),
            format_seconds(row.wait_p99),
            "" if row.on_cpu is None else f"{row.on_cpu:.0%}",
            row.bound_stage,
        ]
        color = f' style="color:{COLORS["uneven"]}"' if row.straggler else ""
        shown.append(([html.escape(v) for v in values], color))
    return _table_html(_RANK_HEADER, shown, left=1)


def _epochs_html(rows: tuple[EpochRow, ...]) -> str:
    """Per-epoch rows and the cumulative one as a small table."""
    if not rows:
        return ""
    shown = []
    for row in rows:
        values = [
            row.label,
            row.state,
            f"{row.batches:,}",
            f"{row.samples:,}",
            three_digits(row.samples_per_second),
            "" if row.wait_share is None else f"{row.wait_share:.0%}",
            format_seconds(row.fetch_p50) if row.batches else "",
            format_seconds(row.fetch_p95) if row.batches else "",
            "" if row.hit_rate is None else f"{row.hit_rate:.0%}",
            format_bytes(row.downloaded),
        ]
        cells = [html.escape(value) for value in values]
        if row.state.startswith("failed"):  # the whole error is in the status line above, and in the tooltip
            cells[1] = f'<span style="color:{COLORS["failed"]}" title="{cells[1]}">failed</span>'
        weight = ' style="font-weight:bold;border-top:1px solid #ccc"' if row.label == CUMULATIVE else ""
        shown.append((cells, weight))
    return _table_html(_HEADER, shown, left=2)
