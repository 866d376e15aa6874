"""Live dashboards while work runs, only if it runs long enough: :class:`LoaderMonitor` and ``monitor()``.

A :class:`LoaderMonitor` belongs to one loader (or a rank pool) and keeps **one** dashboard over all
its passes. For each pass (:meth:`LoaderMonitor.begin` .. :meth:`LoaderMonitor.end`) a daemon thread
of the kernel process polls a snapshot source (``loader.live_stats``, ``pool.collector.snapshot``)
every ``interval`` seconds; once the pass has lasted ``show_after`` seconds the dashboard appears
(again in each new cell that runs a pass, the same widget: every view of it stays live). When the
pass ends the dashboard shows its end state: done, stopped early, or failed in red with the error.
Quick passes stay clean: before ``show_after`` nothing is polled or displayed.

Nothing about a pass waits on its poll thread: the end state is drawn from the snapshot the caller
hands over (the loop's own), under the dashboard's lock, and a poll that was still under way when
the pass ended is ignored when it arrives. A poll stuck in ``source()`` or in a slow first import
leaves the dashboard unchanged until the next pass; it never fails a later pass. In IPython, a cell
that raises while a pass is open (the loop's body failed) marks that pass failed with the cell's error.

Where widgets cannot render (plain ``python``, a terminal IPython: no kernel with comms) nothing
is polled either; at the end, if the pass lasted ``show_after`` seconds, :func:`summary` is printed.
Telemetry failures never mask or replace the outcome of the work: they become one notice.

Example:
    >>> from uc_jupyter.widgets import monitor  # doctest: +SKIP
    >>> with monitor(pool.collector.snapshot, title="2 ranks"):  # every rank's numbers  # doctest: +SKIP
    ...     pool.run(train)
    >>> watch = LoaderMonitor(loader.live_stats, title="DataLoader")  # DataLoader(monitor=True)'s  # doctest: +SKIP
    >>> for epoch in range(3):                                        # doctest: +SKIP
    ...     watch.begin(f"epoch {epoch}", loader.stats())
    ...     for x, y in loader:
    ...         train_step(x, y)
    ...     watch.end(loader.stats())
"""

from __future__ import annotations

import contextvars
import sys
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import TYPE_CHECKING, Any

from uc_jupyter.notices import notice
from uc_jupyter.processes import usable_cpus
from uc_jupyter.telemetry.model import Snapshot
from uc_jupyter.telemetry.watch import watching
from uc_jupyter.widgets.passes import PassRecord, PassState, error_line, forget_snapshots
from uc_jupyter.widgets.view import scoped, summary

if TYPE_CHECKING:
    from uc_jupyter.telemetry.watch import Headroom
    from uc_jupyter.widgets.dashboard import LoaderDashboard

__all__ = ["LoaderMonitor", "Monitor", "monitor", "widgets_can_render"]

_JOIN_SECONDS = 1.0  # how long a pass's end waits for its poll thread to notice; never an error


def widgets_can_render() -> bool:
    """Whether this process is an IPython kernel that can show widgets (it has a kernel with comms).

    Plain ``python`` has no IPython shell; a terminal IPython (or an ``InteractiveShell`` in a test)
    has one but no ``kernel``. IPython is not imported for the question: if nothing imported it,
    there is no shell.
    """
    shell = _shell()
    return shell is not None and getattr(shell, "kernel", None) is not None


def _shell() -> Any:
    if "IPython" not in sys.modules:
        return None
    from IPython import get_ipython

    return get_ipython()


def _notebook_names() -> dict[str, Any]:
    """The notebook's variables (IPython's user namespace; empty outside IPython)."""
    shell = _shell()
    return getattr(shell, "user_ns", {}) if shell is not None else {}


_cells_begun = [0]  # cells IPython began since the counter below was installed


def _current_cell() -> object:
    """The cell running now (None outside IPython): a count of IPython's ``pre_run_cell`` events.

    Not ``execution_count``: ipykernel has already moved it on while a cell runs and plain IPython
    has not, and both move it before ``post_run_cell``; the events come once per cell everywhere.
    """
    shell = _shell()
    if shell is None or not hasattr(shell, "events"):
        return None
    if not getattr(shell, "_uc_jupyter_counts_cells", False):
        shell._uc_jupyter_counts_cells = True

        def began(*_: object) -> None:
            _cells_begun[0] += 1

        shell.events.register("pre_run_cell", began)
    return (id(shell), _cells_begun[0])


@dataclass
class _Pass:
    """One pass's polling state (mutable, guarded by the monitor's lock)."""

    began: float
    cell: object
    scope: int  # the monitor's scope (one per cell) the pass belongs to
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None
    ended: bool = False


class LoaderMonitor:
    """One live dashboard for a loader across its passes; see the module's docstring.

    Args:
        source: returns the newest cumulative Snapshot; called from the poll thread, so it must be
            thread-safe (``loader.live_stats`` and ``pool.collector.snapshot`` are).
        title: shown above the dashboard and before the text summary.
        interval: seconds between polls.
        show_after: a pass shows the dashboard only once it has run this long (by ``clock``).
        clock: seconds; also the dashboard's throttle clock (inject a fake one in tests).
        display: called with the dashboard's widget to show it; None: IPython's ``display`` when
            this is a kernel that renders widgets, else a text summary is printed at each pass's end.
        cell: which cell runs now (the dashboard is displayed once per cell); default: IPython's cells.
        headroom: the loader's ``headroom(step)``: the dashboard offers it as an action, looking the
            step up among the notebook's variables (None: no such action, as for a rank pool).

    Attributes:
        dashboard: the dashboard once shown, else None.
        passes: every pass begun, as :class:`~uc_jupyter.widgets.passes.PassRecord` (label, start,
            end, state, error), oldest first; only the first and the last 8 keep their snapshots.
        error: the exception the last failed telemetry call raised, if any (that pass's polling stops).
    """

    def __init__(
        self,
        source: Callable[[], Snapshot],
        *,
        title: str = "uc_jupyter data loading",
        interval: float = 0.25,
        show_after: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        display: Callable[[Any], object] | None = None,
        cell: Callable[[], object] = _current_cell,
        headroom: Headroom | None = None,
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
        self._cell = cell
        self._headroom = headroom
        self._widgets = display is not None or widgets_can_render()
        self._lock = threading.Lock()
        self._pass: _Pass | None = None
        self._building = False
        self._shown_in: set[object] = set()
        self._hooked = False
        self.passes: list[PassRecord] = []  # the current scope's (cell's)
        self.dashboard: LoaderDashboard | None = None
        self._scope, self._first_epoch = 0, 0
        self._scope_cell: object = None  # the cell of the current scope's passes
        self.error: BaseException | None = None

    @property
    def shown(self) -> bool:
        return self.dashboard is not None

    @property
    def running(self) -> bool:
        """Whether a pass has begun and not ended."""
        with self._lock:
            return self._pass is not None and not self._pass.ended

    def begin(
        self,
        label: str,
        start: Snapshot | None,
        *,
        epoch: int | None = None,
        total: int | None = None,
        positioned: bool = False,
    ) -> None:
        """A new pass: ``label`` ("epoch 2") and the cumulative snapshot at its start (None: from zero).

        ``epoch``: the loader's epoch number, when the pass is one (its row then says when it resumed
        mid-epoch from a checkpoint); ``total``: the batches it will deliver, when known (done/total and
        the time left while it runs). A pass still open is ended as stopped first (the loop left it
        without saying so).

        Each cell is a scope of its own: the first pass in a cell starts a new dashboard there (the
        earlier cell's keeps its passes), and a label "epoch N" of the loader's epoch is numbered from
        0 within the cell, unless the epoch was ``positioned`` (a checkpoint loaded: its epochs are
        the job's).
        """
        if self.running:
            self.end(start, stopped=True)
        with self._lock:
            cell = self._cell()
            if self.passes and cell != self._scope_cell:  # a new cell: its own dashboard and epochs
                self.passes, self.dashboard, self._scope = [], None, self._scope + 1
            if not self.passes:
                self._scope_cell, self._first_epoch = cell, epoch or 0
            if positioned:
                self._first_epoch = 0
            if epoch is not None and label == f"epoch {epoch}":
                label = f"epoch {epoch - self._first_epoch}"
            current = _Pass(began=self._clock(), cell=cell, scope=self._scope)
            self._pass = current
            self.passes.append(PassRecord(label, start, epoch=epoch, total=total))
            forget_snapshots(self.passes)
            if self.dashboard is not None:
                self.dashboard.begin_pass(label, start, epoch=epoch, total=total)
        self._hook_cell_end()
        if self._widgets:
            # The copied context carries the cell's output routing (ipykernel keeps the parent
            # message in context variables), so what the thread displays lands in this cell.
            context = contextvars.copy_context()
            thread = threading.Thread(
                target=context.run, args=(self._poll, current), name="uc_jupyter-monitor", daemon=True
            )
            current.thread = thread
            thread.start()

    def end(self, final: Snapshot | None, *, error: BaseException | str | None = None, stopped: bool = False) -> None:
        """End the open pass at ``final`` (the loop's own last snapshot; None: ask ``source()``).

        ``error`` marks it failed (shown in red as "failed: Type: message"), ``stopped`` as left
        early. Draws the end state now; never waits long for the poll thread and never raises for it.
        """
        with self._lock:
            current = self._pass
            if current is None or current.ended:
                return
            current.ended = True
            current.stop.set()
        long_enough = self._clock() - current.began >= self._show_after
        if final is None and (long_enough or self.dashboard is not None):  # quick work: nothing asked
            final = self._safe_source()
        reason = error if isinstance(error, str) or error is None else error_line(error)
        state: PassState = "failed" if error is not None else "stopped" if stopped else "done"
        with self._lock:
            record = self.passes[-1]
            self.passes[-1] = replace(record, end=final or record.start, state=state, error=reason or "")
            if self.dashboard is not None and final is not None:
                self.dashboard.end_pass(final, error=reason, stopped=stopped)
                if long_enough:
                    self._show_here(current)
            build = self._widgets and self.dashboard is None and not self._building and long_enough
            if build:
                self._building = True
        if build and final is not None:
            self._adopt(self._build(), final, current)  # the work ended between two polls, after show_after
        elif not self._widgets and long_enough and final is not None:
            print(summary(final, title=self.title, passes=self.passes, cpus=usable_cpus()), flush=True)
        elif not long_enough and self.dashboard is None and final is not None:
            # Too quick for a dashboard: the pass still leaves its line.
            print(scoped(self.title, self.passes[-1].line(final)), flush=True)
        if current.thread is not None:
            current.thread.join(_JOIN_SECONDS)
        if self.error is not None:
            failure = f"{type(self.error).__name__}: {self.error}"
            notice(  # once per monitor and failure, however many passes it fails
                f"uc_jupyter monitor {self.title!r}: telemetry failed and live updates stopped: {failure}",
                key=("monitor", id(self), failure),
            )

    def fail_open_pass(self, error: BaseException | str) -> bool:
        """Mark the last pass failed with ``error`` if it is open, or was stopped, in the cell running now.

        The loop's body raising leaves the loader's pass without a word (the loop just stops
        asking); IPython tells the monitor at the end of the cell, through this. True when a pass
        was marked.
        """
        with self._lock:
            current = self._pass
            if current is None or not self.passes or current.cell != self._cell():
                return False
            record = self.passes[-1]
            if record.state not in ("running", "stopped"):
                return False
        if record.state == "running":
            self.end(None, error=error)
            return True
        reason = error if isinstance(error, str) else error_line(error)
        with self._lock:
            self.passes[-1] = replace(record, state="failed", error=reason)
            if self.dashboard is not None and record.end is not None:
                self.dashboard.end_pass(record.end, error=reason)
        return True

    # ------------------------------------------------------------------ the poll thread
    def _poll(self, current: _Pass) -> None:
        while not current.stop.wait(self._interval):
            if self._clock() - current.began < self._show_after:
                continue
            try:
                snapshot = self._source()
                with self._lock:
                    build = self.dashboard is None and not self._building
                    if build:
                        self._building = True
                if build:
                    # Outside the lock: the first dashboard imports ipywidgets and matplotlib (seconds
                    # on a busy machine, more when matplotlib builds its font cache).
                    self._adopt(self._build(), snapshot, current)
                    continue
                with self._lock:
                    if current.ended or self.dashboard is None:
                        return
                    self.dashboard.update(snapshot)
                    self._show_here(current)
            except Exception as failure:
                self.error = failure
                with self._lock:
                    self._building = False
                return

    def _build(self) -> LoaderDashboard:
        from uc_jupyter.widgets.dashboard import LoaderDashboard

        return LoaderDashboard(title=self.title, clock=self._clock, headroom=self._headroom, namespace=_notebook_names)

    def _adopt(self, dashboard: LoaderDashboard, snapshot: Snapshot, current: _Pass) -> None:
        """Make a freshly built dashboard the monitor's: every pass so far (also those too quick to show
        it, and the current one as it is now, perhaps ended meanwhile), filled, then displayed."""
        with self._lock:
            self._building = False
            if current.scope != self._scope:  # built for a cell the monitor has left: not shown
                return
            last = self.passes[-1]
            dashboard.set_passes(self.passes, last.end if last.end is not None else snapshot)
            self.dashboard = dashboard
            self._show_here(current)

    def _show_here(self, current: _Pass) -> None:
        """Display the dashboard in the current pass's cell unless it is there already (lock held)."""
        if self.dashboard is None or current.cell in self._shown_in:
            return
        self._shown_in.add(current.cell)
        if self._display is not None:
            self._display(self.dashboard.widget)
        else:
            from IPython.display import display

            display(self.dashboard.widget)  # type: ignore[no-untyped-call]

    def _safe_source(self) -> Snapshot | None:
        try:
            return self._source()
        except Exception as failure:
            self.error = failure
            return None

    def _hook_cell_end(self) -> None:
        """Once per monitor: at the end of a cell that raised, mark a pass it left open or stopped failed."""
        shell = _shell()
        if self._hooked or shell is None or not hasattr(shell, "events"):
            return
        self._hooked = True
        owner = weakref.ref(self)  # the shell outlives loaders: it must not keep them alive

        def after_cell(result: Any) -> None:
            watch = owner()
            if watch is None:
                shell.events.unregister("post_run_cell", after_cell)
                return
            error = getattr(result, "error_in_exec", None)
            if error is not None:
                watch.fail_open_pass(error)

        shell.events.register("post_run_cell", after_cell)


class Monitor:
    """The context manager :func:`monitor` returns: one pass of a :class:`LoaderMonitor`; see there.

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
        self._watch = LoaderMonitor(
            source, title=title, interval=interval, show_after=show_after, clock=clock, display=display
        )
        self.title = title
        self._entered = False
        self._block = watching(self._watch)  # the body as one pass, as a %%uc_distributed cell's

    @property
    def dashboard(self) -> LoaderDashboard | None:
        return self._watch.dashboard

    @property
    def error(self) -> BaseException | None:
        return self._watch.error

    @property
    def shown(self) -> bool:
        return self._watch.shown

    def __enter__(self) -> Monitor:
        if self._entered:
            raise RuntimeError("a monitor runs once; make a new one with monitor()")
        self._entered = True
        self._block.__enter__()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._block.__exit__(kind, error, traceback)


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

    The poll thread stops when the body ends, also when it raises; the body's exception propagates
    and the dashboard shows it ("failed: Type: message").

    Example:
        >>> with monitor(loader.live_stats, title="epoch 0") as m:  # doctest: +SKIP
        ...     for batch in loader:
        ...         step(batch)
        >>> m.shown, m.dashboard.flagged_ranks  # doctest: +SKIP
        (True, ())
    """
    if interval <= 0:
        raise ValueError(f"interval must be positive, got {interval}")
    if show_after < 0:
        raise ValueError(f"show_after must be 0 or more, got {show_after}")
    return Monitor(source, title=title, interval=interval, show_after=show_after, clock=clock, display=display)
