"""A mix epoch's plan (uc_jupyter.data.mix.epochs) split over grids by the stream machinery (data/stream/resume.py),
as Mix splits it: every source exactly once per its own epoch, on any grid, across interruptions and weight changes."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from uc_jupyter.data.mix.epochs import MixPlan, source_epochs, source_items
from uc_jupyter.data.stream.partition import Grid, plan
from uc_jupyter.data.stream.resume import Segment, segment_shard

Sample = tuple[int, int, int]  # (source, its own epoch, item)

sizes_st = st.lists(st.integers(min_value=1, max_value=12), min_size=1, max_size=5)
until_st = st.sampled_from(["all_seen", "first_exhausted"])


def weights_for(sizes: list[int]) -> st.SearchStrategy[list[int]]:
    return st.lists(st.integers(min_value=0, max_value=6), min_size=len(sizes), max_size=len(sizes)).filter(any)


def grids(world: int, workers: int) -> list[Grid]:
    return [
        Grid(rank=r, world_size=world, worker=w, num_workers=workers)
        for r in range(world)
        for w in range(max(workers, 1))
    ]


def samples(mix: MixPlan, positions: np.ndarray, sizes: list[int], shuffle: bool = True) -> list[Sample]:
    """What Mix._stream reads at ``positions``: each sample's source, its own epoch and its item."""
    sources, taken = mix.picks(positions.astype(np.int64))
    found: list[Sample] = []
    for j, t in zip(sources.tolist(), taken.tolist(), strict=True):
        item = source_items(np.array([t]), sizes[j], shuffle=shuffle, seed=j)[0]
        found.append((j, int(source_epochs(np.array([t]), sizes[j])[0]), int(item)))
    return found


def assert_once_per_source_epoch(delivered: list[Sample], sizes: list[int]) -> None:
    by_epoch: dict[tuple[int, int], list[int]] = defaultdict(list)
    for source, epoch, item in delivered:
        by_epoch[(source, epoch)].append(item)
    for (source, epoch), items in by_epoch.items():
        assert len(items) == len(set(items)), f"source {source} epoch {epoch} repeats an item"
        later = any(s == source and e > epoch for s, e in by_epoch)
        if later:  # an epoch the source has moved on from holds all its items
            assert sorted(items) == list(range(sizes[source]))


@settings(max_examples=80, deadline=None)
@given(st.data(), sizes_st, until_st, st.integers(1, 3), st.integers(0, 3), st.integers(1, 4))
def test_every_source_is_read_once_per_its_own_epoch_on_any_grid(
    data: st.DataObject, sizes: list[int], until: str, world: int, workers: int, epochs: int
) -> None:
    weights = data.draw(weights_for(sizes))
    mix = MixPlan.first(weights, sizes, until)  # type: ignore[arg-type]
    delivered: list[Sample] = []
    for _ in range(epochs):
        for grid in grids(world, workers):
            shard = plan(mix.length, grid, on_uneven="allow")
            delivered += samples(mix, shard.indices, sizes)
        mix = mix.following(weights, sizes, until)  # type: ignore[arg-type]
    assert_once_per_source_epoch(delivered, sizes)
    live = [j for j, w in enumerate(weights) if w]
    counts = Counter(s for s, _, _ in delivered)
    assert set(counts) <= set(live)


@settings(max_examples=80, deadline=None)
@given(st.data(), sizes_st, until_st, st.integers(1, 3), st.integers(0, 2), st.integers(1, 3), st.integers(0, 2))
def test_an_epoch_interrupted_and_resumed_on_another_grid_delivers_each_source_sample_once(
    data: st.DataObject, sizes: list[int], until: str, world: int, workers: int, new_world: int, new_workers: int
) -> None:
    weights = data.draw(weights_for(sizes))
    mix = MixPlan.first(weights, sizes, until)  # type: ignore[arg-type]
    before: list[Sample] = []
    delivered_counts: list[int] = []
    for grid in grids(world, workers):
        indices = plan(mix.length, grid, on_uneven="allow").indices
        stopped = data.draw(st.integers(0, len(indices)))  # the interruption point of this stream
        delivered_counts.append(stopped)
        before += samples(mix, indices[:stopped], sizes)
    segment = Segment(world, workers, "allow", tuple(delivered_counts))
    after: list[Sample] = []
    for grid in grids(new_world, new_workers):
        shard = segment_shard(mix.length, grid, shuffle=False, seed=0, epoch=0, on_uneven="allow", prior=[segment])
        after += samples(mix, shard.indices, sizes)
    whole = samples(mix, np.arange(mix.length), sizes)
    assert Counter(before + after) == Counter(whole)  # nothing repeated, nothing skipped
    assert_once_per_source_epoch(before + after, sizes)


@settings(max_examples=60, deadline=None)
@given(st.data(), sizes_st, until_st, st.integers(1, 3))
def test_weights_changed_between_mix_epochs_keep_every_source_epoch_whole(
    data: st.DataObject, sizes: list[int], until: str, epochs: int
) -> None:
    mix = MixPlan.first(data.draw(weights_for(sizes)), sizes, until)  # type: ignore[arg-type]
    delivered: list[Sample] = []
    for _ in range(epochs):
        delivered += samples(mix, np.arange(mix.length), sizes)
        mix = mix.following(data.draw(weights_for(sizes)), sizes, until)  # type: ignore[arg-type]
    assert_once_per_source_epoch(delivered, sizes)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 3), st.integers(0, 3), st.integers(1, 4), st.integers(1, 3))
def test_each_round_of_steps_of_the_whole_job_takes_the_next_window_of_the_schedule(
    world: int, workers: int, batch: int, rounds: int
) -> None:
    # The window guarantee is over the schedule; the job takes it in order: round k (num_workers
    # steps of every rank, one step without workers) is the k-th window of world x workers x batch.
    window = world * max(workers, 1) * batch
    length = window * rounds
    for k in range(rounds):
        taken: list[int] = []
        for grid in grids(world, workers):
            indices = plan(length, grid, on_uneven="allow").indices
            taken += indices[k * batch : (k + 1) * batch].tolist()  # this worker's k-th batch
        assert sorted(taken) == list(range(k * window, (k + 1) * window))


def test_a_plan_reads_back_from_its_state_and_bad_states_are_refused() -> None:
    mix = MixPlan.first([1, 2], [3, 4], "all_seen").following([5, 1], [3, 4], "all_seen")
    again = MixPlan.from_state(mix.to_state())
    assert again == mix and again.schedule.tolist() == mix.schedule.tolist()
    with pytest.raises(ValueError, match="^not a mix schedule state"):
        MixPlan.from_state({"weights": ["1"], "length": 3, "bases": [0, 0]})
    assert replace(mix, bases=(0, 0)) != mix


@settings(max_examples=80, deadline=None)
@given(st.data(), sizes_st, until_st, st.integers(1, 3), st.integers(0, 2), st.integers(0, 3))
def test_weights_changed_mid_epoch_rule_from_the_resume_point_and_nothing_is_repeated_or_skipped(
    data: st.DataObject, sizes: list[int], until: str, world: int, workers: int, epochs: int
) -> None:
    weights, new = data.draw(weights_for(sizes)), data.draw(weights_for(sizes))
    mix = MixPlan.first(weights, sizes, until)  # type: ignore[arg-type]
    delivered = np.zeros(mix.length, dtype=bool)
    for grid in grids(world, workers):  # each stream interrupted anywhere: holes below the frontier
        indices = plan(mix.length, grid, on_uneven="allow").indices
        delivered[indices[: data.draw(st.integers(0, len(indices)))]] = True
    taken: dict[int, list[int]] = defaultdict(list)
    sources, numbers = mix.picks(np.flatnonzero(delivered))
    for j, m in zip(sources.tolist(), numbers.tolist(), strict=True):
        taken[j].append(m)
    rest = mix.rebased(delivered, new, until)  # type: ignore[arg-type]
    assert rest.weights == tuple(Fraction(w) for w in new)  # the new weights from the resume point
    current = rest
    for _ in range(epochs + 1):
        sources, numbers = current.picks(np.arange(current.length))
        for j, m in zip(sources.tolist(), numbers.tolist(), strict=True):
            taken[j].append(m)
        current = current.following(new, sizes, until)  # type: ignore[arg-type]
    for j in range(len(sizes)):  # every sample number below where the source stands, once, but those still owed
        owed = set(current.holes[j]) if current.holes else set()
        assert sorted(taken[j]) == sorted(set(range(current.bases[j])) - owed), j
