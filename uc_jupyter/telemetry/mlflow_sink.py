"""Data-loading metrics into an MLflow run, batched, from the training process only, off the loop's path.

Keys (per rank R): ``dataloader/fetch_seconds/rank_R`` and ``.../fetch_seconds_variance/rank_R``,
``dataloader/between_next_seconds/rank_R`` and its ``_variance`` (the reference runtime's names),
plus ``dataloader/fetch_seconds_p95/rank_R``, ``dataloader/samples_per_second/rank_R``,
``dataloader/cache_hit_rate/rank_R``, ``dataloader/exposed_wait/rank_R`` (the share of the loop's
steady-state time it waited for data: a pass's start-up left out) and
``dataloader/startup_seconds/rank_R`` (iter() and the first batch, in a window where a pass starts),
``dataloader/exposed_wait_seconds/rank_R`` (the steady-state wait per batch) and, where the stages
were timed, what each caused of it: ``dataloader/exposed_seconds/<stage>/rank_R`` for the stages
``fetch``, ``decode``, ``collate``, ``transfer`` and ``other`` (per batch; they add up to the former).
For the job, a kernel running ranks (:mod:`uc_jupyter.distributed`) logs from their telemetry
``dataloader/max_exposed_wait_seconds`` (the exposed wait per batch of the rank that waited most:
under DDP it sets the step), ``dataloader/max_exposed_wait`` (its share) and
``dataloader/max_exposed_wait_rank`` (which rank); :mod:`~uc_jupyter.telemetry.mlflow_windows`.
Each point is one *window*: the batches since the previous one (means, variances, p95 of that
window), logged at a step that only grows (batches delivered so far); a window without a new batch
logs nothing.

When: a window closes every ``interval`` seconds while a pass runs (:meth:`MlflowSink.due`,
:meth:`MlflowSink.hand_over`: before the batch that made it due counts, so the end of a pass always
has a batch of its own) and at the end of every pass (:meth:`MlflowSink.end_pass`: the epoch's end,
an exception, a ``break``, ``close``). Closing a window is the loop's only work; a background thread
logs the windows, in order, with one ``log_batch`` for all that wait. The loop never waits on MLflow,
except where a point must exist (:meth:`MlflowSink.wait`):

- ``DataLoader.close()``, at interpreter exit (atexit) and when a rank's call returns
  (:func:`wait_all`): every window handed over is logged on return;
- when this process ends a run through MLflow's fluent API (``mlflow.end_run()``, the exit of
  ``with mlflow.start_run()``): the windows handed over for that run are logged first, so a pass
  that ends in the block has its points in the run when the block exits (:func:`_wait_before_run_ends`);
- at a pass's start (:meth:`MlflowSink.begin_pass`), only when the thread still has windows from
  before the previous pass began (MLflow slower than a pass): the backlog never exceeds one pass.

Nothing is lost when the run ends before the thread got to its windows in another way (another
process, ``MlflowClient.set_terminated``, a wait that gave up): a window closed while the run was
running is logged even if the run has ended by the time the thread gets to it (MLflow takes points
into a finished run; only a deleted one refuses); it just arrives after the end. A window closed
after the run ended is dropped, and the sink stays silent. Whether the run still runs is read at no
cost for this process's own active run (it runs while it is the active run here; it has ended once
no run is active), else (``MLFLOW_RUN_ID``, a rank; a nested run active) from the tracking store by
the thread: a window closed after the run's ``end_time`` is dropped. Nothing is buffered without a
run; a failing MLflow gives one notice line (once per process) and training goes on. In a notebook
The run is the one :mod:`~uc_jupyter.telemetry.mlflow_runs` names: the active fluent run of this
process; in a rank without one, the kernel's run its call was made in (every rank's keys and the
job's land in the notebook's run); else the one ``MLFLOW_RUN_ID`` names. Workers never log: the fluent API there
silently starts stray runs.

Example:
    >>> sink = MlflowSink.for_active_run(rank=0)  # None when no run is active   # doctest: +SKIP
    >>> if sink is not None and sink.due():       # per batch, before it counts  # doctest: +SKIP
    ...     sink.hand_over(loader.stats())        # logged in the background
    >>> sink.end_pass(loader.stats())             # logged in the background too  # doctest: +SKIP
    >>> sink.wait()                               # every point is in the run on return  # doctest: +SKIP
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import functools
import os
import queue
import sys
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, NamedTuple

from uc_jupyter.notices import notice
from uc_jupyter.telemetry.mlflow_runs import active_run
from uc_jupyter.telemetry.mlflow_windows import JOB_METRICS, JobWindows, RankWindows, metric_names
from uc_jupyter.telemetry.model import Snapshot

__all__ = ["JOB_METRICS", "MlflowSink", "metric_names", "wait_all"]

# Each said once per process, as one line (uc_jupyter.notices), not once per loader or per window.
_UNAVAILABLE = "uc_jupyter.telemetry.mlflow_sink: unavailable"
_FAILED = "uc_jupyter.telemetry.mlflow_sink: failed"

_WAIT_SECONDS = 30.0  # the most a wait for MLflow lasts before giving up on it
_WINDOWS_PER_CALL = 60  # 15 metrics at most each: within log_batch's 1000 metrics per call


class _Window(NamedTuple):
    values: dict[str, float]
    step: int
    stamp: int  # milliseconds since the epoch, when the window closed
    running: bool  # the run was seen running as it closed (else the thread asks the store)


class MlflowSink:
    """Logs one rank's loader metrics to run ``run_id`` through ``log_batch(run_id, metrics=...)``.

    Args:
        run_id, rank: where the points go and the rank they are named for.
        log_batch: MLflow's ``MlflowClient.log_batch`` (or a stand-in).
        interval: seconds between the periodic windows of a pass.
        clock: monotonic seconds, for ``interval``.
        running_here: whether the run still runs, as far as this process can tell at no cost,
            asked on the loop's thread as a window closes: True (logged whatever happens later),
            False (it ended: dropped, and the sink falls silent) or None (ask the store).
        run_end: when the run ended, in milliseconds since the epoch (None while it runs), asked
            by the background thread for windows ``running_here`` could not tell about; those
            closed after that are dropped.
        wall: seconds since the epoch, for a window's timestamp.
        start: runs the background sender, ``start(target)`` (default: the process's logging thread).
        baseline: the loader's snapshot when the sink was made: its first window starts there.

    Example:
        >>> sink = MlflowSink("run-id", 0, MlflowClient().log_batch)   # doctest: +SKIP
    """

    def __init__(
        self,
        run_id: str,
        rank: int | None,
        log_batch: Callable[..., Any],
        *,
        interval: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        running_here: Callable[[], bool | None] = lambda: None,
        run_end: Callable[[], float | None] = lambda: None,
        wall: Callable[[], float] = time.time,
        start: Callable[[Callable[[], None]], object] | None = None,
        baseline: Snapshot | None = None,
    ) -> None:
        self.run_id, self.rank = run_id, rank
        self._log_batch, self._running_here, self._run_end = log_batch, running_here, run_end
        self._interval, self._clock, self._wall = interval, clock, wall
        self._start = start or _SENDER
        self._names = metric_names(rank) if rank is not None else JOB_METRICS
        self._windows = RankWindows(rank, baseline) if rank is not None else JobWindows(baseline)
        self._last_window = clock()
        self.ended = False  # the run ended: windows closed from now on are not logged
        self._end_stamp: float | None = None  # when the store said it ended (ms since the epoch)
        self._broken = False  # MLflow failed: nothing more is logged
        self.flushes = 0  # windows logged
        self._waiting: collections.deque[_Window] = collections.deque()
        self._lock = threading.Lock()  # guards _waiting, _sending and the counts below
        self._delivering = threading.Lock()  # held by whoever logs: one batch at a time, in order
        self._sending = False  # a background sender runs (or is starting)
        self._handed = 0  # windows handed over so far
        self._settled = 0  # of those, logged or dropped
        self._behind_mark = 0  # windows handed over before the current pass began
        self._pid = os.getpid()  # a forked child never logs its parent's windows
        _SINKS.add(self)

    @classmethod
    def for_active_run(
        cls,
        rank: int | None,
        current: MlflowSink | None = None,
        *,
        baseline: Callable[[], Snapshot] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> MlflowSink | None:
        """A sink for the run this process logs to (:mod:`~uc_jupyter.telemetry.mlflow_runs`);
        ``current`` when it already logs to that run (its :meth:`begin_pass` then runs: call this as a pass begins);
        None when there is no run or MLflow fails. ``rank`` None: the job's sink (a kernel's, over
        its ranks' telemetry). ``baseline`` gives the loader's snapshot now, asked only for a new
        sink; ``clock`` is the loader's.

        Example:
            >>> sink = MlflowSink.for_active_run(0, sink, baseline=loader.stats)   # doctest: +SKIP
        """
        try:
            found = active_run()
            if found is None:
                return None
            run_id, tracking_uri = found
            if current is not None and current.run_id == run_id and not current.ended:
                current.begin_pass()
                return current
            import mlflow
            from mlflow.tracking import MlflowClient

            with contextlib.suppress(Exception):  # an MLflow we cannot wrap: points come just after the end
                _wait_before_run_ends()
            client = MlflowClient(tracking_uri=tracking_uri)
            own = (active := mlflow.active_run()) is not None and active.info.run_id == run_id

            def running_here() -> bool | None:
                """This process's own run runs while it is active here (or a run nested in it is:
                the store decides); it has ended once no run is. A parent's run: the store decides."""
                if not own:
                    return None
                now = mlflow.active_run()
                return None if now is not None and now.info.run_id != run_id else now is not None

            def run_end() -> float | None:  # a parent's run (MLFLOW_RUN_ID): the store knows
                info = client.get_run(run_id).info
                if info.lifecycle_stage != "active":
                    return 0.0  # deleted: it takes nothing
                return None if info.status in ("RUNNING", "SCHEDULED") else float(info.end_time or 0)

            return cls(
                run_id,
                rank,
                client.log_batch,
                running_here=running_here,
                run_end=run_end,
                baseline=baseline() if baseline is not None else None,
                clock=clock,
            )
        except Exception as exc:  # MLflow missing or misconfigured: train without it
            notice(f"uc_jupyter: not logging data-loading metrics to MLflow: {exc}", key=_UNAVAILABLE)
            return None

    # ---------------------------------------------------------------- the training thread
    def due(self) -> bool:
        """Whether a periodic window is due (``interval`` seconds since the last window)."""
        return self._clock() - self._last_window >= self._interval

    def hand_over(self, snapshot: Snapshot) -> None:
        """Close the window at ``snapshot`` and let the background thread log it."""
        window = self._close_window(snapshot)
        if window is None:
            return
        with self._lock:
            self._waiting.append(window)
            self._handed += 1
            if self._sending:
                return  # the running sender takes it: it looks again before it stops
            self._sending = True
        self._start(self._send_waiting)

    def end_pass(self, snapshot: Snapshot) -> None:
        """A pass ended at ``snapshot``: close its window and return; the background thread logs it
        after every window before it. :meth:`wait` for the point to be in the run."""
        self.hand_over(snapshot)

    def begin_pass(self) -> None:
        """A pass begins: wait for MLflow only if the thread still has windows from before the
        previous pass began, so that a slow MLflow holds at most one pass's windows in memory and
        epochs back to back never wait on it (the last pass's point is logged while this one runs)."""
        with self._lock:
            behind = self._settled < self._behind_mark
        if behind:
            self.wait()
        with self._lock:
            self._behind_mark = self._handed

    def wait(self, timeout: float = _WAIT_SECONDS) -> None:
        """Log every window handed over so far, on this thread, in order (``close``, process exit,
        a rank's reply). Gives up on MLflow, with a notice, when a batch already being logged has
        not gone out after ``timeout`` seconds.

        Example:
            >>> sink.wait()   # the run holds every point handed over   # doctest: +SKIP
        """
        if not self._delivering.acquire(timeout=timeout):
            self._fail(f"MLflow did not take a window within {timeout:g} s")
            return
        try:
            self._deliver_waiting()
        finally:
            self._delivering.release()

    # ---------------------------------------------------------------- internals
    def _close_window(self, snapshot: Snapshot) -> _Window | None:
        """The window since the previous one, at ``snapshot`` (None: no new batch, or not logging)."""
        self._last_window = self._clock()
        if self._broken or self.ended:
            return None
        running = self._running_here()
        if running is False:
            self.ended = True  # this process ended its run: this window came after
            return None
        found = self._windows.close(snapshot)
        if found is None:
            return None
        values, step = found
        return _Window(values, step, int(self._wall() * 1000), running is True)

    def _send_waiting(self) -> None:
        """The background sender: log what waits, until nothing does."""
        while True:
            with self._lock:
                if not self._waiting:
                    self._sending = False
                    return
            with self._delivering:
                self._deliver_waiting()

    def _deliver_waiting(self) -> None:
        """Log the waiting windows in order, as few ``log_batch`` calls as MLflow's limit allows;
        the caller holds ``_delivering``."""
        while True:
            with self._lock:
                if not self._waiting:
                    return
                batch = [self._waiting.popleft() for _ in range(min(len(self._waiting), _WINDOWS_PER_CALL))]
            try:
                self._log(batch)
            finally:
                with self._lock:
                    self._settled += len(batch)

    def _log(self, batch: list[_Window]) -> None:
        """One ``log_batch`` for the windows of ``batch`` closed before the run ended."""
        if self._broken:
            return
        try:
            if self._end_stamp is None and not all(window.running for window in batch):
                self._end_stamp = self._run_end()
            if self._end_stamp is not None:
                self.ended = True
                # Closed by the end (same millisecond included): made while the run ran.
                end = self._end_stamp
                batch = [window for window in batch if window.running or window.stamp <= end]
            if not batch:
                return
            from mlflow.entities import Metric

            metrics = [
                Metric(self._names[key], float(value), window.stamp, window.step)
                for window in batch
                for key, value in window.values.items()
            ]
            self._log_batch(self.run_id, metrics=metrics)
            self.flushes += len(batch)
        except Exception as exc:
            self._fail(f"MLflow logging failed: {exc}")

    def _fail(self, why: str) -> None:
        if not self._broken:
            self._broken = True
            notice(f"uc_jupyter: {why}; training goes on without data-loading metrics", key=_FAILED)
        with self._lock:
            self._settled += len(self._waiting)
            self._waiting.clear()


def wait_all(timeout: float = _WAIT_SECONDS) -> None:
    """Wait until every window any sink of this process handed over is logged (each sink gives up
    on MLflow after ``timeout`` seconds, with a notice). Runs at interpreter exit; a rank runs it
    before each reply, so a call's points are in the run when the call returns.

    Example:
        >>> wait_all()   # every data-loading point of this process is in MLflow   # doctest: +SKIP
    """
    _wait_for(None, timeout)


def _wait_for(run_id: str | None, timeout: float) -> None:
    """Wait for this process's sinks that log to ``run_id`` (None: all of them). A forked child's
    copies of its parent's sinks are the parent's to log: waiting there would log their windows
    twice, or wait ``timeout`` on a lock whose holder (the parent's logging thread) is not here."""
    for sink in list(_SINKS):
        if sink._pid == os.getpid() and run_id in (None, sink.run_id):
            sink.wait(timeout)


# MLflow offers no hook for "a run is about to end": its plugins (tracking stores, run context and
# request header providers) cover where runs live, their start tags and HTTP headers, and nothing
# is called as end_run begins. Both ways the fluent API ends a run go through one function, the
# fluent module's ``end_run``, looked up at call time: ``ActiveRun.__exit__`` (the end of ``with
# mlflow.start_run()``) and MLflow's own atexit call it by its module-level name, and the user's
# ``mlflow.end_run`` is the same function re-exported. Wrapping it there is the one seam that
# catches every fluent run end; the wrapper is marked, so it is installed once (several sinks,
# several threads) and never wraps itself. A ``from mlflow import end_run`` made before
# the first sink keeps MLflow's own; its run's points still arrive, from the logging thread, just
# after the run ended. Runs ended through ``MlflowClient.set_terminated`` are not waited for either.
_WRAPPER_MARK = "_uc_jupyter_waits_for_sinks"
_WRAPPING = threading.Lock()


def _wait_before_run_ends() -> None:
    """Make MLflow's fluent ``end_run`` first log every window this process's sinks handed over for
    the run it ends, then end the run as before. It is :meth:`MlflowSink.wait`: it gives up, with a
    notice, on a batch the logging thread has not got out in ``_WAIT_SECONDS``; the windows left it
    logs itself, through the same MLflow that ends the run next. Nothing the wait does, or fails to
    do, keeps the run from ending; the loop's pass end stays a hand-over (issue 31: the points
    arrived 30-36 ms after the block had ended the run)."""
    from mlflow.tracking import fluent

    with _WRAPPING:
        original = fluent.end_run
        if getattr(original, _WRAPPER_MARK, False):
            return

        @functools.wraps(original)
        def end_run(*args: Any, **kwargs: Any) -> Any:
            try:
                with contextlib.suppress(Exception):  # the user's end_run never fails because of us
                    ending = fluent.active_run()  # what end_run ends: this thread's innermost run
                    if ending is not None:
                        _wait_for(ending.info.run_id, _WAIT_SECONDS)
            finally:  # an interrupt during the wait still ends the run, then goes on up
                ended = original(*args, **kwargs)
            return ended

        setattr(end_run, _WRAPPER_MARK, True)
        fluent.end_run = end_run
        mlflow: Any = sys.modules["mlflow"]
        if getattr(mlflow, "end_run", None) is original:  # mlflow.end_run: the name users call
            mlflow.end_run = end_run


class _Sender:
    """The process's one logging thread: runs the sinks' sends in turn. Handing it one is a queue
    put; starting a thread per send cost the loop about 2 ms (``Thread.start`` waits for the new
    thread, which then holds the GIL for its first switch interval). A daemon: a stuck MLflow never
    keeps a process from exiting (the exit's own wait gives up after ``_WAIT_SECONDS``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._pid: int | None = None  # where the thread runs: a forked child starts its own

    def __call__(self, job: Callable[[], None]) -> None:
        with self._lock:
            if self._pid != os.getpid():
                self._pid, self._jobs = os.getpid(), queue.SimpleQueue()
                threading.Thread(target=self._run, args=(self._jobs,), name="uc-jupyter-mlflow", daemon=True).start()
        self._jobs.put(job)

    @staticmethod
    def _run(jobs: queue.SimpleQueue[Callable[[], None]]) -> None:
        while True:
            job = jobs.get()
            with contextlib.suppress(Exception):  # a sink reports its own failures; serve the next
                job()


# Weak: a notebook that makes a sink per run does not keep them all alive.
_SINKS: weakref.WeakSet[MlflowSink] = weakref.WeakSet()
_SENDER = _Sender()
atexit.register(wait_all)
