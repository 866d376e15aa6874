"""Mix (uc_jupyter.data.mix.dataset) over small in-memory sources, property-tested: interrupted at any point and
resumed on the same ranks or others, with the same weights or new ones, each source delivers each item of its
epoch once. The sources are PartitionedDatasets of numbers (as tests/data/stream/test_partitioned.py's), so
hundreds of mixes run in seconds; tests/data/mix/test_dataset.py runs the same over real volumes and tables."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from uc_jupyter.data import Mix
from uc_jupyter.data.stream.partition import StreamPositions
from uc_jupyter.data.stream.partitioned import PartitionedDataset
from uc_jupyter.data.stream.stats import StreamCounters


class Letters(PartitionedDataset):
    """Source ``name``: items ``(name, 0) .. (name, n - 1)``, shuffled by its own seed."""

    def __init__(self, name: str, n: int) -> None:
        super().__init__(shuffle=True, seed=len(name) + n, on_uneven="pad")
        self.name, self.n = name, n

    def _item_count(self) -> int:
        return self.n

    def _identity(self) -> tuple[str, str]:
        return (self.name, f"n={self.n}")

    def _stream(
        self, positions: npt.NDArray[np.int64] | StreamPositions, counters: StreamCounters, stream: str
    ) -> Iterator[Any]:
        for position in positions:
            self._count(counters, stream, delivered=1, files=1)
            yield (self.name, int(position))


def mix_of(sizes: list[int], weights: list[int]) -> Mix:
    return Mix([Letters(chr(97 + i), n) for i, n in enumerate(sizes)], weights, on_uneven="allow")


def on_rank(rank: int, world: int) -> None:
    os.environ["RANK"], os.environ["WORLD_SIZE"] = str(rank), str(world)


def off_ranks() -> None:
    os.environ.pop("RANK", None)
    os.environ.pop("WORLD_SIZE", None)


sizes_st = st.lists(st.integers(1, 7), min_size=1, max_size=4)


@settings(max_examples=60, deadline=None)
@given(st.data(), sizes_st, st.integers(1, 3))
def test_interrupted_anywhere_a_mix_resumes_exactly_on_its_grid_or_another(
    data: st.DataObject, sizes: list[int], new_world: int
) -> None:
    weights = data.draw(st.lists(st.integers(0, 4), min_size=len(sizes), max_size=len(sizes)).filter(any))
    off_ranks()
    whole = list(mix_of(sizes, weights))
    assume(len(whole) >= new_world)  # else a rank has nothing: refused as for any dataset (use on_uneven="pad")
    mix = mix_of(sizes, weights)
    stream = iter(mix)
    stop = data.draw(st.integers(0, len(whole)))
    taken = [next(stream) for _ in range(stop)]
    state = mix.state_dict()
    same = mix_of(sizes, weights)
    same.load_state_dict(state)
    assert taken + list(same) == whole  # the same grid: in order
    rest: list[Any] = []
    try:
        for rank in range(new_world):
            on_rank(rank, new_world)
            other = mix_of(sizes, weights)
            other.load_state_dict(state)
            rest += list(other)
    finally:
        off_ranks()
    assert Counter(taken + rest) == Counter(whole)  # another grid: each sample left, once


@settings(max_examples=60, deadline=None)
@given(st.data(), sizes_st, st.integers(1, 3))
def test_weights_changed_at_resume_keep_every_source_epoch_whole(
    data: st.DataObject, sizes: list[int], epochs: int
) -> None:
    def weights() -> list[int]:
        return data.draw(st.lists(st.integers(0, 4), min_size=len(sizes), max_size=len(sizes)).filter(any))

    off_ranks()
    mix = mix_of(sizes, weights())
    delivered: list[tuple[str, int]] = []
    for _ in range(epochs):
        stream = iter(mix)
        stop = data.draw(st.integers(0, len(mix)))
        delivered += [next(stream) for _ in range(stop)]
        state = mix.state_dict()
        mix = mix_of(sizes, weights())  # a new job with new weights resumes it
        mix.load_state_dict(state)
        delivered += list(mix)  # the interrupted epoch, with the weights it began with
    for i, n in enumerate(sizes):
        items = [item for name, item in delivered if name == chr(97 + i)]
        for start in range(0, len(items), n):  # each of the source's own epochs: every item at most once
            epoch = items[start : start + n]
            assert len(set(epoch)) == len(epoch)
            if len(epoch) == n:
                assert sorted(epoch) == list(range(n))
