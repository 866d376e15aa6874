"""uc_jupyter.testing.s3_shaping: the S3 test server's latency draws, bandwidth caps and in-flight
meter, on clocks the tests own."""

from __future__ import annotations

import doctest
import math
import statistics

import pytest

from uc_jupyter.testing import s3_shaping
from uc_jupyter.testing.clocks import ManualClock
from uc_jupyter.testing.s3_shaping import InFlight, Latency, Link


def test_latency_draws_are_lognormal_around_the_median_and_reproducible() -> None:
    draws = [Latency(0.03, sigma=0.6, seed=7).draw() for _ in range(3)]
    assert len(set(draws)) == 1  # a fresh generator with the same seed draws the same first value
    latency = Latency(0.03, sigma=0.6, seed=7)
    sample = [latency.draw() for _ in range(20_001)]
    again = Latency(0.03, sigma=0.6, seed=7)
    assert [again.draw() for _ in range(20_001)] == sample
    assert statistics.median(sample) == pytest.approx(0.03, rel=0.03)
    assert statistics.fmean(sample) == pytest.approx(latency.mean, rel=0.03)
    assert latency.mean == pytest.approx(0.03 * math.exp(0.18))
    assert statistics.quantiles(sample, n=100)[98] == pytest.approx(0.03 * math.exp(2.326 * 0.6), rel=0.08)
    assert min(sample) > 0


def test_a_latency_without_sigma_is_constant_and_bad_values_are_refused() -> None:
    assert {Latency(0.02).draw() for _ in range(5)} == {0.02}
    assert Latency(0.0, sigma=0.6).draw() == 0.0
    with pytest.raises(ValueError, match="invalid latency median -1"):
        Latency(-1)


def test_each_connection_passes_at_most_its_own_bandwidth() -> None:
    clock = ManualClock()
    link = Link(connection_bandwidth=25e6, clock=clock)
    assert link.delay(25_000_000, "a") == 1.0
    assert link.delay(25_000_000, "b") == 1.0  # another connection is not held up by the first
    assert link.delay(25_000_000, "a") == 2.0  # bytes queue behind those of their own connection
    clock.now = 5.0
    assert link.delay(2_500_000, "a") == pytest.approx(0.1)  # idle since 2 s: no backlog left
    assert link.delayed_seconds == pytest.approx(4.1)
    link.reset()
    assert link.delayed_seconds == 0.0


def test_the_shared_link_caps_all_connections_together() -> None:
    clock = ManualClock()
    link = Link(bandwidth=50e6, connection_bandwidth=25e6, clock=clock)
    waits = [link.delay(25_000_000, name) for name in "abcd"]
    assert waits == [1.0, 1.0, 1.5, 2.0]  # two connections fill the link; the third and fourth queue
    assert Link(clock=clock).delay(10**9, "a") == 0.0  # no cap: no wait
    with pytest.raises(ValueError, match="give bytes/s >= 0"):
        Link(bandwidth=-1)


def test_a_busy_connection_keeps_its_backlog_among_many_short_ones() -> None:
    clock = ManualClock()
    link = Link(connection_bandwidth=1e6, clock=clock)
    link.delay(10_000_000, "busy")  # busy until 10 s
    for port in range(2000):  # many short connections, each done at once
        link.delay(1, port)
        clock.advance(0.001)
    assert link.delay(1_000_000, "busy") == pytest.approx(10.0 - clock.now + 1.0)


def test_in_flight_mean_is_weighted_by_time_and_reset_starts_a_new_window() -> None:
    clock = ManualClock()
    meter = InFlight(clock=clock)
    meter.enter()
    meter.enter()
    clock.now = 1.0
    meter.leave()  # two in flight for 1 s
    clock.now = 3.0
    meter.leave()  # one for 2 s
    clock.now = 4.0  # none for 1 s
    snap = meter.snapshot()
    assert snap == {"now": 0, "peak": 2, "mean": 1.0, "busy_mean": 4 / 3, "window_seconds": 4.0}
    meter.enter()
    meter.reset()  # the one in flight stays counted in the new window
    clock.now = 6.0
    assert meter.snapshot() == {"now": 1, "peak": 1, "mean": 1.0, "busy_mean": 1.0, "window_seconds": 2.0}


def test_an_empty_window_reads_zero() -> None:
    snap = InFlight(clock=ManualClock()).snapshot()
    assert (snap["mean"], snap["busy_mean"], snap["peak"]) == (0.0, 0.0, 0)


def test_the_docstring_examples_run() -> None:
    result = doctest.testmod(s3_shaping, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
