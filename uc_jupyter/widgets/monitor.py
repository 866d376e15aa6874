"""``monitor()``: show a live dashboard while a block of work runs, only if it runs long enough.

A background daemon thread of the kernel process polls a snapshot source (``loader.live_stats``,
``pool.collector.snapshot``) every ``interval`` seconds. Once the work has
lasted ``show_after`` seconds, it displays a :class:`~uc_jupyter.widgets.dashboard.LoaderDashboard`
and keeps it updated (the dashboard throttles itself); when the work ends, one final update shows
the end state. Quick cells stay clean: before ``show_after`` nothing is polled or displayed.

Where widgets cannot render (plain ``python``, a terminal IPython: no kernel with comms) nothing
is polled either; at the end, if the work lasted ``show_after`` seconds, :func:`summary` is printed.
Telemetry failures never mask or replace the outcome of the work: they become one warning.

Example:
    >>> from uc_jupyter.widgets import monitor  # doctest: +SKIP
    >>> with monitor(loader.live_stats, title="epoch 0"):  # doctest: +SKIP
    ...     for x, y in loader:
    ...         train_step(x, y)
    >>> with monitor(pool.collector.snapshot, title="2 ranks"):  # every rank's numbers  # doctest: +SKIP
    ...     pool.run(train)
"""

from __future__ import annotations

import contextvars
import sys
import threading
import time
import warnings
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any

from uc_jupyter.telemetry.model import Snapshot
from uc_jupyter.widgets.view import summary

if TYPE_CHECKING:
    from uc_jupyter.widgets.dashboard import LoaderDashboard

__all__ = ["Monitor", "monitor", "widgets_can_render"]

_JOIN_SECONDS = 5.0  # how long exit waits for a poll stuck in source(); the thread is a daemon anyway


def widgets_can_render() -> bool:
    """Whether this process is an IPython kernel that can show widgets (it has a kernel with comms).

    Plain ``python`` has no IPython shell; a terminal IPython (or an ``InteractiveShell`` in a test)
    has one but no ``kernel``. IPython is not imported for the question: if nothing imported it,
    there is no shell.
    """
    if "IPython" not in sys.modules:
        return False
    from IPython import get_ipython

    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


class Monitor:
    """The context manager :func:`monitor` returns; see there.

    Attributes:
        dashboard: the dashboard once shown, else None.
        error: the exception a telemetry call raised, if any (polling stops at the first).
    """

    def __init__(
        self,
        source: Callable[[], Snapshot],
        *,
        title: str,
        interval: float,
        show_after: float,
        clock: Callable[[], float],
        display: Callable[[Any], object] | None,
    ) -> None:
        if interval <= 0:
            raise ValueError(f"interval must be positive, got {interval}")
        if show_after < 0:
            raise ValueError(f"show_after must be 0 or more, got {show_after}")
        self._source = source
        self.title = title
        self._interval = interval
        self._show_after = show_after
        self._clock = clock
        self._display = display
        self._widgets = display is not None or widgets_can_render()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = 0.0
        self.dashboard: LoaderDashboard | None = None
        self.error: BaseException | None = None

    @property
    def shown(self) -> bool:
        return self.dashboard is not None

    def __enter__(self) -> Monitor:
        if self._thread is not None:
            raise RuntimeError("a monitor runs once; make a new one with monitor()")
        self._started = self._clock()
        if self._widgets:
            # The copied context carries the cell's output routing (ipykernel keeps the parent
            # message in context variables), so what the thread displays lands in this cell.
            context = contextvars.copy_context()
            self._thread = threading.Thread(
                target=context.run, args=(self._poll,), name="uc_jupyter-monitor", daemon=True
            )
            self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(_JOIN_SECONDS)
        long_enough = self._clock() - self._started >= self._show_after
        try:
            if self._thread is not None and self._thread.is_alive():
                # A poll is stuck in source(); drawing beside it would race it for the widgets.
                raise TimeoutError(f"source() did not return within {_JOIN_SECONDS:g} s")
            if self._widgets:
                if self.dashboard is None and long_enough:
                    self._show()  # the work ended between two polls, after show_after
                if self.dashboard is not None:
                    self.dashboard.update(self._source(), force=True)
            elif long_enough:
                print(summary(self._source(), title=self.title), flush=True)
        except Exception as failure:
            self.error = self.error or failure
        if self.error is not None:
            warnings.warn(
                f"uc_jupyter monitor {self.title!r}: telemetry failed and the dashboard stopped: "
                f"{type(self.error).__name__}: {self.error}",
                RuntimeWarning,
                stacklevel=2,
            )

    def _poll(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                if self.dashboard is None:
                    if self._clock() - self._started < self._show_after:
                        continue
                    self._show()
                else:
                    self.dashboard.update(self._source())
            except Exception as failure:
                self.error = failure
                return

    def _show(self) -> None:
        from uc_jupyter.widgets.dashboard import LoaderDashboard

        dashboard = LoaderDashboard(title=self.title, clock=self._clock)
        dashboard.update(self._source(), force=True)  # filled before it appears
        if self._display is not None:
            self._display(dashboard.widget)
        else:
            from IPython.display import display

            display(dashboard.widget)  # type: ignore[no-untyped-call]
        self.dashboard = dashboard


def monitor(
    source: Callable[[], Snapshot],
    *,
    title: str = "uc_jupyter data loading",
    interval: float = 0.25,
    show_after: float = 1.0,
    clock: Callable[[], float] = time.monotonic,
    display: Callable[[Any], object] | None = None,
) -> Monitor:
    """A context manager that shows a live :class:`LoaderDashboard` of ``source()`` while its body runs.

    Args:
        source: returns the newest Snapshot; called from the poll thread, so it must be thread-safe
            (``pool.collector.snapshot`` and ``loader.live_stats`` are; ``loader.stats`` also
            advances the loop's own bookkeeping and iterates torch's task table, so while a loop
            runs it belongs to the loop's thread).
        title: shown above the dashboard and before the text summary.
        interval: seconds between polls.
        show_after: nothing appears unless the body runs at least this long (by ``clock``).
        clock: seconds; also the dashboard's throttle clock (inject a fake one in tests).
        display: called once with the dashboard's widget to show it; None: IPython's ``display``
            when this is a kernel that renders widgets, else a text summary printed at the end.

    The poll thread stops when the body ends, also when it raises; the body's exception propagates.

    Example:
        >>> with monitor(loader.live_stats, title="epoch 0") as m:  # doctest: +SKIP
        ...     for batch in loader:
        ...         step(batch)
        >>> m.shown, m.dashboard.flagged_ranks  # doctest: +SKIP
        (True, ())
    """
    return Monitor(source, title=title, interval=interval, show_after=show_after, clock=clock, display=display)
