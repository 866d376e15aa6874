"""Data-loading metrics into an MLflow run, batched, from the training process only.

Keys (per rank R): ``dataloader/fetch_seconds/rank_R`` and ``.../fetch_seconds_variance/rank_R``,
``dataloader/between_next_seconds/rank_R`` and its ``_variance`` (the reference runtime's names),
plus ``dataloader/fetch_seconds_p95/rank_R``, ``dataloader/samples_per_second/rank_R`` and
``dataloader/cache_hit_rate/rank_R``. Each flush logs the window since the previous one (means,
variances, p95 of that window) with one ``log_batch`` call and a step that only grows (batches
delivered so far). Flushes happen at most every ``interval`` seconds, at the end of every pass
(epoch end, an exception, ``close``). A background thread does the logging, so the loop never
waits on MLflow; ``wait()`` (called at ``close`` and at exit) delivers what is pending. Nothing is
buffered without a run; a failing MLflow gives one warning and training goes on.

The run is the active fluent run of this process, or the one ``MLFLOW_RUN_ID`` names (how ranks
reach their parent's run). Workers never log: the fluent API there silently starts stray runs.

Example:
    >>> sink = MlflowSink.for_active_run(rank=0)  # None when no run is active   # doctest: +SKIP
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

from uc_jupyter.telemetry.model import MAIN_WORKER, Histogram, Snapshot

__all__ = ["MlflowSink", "active_run_id", "metric_names"]


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


def active_run_id() -> str | None:
    """The fluent run active in this process, else ``MLFLOW_RUN_ID``; never imports mlflow itself
    (an active fluent run means it is imported already)."""
    mlflow = sys.modules.get("mlflow")
    if mlflow is not None:
        active = mlflow.active_run()
        if active is not None:
            return str(active.info.run_id)
    return os.environ.get("MLFLOW_RUN_ID") or None


class MlflowSink:
    """Logs one rank's loader metrics to run ``run_id`` through ``log_batch(run_id, metrics=...)``."""

    def __init__(
        self,
        run_id: str,
        rank: int,
        log_batch: Callable[..., Any],
        *,
        interval: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.run_id, self.rank = run_id, rank
        self._log_batch = log_batch
        self._interval, self._clock = interval, clock
        self._names = metric_names(rank)
        self._last_flush = clock()
        self._previous: tuple[Histogram, Histogram, int, int, int, float] | None = None
        self._broken = False
        self.flushes = 0
        self._pending: list[tuple[dict[str, float], int, int]] = []
        self._pending_lock = threading.Lock()
        self._sender: threading.Thread | None = None
        atexit.register(self.wait)

    @classmethod
    def for_active_run(cls, rank: int, current: MlflowSink | None = None) -> MlflowSink | None:
        """A sink for the active run (or ``MLFLOW_RUN_ID``); ``current`` when it already logs to
        that run; None when there is no run or MLflow fails."""
        try:
            run_id = active_run_id()
            if not run_id:
                return None
            if current is not None and current.run_id == run_id:
                return current
            from mlflow.tracking import MlflowClient

            return cls(run_id, rank, MlflowClient().log_batch)
        except Exception as exc:  # MLflow missing or misconfigured: train without it
            warnings.warn(f"uc_jupyter: not logging data-loading metrics to MLflow: {exc}", stacklevel=2)
            return None

    def maybe_flush(self, snapshot: Snapshot) -> None:
        if self._clock() - self._last_flush >= self._interval:
            self.flush(snapshot)

    def flush(self, snapshot: Snapshot) -> None:
        """Log the window since the previous flush (nothing when no batch arrived)."""
        self._last_flush = self._clock()
        if self._broken:
            return
        mine = [s for s in snapshot.samples.values() if s.rank == self.rank]
        loop = next((s for s in mine if s.worker == MAIN_WORKER), None)
        if loop is None:
            return
        hits = sum(s.hits for s in mine)
        misses = sum(s.misses for s in mine)
        now = snapshot.time
        fetch, between, samples = loop.fetch, loop.between, loop.samples
        if self._previous is not None:
            old_fetch, old_between, old_samples, old_hits, old_misses, old_time = self._previous
            window_fetch, window_between = fetch.minus(old_fetch), between.minus(old_between)
            window_samples, window_hits, window_misses = samples - old_samples, hits - old_hits, misses - old_misses
            elapsed = now - old_time
        else:
            window_fetch, window_between, window_samples = fetch, between, samples
            window_hits, window_misses, elapsed = hits, misses, now - loop.started
        if window_fetch.count == 0:
            return
        self._previous = (fetch, between, samples, hits, misses, now)
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
        self._send(values, step=loop.batches)

    def _send(self, values: dict[str, float], step: int) -> None:
        """Hand the window to the sender thread: the training loop never waits on MLflow's I/O."""
        stamp = int(time.time() * 1000)
        with self._pending_lock:
            self._pending.append((values, step, stamp))
            if self._sender is None or not self._sender.is_alive():
                self._sender = threading.Thread(target=self._deliver, name="uc-jupyter-mlflow", daemon=True)
                self._sender.start()

    def wait(self, timeout: float = 30.0) -> None:
        """Block until every window handed over so far is logged (at close, and at process exit)."""
        sender = self._sender
        if sender is not None:
            sender.join(timeout)

    def _deliver(self) -> None:
        from mlflow.entities import Metric

        while True:
            with self._pending_lock:
                if not self._pending:
                    self._sender = None
                    return
                values, step, stamp = self._pending.pop(0)
            if self._broken:
                continue
            try:
                metrics = [Metric(self._names[k], float(v), stamp, step) for k, v in values.items()]
                self._log_batch(self.run_id, metrics=metrics)
                self.flushes += 1
            except Exception as exc:
                self._broken = True
                warnings.warn(f"uc_jupyter: MLflow logging failed, training goes on without it: {exc}", stacklevel=2)
