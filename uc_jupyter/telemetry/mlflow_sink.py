"""Data-loading metrics into an MLflow run, batched, from the training process only.

Keys (per rank R): ``dataloader/fetch_seconds/rank_R`` and ``.../fetch_seconds_variance/rank_R``,
``dataloader/between_next_seconds/rank_R`` and its ``_variance`` (the reference runtime's names),
plus ``dataloader/fetch_seconds_p95/rank_R``, ``dataloader/samples_per_second/rank_R`` and
``dataloader/cache_hit_rate/rank_R``. Each point is one *window*: the batches since the previous
one (means, variances, p95 of that window), logged with one ``log_batch`` call at a step that only
grows (batches delivered so far); a window without a new batch logs nothing.

When:

- every ``interval`` seconds while a pass runs (:meth:`MlflowSink.due`, :meth:`MlflowSink.hand_over`):
  a background thread logs these, so the loop never waits on MLflow. The loader hands a window over
  *before* the batch that made it due counts, so the end of a pass always has a batch of its own;
- at the end of every pass (:meth:`MlflowSink.end_pass`: the epoch's end, an exception, a
  ``break``, ``close``), synchronously: it returns once every window handed over before it, and its
  own, is logged, in order. Whatever the background thread's timing, each pass leaves its own point,
  at its last batch's step, before the loop goes on (and before a ``with mlflow.start_run()`` block
  around it ends the run).

Nothing is logged once the run has ended: right before each ``log_batch`` the sink asks the tracking
server whether the run is still running; once it is not, the windows waiting are dropped and the
sink stays silent (a pass still open when its run ends is logged up to its last window before).
Nothing is buffered without a run; a failing MLflow gives one notice line (once per process) and
training goes on. In a notebook :func:`quiet_mlflow_logging` keeps MLflow's INFO lines out of cells.

The run is the active fluent run of this process, or the one ``MLFLOW_RUN_ID`` names (how ranks
reach their parent's run). Workers never log: the fluent API there silently starts stray runs.

Example:
    >>> sink = MlflowSink.for_active_run(rank=0)  # None when no run is active   # doctest: +SKIP
    >>> if sink is not None and sink.due():       # per batch, before it counts  # doctest: +SKIP
    ...     sink.hand_over(loader.stats())        # logged in the background
    >>> sink.end_pass(loader.stats())             # logged, with all before it, on return  # doctest: +SKIP
"""

from __future__ import annotations

import atexit
import collections
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, NamedTuple

from uc_jupyter.notices import notice
from uc_jupyter.telemetry.model import MAIN_WORKER, Histogram, Sample, Snapshot

__all__ = ["MlflowSink", "active_run_id", "metric_names", "quiet_mlflow_logging"]

# Each said once per process, as one line (uc_jupyter.notices), not once per loader or per window.
_UNAVAILABLE = "uc_jupyter.telemetry.mlflow_sink: unavailable"
_FAILED = "uc_jupyter.telemetry.mlflow_sink: failed"
_QUIET = "WARNING"  # MLflow's INFO lines ("Created MLflow experiment", run links) are not for a notebook

_WAIT_SECONDS = 30.0  # the most the end of a pass waits for MLflow before giving up on it


def metric_names(rank: int) -> dict[str, str]:
    prefix = "dataloader"
    return {
        "fetch": f"{prefix}/fetch_seconds/rank_{rank}",
        "fetch_variance": f"{prefix}/fetch_seconds_variance/rank_{rank}",
        "between": f"{prefix}/between_next_seconds/rank_{rank}",
        "between_variance": f"{prefix}/between_next_seconds_variance/rank_{rank}",
        "fetch_p95": f"{prefix}/fetch_seconds_p95/rank_{rank}",
        "samples_per_second": f"{prefix}/samples_per_second/rank_{rank}",
        "cache_hit_rate": f"{prefix}/cache_hit_rate/rank_{rank}",
    }


def quiet_mlflow_logging() -> None:
    """Keep MLflow's INFO logging out of a notebook: MLflow reads ``MLFLOW_LOGGING_LEVEL`` when it is
    first imported (here, or in ranks and workers, which inherit it); a level the user set wins.
    When MLflow is already imported, its loggers are raised to that level now.

    Example:
        >>> quiet_mlflow_logging()   # what %load_ext uc_jupyter does   # doctest: +SKIP
    """
    import logging

    threshold = logging.getLevelName(os.environ.setdefault("MLFLOW_LOGGING_LEVEL", _QUIET).upper())
    if "mlflow" in sys.modules and isinstance(threshold, int):
        for name in ("mlflow", "alembic"):
            logger = logging.getLogger(name)
            if logger.getEffectiveLevel() < threshold:
                logger.setLevel(threshold)


def active_run_id() -> str | None:
    """The fluent run active in this process, else ``MLFLOW_RUN_ID``; never imports mlflow itself
    (an active fluent run means it is imported already)."""
    mlflow = sys.modules.get("mlflow")
    if mlflow is not None:
        active = mlflow.active_run()
        if active is not None:
            return str(active.info.run_id)
    return os.environ.get("MLFLOW_RUN_ID") or None


class _Window(NamedTuple):
    values: dict[str, float]
    step: int
    stamp: int  # milliseconds since the epoch, when the window closed


# The cumulative counters a window is measured against: fetch, between, samples, hits, misses, time.
_Totals = tuple[Histogram, Histogram, int, int, int, float]


class MlflowSink:
    """Logs one rank's loader metrics to run ``run_id`` through ``log_batch(run_id, metrics=...)``.

    Args:
        run_id, rank: where the points go and the rank they are named for.
        log_batch: MLflow's ``MlflowClient.log_batch`` (or a stand-in).
        interval: seconds between the periodic windows of a pass.
        clock: monotonic seconds, for ``interval``.
        run_active: whether the run still takes points; asked right before each ``log_batch``.
        start: starts the background sender, ``start(target)`` (default: a daemon thread).
        baseline: the loader's snapshot when the sink was made: its first window starts there.
    """

    def __init__(
        self,
        run_id: str,
        rank: int,
        log_batch: Callable[..., Any],
        *,
        interval: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        run_active: Callable[[], bool] = lambda: True,
        start: Callable[[Callable[[], None]], object] | None = None,
        baseline: Snapshot | None = None,
    ) -> None:
        self.run_id, self.rank = run_id, rank
        self._log_batch, self._run_active = log_batch, run_active
        self._interval, self._clock = interval, clock
        self._start = start or _start_thread
        self._names = metric_names(rank)
        self._last_window = clock()
        self._previous: _Totals | None = None if baseline is None else self._totals(baseline)
        self.ended = False  # the run ended: nothing more is logged
        self._broken = False  # MLflow failed: nothing more is logged
        self.flushes = 0  # windows logged
        self._waiting: collections.deque[_Window] = collections.deque()
        self._lock = threading.Lock()  # guards _waiting and _sending
        self._delivering = threading.Lock()  # held by whoever logs: one window at a time, in order
        self._sending = False  # a background sender runs (or is starting)
        # A weak reference: a notebook that makes a sink per run does not keep them all alive.
        atexit.register(_wait_at_exit, weakref.ref(self))

    @classmethod
    def for_active_run(
        cls,
        rank: int,
        current: MlflowSink | None = None,
        *,
        baseline: Callable[[], Snapshot] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> MlflowSink | None:
        """A sink for the active run (or ``MLFLOW_RUN_ID``); ``current`` when it already logs to
        that run; None when there is no run or MLflow fails. ``baseline`` gives the loader's
        snapshot now, asked only for a new sink; ``clock`` is the loader's."""
        try:
            run_id = active_run_id()
            if not run_id:
                return None
            if current is not None and current.run_id == run_id and not current.ended:
                return current
            from mlflow.tracking import MlflowClient

            client = MlflowClient()

            def run_active() -> bool:
                return bool(client.get_run(run_id).info.status == "RUNNING")

            return cls(
                run_id,
                rank,
                client.log_batch,
                run_active=run_active,
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
            if self._sending:
                return  # the running sender takes it: it looks again before it stops
            self._sending = True
        self._start(self._send_waiting)

    def end_pass(self, snapshot: Snapshot) -> None:
        """A pass ended at ``snapshot``: log its window and every one before it, in order, before returning."""
        window = self._close_window(snapshot)
        if window is not None:
            with self._lock:
                self._waiting.append(window)
        self.wait()

    def wait(self, timeout: float = _WAIT_SECONDS) -> None:
        """Log every window handed over so far, on this thread, in order (at the end of a pass, at
        ``close`` and at process exit). Gives up on MLflow, with a warning, when a window already
        being logged has not gone out after ``timeout`` seconds."""
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
        found = self._loop_totals(snapshot)
        if found is None:
            return None
        loop, totals = found
        fetch, between, samples, hits, misses, now = totals
        if self._previous is not None:
            old_fetch, old_between, old_samples, old_hits, old_misses, old_time = self._previous
            window_fetch, window_between = fetch.minus(old_fetch), between.minus(old_between)
            window_samples, window_hits, window_misses = samples - old_samples, hits - old_hits, misses - old_misses
            elapsed = now - old_time
        else:
            window_fetch, window_between, window_samples = fetch, between, samples
            window_hits, window_misses, elapsed = hits, misses, now - loop.started
        if window_fetch.count == 0:
            return None
        self._previous = totals
        values = {
            "fetch": window_fetch.mean,
            "fetch_variance": window_fetch.variance,
            "between": window_between.mean,
            "between_variance": window_between.variance,
            "fetch_p95": window_fetch.quantile(0.95),
            "samples_per_second": window_samples / elapsed if elapsed > 0 else 0.0,
        }
        if window_hits + window_misses:
            values["cache_hit_rate"] = window_hits / (window_hits + window_misses)
        return _Window(values, loop.batches, int(time.time() * 1000))

    def _loop_totals(self, snapshot: Snapshot) -> tuple[Sample, _Totals] | None:
        """This rank's loop sample in ``snapshot`` and the rank's cumulative totals (None: no loop yet)."""
        mine = [s for s in snapshot.samples.values() if s.rank == self.rank]
        loop = next((s for s in mine if s.worker == MAIN_WORKER), None)
        if loop is None:
            return None
        hits, misses = sum(s.hits for s in mine), sum(s.misses for s in mine)
        return loop, (loop.fetch, loop.between, loop.samples, hits, misses, snapshot.time)

    def _totals(self, snapshot: Snapshot) -> _Totals | None:
        found = self._loop_totals(snapshot)
        return None if found is None else found[1]

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
        """Log the waiting windows in order; the caller holds ``_delivering``."""
        from mlflow.entities import Metric

        while True:
            with self._lock:
                if not self._waiting:
                    return
                window = self._waiting.popleft()
            if self._broken or self.ended:
                continue  # dropped
            try:
                if not self._run_active():
                    self._end()
                    continue
                metrics = [
                    Metric(self._names[k], float(v), window.stamp, window.step) for k, v in window.values.items()
                ]
                self._log_batch(self.run_id, metrics=metrics)
                self.flushes += 1
            except Exception as exc:
                self._fail(f"MLflow logging failed: {exc}")

    def _end(self) -> None:
        self.ended = True
        with self._lock:
            self._waiting.clear()

    def _fail(self, why: str) -> None:
        if not self._broken:
            self._broken = True
            notice(f"uc_jupyter: {why}; training goes on without data-loading metrics", key=_FAILED)
        with self._lock:
            self._waiting.clear()


def _start_thread(target: Callable[[], None]) -> object:
    thread = threading.Thread(target=target, name="uc-jupyter-mlflow", daemon=True)
    thread.start()
    return thread


def _wait_at_exit(ref: weakref.ReferenceType[MlflowSink]) -> None:
    sink = ref()
    if sink is not None:
        sink.wait()
