"""``LoaderDashboard``: live ipywidgets view of a telemetry Snapshot (cache, shards, latency, throughput).

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
    >>> for batch in loader:                            # doctest: +SKIP
    ...     dashboard.update(loader.stats())            # cheap when throttled or unchanged
    >>> dashboard.flush()                               # doctest: +SKIP
"""

from __future__ import annotations

import html
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets  # type: ignore[import-untyped]

from uc_jupyter.telemetry.model import Snapshot
from uc_jupyter.widgets.charts import COLORS, latency_chart, shard_chart
from uc_jupyter.widgets.view import DashboardView, HistoryPoint, summary, window

__all__ = ["LoaderDashboard", "summary"]


class LoaderDashboard:
    """Cache fill, shard sizes, fetch latency and throughput of a DataLoader or a rank pool, live.

    Args:
        title: shown above the dashboard.
        clock: seconds, for the redraw throttle (inject a fake one in tests).
        max_redraws: redraws per second at most.
        chart_interval: seconds between two renderings of one chart at least (texts are not held back).
        history: how many (time, fetch, compute) windows the time series keeps.

    Attributes:
        widget: the ipywidgets ``VBox`` to display (``display(dashboard)`` works too).
        title: the ``HTML`` widget with the title.
        cache_bar, cache_label, throughput_label, latency_label, hint_label, shard_label: the parts.
        shard_image, latency_image: ``ipywidgets.Image`` widgets holding the charts' PNGs.
        flagged_ranks: ranks whose shard is uneven or empty in the last drawn snapshot.
        redraws: how many updates changed what is shown.

    Example:
        >>> dashboard = LoaderDashboard(title="epoch 0", clock=lambda: 0.0)  # doctest: +SKIP
        >>> dashboard.update(snapshot)  # True: drawn                        # doctest: +SKIP
        >>> dashboard.update(snapshot)  # False: unchanged, nothing sent      # doctest: +SKIP
    """

    def __init__(
        self,
        *,
        title: str = "uc_jupyter data loading",
        clock: Callable[[], float] = time.monotonic,
        max_redraws: float = 4.0,
        chart_interval: float = 1.0,
        history: int = 240,
    ) -> None:
        if max_redraws <= 0:
            raise ValueError(f"max_redraws must be positive, got {max_redraws}")
        self._clock = clock
        self._min_gap = 1.0 / max_redraws
        self._chart_gap = chart_interval
        self._chart_keys: dict[str, object] = {}
        self._chart_times: dict[str, float] = {}
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._history: deque[HistoryPoint] = deque(maxlen=history)
        self._view: DashboardView | None = None
        self._drawn: Snapshot | None = None
        self._last_redraw: float | None = None
        self._pending: Snapshot | None = None
        self.redraws = 0
        self.flagged_ranks: tuple[int, ...] = ()

        self.title = widgets.HTML(f"<b>{html.escape(title)}</b>")
        self.cache_bar = widgets.FloatProgress(value=0.0, min=0.0, max=1.0, description="cache")
        self.cache_label = widgets.Label("")
        self.throughput_label = widgets.Label("")
        self.latency_label = widgets.Label("")
        self.hint_label = widgets.HTML("")
        self.shard_label = widgets.HTML("")
        self.shard_image = widgets.Image(format="png")
        self.latency_image = widgets.Image(format="png")
        self.widget = widgets.VBox(
            [
                self.title,
                widgets.HBox([self.cache_bar, self.cache_label]),
                self.throughput_label,
                self.latency_label,
                self.hint_label,
                self.shard_label,
                widgets.HBox([self.shard_image, self.latency_image]),
            ]
        )

    @property
    def history(self) -> tuple[HistoryPoint, ...]:
        """The windows the latency time series shows, oldest first."""
        return tuple(self._history)

    def update(self, snapshot: Snapshot, *, force: bool = False) -> bool:
        """Show ``snapshot``; returns whether anything was sent to the browser.

        Within ``1 / max_redraws`` seconds of the last redraw the snapshot is only kept: a later
        update draws its own, newer one, :meth:`flush` the kept one; ``force=True`` skips that wait
        (a final update). A snapshot that shows what is already shown sends nothing either way.
        """
        if os.getpid() != self._pid:
            raise RuntimeError(
                f"LoaderDashboard.update called in process {os.getpid()}; widgets live in the kernel process "
                f"({self._pid}): send telemetry there (a Collector) and update the dashboard from the kernel"
            )
        with self._lock:
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

    def _draw(self, snapshot: Snapshot, now: float, force: bool) -> bool:
        point = window(self._drawn, snapshot)
        if point is not None:
            self._history.append(point)
        self._drawn = snapshot
        view = DashboardView.of(snapshot, tuple(self._history))
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
            png = latency_chart(snapshot, view.latency_key[1])
        self._chart_times[name] = now
        return png

    def _show_texts(self, view: DashboardView) -> None:
        # Traitlets only notify on a real change, so unchanged parts send nothing; hold_sync makes
        # the changes of one widget a single message.
        with self.cache_bar.hold_sync():
            self.cache_bar.max = float(max(view.cache_max, 1))
            self.cache_bar.value = float(min(view.cache_value, max(view.cache_max, 1)))
            self.cache_bar.bar_style = "warning" if view.cache_max and view.cache_value >= view.cache_max else ""
        self.cache_label.value = view.cache_text
        self.throughput_label.value = view.throughput_text
        self.latency_label.value = view.latency_text
        self.hint_label.value = _colored(view.hint_text, COLORS["uneven"] if view.input_bound else "")
        warn = bool(view.flagged_ranks) or "empty" in view.shard_text
        self.shard_label.value = _colored(view.shard_text, COLORS["uneven"] if warn else "")

    def text(self) -> str:
        """The last drawn snapshot as :func:`summary` text ('' before the first draw)."""
        with self._lock:
            drawn = self._drawn
        return summary(drawn) if drawn is not None else ""

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        """Let ``display(dashboard)`` show the widget."""
        return self.widget._repr_mimebundle_(**kwargs)


def _colored(text: str, color: str) -> str:
    if not text:
        return ""
    escaped = html.escape(text)
    return f'<span style="color:{color}">{escaped}</span>' if color else escaped
