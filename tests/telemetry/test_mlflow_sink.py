"""The MLflow sink with its logging thread, its clock and the run's state in the test's hands."""

from __future__ import annotations

import dataclasses
import threading
import warnings
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from uc_jupyter import notices
from uc_jupyter.telemetry.mlflow_sink import MlflowSink, metric_names
from uc_jupyter.telemetry.model import MAIN_WORKER, Histogram, Sample, Snapshot

FETCH = metric_names(0)["fetch"]


def after(
    batches: int, *, time: float | None = None, seconds: float = 0.01, hits: int = 0, misses: int = 0
) -> Snapshot:
    """Rank 0's loader after ``batches`` batches of 4 samples, each fetched in ``seconds``."""
    loop = Sample(
        rank=0,
        worker=MAIN_WORKER,
        seq=batches + 1,
        time=float(batches),
        batches=batches,
        samples=4 * batches,
        fetch=Histogram.of([seconds] * batches),
        between=Histogram.of([0.02] * max(batches - 1, 0)),
        started=0.0,
    )
    worker = Sample(rank=0, worker=0, seq=1, time=0.0, hits=hits, misses=misses)
    return Snapshot({loop.producer: loop, worker.producer: worker}, float(batches) if time is None else time)


class Recorder:
    """``log_batch``: keeps what it was given; ``gate`` (when set) holds each call until released."""

    def __init__(self, gate: threading.Event | None = None) -> None:
        self.calls: list[dict[str, tuple[float, int]]] = []
        self.gate = gate
        self.entered = threading.Event()

    def __call__(self, run_id: str, *, metrics: list[Any]) -> None:
        assert run_id == "run"
        self.entered.set()
        if self.gate is not None:
            assert self.gate.wait(30)
        self.calls.append({m.key: (m.value, m.step) for m in metrics})

    def steps(self) -> list[int]:
        return [call[FETCH][1] for call in self.calls]


class HeldThreads:
    """``start``: keeps each background sender instead of running it, until told to."""

    def __init__(self) -> None:
        self.targets: list[Callable[[], None]] = []

    def __call__(self, target: Callable[[], None]) -> None:
        self.targets.append(target)

    def run_all(self) -> None:
        for target in self.targets:
            target()


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def sink(log: Recorder, *, start: Any = None, active: Callable[[], bool] = lambda: True, **kw: Any) -> MlflowSink:
    return MlflowSink("run", 0, log, start=start or HeldThreads(), run_active=active, **kw)


def test_the_end_of_a_pass_logs_what_waits_and_its_own_window_before_returning() -> None:
    """Issue 19: the end-of-pass window went to the background thread, so a pass could end (and its
    run close) before its point was logged; here the background thread never runs at all."""
    log, threads = Recorder(), HeldThreads()
    out = sink(log, start=threads)
    out.hand_over(after(3))  # a periodic window: the background thread's
    assert log.calls == [] and len(threads.targets) == 1
    out.end_pass(after(4))
    assert log.steps() == [3, 4]
    assert log.calls[0][FETCH][0] == pytest.approx(0.01)
    threads.run_all()  # the sender, once it runs, finds nothing left
    assert log.steps() == [3, 4] and out.flushes == 2


def test_the_end_of_a_pass_waits_for_a_window_being_logged_and_keeps_the_order() -> None:
    gate = threading.Event()
    log = Recorder(gate)
    out = sink(log, start=lambda target: threading.Thread(target=target, daemon=True).start())
    out.hand_over(after(3))
    assert log.entered.wait(30)  # the background thread is inside log_batch with window 1
    ending = threading.Thread(target=out.end_pass, args=(after(4),))
    ending.start()
    gate.set()
    ending.join(30)
    assert not ending.is_alive()
    assert log.steps() == [3, 4]  # when the pass's end returned, both were logged, in order


def test_a_window_without_a_new_batch_logs_nothing() -> None:
    log = Recorder()
    out = sink(log)
    out.end_pass(after(0))
    out.end_pass(after(4))
    out.end_pass(after(4))  # a second end with no batch since (close after the pass's end)
    assert log.steps() == [4]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.booleans()), max_size=20))
def test_steps_only_grow_and_every_pass_end_with_a_batch_leaves_its_point(events: list[tuple[int, bool]]) -> None:
    """Periodic windows and pass ends in any order: each logged window has a step above the last,
    and every pass end that saw a new batch logs one at its step, before returning."""
    log = Recorder()
    threads = HeldThreads()
    out = sink(log, start=threads)
    batches = logged_through = 0
    for more, ends_pass in events:
        batches += more
        if ends_pass:
            out.end_pass(after(batches))
            if batches > logged_through:
                assert log.steps()[-1] == batches
            logged_through = batches
        else:
            out.hand_over(after(batches))
    threads.run_all()
    out.wait()
    steps = log.steps()
    assert steps == sorted(set(steps))


def test_nothing_is_logged_once_the_run_has_ended() -> None:
    log, threads = Recorder(), HeldThreads()
    running = [True]
    out = sink(log, start=threads, active=lambda: running[0])
    out.end_pass(after(2))
    out.hand_over(after(3))  # waits for the background thread
    running[0] = False  # the run ends
    threads.run_all()
    out.end_pass(after(5))
    assert log.steps() == [2]
    assert out.ended
    out.hand_over(after(6))
    out.end_pass(after(7))
    assert log.steps() == [2]


def test_a_failing_mlflow_says_so_once_and_training_goes_on(capsys: pytest.CaptureFixture[str]) -> None:
    notices.reset()
    calls = []

    def broken(run_id: str, *, metrics: list[Any]) -> None:
        calls.append(run_id)
        raise RuntimeError("tracking server down")

    out = MlflowSink("run", 0, broken, start=HeldThreads())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # one plain line on stderr, never a UserWarning
        out.end_pass(after(2))
        out.end_pass(after(4))
        MlflowSink("run", 0, broken, start=HeldThreads()).end_pass(after(2))  # another sink: said already
    assert capsys.readouterr().err.splitlines() == [
        "uc_jupyter: MLflow logging failed: tracking server down; training goes on without data-loading metrics"
    ]
    assert calls == ["run", "run"]


def test_a_window_already_being_logged_too_long_is_given_up_with_a_notice(capsys: pytest.CaptureFixture[str]) -> None:
    notices.reset()
    gate = threading.Event()
    log = Recorder(gate)
    out = sink(log, start=lambda target: threading.Thread(target=target, daemon=True).start())
    out.hand_over(after(3))
    assert log.entered.wait(30)
    out.wait(timeout=0)
    assert "uc_jupyter: MLflow did not take a window within 0 s; training goes on" in capsys.readouterr().err
    gate.set()
    out.end_pass(after(6))
    assert log.steps() == [3]  # given up: nothing more


def test_a_baseline_starts_the_first_window_there() -> None:
    """A sink made for a new run on a loader already used: its first point covers only the batches
    since (they were all merged into it before)."""
    log = Recorder()
    out = sink(log, baseline=after(10, seconds=0.5))
    later = after(14, seconds=0.5)
    loop = later.samples[(0, MAIN_WORKER)]
    faster = Snapshot(
        {loop.producer: dataclasses.replace(loop, fetch=Histogram.of([0.5] * 10 + [0.1] * 4))}, later.time
    )
    out.end_pass(faster)
    assert log.calls[0][FETCH] == (pytest.approx(0.1), 14)


def test_periodic_windows_are_due_every_interval_of_the_injected_clock() -> None:
    clock = Clock()
    out = sink(Recorder(), interval=10.0, clock=clock)
    assert not out.due()
    clock.now = 9.99
    assert not out.due()
    clock.now = 10.0
    assert out.due()
    out.hand_over(after(1))
    assert not out.due()
    clock.now = 20.0
    assert out.due()


def test_the_hit_rate_is_the_windows_own() -> None:
    log = Recorder()
    out = sink(log)
    out.end_pass(after(2, hits=0, misses=8))
    out.end_pass(after(4, hits=8, misses=8))
    rate = metric_names(0)["cache_hit_rate"]
    assert [call[rate][0] for call in log.calls] == [0.0, 1.0]
