"""Starting a generation of ranks through its public function: every rank ready on the devices planned,
and a start that cannot finish (no rank ready in time) named rank by rank."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from uc_jupyter.distributed import RankStartError
from uc_jupyter.distributed.launch import Placement, placement_for
from uc_jupyter.distributed.protocol import Output
from uc_jupyter.distributed.start import start_ranks
from uc_jupyter.telemetry.collector import Collector


@pytest.fixture
def here() -> Iterator[Placement]:
    placement = placement_for(None)  # this machine
    yield placement
    placement.close()


def test_every_rank_is_ready_on_the_devices_planned(here: Placement) -> None:
    printed: list[tuple[int, Output]] = []
    generation = start_ranks(here, 2, "cpu", "auto", "alice", Collector(), 120.0, lambda r, o: printed.append((r, o)))
    try:
        assert (generation.devices, generation.backend) == ("cpu", "gloo")  # "auto" on CPUs
        assert [h.rank for h in generation.ranks] == [0, 1]
        assert all(h.pid and h.running() for h in generation.ranks)  # each told its pid once ready
        assert {h.device for h in generation.ranks} == {"cpu"}
    finally:
        generation.stop(5.0)
    assert not any(h.running() for h in generation.ranks)


def test_ranks_not_ready_in_time_are_each_named(here: Placement) -> None:
    with pytest.raises(RankStartError) as raised:
        start_ranks(here, 2, "cpu", "gloo", "alice", Collector(), 0.01, lambda r, o: None)
    assert str(raised.value).startswith(
        "the rank pool could not start: rank 0: TimeoutError: did not start within 0.01 s; rank 1: TimeoutError"
    )
