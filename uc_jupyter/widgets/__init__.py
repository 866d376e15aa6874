"""Live notebook widgets over telemetry Snapshots: a loader dashboard, its charts, and ``monitor()``.

``import uc_jupyter.widgets`` imports neither ipywidgets nor matplotlib: the dashboard and the
charts load on first use. ``monitor`` is imported right away, because it is light (it loads the
dashboard only when it shows one) and because its module has the same name: a lazy attribute would
be replaced by the submodule the moment anything imported ``uc_jupyter.widgets.monitor``.

Example:
    >>> from uc_jupyter.widgets import monitor  # doctest: +SKIP
    >>> with monitor(pool.collector.snapshot, title="2 ranks"):  # doctest: +SKIP
    ...     pool.run(train)
    >>> loader = DataLoader(dataset, monitor=True)  # one LoaderMonitor, a dashboard per cell  # doctest: +SKIP
"""

from __future__ import annotations

from uc_jupyter.lazy import lazy_attributes
from uc_jupyter.widgets.monitor import LoaderMonitor, Monitor, monitor, widgets_can_render

__all__ = [
    "LoaderDashboard",
    "LoaderMonitor",
    "Monitor",
    "latency_chart",
    "monitor",
    "shard_chart",
    "summary",
    "widgets_can_render",
]

_HOMES = {
    "LoaderDashboard": "uc_jupyter.widgets.dashboard",
    "latency_chart": "uc_jupyter.widgets.charts",
    "shard_chart": "uc_jupyter.widgets.charts",
    "summary": "uc_jupyter.widgets.view",
}


__getattr__ = lazy_attributes("uc_jupyter.widgets", _HOMES)
