"""How items split across ranks and DataLoader workers: properties of the pure plan, and the grid
read from torch.distributed / RANK+WORLD_SIZE / DataLoader worker info."""

from __future__ import annotations

import collections
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch.utils.data
from hypothesis import given, settings
from hypothesis import strategies as st

from uc_jupyter.catalog import get_catalog
from uc_jupyter.data import UCVolumeDataset
from uc_jupyter.data.stream.grid import current_grid, current_rank
from uc_jupyter.data.stream.partition import (
    Grid,
    OnUneven,
    Shard,
    StreamPositions,
    epoch_order,
    plan,
    rank_share,
    skipped_share,
)

POLICIES: tuple[OnUneven, ...] = ("pad", "drop", "allow")

sizes = st.integers(min_value=1, max_value=200)
world_sizes = st.sampled_from([1, 2, 3])
worker_counts = st.sampled_from([0, 1, 2, 3])  # 0 and 1 both mean one stream
seeds = st.integers(min_value=0, max_value=2**32 - 1)
epochs = st.integers(min_value=0, max_value=1000)

FAST = settings(max_examples=150, deadline=None)


def all_streams(n: int, world_size: int, num_workers: int, **options: object) -> dict[int, list[Shard]]:
    """{rank: [the shard of each of its workers]}."""
    return {
        rank: [
            plan(n, Grid(rank=rank, world_size=world_size, worker=w, num_workers=num_workers), **options)  # type: ignore[arg-type]
            for w in range(max(num_workers, 1))
        ]
        for rank in range(world_size)
    }


def per_rank(shards: list[Shard]) -> tuple[int, int, int]:
    """rank_count, padded and dropped are per-rank values: every worker's shard carries the same."""
    values = {(s.rank_count, s.padded, s.dropped) for s in shards}
    assert len(values) == 1, f"workers of one rank disagree on per-rank counts: {values}"
    return values.pop()


def delivered(streams: dict[int, list[Shard]]) -> collections.Counter[int]:
    return collections.Counter(int(i) for shards in streams.values() for s in shards for i in s.indices)


# ------------------------------------------------------------------ exactly once / pad / drop


@FAST
@given(n=sizes, world=world_sizes, workers=worker_counts, shuffle=st.booleans(), seed=seeds, epoch=epochs)
def test_allow_delivers_every_item_exactly_once(
    n: int, world: int, workers: int, shuffle: bool, seed: int, epoch: int
) -> None:
    streams = all_streams(n, world, workers, shuffle=shuffle, seed=seed, epoch=epoch, on_uneven="allow")
    assert delivered(streams) == collections.Counter(range(n))
    for rank, shards in streams.items():
        rank_count, padded, dropped = per_rank(shards)
        assert rank_count == sum(len(s.indices) for s in shards) == len(range(rank, n, world))
        assert (padded, dropped) == (0, 0)


@FAST
@given(n=sizes, world=world_sizes, workers=worker_counts, shuffle=st.booleans(), seed=seeds, epoch=epochs)
def test_pad_evens_ranks_by_repeating_from_the_start_of_the_order(
    n: int, world: int, workers: int, shuffle: bool, seed: int, epoch: int
) -> None:
    streams = all_streams(n, world, workers, shuffle=shuffle, seed=seed, epoch=epoch, on_uneven="pad")
    counts = delivered(streams)
    assert set(counts) == set(range(n))
    per_rank_total = -(-n // world)
    padded_total = 0
    for shards in streams.values():
        rank_count, padded, dropped = per_rank(shards)
        assert rank_count == sum(len(s.indices) for s in shards) == per_rank_total
        assert dropped == 0
        padded_total += padded
    repeats = counts - collections.Counter(range(n))
    assert sum(repeats.values()) == per_rank_total * world - n == padded_total
    order = epoch_order(n, shuffle=shuffle, seed=seed, epoch=epoch)
    # the repeated items are the first ones of the epoch's order (cycling when n < world size)
    assert repeats == collections.Counter(int(order[i % n]) for i in range(per_rank_total * world - n))


@FAST
@given(n=sizes, world=world_sizes, workers=worker_counts, shuffle=st.booleans(), seed=seeds, epoch=epochs)
def test_drop_trims_ranks_to_the_floor_without_repeats(
    n: int, world: int, workers: int, shuffle: bool, seed: int, epoch: int
) -> None:
    streams = all_streams(n, world, workers, shuffle=shuffle, seed=seed, epoch=epoch, on_uneven="drop")
    counts = delivered(streams)
    assert all(c == 1 for c in counts.values()), "drop repeated an item"
    dropped_total = 0
    for shards in streams.values():
        rank_count, padded, dropped = per_rank(shards)
        assert rank_count == sum(len(s.indices) for s in shards) == n // world
        assert padded == 0, f"drop reported padded={padded}"
        dropped_total += dropped
    missing = set(range(n)) - set(counts)
    assert len(missing) == n % world == dropped_total
    order = epoch_order(n, shuffle=shuffle, seed=seed, epoch=epoch)
    assert missing == {int(i) for i in order[n - n % world :]}  # the tail of the order


@pytest.mark.parametrize(
    ("n", "world", "on_uneven", "expected"),
    [
        # (indices of ranks 0.., padded per rank, dropped per rank)
        (5, 2, "pad", ([[0, 2, 4], [1, 3, 0]], [0, 1], [0, 0])),
        (5, 2, "drop", ([[0, 2], [1, 3]], [0, 0], [1, 0])),
        (5, 2, "allow", ([[0, 2, 4], [1, 3]], [0, 0], [0, 0])),
        (1, 3, "pad", ([[0], [0], [0]], [0, 1, 1], [0, 0, 0])),
        (2, 3, "drop", ([[], [], []], [0, 0, 0], [1, 1, 0])),
        (2, 3, "allow", ([[0], [1], []], [0, 0, 0], [0, 0, 0])),
    ],
)
def test_small_plans_by_hand(
    n: int, world: int, on_uneven: OnUneven, expected: tuple[list[list[int]], list[int], list[int]]
) -> None:
    shards = [plan(n, Grid(rank=r, world_size=world), on_uneven=on_uneven) for r in range(world)]
    got = ([s.indices.tolist() for s in shards], [s.padded for s in shards], [s.dropped for s in shards])
    assert got == expected


def test_module_example() -> None:
    s = plan(10, Grid(rank=1, world_size=3, worker=0, num_workers=2), on_uneven="pad")
    assert (s.indices.tolist(), s.rank_count, s.padded, s.dropped) == ([1, 7], 4, 1, 0)


# ------------------------------------------------------------------ workers within a rank


@FAST
@given(
    n=sizes,
    world=world_sizes,
    workers=worker_counts,
    shuffle=st.booleans(),
    seed=seeds,
    epoch=epochs,
    on_uneven=st.sampled_from(POLICIES),
)
def test_workers_take_disjoint_strided_slices_of_their_ranks_share(
    n: int, world: int, workers: int, shuffle: bool, seed: int, epoch: int, on_uneven: OnUneven
) -> None:
    order = epoch_order(n, shuffle=shuffle, seed=seed, epoch=epoch)
    streams = all_streams(n, world, workers, shuffle=shuffle, seed=seed, epoch=epoch, on_uneven=on_uneven)
    for rank, shards in streams.items():
        share, _, _ = rank_share(order, rank, world, on_uneven)
        if on_uneven == "allow":
            assert share.tolist() == order[rank::world].tolist()
        stride = max(workers, 1)
        assert len(shards) == stride
        for w, shard in enumerate(shards):
            assert shard.indices.dtype == np.int64
            assert shard.indices.tolist() == share[w::stride].tolist()
        # interleaving the workers' streams gives back the share: every position exactly once
        rebuilt = np.empty(len(share), dtype=np.int64)
        for w, shard in enumerate(shards):
            rebuilt[w::stride] = shard.indices
        assert rebuilt.tolist() == share.tolist()


@given(n=sizes, world=world_sizes, on_uneven=st.sampled_from(POLICIES), seed=seeds, epoch=epochs)
def test_zero_and_one_workers_are_the_same_single_stream(
    n: int, world: int, on_uneven: OnUneven, seed: int, epoch: int
) -> None:
    for rank in range(world):
        zero, one = (
            plan(
                n,
                Grid(rank=rank, world_size=world, num_workers=k),
                shuffle=True,
                seed=seed,
                epoch=epoch,
                on_uneven=on_uneven,
            )
            for k in (0, 1)
        )
        assert zero.indices.tolist() == one.indices.tolist()
        assert (zero.rank_count, zero.padded, zero.dropped) == (one.rank_count, one.padded, one.dropped)
        assert len(zero.indices) == zero.rank_count
    assert Grid(num_workers=0).workers == Grid(num_workers=1).workers == 1


# ------------------------------------------------------------------ epoch order


ORDER_SNIPPET = "; ".join(
    [
        "from uc_jupyter.data.stream.partition import epoch_order",
        "print(epoch_order(50, shuffle=True, seed=7, epoch=3).tolist())",
    ]
)


def test_epoch_order_is_the_same_in_a_fresh_process() -> None:
    here = epoch_order(50, shuffle=True, seed=7, epoch=3)
    assert here.tolist() == epoch_order(50, shuffle=True, seed=7, epoch=3).tolist()
    out = subprocess.run(
        [sys.executable, "-c", ORDER_SNIPPET], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert out.strip() == str(here.tolist())


@given(n=st.integers(min_value=0, max_value=200), seed=seeds, epoch=epochs)
def test_epoch_order_is_a_repeatable_permutation(n: int, seed: int, epoch: int) -> None:
    order = epoch_order(n, shuffle=True, seed=seed, epoch=epoch)
    assert order.dtype == np.int64
    assert sorted(order.tolist()) == list(range(n))
    assert order.tolist() == epoch_order(n, shuffle=True, seed=seed, epoch=epoch).tolist()
    assert epoch_order(n, shuffle=False, seed=seed, epoch=epoch).tolist() == list(range(n))


@pytest.mark.parametrize(
    ("a", "b"),
    [((7, 3), (7, 4)), ((7, 3), (8, 3)), ((0, 0), (0, 1)), ((0, 1), (1, 0))],
    ids=["next-epoch", "other-seed", "epoch-0-1", "seed-epoch-swapped"],
)
def test_different_seed_or_epoch_gives_a_different_order(a: tuple[int, int], b: tuple[int, int]) -> None:
    first = epoch_order(50, shuffle=True, seed=a[0], epoch=a[1])
    second = epoch_order(50, shuffle=True, seed=b[0], epoch=b[1])
    assert first.tolist() != second.tolist()


def test_every_rank_sees_the_same_epoch_order() -> None:
    """Ranks build the order independently; their shares must still tile it (pad, n divisible)."""
    shards = [plan(12, Grid(rank=r, world_size=3), shuffle=True, seed=5, epoch=2) for r in range(3)]
    order = epoch_order(12, shuffle=True, seed=5, epoch=2)
    for r, shard in enumerate(shards):
        assert shard.indices.tolist() == order[r::3].tolist()


# ------------------------------------------------------------------ rank_count == len(dataset)


@given(
    n=sizes,
    world=world_sizes,
    workers=worker_counts,
    on_uneven=st.sampled_from(POLICIES),
    seed=seeds,
    epoch=epochs,
)
def test_rank_count_does_not_depend_on_worker_shuffle_or_epoch(
    n: int, world: int, workers: int, on_uneven: OnUneven, seed: int, epoch: int
) -> None:
    expected = {"pad": lambda r: -(-n // world), "drop": lambda r: n // world}.get(
        on_uneven, lambda r: len(range(r, n, world))
    )
    for rank in range(world):
        as_len = plan(n, Grid(rank=rank, world_size=world), on_uneven=on_uneven).rank_count
        assert as_len == expected(rank)
        for w in range(max(workers, 1)):
            grid = Grid(rank=rank, world_size=world, worker=w, num_workers=workers)
            shard = plan(n, grid, shuffle=True, seed=seed, epoch=epoch, on_uneven=on_uneven)
            assert shard.rank_count == as_len


@pytest.fixture
def seven_files(isolated_home: Path) -> str:
    cat = get_catalog()
    cat.create_catalog("main")
    cat.create_schema("main.ml")
    volume = cat.create_volume("main.ml.seven")
    folder = Path(volume.storage_location.removeprefix("file://"))
    for i in range(7):
        (folder / f"f{i}.txt").write_text(str(i))
    return volume.path


@pytest.mark.parametrize("on_uneven", POLICIES)
@pytest.mark.parametrize("world", [1, 2, 3])
def test_dataset_len_is_the_plans_rank_count(
    seven_files: str, monkeypatch: pytest.MonkeyPatch, world: int, on_uneven: OnUneven
) -> None:
    for rank in range(world):
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", str(world))
        ds = UCVolumeDataset(seven_files, on_uneven=on_uneven)
        expected = plan(7, Grid(rank=rank, world_size=world), on_uneven=on_uneven).rank_count
        assert len(ds) == expected == len(list(ds))


# ------------------------------------------------------------------ invalid input


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Grid(rank=2, world_size=2), "rank 2 of world size 2"),
        (lambda: Grid(rank=-1, world_size=2), "rank -1"),
        (lambda: Grid(world_size=0), "world size 0"),
        (lambda: Grid(worker=3, num_workers=2), "worker 3 of 2"),
        (lambda: Grid(worker=1, num_workers=0), "worker 1 of 0"),
        (lambda: plan(10, Grid(), on_uneven="bogus"), "'bogus'"),  # type: ignore[arg-type]
        (lambda: plan(10, Grid(world_size=3), on_uneven="bogus"), "'bogus'"),  # type: ignore[arg-type]
    ],
    ids=[
        "rank-too-big",
        "rank-negative",
        "world-zero",
        "worker-too-big",
        "worker-of-zero",
        "policy",
        "policy-3",
    ],
)
def test_invalid_input_names_the_bad_value(make: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()  # type: ignore[operator]


# ------------------------------------------------------------------ grid.py


@pytest.fixture
def no_rank_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    return monkeypatch


def test_rank_without_environment_is_0_of_1(no_rank_env: pytest.MonkeyPatch) -> None:
    assert current_rank() == (0, 1)
    assert current_grid() == Grid(rank=0, world_size=1, worker=0, num_workers=1)


@pytest.mark.parametrize(("rank", "world"), [(0, 1), (1, 4), (3, 4)])
def test_rank_comes_from_the_environment(no_rank_env: pytest.MonkeyPatch, rank: int, world: int) -> None:
    no_rank_env.setenv("RANK", str(rank))
    no_rank_env.setenv("WORLD_SIZE", str(world))
    assert current_rank() == (rank, world)
    assert current_grid() == Grid(rank=rank, world_size=world, worker=0, num_workers=1)


@pytest.mark.parametrize("only", ["RANK", "WORLD_SIZE"])
def test_one_variable_without_the_other_names_both(no_rank_env: pytest.MonkeyPatch, only: str) -> None:
    no_rank_env.setenv(only, "1")
    with pytest.raises(RuntimeError) as err:
        current_rank()
    assert "RANK" in str(err.value) and "WORLD_SIZE" in str(err.value)


@pytest.mark.parametrize(
    ("rank", "world"),
    [("a", "2"), ("1", "two"), ("", "2"), ("1.0", "2"), ("2", "2"), ("5", "2"), ("-1", "2"), ("0", "0")],
)
def test_bad_rank_environment_is_refused(no_rank_env: pytest.MonkeyPatch, rank: str, world: str) -> None:
    no_rank_env.setenv("RANK", rank)
    no_rank_env.setenv("WORLD_SIZE", world)
    with pytest.raises(RuntimeError, match="RANK"):
        current_rank()


class GridReport(torch.utils.data.IterableDataset[tuple[int, int, int, int]]):
    """Yields where the stream that iterates it sits."""

    def __iter__(self) -> Iterator[tuple[int, int, int, int]]:
        g = current_grid()
        yield (g.rank, g.world_size, g.worker, g.num_workers)


def test_current_grid_inside_dataloader_workers(no_rank_env: pytest.MonkeyPatch) -> None:
    no_rank_env.setenv("RANK", "1")
    no_rank_env.setenv("WORLD_SIZE", "3")
    loader = torch.utils.data.DataLoader(GridReport(), num_workers=2, batch_size=None, multiprocessing_context="fork")
    assert sorted(tuple(int(v) for v in item) for item in loader) == [(1, 3, 0, 2), (1, 3, 1, 2)]


@FAST
@given(skipped=st.integers(min_value=0, max_value=500), world_size=world_sizes, num_workers=worker_counts)
def test_the_skipped_shares_of_every_stream_add_up_and_differ_by_at_most_one(
    skipped: int, world_size: int, num_workers: int
) -> None:
    shares = [
        skipped_share(skipped, Grid(rank=rank, world_size=world_size, worker=worker, num_workers=num_workers))
        for rank in range(world_size)
        for worker in range(max(num_workers, 1))
    ]
    assert sum(shares) == skipped and max(shares) - min(shares) <= 1


# ------------------------------------------------------------------ positions while the items arrive


class Arriving:
    """Items that arrive a few at a time: ``arrive()`` makes more known, the last call all of them."""

    def __init__(self, n: int) -> None:
        self.n, self.now = n, 0

    def known(self) -> int:
        return self.now

    def total(self) -> int | None:
        return self.n if self.now == self.n else None

    def wait_for(self, count: int) -> int:
        self.now = min(self.n, max(self.now + 1, count))  # what waiting brings: more items
        return self.now


@FAST
@given(
    n=sizes,
    world=world_sizes,
    workers=worker_counts,
    policy=st.sampled_from(POLICIES),
    skip=st.integers(min_value=0, max_value=30),
    steps=st.lists(st.integers(min_value=1, max_value=60), max_size=8),
)
def test_positions_of_items_still_arriving_are_the_plans_positions(
    n: int, world: int, workers: int, policy: OnUneven, skip: int, steps: list[int]
) -> None:
    for rank in range(world):
        for worker in range(max(workers, 1)):
            grid = Grid(rank=rank, world_size=world, worker=worker, num_workers=workers)
            expected = plan(n, grid, on_uneven=policy).indices[skip:].tolist()
            items = Arriving(n)
            positions = StreamPositions(items, grid, policy, skip)
            taken: list[int] = []
            for step in steps:  # every position handed out while items arrive is the plan's own
                items.now = min(n, items.now + step)
                taken += positions[len(taken) :]
                assert taken == expected[: len(taken)]
            while positions.wait_beyond(len(taken)):
                taken += positions[len(taken) :]
            assert taken == expected
            assert len(positions) == len(expected)
            with pytest.raises(IndexError):
                positions[len(expected)]
