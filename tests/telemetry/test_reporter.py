"""The reporter: publishes at most ``rate`` times a second through a non-blocking put, never blocking."""

from __future__ import annotations

import itertools
import math
import multiprocessing
import queue
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from uc_jupyter.telemetry.reporter import Reporter
from uc_jupyter.testing.clocks import ManualClock


class CountingClock(ManualClock):
    """A manual clock that counts how often it is read."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        return super().__call__()


class Builder:
    """A ``build`` callable that counts its calls and returns a fresh payload each time."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> int:
        self.calls += 1
        return self.calls


def publication_times(rate: float, gaps: list[float]) -> tuple[list[float], list[bool], Builder, list[Any]]:
    """Call ``maybe_publish`` at the cumulative ``gaps`` and return the call times and results."""
    clock, build, sink = ManualClock(), Builder(), []
    reporter = Reporter(sink.append, rate=rate, clock=clock)
    times, results = [], []
    for gap in gaps:
        times.append(clock.advance(gap))
        results.append(reporter.maybe_publish(build))
    assert reporter.sent == len(sink) == sum(results)
    assert reporter.dropped == 0
    return times, results, build, sink


rates = st.one_of(st.sampled_from([1.0, 2.0, 10.0, 100.0]), st.floats(min_value=0.1, max_value=1000.0))
gap_lists = st.lists(
    st.one_of(st.just(0.0), st.floats(min_value=0.0, max_value=0.5), st.floats(min_value=0.0, max_value=0.005)),
    min_size=1,
    max_size=300,
)


@settings(max_examples=150, deadline=None)
@given(rates, gap_lists)
def test_at_most_rate_publications_per_second(rate: float, gaps: list[float]) -> None:
    times, results, _, _ = publication_times(rate, gaps)
    published = [t for t, sent in zip(times, results, strict=True) if sent]
    interval = 1.0 / rate
    # Consecutive publications are at least one interval apart ...
    assert all(b - a >= interval * (1 - 1e-9) for a, b in itertools.pairwise(published))
    # ... so any one-second window holds at most ceil(rate) of them (rate of them for a whole rate).
    for start in published:
        in_window = [t for t in published if start <= t < start + 1.0 - 1e-9]
        assert len(in_window) <= math.ceil(rate - 1e-9)


@settings(max_examples=150, deadline=None)
@given(rates, gap_lists)
def test_publishes_whenever_due(rate: float, gaps: list[float]) -> None:
    times, results, _, _ = publication_times(rate, gaps)
    assert results[0] is True  # the first call always publishes
    interval = 1.0 / rate
    last = times[0]
    for t, sent in zip(times, results, strict=True):
        if sent:
            last = t
        else:  # skipped only while the last publication is less than an interval old
            assert t < last + interval * (1 + 1e-9)


@settings(max_examples=100, deadline=None)
@given(rates, gap_lists)
def test_build_is_called_only_when_due(rate: float, gaps: list[float]) -> None:
    _, results, build, sink = publication_times(rate, gaps)
    assert build.calls == sum(results)
    assert sink == list(range(1, build.calls + 1))


def test_every_call_a_second_apart_publishes() -> None:
    times, results, build, _ = publication_times(1.0, [0.0] + [1.0] * 9)
    assert all(results) and build.calls == 10 and times[-1] == 9.0


def test_calls_within_an_interval_are_skipped_without_building() -> None:
    clock, build, sink = ManualClock(now=100.0), Builder(), []
    reporter = Reporter(sink.append, rate=10.0, clock=clock)
    assert reporter.maybe_publish(build) is True
    for now in (100.0, 100.01, 100.05, 100.099):
        clock.now = now
        assert reporter.maybe_publish(build) is False
    assert build.calls == 1 and sink == [1]
    clock.now = 100.1
    assert reporter.maybe_publish(build) is True
    assert build.calls == 2 and sink == [1, 2] and reporter.sent == 2


def test_the_clock_is_read_once_per_call() -> None:
    clock = CountingClock()
    reporter = Reporter([].append, rate=1.0, clock=clock)
    for _ in range(5):
        reporter.maybe_publish(Builder())
    assert clock.reads == 5


def test_an_iterator_clock_works() -> None:
    reporter = Reporter([].append, rate=10.0, clock=iter([0.0, 0.05, 0.2, 0.35]).__next__)
    assert [reporter.maybe_publish(lambda: "s") for _ in range(4)] == [True, False, True, True]


def test_publish_always_sends() -> None:
    clock, sink = ManualClock(), []
    reporter = Reporter(sink.append, rate=1.0, clock=clock)
    assert all(reporter.publish(i) for i in range(5))  # same instant, five times
    assert sink == [0, 1, 2, 3, 4] and reporter.sent == 5


def test_publish_restarts_the_interval() -> None:
    clock, build, sink = ManualClock(), Builder(), []
    reporter = Reporter(sink.append, rate=2.0, clock=clock)
    assert reporter.publish("final") is True
    clock.now = 0.25
    assert reporter.maybe_publish(build) is False
    clock.now = 0.5
    assert reporter.maybe_publish(build) is True
    assert sink == ["final", 1]


@pytest.mark.parametrize("rate", [0.0, -0.0, -1.0, -1e-9, -math.inf])
def test_rate_must_be_positive(rate: float) -> None:
    with pytest.raises(ValueError, match="rate must be positive"):
        Reporter([].append, rate=rate)


def test_a_full_queue_drops_without_blocking() -> None:
    clock, build = ManualClock(), Builder()
    q: queue.Queue[Any] = queue.Queue(maxsize=1)
    q.put("earlier")
    reporter = Reporter(q.put_nowait, rate=10.0, clock=clock)

    started = time.perf_counter()
    assert reporter.maybe_publish(build) is False
    assert time.perf_counter() - started < 1.0
    assert (reporter.sent, reporter.dropped, build.calls) == (0, 1, 1)
    assert q.get_nowait() == "earlier" and q.empty()

    # The next due sample goes through once there is room.
    clock.now = 0.1
    assert reporter.maybe_publish(build) is True
    assert (reporter.sent, reporter.dropped) == (1, 1)
    assert q.get_nowait() == 2


def test_publish_to_a_full_queue_counts_a_drop() -> None:
    q: queue.Queue[Any] = queue.Queue(maxsize=1)
    reporter = Reporter(q.put_nowait, clock=ManualClock())
    assert reporter.publish("a") is True
    assert reporter.publish("b") is False
    assert reporter.publish("c") is False
    assert (reporter.sent, reporter.dropped) == (1, 2)
    assert q.get_nowait() == "a"


@settings(max_examples=50, deadline=None)
@given(st.lists(st.sampled_from(["call", "drain", "tick"]), max_size=60))
def test_sent_and_dropped_account_for_every_attempt(steps: list[str]) -> None:
    clock, build = ManualClock(), Builder()
    q: queue.Queue[Any] = queue.Queue(maxsize=1)
    reporter = Reporter(q.put_nowait, rate=4.0, clock=clock)
    received = 0
    for step in steps:
        if step == "call":
            reporter.maybe_publish(build)
        elif step == "drain" and not q.empty():
            q.get_nowait()
            received += 1
        elif step == "tick":
            clock.advance(0.25)
    assert reporter.sent + reporter.dropped == build.calls
    assert reporter.sent == received + q.qsize()


def test_a_full_multiprocessing_queue_drops_without_blocking() -> None:
    q: Any = multiprocessing.get_context("spawn").Queue(maxsize=1)
    try:
        q.put_nowait("earlier")
        build = Builder()
        reporter = Reporter(q.put_nowait, rate=10.0, clock=ManualClock())
        started = time.perf_counter()
        assert reporter.maybe_publish(build) is False
        assert reporter.publish("final") is False
        assert time.perf_counter() - started < 1.0
        assert (reporter.sent, reporter.dropped, build.calls) == (0, 2, 1)
    finally:
        q.close()
        q.join_thread()


def test_errors_other_than_full_are_not_swallowed() -> None:
    def broken(_: object) -> None:
        raise RuntimeError("boom")

    reporter = Reporter(broken, clock=ManualClock())
    with pytest.raises(RuntimeError, match="boom"):
        reporter.maybe_publish(Builder())
    assert (reporter.sent, reporter.dropped) == (0, 0)


def test_nothing_to_report_sends_nothing() -> None:
    sink: list[Any] = []
    reporter = Reporter(sink.append, clock=ManualClock())
    assert reporter.maybe_publish(lambda: None) is False
    assert reporter.publish(None) is False
    assert sink == [] and (reporter.sent, reporter.dropped) == (0, 0)
