"""The MLflow sink with its logging thread, its clocks and the run's state in the test's hands."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import threading
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from time import monotonic
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from uc_jupyter import notices
from uc_jupyter.telemetry import mlflow_sink
from uc_jupyter.telemetry.mlflow_runs import RUN_VARIABLE, active_run_id, logging_to
from uc_jupyter.telemetry.mlflow_sink import JOB_METRICS, MlflowSink, metric_names, wait_all
from uc_jupyter.telemetry.model import MAIN_WORKER, Histogram, Sample, Snapshot
from uc_jupyter.testing.clocks import ManualClock

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
    """``log_batch`` for run ``run``: keeps what it was given; ``gate`` (when set) holds each call
    until released."""

    def __init__(self, gate: threading.Event | None = None, run: str = "run") -> None:
        self.calls: list[dict[str, tuple[float, int]]] = []  # per call: each key's last value and step
        self.metrics: list[list[Any]] = []  # per call: every metric
        self.gate, self.run = gate, run
        self.entered = threading.Event()

    def __call__(self, run_id: str, *, metrics: list[Any]) -> None:
        assert run_id == self.run
        self.entered.set()
        if self.gate is not None:
            assert self.gate.wait(30)
        self.calls.append({m.key: (m.value, m.step) for m in metrics})
        self.metrics.append(list(metrics))

    def steps(self) -> list[int]:
        """The fetch metric's steps, in the order they were logged."""
        return [m.step for call in self.metrics for m in call if m.key == FETCH]


class HeldThreads:
    """``start``: keeps each background sender instead of running it, until told to."""

    def __init__(self) -> None:
        self.targets: list[Callable[[], None]] = []

    def __call__(self, target: Callable[[], None]) -> None:
        self.targets.append(target)

    def run_all(self) -> None:
        for target in self.targets:
            target()


def sink(log: Recorder, *, start: Any = None, **kw: Any) -> MlflowSink:
    return MlflowSink("run", 0, log, start=start or HeldThreads(), **kw)


def background(target: Callable[[], None]) -> None:
    threading.Thread(target=target, daemon=True).start()


def test_the_end_of_a_pass_hands_its_window_over_and_wait_logs_all_in_order() -> None:
    """The end of a pass only closes its window (issue 16: the synchronous log was 2.6% of a
    loader-bound job); ``wait`` logs it after the periodic one before it, even if the background
    thread never runs, with one ``log_batch`` for both."""
    log, threads = Recorder(), HeldThreads()
    out = sink(log, start=threads)
    out.hand_over(after(3))  # a periodic window
    out.end_pass(after(4))
    assert log.calls == [] and len(threads.targets) == 1  # one sender for both
    out.wait()
    assert log.steps() == [3, 4] and len(log.calls) == 1 and out.flushes == 2
    assert log.calls[0][FETCH][0] == pytest.approx(0.01)
    threads.run_all()  # the sender, once it runs, finds nothing left
    assert log.steps() == [3, 4] and out.flushes == 2


def test_the_end_of_a_pass_never_waits_on_a_slow_mlflow() -> None:
    """MLflow is inside ``log_batch`` and stays there until the test lets it go: the pass ends
    anyway; its window follows the one being logged, in order, once MLflow takes it."""
    gate = threading.Event()
    log = Recorder(gate)
    out = MlflowSink("run", 0, log)  # the process's own logging thread
    out.hand_over(after(3))
    assert log.entered.wait(30)  # the logging thread is inside log_batch with window 1
    out.end_pass(after(4))  # returns with MLflow still stuck
    out.begin_pass()  # the next pass starts: the last one's window may still wait
    assert log.calls == []
    gate.set()
    out.wait()
    assert log.steps() == [3, 4]


def test_a_pass_waits_only_when_mlflow_is_a_whole_pass_behind() -> None:
    """Back to back epochs never wait on MLflow; a MLflow slower than a pass holds one pass's
    windows, not a growing backlog."""
    log, threads = Recorder(), HeldThreads()
    out = sink(log, start=threads)
    out.begin_pass()
    out.end_pass(after(4))
    out.begin_pass()  # the thread has not run: the previous pass's window may wait
    assert log.calls == []
    out.end_pass(after(8))
    out.begin_pass()  # the window from before the previous pass began still waits: now it waits
    assert log.steps() == [4, 8] and out.flushes == 2
    out.end_pass(after(12))
    out.begin_pass()
    assert out.flushes == 2


def test_a_window_without_a_new_batch_logs_nothing() -> None:
    log = Recorder()
    out = sink(log)
    out.end_pass(after(0))
    out.end_pass(after(4))
    out.end_pass(after(4))  # a second end with no batch since (close after the pass's end)
    out.wait()
    assert log.steps() == [4] and out.flushes == 1


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.sampled_from(["periodic", "end", "begin", "thread"])), max_size=20))
def test_steps_only_grow_and_every_pass_end_with_a_batch_leaves_its_point(events: list[tuple[int, str]]) -> None:
    """Periodic windows, pass ends, pass starts and the thread's runs in any order: each logged
    window has a step above the last, and every pass end that saw a new batch leaves a point at
    its step."""
    log = Recorder()
    threads = HeldThreads()
    out = sink(log, start=threads)
    batches = 0
    ends: set[int] = set()
    for more, event in events:
        batches += more
        if event == "end":
            out.end_pass(after(batches))
            ends.add(batches)
        elif event == "periodic":
            out.hand_over(after(batches))
        elif event == "begin":
            out.begin_pass()
        else:
            threads.run_all()
            threads.targets.clear()
    out.wait()
    steps = log.steps()
    assert steps == sorted(set(steps))
    assert ends - {0} <= set(steps)


def test_a_window_closed_before_its_run_ended_is_logged_after_the_end() -> None:
    """A run named by ``MLFLOW_RUN_ID`` (a rank): the store says when it ended. The window closed
    before that is logged although the thread gets to it afterwards; the one closed after is not,
    and nothing more is."""
    log, threads, wall = Recorder(), HeldThreads(), ManualClock(now=1000.0)
    ended_at: list[float | None] = [None]
    out = sink(log, start=threads, wall=wall, run_end=lambda: ended_at[0])
    out.end_pass(after(2))
    ended_at[0] = 1000.5 * 1000  # the run ends half a second later, before the thread runs
    wall.now = 1001.0
    out.end_pass(after(3))  # closed after the end
    threads.run_all()
    assert log.steps() == [2] and out.ended
    out.hand_over(after(6))
    out.end_pass(after(7))
    out.wait()
    assert log.steps() == [2]


def test_this_processes_own_run_is_seen_ending_at_no_cost() -> None:
    """The process's own active run: a window closed while the run is active here is logged,
    whatever the thread finds later, without asking the store; one closed with no run active is not."""
    log, threads = Recorder(), HeldThreads()
    here: list[bool | None] = [True]
    asked = []

    def store() -> float | None:
        asked.append(True)
        return 5.0  # "ended long ago": only windows nobody could vouch for are dropped by it

    out = sink(log, start=threads, running_here=lambda: here[0], run_end=store)
    out.end_pass(after(2))
    here[0] = False  # `with mlflow.start_run()` ended before the thread ran
    out.end_pass(after(3))
    assert out.ended
    threads.run_all()
    assert log.steps() == [2] and asked == []
    out.hand_over(after(6))
    out.wait()
    assert log.steps() == [2]


def test_a_nested_run_active_leaves_the_verdict_to_the_store() -> None:
    """A nested run is active here: this process cannot tell whether its parent (the sink's run)
    still runs, so the thread asks the store; while it runs, nothing is lost."""
    log, threads = Recorder(), HeldThreads()
    here: list[bool | None] = [None]
    asked = []

    def store() -> float | None:
        asked.append(True)
        return None

    out = sink(log, start=threads, running_here=lambda: here[0], run_end=store)
    out.hand_over(after(2))
    here[0] = True
    out.end_pass(after(4))
    threads.run_all()
    assert log.steps() == [2, 4] and asked == [True] and not out.ended


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
        out.wait()
        out.end_pass(after(4))
        out.wait()
        other = MlflowSink("run", 0, broken, start=HeldThreads())  # another sink: said already
        other.end_pass(after(2))
        other.wait()
    assert capsys.readouterr().err.splitlines() == [
        "uc_jupyter: MLflow logging failed: tracking server down; training goes on without data-loading metrics"
    ]
    assert calls == ["run", "run"]


def test_a_window_already_being_logged_too_long_is_given_up_with_a_notice(capsys: pytest.CaptureFixture[str]) -> None:
    notices.reset()
    gate = threading.Event()
    log = Recorder(gate)
    out = sink(log, start=background)
    out.hand_over(after(3))
    assert log.entered.wait(30)
    out.end_pass(after(4))
    out.wait(timeout=0)
    assert "uc_jupyter: MLflow did not take a window within 0 s; training goes on" in capsys.readouterr().err
    gate.set()
    out.end_pass(after(6))
    out.wait()
    assert log.steps() == [3]  # given up: nothing more


def test_wait_all_waits_for_every_sink_of_this_process_only() -> None:
    """What runs at exit and before a rank's reply; a forked child never logs its parent's windows
    (they are the parent's to log: twice would be a duplicate point)."""
    logs = [Recorder(), Recorder()]
    outs = [sink(log) for log in logs]
    for out in outs:
        out.end_pass(after(4))
    child = os.fork()
    if child == 0:
        wait_all()
        os._exit(len(logs[0].calls) + len(logs[1].calls))
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    wait_all()
    assert [log.steps() for log in logs] == [[4], [4]]


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
    out.wait()
    assert log.calls[0][FETCH] == (pytest.approx(0.1), 14)


def test_periodic_windows_are_due_every_interval_of_the_injected_clock() -> None:
    clock = ManualClock()
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
    out.wait()
    rate = metric_names(0)["cache_hit_rate"]
    assert [m.value for call in log.metrics for m in call if m.key == rate] == [0.0, 1.0]


def test_exposed_wait_and_start_up_are_the_windows_own() -> None:
    """The first window holds the pass's start-up (iter() and the first batch), apart from its exposed
    wait; a later window of the same pass has no start-up and its own share."""
    log = Recorder()
    out = sink(log)
    first = after(3, seconds=0.04)  # 3 batches: the first is start-up, 2 later ones wait 0.04 against 0.02 each
    loop = first.samples[(0, MAIN_WORKER)]
    started = dataclasses.replace(loop, setup=0.5, first_waits=0.04)
    out.end_pass(Snapshot({**first.samples, loop.producer: started}, first.time))
    later = after(5, seconds=0.04)
    loop = later.samples[(0, MAIN_WORKER)]
    out.end_pass(
        Snapshot({**later.samples, loop.producer: dataclasses.replace(loop, setup=0.5, first_waits=0.04)}, 5.0)
    )
    out.wait()
    exposed, startup = metric_names(0)["exposed_wait"], metric_names(0)["startup_seconds"]
    logged = [(m.key, m.value, m.step) for call in log.metrics for m in call if m.key in (exposed, startup)]
    assert logged == [
        (exposed, pytest.approx(0.08 / (0.08 + 0.04)), 3),
        (startup, pytest.approx(0.54), 3),
        (exposed, pytest.approx(0.08 / (0.08 + 0.04)), 5),  # no pass started in the second window
    ]


def test_the_exposed_wait_is_logged_in_seconds_per_batch_and_split_by_stage() -> None:
    """Per window: the steady-state wait per batch, and what each stage caused of it (they add up)."""
    log = Recorder()
    out = sink(log)
    first = after(3, seconds=0.04)  # 2 batches past the first wait 0.04 each
    loop = first.samples[(0, MAIN_WORKER)]
    staged = dataclasses.replace(loop, first_waits=0.04, exposed=(0.06, 0.02, 0.0, 0.0, 0.0))
    out.end_pass(Snapshot({**first.samples, loop.producer: staged}, first.time))
    out.wait()
    names = metric_names(0)
    logged = {m.key: m.value for call in log.metrics for m in call}
    assert logged[names["exposed_wait_seconds"]] == pytest.approx(0.04)
    assert logged[names["exposed_fetch"]] == pytest.approx(0.03) and logged[names["exposed_decode"]] == pytest.approx(
        0.01
    )
    assert names["exposed_fetch"] == "dataloader/exposed_seconds/fetch/rank_0"


def test_the_jobs_sink_logs_its_worst_ranks_wait_under_the_job_keys() -> None:
    log = Recorder()
    job = MlflowSink("run", None, log, start=HeldThreads())
    slow = dataclasses.replace(after(4, seconds=0.05).samples[(0, MAIN_WORKER)], rank=1)
    job.end_pass(Snapshot({**after(4).samples, slow.producer: slow}, 4.0))
    job.wait()
    ((values,),) = [[{key: value for key, (value, _) in call.items()}] for call in log.calls]
    assert set(values) == set(JOB_METRICS.values()) and values[JOB_METRICS["max_exposed_wait_rank"]] == 1.0
    assert abs(values[JOB_METRICS["max_exposed_wait_seconds"]] - 4 * 0.05 / 3) < 1e-9


def test_a_ranks_call_carries_the_kernels_run_and_leaves_the_environment_as_it_was(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(RUN_VARIABLE, raising=False)
    monkeypatch.setenv("MLFLOW_RUN_ID", "set-by-the-user")
    carried = json.dumps({"run_id": "kernels", "tracking_uri": "sqlite:////tmp/kernel.db"})
    with logging_to(carried):
        assert active_run_id() == "kernels"  # before MLFLOW_RUN_ID: the call's run
        with logging_to(None):  # a call made without a run, nested: none carried
            assert active_run_id() == "set-by-the-user" and RUN_VARIABLE not in os.environ
        assert os.environ[RUN_VARIABLE] == carried
    assert RUN_VARIABLE not in os.environ and active_run_id() == "set-by-the-user"
    monkeypatch.setenv(RUN_VARIABLE, "not json")
    assert active_run_id() == "set-by-the-user"  # a variable that cannot be read is not a run


# ------------------------------------------------------------------ a real MLflow store


@pytest.fixture
def tracking(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """MLflow on a SQLite store of the test's own; every run this test left active is ended."""
    import mlflow

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)
    monkeypatch.delenv(RUN_VARIABLE, raising=False)
    mlflow.set_tracking_uri(uri)
    yield mlflow
    while mlflow.active_run() is not None:
        mlflow.end_run()


def logged_steps(tracking: Any, run_id: str) -> list[int]:
    return [m.step for m in tracking.MlflowClient().get_metric_history(run_id, FETCH)]


@pytest.mark.usefixtures("busy_machine")
def test_a_pass_ending_inside_a_start_run_block_is_in_the_run_when_the_block_exits(tracking: Any) -> None:
    """Issue 31: the block's exit ends the run right after the pass; the logging thread, late on a
    loaded machine, had not logged the pass's windows yet (they arrived 30-36 ms after the run
    ended, in 4 of 13 runs). Ending the run now waits for them: every time, both points are there."""
    missing = []
    for attempt in range(20):
        with tracking.start_run() as run:
            out = MlflowSink.for_active_run(0)  # as the loader makes it, when a pass begins
            assert out is not None
            out.hand_over(after(3))  # a periodic window
            out.end_pass(after(4))  # the pass ends; the block exits at once
        if (steps := logged_steps(tracking, run.info.run_id)) != [3, 4]:
            missing.append((attempt, steps))
    assert not missing, f"{len(missing)} of 20 runs ended without every point: {missing}"


def stuck_sink(tracking: Any, gate: threading.Event) -> MlflowSink:
    """A sink for the active run whose MLflow is inside ``log_batch`` with a periodic window until
    ``gate`` is set, and has the pass's end waiting behind it (the loader's sink, made first, puts
    the wait in MLflow's end_run)."""
    run_id = tracking.active_run().info.run_id
    assert MlflowSink.for_active_run(0) is not None
    log = Recorder(gate, run=run_id)
    out = MlflowSink(run_id, 0, log, start=background)
    out.hand_over(after(3))
    assert log.entered.wait(30)
    out.end_pass(after(4))
    return out


def test_a_stuck_mlflow_holds_the_end_of_a_run_no_longer_than_any_wait(
    tracking: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ending the run waits for the pass's windows as every wait does: it gives up on a MLflow that
    does not take them within ``_WAIT_SECONDS``, says so in one line, and the run ends all the same."""
    notices.reset()
    monkeypatch.setattr(mlflow_sink, "_WAIT_SECONDS", 0.2)
    gate = threading.Event()
    try:
        with tracking.start_run() as run:
            stuck_sink(tracking, gate)
    finally:
        gate.set()
    assert tracking.MlflowClient().get_run(run.info.run_id).info.status == "FINISHED"
    assert "uc_jupyter: MLflow did not take a window within 0.2 s" in capsys.readouterr().err


def test_a_forked_child_ending_the_run_does_not_wait_on_its_parents_sinks(
    tracking: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MLflow forgets its active runs in a forked child; one that resumes the parent's run and ends
    it does not wait on its copy of the parent's sink: those windows are the parent's to log, and
    the sink's lock, held by the parent's logging thread (stuck in MLflow), is never released there."""
    monkeypatch.setattr(mlflow_sink, "_WAIT_SECONDS", 10.0)
    gate = threading.Event()
    try:
        with tracking.start_run() as run:
            stuck_sink(tracking, gate)
            child = os.fork()
            if child == 0:
                code = 1
                with contextlib.suppress(BaseException):
                    tracking.start_run(run_id=run.info.run_id)
                    began = monotonic()
                    tracking.end_run()  # a wait here would give up only after 10 s
                    code = 0 if monotonic() - began < 5.0 else 2
                os._exit(code)
            _, status = os.waitpid(child, 0)
            assert os.waitstatus_to_exitcode(status) == 0
            gate.set()  # the parent's own end waits for its windows, now that MLflow takes them
    finally:
        gate.set()
