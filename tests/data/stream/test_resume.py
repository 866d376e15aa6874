"""The pure core of resuming an epoch on another grid: every item left is delivered exactly once."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from uc_jupyter.data.stream.partition import Grid, plan
from uc_jupyter.data.stream.position import LoaderPosition
from uc_jupyter.data.stream.resume import Position, Segment, remaining, resume_point, segment_shard

POLICIES = ("pad", "drop", "allow")


def streams(world: int, workers: int) -> list[Grid]:
    return [
        Grid(rank=r, world_size=world, worker=w, num_workers=workers)
        for r in range(world)
        for w in range(max(workers, 1))
    ]


def run_segment(
    n: int, world: int, workers: int, policy: str, prior: tuple[Segment, ...], fractions: list[float], epoch: int
) -> tuple[Segment, list[int], int, int]:
    """Run one segment on a grid, each stream stopping after its fraction of its items: the segment,
    the items delivered in order of streams, and the padding and dropping its shards report."""
    delivered, counts, padded, dropped = [], [], 0, 0
    for index, grid in enumerate(streams(world, workers)):
        shard = segment_shard(n, grid, shuffle=True, seed=5, epoch=epoch, on_uneven=policy, prior=prior)  # type: ignore[arg-type]
        take = int(len(shard.indices) * fractions[index % len(fractions)])
        delivered += shard.indices[:take].tolist()
        counts.append(take)
        if grid.worker == 0:
            padded, dropped = padded + shard.padded, dropped + shard.dropped
    return Segment(world, workers, policy, tuple(counts)), delivered, padded, dropped  # type: ignore[arg-type]


grids = st.tuples(st.integers(1, 5), st.integers(0, 4), st.sampled_from(POLICIES))


@settings(max_examples=300, deadline=None)
@given(
    n=st.integers(0, 60),
    chain=st.lists(grids, min_size=1, max_size=4),
    fractions=st.lists(st.floats(0, 1), min_size=1, max_size=6),
    last=grids,
)
def test_every_item_is_delivered_once_across_interruptions_on_any_grids(
    n: int, chain: list[tuple[int, int, str]], fractions: list[float], last: tuple[int, int, str]
) -> None:
    """An epoch interrupted on up to four grids in turn, then run to its end on a last one: with
    "allow" every item exactly once; with "pad" the extra deliveries are exactly the padding the
    shards report; with "drop" the missing ones exactly the remainder they report."""
    prior: tuple[Segment, ...] = ()
    seen: list[int] = []
    for world, workers, policy in chain:
        if n < world and policy != "pad" and not prior:
            continue  # a plain epoch refuses ranks with nothing (UCVolumeDataset says so)
        segment, delivered, _, _ = run_segment(n, world, workers, policy, prior, fractions, epoch=2)
        seen += delivered
        prior = (*prior, segment)
    world, workers, policy = last
    _, delivered, padded, dropped = run_segment(n, world, workers, policy, prior, [1.0], epoch=2)
    seen += delivered
    left = len(remaining(n, shuffle=True, seed=5, epoch=2, segments=prior))
    counts = Counter(seen)
    assert set(counts) <= set(range(n))
    repeats = sum(c - 1 for c in counts.values())
    # Earlier segments' own padding may repeat too; the last segment's rule is what this checks.
    assert len(delivered) == left + padded - dropped
    if all(p == "allow" for _, _, p in [*chain, last]):
        assert repeats == 0 and len(counts) == n
    if policy == "allow":
        assert len(set(delivered)) == len(delivered) == left
    if policy == "drop":
        assert len(counts) == n - dropped


def test_same_grid_continues_the_streams_where_they_stopped() -> None:
    """Resumed on the grid of the last segment, each stream continues its own shard: the items an
    uninterrupted run delivers, in its order."""
    n, world, workers = 23, 2, 3
    full = {
        g: plan(n, g, shuffle=True, seed=1, epoch=4, on_uneven="pad").indices.tolist() for g in streams(world, workers)
    }
    counts = (2, 0, 5, 1, 3, 4)
    position = Position(4, (Segment(world, workers, "pad", counts),), next_stream=(2, 1))
    for rank in range(world):
        point = resume_point(position, rank, world, workers, "pad")
        assert point.prior == () and point.rotate == (2, 1)[rank]
        for worker in range(workers):
            grid = Grid(rank=rank, world_size=world, worker=worker, num_workers=workers)
            shard = segment_shard(n, grid, shuffle=True, seed=1, epoch=4, on_uneven="pad", prior=point.prior)
            assert shard.indices[point.skip[worker] :].tolist() == full[grid][counts[rank * workers + worker] :]


def test_a_new_grid_after_a_same_grid_resume_keeps_both_segments() -> None:
    first = Segment(2, 1, "allow", (3, 3))
    position = Position(0, (first,))
    assert resume_point(position, 0, 3, 1, "allow").prior == (first,)  # a new segment
    assert resume_point(position, 0, 2, 1, "pad").prior == (first,)  # another policy: new too
    assert resume_point(position, 0, 2, 0, "allow").prior == ()  # 0 and 1 workers: one stream


def test_a_position_taken_without_distributed_resumes_only_on_its_grid() -> None:
    position = Position(1, (Segment(2, 1, "pad", (4, -1)),))
    assert resume_point(position, 0, 2, 1, "pad").skip == (4,)
    with pytest.raises(ValueError, match="holds no data position for rank 1 .*resume on its grid .2 x 1"):
        resume_point(position, 0, 3, 1, "pad")
    with pytest.raises(ValueError, match="cannot resume rank 1: the checkpoint holds no data position for it"):
        resume_point(position, 1, 2, 1, "pad")


def test_counts_beyond_a_streams_items_are_refused() -> None:
    with pytest.raises(ValueError, match="rank 1 worker 0 delivered 9 items of an epoch that gives it 5"):
        remaining(10, shuffle=False, seed=0, epoch=0, segments=[Segment(2, 1, "pad", (1, 9))])


def test_positions_read_back_and_old_states_read_as_one_segment() -> None:
    position = Position(3, (Segment(2, 2, "drop", (1, 2, 3, 4)), Segment(3, 0, "allow", (0, 1, 2))), (1, 0))
    assert Position.from_state(position.to_state()) == position
    old = {
        "fingerprint": {"world_size": 2, "num_workers": 1, "on_uneven": "pad"},
        "epoch": 2,
        "streams": {"rank0-worker0": 7},
    }
    assert Position.from_state(old) == Position(2, (Segment(2, 1, "pad", (7, -1)),))
    for bad in ({"epoch": 1, "segments": [[2, 1, "pad", [1]]]}, {"epoch": "x"}, {"segments": []}):
        with pytest.raises(ValueError, match="not a data position"):
            Position.from_state(bad)


def test_an_empty_rest_gives_every_stream_nothing() -> None:
    done = Segment(1, 1, "allow", (5,))
    shard = segment_shard(5, Grid(rank=1, world_size=2), shuffle=False, seed=0, epoch=0, on_uneven="pad", prior=[done])
    assert shard.indices.tolist() == [] and shard.padded == 0
    assert np.array_equal(remaining(5, shuffle=False, seed=0, epoch=0, segments=[done]), np.zeros(0))


def test_a_pass_that_delivered_nothing_keeps_the_position_it_resumed() -> None:
    """A state taken on a new grid before any batch is the loaded one: the segments and the streams
    that come next, so a resume on the old grid turns the workers as an uninterrupted run would."""
    loaded = {"fingerprint": {}, **Position(2, (Segment(1, 2, "pad", (3, 2)),), (1,)).to_state()}
    position = LoaderPosition(rank=0, workers=3)  # another worker count: a new segment
    position.load(loaded, Grid(rank=0, world_size=1, worker=0, num_workers=3), "pad")
    position.begin()
    assert position.state({}, 1, "pad") == loaded
    position.received(worker=0, items=2, position=2)
    assert position.state({}, 1, "pad")["segments"][-1] == [1, 3, "pad", [2, 0, 0]]
