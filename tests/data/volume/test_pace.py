"""How deep a stream fetches ahead, on its own (no cache, no downloads): Little's law on an injected
clock, the margin that grows while the consumer waits, the rank's shared cap, the cache's headroom,
and a fixed prefetch. The Prefetcher's use of it is in test_prefetch.py."""

from __future__ import annotations

import doctest

import pytest
from hypothesis import given
from hypothesis import strategies as st

from uc_jupyter.data.volume import pace as pace_module
from uc_jupyter.data.volume.pace import MAX_DEPTH, MIN_DEPTH, RANK_DEPTH, START_DEPTH, Pace, budget_cap, depth_cap
from uc_jupyter.storage.config import MAX_CONNECTIONS
from uc_jupyter.testing.clocks import ManualClock


def test_the_pace_keeps_little_s_law_in_flight() -> None:
    clock = ManualClock()
    pace = Pace(None, clock=clock)
    assert pace.depth() == START_DEPTH == 64  # nothing measured yet: a first window that hides a store's latency
    pace.fetched(0.1, waited=False)
    clock.now = 0.05
    pace.consumed(10)  # one file every 5 ms
    assert pace.depth() == 22  # 0.1 / 0.005 in flight, plus 2
    clock.now = 0.05 + 10.0
    pace.consumed(10)  # a slow consumer: one file a second
    assert pace.depth() == MIN_DEPTH  # never fewer


def test_the_pace_grows_its_margin_each_time_the_consumer_waited_and_caps_at_the_ceiling() -> None:
    clock = ManualClock()
    pace = Pace(None, clock=clock)
    clock.now = 10.0
    pace.consumed(10)  # a slow consumer: Little's law alone asks for the floor
    pace.fetched(0.1, waited=True)
    assert (pace.margin, pace.depth()) == (2.0, 5)  # ceil(0.1 + 2) + 2
    margins = []
    for _ in range(4):
        pace.fetched(0.1, waited=True)
        margins.append(pace.margin)
    assert margins == [4.0, 6.0, 9.0, 13.5]  # by half, at least 2: the cap within a few waits
    for _ in range(100):
        pace.fetched(0.1, waited=True)
    assert pace.margin == MAX_DEPTH and pace.depth() == MAX_DEPTH
    pace.fetched(0.1, waited=False)
    assert pace.margin == pytest.approx(MAX_DEPTH - 0.05)  # shrinks slowly while nobody waits


def test_a_rank_s_streams_share_one_ceiling_of_downloads_in_flight() -> None:
    assert [depth_cap(n) for n in (1, 2, 3, 4, 8, 1000)] == [MAX_DEPTH, MAX_DEPTH, 85, 64, 32, 4]
    assert all(n * depth_cap(n) <= RANK_DEPTH for n in range(1, 65))  # never more than a store takes at once
    clock = ManualClock()
    pace = Pace(None, clock=clock, most=depth_cap(8))
    assert pace.depth() == 32  # the first window too
    for _ in range(100):
        pace.fetched(0.1, waited=True)
    assert pace.depth() == 32


def test_a_fixed_prefetch_is_the_depth_whatever_is_measured() -> None:
    pace = Pace(3, clock=ManualClock())
    pace.fetched(5.0, waited=True)
    assert pace.depth() == 3


def test_a_cap_below_the_floor_is_raised_to_it() -> None:
    assert Pace(None, clock=ManualClock(), most=1).most == MIN_DEPTH


@given(
    room=st.floats(min_value=0, max_value=1e12, allow_nan=False),
    streams=st.integers(min_value=1, max_value=512),
    mean_size=st.floats(min_value=1, max_value=1e9, allow_nan=False),
)
def test_the_streams_windows_fit_the_cache_s_headroom_and_the_rank_s_cap(
    room: float, streams: int, mean_size: float
) -> None:
    most = budget_cap(room, streams=streams, mean_size=mean_size)
    assert MIN_DEPTH <= most <= depth_cap(streams)
    if most > MIN_DEPTH:  # above the floor, every stream's window together fits the room
        assert streams * most * mean_size <= room * (1 + 1e-9)


def test_a_store_keeps_a_connection_for_each_download_one_stream_has_in_flight() -> None:
    assert MAX_CONNECTIONS >= MAX_DEPTH  # else the deepest window would queue for connections


def test_docstring_examples() -> None:
    result = doctest.testmod(pace_module)
    assert result.attempted > 0 and result.failed == 0
