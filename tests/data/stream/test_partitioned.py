"""PartitionedDataset (uc_jupyter.data.stream.partitioned): epochs, the split over ranks and workers, and its state."""

from __future__ import annotations

import copy
import itertools
import pickle
from collections import Counter
from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
import torch.utils.data

from uc_jupyter.data.stream.partition import GrowingCount, OnUneven, StreamPositions, epoch_order
from uc_jupyter.data.stream.partitioned import Fingerprint, PartitionedDataset
from uc_jupyter.data.stream.stats import StreamCounters


class Numbers(PartitionedDataset):
    """Items 0..n-1, each yielded as its own number, counted as one file delivered."""

    def __init__(self, n: int, *, shuffle: bool = False, seed: int = 0, on_uneven: OnUneven = "pad") -> None:
        super().__init__(shuffle=shuffle, seed=seed, on_uneven=on_uneven)
        self.n = n

    def _item_count(self) -> int:
        return self.n

    def _identity(self) -> tuple[str, str]:
        return ("/Volumes/main/ml/numbers", f"n={self.n}")

    def _stream(
        self, positions: npt.NDArray[np.int64] | StreamPositions, counters: StreamCounters, stream: str
    ) -> Iterator[Any]:
        for position in positions:
            self._count(counters, stream, delivered=1, files=1)
            yield int(position)


class Tagged(Numbers):
    """Each item with the stream that yielded it."""

    def _stream(
        self, positions: npt.NDArray[np.int64] | StreamPositions, counters: StreamCounters, stream: str
    ) -> Iterator[Any]:
        for number in super()._stream(positions, counters, stream):
            yield (number, stream)


def test_each_pass_takes_the_next_epoch_and_set_epoch_goes_back() -> None:
    numbers = Numbers(20, shuffle=True, seed=7)
    first, second = list(numbers), list(numbers)
    assert first == epoch_order(20, shuffle=True, seed=7, epoch=0).tolist()
    assert second == epoch_order(20, shuffle=True, seed=7, epoch=1).tolist()
    assert sorted(first) == sorted(second) == list(range(20)) and first != second
    numbers.set_epoch(0)
    assert list(numbers) == first and list(numbers) == second  # and counts up from it again
    assert list(Numbers(20, shuffle=True, seed=7)) == first  # the same on every rank and run
    assert list(Numbers(5)) == list(Numbers(5)) == [0, 1, 2, 3, 4]


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"shuffle": "no"}, TypeError, "invalid shuffle 'no'"),
        ({"shuffle": 1}, TypeError, "invalid shuffle 1"),
        ({"seed": 1.5}, TypeError, "invalid seed 1.5"),
        ({"seed": True}, TypeError, "invalid seed True"),
        ({"seed": -1}, ValueError, "invalid seed -1"),
        ({"on_uneven": "even"}, ValueError, "invalid on_uneven 'even'"),
    ],
)
def test_settings_that_only_look_valid_are_refused(options: dict[str, Any], error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        Numbers(3, **options)


def test_an_epoch_that_is_not_a_whole_number_is_refused() -> None:
    numbers = Numbers(3)
    for epoch, error in ((True, TypeError), (-1, ValueError), (2.0, TypeError)):
        with pytest.raises(error, match="invalid epoch"):
            numbers.set_epoch(epoch)  # type: ignore[arg-type]
    assert list(numbers) == [0, 1, 2]


def test_ranks_take_strided_shares_of_one_order_evened_out(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[int, list[int]] = {}
    for rank in range(3):
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", "3")
        numbers = Numbers(10, shuffle=True, seed=1)
        seen[rank] = list(numbers)
        assert len(numbers) == 4 == len(seen[rank])  # padded: every rank the same count
    order = epoch_order(10, shuffle=True, seed=1, epoch=0).tolist()
    assert [seen[r] for r in range(3)] == [(order + order[:2])[r::3] for r in range(3)]
    assert Counter(itertools.chain(*seen.values())) == Counter(order + order[:2])


@pytest.mark.parametrize(("on_uneven", "per_rank"), [("pad", [3, 3]), ("drop", [2, 2]), ("allow", [3, 2])])
def test_the_uneven_policy_sets_each_ranks_length(
    monkeypatch: pytest.MonkeyPatch, on_uneven: OnUneven, per_rank: list[int]
) -> None:
    monkeypatch.setenv("WORLD_SIZE", "2")
    for rank, expected in enumerate(per_rank):
        monkeypatch.setenv("RANK", str(rank))
        numbers = Numbers(5, on_uneven=on_uneven)
        assert len(numbers) == expected == len(list(numbers))
        [stats] = numbers.stream_stats()
        assert (stats.padded, stats.dropped) == {"pad": (rank, 0), "drop": (0, 1 - rank), "allow": (0, 0)}[on_uneven]


def test_a_rank_left_nothing_is_told_to_pad(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ValueError, match=r"^/Volumes/main/ml/numbers: 1 items leave rank 1 of 2 nothing .*'pad'$"):
        iter(Numbers(1, on_uneven="drop"))
    assert list(Numbers(1, on_uneven="pad")) == [0]  # the one item, repeated for rank 1


def test_dataloader_workers_split_their_ranks_share() -> None:
    numbers = Tagged(7)
    loader = torch.utils.data.DataLoader(numbers, batch_size=None, num_workers=2, multiprocessing_context="fork")
    got = [tuple(item) for item in loader]
    assert sorted(got) == [(i, f"rank0-worker{i % 2}") for i in range(7)]  # worker w: the w-th of every two
    assert len(numbers) == 7  # the rank's items over all its workers


def test_without_workers_one_stream_yields_everything() -> None:
    numbers = Tagged(4)
    loader = torch.utils.data.DataLoader(numbers, batch_size=2, num_workers=0)
    batches = [batch[0].tolist() for batch in loader]
    assert batches == [[0, 1], [2, 3]]
    assert numbers.stream_position() == 4


def test_counters_and_the_stream_position_follow_the_passes() -> None:
    numbers = Numbers(6)
    assert numbers.stream_position() is None and numbers.stream_stats() == ()
    list(numbers)
    stream = iter(numbers)
    assert numbers.stream_position() == 0  # a new pass started: nothing of it yielded yet
    assert [next(stream) for _ in range(2)] == [0, 1]
    assert numbers.stream_position() == 2
    [stats] = numbers.stream_stats()
    assert (stats.epoch, stats.files, stats.shard_size, stats.resumed_epoch) == (1, 8, 6, -1)  # files: cumulative


def test_a_state_resumes_the_epoch_where_it_stopped() -> None:
    numbers = Numbers(10, shuffle=True, seed=3)
    list(numbers)  # epoch 0
    stream = iter(numbers)  # epoch 1
    taken = [next(stream) for _ in range(4)]
    state = numbers.state_dict()
    assert state["epoch"] == 1 and state["fingerprint"] == {
        "source": "/Volumes/main/ml/numbers",
        "version": "n=10",
        "seed": 3,
        "shuffle": True,
    }
    resumed = Numbers(10, shuffle=True, seed=3)
    resumed.load_state_dict(pickle.loads(pickle.dumps(state)))
    assert resumed.state_dict() == state  # before its pass: the loaded state itself
    rest = list(resumed)
    assert taken + rest == epoch_order(10, shuffle=True, seed=3, epoch=1).tolist()
    [stats] = resumed.stream_stats()
    assert stats.resumed_epoch == 1 and stats.files == 6
    assert resumed.stream_position() == 10  # with what the interrupted stream had delivered
    assert list(resumed) == epoch_order(10, shuffle=True, seed=3, epoch=2).tolist()  # then the next epoch whole


@pytest.mark.parametrize(
    ("other", "what"),
    [
        ({"n": 11}, r"the checkpoint's version is 'n=10', this dataset's is 'n=11'"),
        ({"seed": 4}, r"the checkpoint's seed is 3, this dataset's is 4"),
        ({"shuffle": False}, r"the checkpoint's shuffle is True, this dataset's is False"),
    ],
)
def test_a_state_of_other_data_is_refused_naming_what_differs(other: dict[str, Any], what: str) -> None:
    numbers = Numbers(10, shuffle=True, seed=3)
    next(iter(numbers))
    state = numbers.state_dict()
    settings: dict[str, Any] = {"n": 10, "shuffle": True, "seed": 3, **other}
    elsewhere = Numbers(settings.pop("n"), **settings)
    with pytest.raises(ValueError, match=rf"^cannot resume /Volumes/main/ml/numbers: {what}$"):
        elsewhere.load_state_dict(state)
    with pytest.raises(ValueError, match="not a Numbers state: it has no 'fingerprint'"):
        elsewhere.load_state_dict({"epoch": 0})


def test_a_copy_has_the_same_items_and_settings_but_its_own_progress() -> None:
    numbers = Numbers(5, shuffle=True, seed=2)
    list(numbers)
    twin = copy.copy(numbers)
    assert twin.fingerprint() == numbers.fingerprint() == Fingerprint("/Volumes/main/ml/numbers", "n=5", 2, True)
    assert twin.stream_position() is None and twin.stream_stats() == ()
    assert list(twin) == list(numbers)  # the same next epoch for both: the copy took the epoch count
    restored = pickle.loads(pickle.dumps(numbers))  # what a spawned worker or a rank receives
    assert list(restored) == epoch_order(5, shuffle=True, seed=2, epoch=2).tolist()


class Arriving:
    """Items still arriving (a listing under way), driven by the test: ``wait_for`` lets the rest in."""

    def __init__(self, known: int, total: int) -> None:
        self._known, self._total, self.done = known, total, False

    def known(self) -> int:
        return self._known

    def total(self) -> int | None:
        return self._total if self.done else None

    def wait_for(self, count: int) -> int:
        self._known, self.done = self._total, True
        return self._known


class Listing(Numbers):
    """Numbers whose items arrive while an unshuffled pass runs."""

    def __init__(self, arriving: Arriving, n: int, **options: Any) -> None:
        super().__init__(n, **options)
        self.arriving = arriving
        self.shards: list[int] = []  # the shard's size as known when each item was yielded
        self.started_arriving: bool | None = None

    def _arriving(self) -> GrowingCount | None:
        return None if self.arriving.done else self.arriving

    def _stream(
        self, positions: npt.NDArray[np.int64] | StreamPositions, counters: StreamCounters, stream: str
    ) -> Iterator[Any]:
        self.started_arriving = isinstance(positions, StreamPositions)
        if not isinstance(positions, StreamPositions):
            yield from super()._stream(positions, counters, stream)
            return
        index = 0
        while positions.wait_beyond(index):
            item = positions[index]
            self.shards.append(counters.shard_size)
            self._count(counters, stream, delivered=1, files=1)
            yield item
            index += 1
        self._arrived(positions, counters)


def test_an_unshuffled_pass_starts_on_items_still_arriving_and_sets_its_figures_at_the_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    listing = Listing(Arriving(known=4, total=7), 7)
    assert list(listing) == [1, 3, 5, 0]  # rank 1's share of 7, padded
    assert listing.shards[0] == 2  # known to be at least 2 from the start, while the rest arrived
    [stats] = listing.stream_stats()
    assert (stats.shard_size, stats.padded, stats.dropped) == (4, 1, 0)
    assert listing.started_arriving
    shuffled = Listing(Arriving(known=4, total=7), 7, shuffle=True)
    order = epoch_order(7, shuffle=True, seed=0, epoch=0).tolist()
    assert list(shuffled) == (order + order[:1])[1::2]  # all 7 items' order: it never starts before they are in
    assert shuffled.started_arriving is False


class Paged:
    """Items arriving page by page: ``wait_for(count)`` lets in what is asked for, or all of them."""

    def __init__(self, known: int, total: int) -> None:
        self._known, self._total = known, total
        self.done = known >= total

    def known(self) -> int:
        return self._known

    def total(self) -> int | None:
        return self._total if self.done else None

    def wait_for(self, count: int) -> int:
        self._known = min(self._total, max(self._known, count))
        self.done = self._known >= self._total
        return self._known


def test_its_length_is_known_without_waiting_for_items_still_arriving() -> None:
    """What a DataLoader compares its batch_size with: len() of a listing still arriving would wait
    for its end, so length_known says None instead, or waits only as far as it is told."""
    assert Numbers(7).length_known() == 7
    listing = Listing(Paged(known=4, total=10), 10)
    assert listing.length_known() is None  # no waiting: more may come
    assert listing.arriving.known() == 4
    assert listing.length_known(waiting_for=6) is None  # six are in, still arriving
    assert listing.length_known(waiting_for=50) == 10  # the end came before fifty
