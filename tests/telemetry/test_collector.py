"""The collector: newest sample per producer whatever the arrival order, drained from a queue."""

from __future__ import annotations

import itertools
import pickle
import queue
import random
import threading
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from uc_jupyter.telemetry.collector import Collector
from uc_jupyter.telemetry.model import MAIN_WORKER, Histogram, Sample

Producer = tuple[int, int]


def sample(producer: Producer, seq: int, **fields: object) -> Sample:
    rank, worker = producer
    return Sample(rank, worker, seq, float(seq), **fields)  # type: ignore[arg-type]


def newest(samples: list[Sample]) -> dict[Producer, Sample]:
    best: dict[Producer, Sample] = {}
    for s in samples:
        if s.producer not in best or s.seq > best[s.producer].seq:
            best[s.producer] = s
    return best


producers = st.tuples(st.integers(0, 3), st.integers(MAIN_WORKER, 3))
# Per producer, distinct seqs; the payload (files) tells samples of one producer apart.
histories = st.dictionaries(producers, st.sets(st.integers(0, 10**6), min_size=1, max_size=20), max_size=8)


@settings(max_examples=150, deadline=None)
@given(histories, st.randoms(use_true_random=False))
def test_latest_seq_wins_whatever_the_arrival_order(history: dict[Producer, set[int]], rng: random.Random) -> None:
    samples = [sample(p, seq, files=seq * 7 + 1) for p, seqs in history.items() for seq in seqs]
    rng.shuffle(samples)
    collector = Collector(clock=lambda: 0.0)
    for s in samples:
        collector.offer(s)
    held = collector.snapshot().samples
    assert dict(held) == newest(samples)
    assert {p: s.seq for p, s in held.items()} == {p: max(seqs) for p, seqs in history.items()}


def test_an_older_sample_does_not_replace_a_newer_one() -> None:
    collector = Collector()
    collector.offer(sample((0, 0), 5, files=50))
    collector.offer(sample((0, 0), 3, files=30))
    collector.offer(sample((0, 1), 1, files=1))
    held = collector.snapshot().samples
    assert held[(0, 0)].files == 50 and held[(0, 1)].files == 1
    collector.offer(sample((0, 0), 6, files=60))
    assert collector.snapshot().samples[(0, 0)].files == 60


def test_snapshot_time_comes_from_the_clock() -> None:
    collector = Collector(clock=itertools.count(100.0, 2.5).__next__)
    assert collector.snapshot().time == 100.0
    assert collector.snapshot().time == 102.5


def test_sample_time_is_not_the_snapshot_time() -> None:
    collector = Collector(clock=lambda: 42.0)
    collector.offer(sample((0, MAIN_WORKER), 9))
    snap = collector.snapshot()
    assert snap.time == 42.0 and snap.samples[(0, MAIN_WORKER)].time == 9.0


def test_an_empty_collector_gives_an_empty_snapshot() -> None:
    snap = Collector(clock=lambda: 1.0).snapshot()
    assert dict(snap.samples) == {} and snap.ranks == () and snap.fetch == Histogram()


# ---------------------------------------------------------------- drain


def test_drain_takes_everything_waiting() -> None:
    q: queue.Queue[Any] = queue.Queue()
    samples = [sample((r, w), seq) for seq in range(3) for r in range(2) for w in (MAIN_WORKER, 0)]
    for s in samples:
        q.put(s)
    collector = Collector()
    assert collector.drain(q) == len(samples)
    assert q.empty()
    assert dict(collector.snapshot().samples) == newest(samples)


def test_drain_of_an_empty_queue_returns_at_once() -> None:
    q: queue.Queue[Any] = queue.Queue()
    collector = Collector()
    started = time.perf_counter()
    assert collector.drain(q) == 0
    assert time.perf_counter() - started < 1.0
    assert dict(collector.snapshot().samples) == {}


def test_drain_ignores_what_is_not_a_sample() -> None:
    q: queue.Queue[Any] = queue.Queue()
    for item in ("junk", sample((0, 0), 1), None, {"seq": 99}, sample((1, 0), 2), 3.5):
        q.put(item)
    collector = Collector()
    collector.drain(q)
    assert q.empty()
    assert {p: s.seq for p, s in collector.snapshot().samples.items()} == {(0, 0): 1, (1, 0): 2}


@pytest.mark.parametrize(("waiting", "limit"), [(10, 4), (10, 10), (3, 10), (5, 0), (5, 1)])
def test_drain_respects_the_limit(waiting: int, limit: int) -> None:
    q: queue.Queue[Any] = queue.Queue()
    for seq in range(waiting):
        q.put(sample((0, seq), seq))  # one producer each, so the snapshot shows what was taken
    collector = Collector()
    taken = collector.drain(q, limit=limit)
    assert taken == min(waiting, limit)
    assert q.qsize() == waiting - taken
    assert sorted(collector.snapshot().samples) == [(0, w) for w in range(taken)]  # first in, first out


def test_drain_counts_towards_the_limit_in_order_and_leaves_the_rest() -> None:
    q: queue.Queue[Any] = queue.Queue()
    for seq in range(6):
        q.put(sample((0, 0), seq))
    collector = Collector()
    collector.drain(q, limit=2)
    assert collector.snapshot().samples[(0, 0)].seq == 1
    collector.drain(q)
    assert collector.snapshot().samples[(0, 0)].seq == 5
    assert q.empty()


class ClosingSource:
    """A queue that yields its items, then fails the way a closed multiprocessing queue does."""

    def __init__(self, items: list[Any], error: BaseException) -> None:
        self._items = list(items)
        self._error = error

    def get_nowait(self) -> Any:
        if self._items:
            return self._items.pop(0)
        raise self._error


@pytest.mark.parametrize(
    "error", [queue.Empty(), EOFError(), OSError("handle is closed")], ids=lambda e: type(e).__name__
)
def test_drain_stops_quietly_when_the_source_is_exhausted_or_closed(error: BaseException) -> None:
    collector = Collector()
    source = ClosingSource([sample((0, 0), 1), sample((0, 0), 2)], error)
    assert collector.drain(source) == 2
    assert collector.snapshot().samples[(0, 0)].seq == 2


# ---------------------------------------------------------------- snapshots are immutable


def test_snapshot_samples_are_read_only() -> None:
    collector = Collector()
    collector.offer(sample((0, 0), 1))
    snap = collector.snapshot()
    with pytest.raises(TypeError):
        snap.samples[(0, 1)] = sample((0, 1), 1)  # type: ignore[index]
    with pytest.raises(TypeError):
        del snap.samples[(0, 0)]  # type: ignore[attr-defined]
    assert list(snap.samples) == [(0, 0)]


def test_a_snapshot_does_not_change_when_later_samples_arrive() -> None:
    collector = Collector(clock=itertools.count().__next__)
    collector.offer(sample((0, 0), 1, files=10))
    before = collector.snapshot()
    collector.offer(sample((0, 0), 2, files=20))
    collector.offer(sample((1, 0), 1, files=5))
    assert dict(before.samples) == {(0, 0): sample((0, 0), 1, files=10)}
    assert before.time == 0
    after = collector.snapshot()
    assert {p: s.files for p, s in after.samples.items()} == {(0, 0): 20, (1, 0): 5}
    collector.clear()
    assert len(after.samples) == 2  # clearing the collector leaves earlier snapshots alone


def test_clear_empties_and_accepts_older_samples_again() -> None:
    collector = Collector()
    collector.offer(sample((0, 0), 10))
    collector.offer(sample((1, MAIN_WORKER), 3))
    collector.clear()
    assert dict(collector.snapshot().samples) == {}
    collector.offer(sample((0, 0), 1))  # a restarted producer counts from scratch
    assert collector.snapshot().samples[(0, 0)].seq == 1


# ---------------------------------------------------------------- threads


def test_concurrent_offers_keep_the_newest_per_producer() -> None:
    threads_n, per_thread = 4, 1_000
    keys: list[Producer] = [(0, MAIN_WORKER), (0, 0), (0, 1), (1, MAIN_WORKER), (1, 0)]
    collector = Collector()
    barrier = threading.Barrier(threads_n)
    plans: list[list[Sample]] = []
    for t in range(threads_n):
        # Thread t offers seqs t, t + 4, t + 8, ... of every producer, shuffled, so all threads race on each one.
        plan = [sample(keys[i % len(keys)], t + threads_n * (i // len(keys))) for i in range(per_thread)]
        random.Random(t).shuffle(plan)
        plans.append(plan)

    def offer_all(plan: list[Sample]) -> None:
        barrier.wait()
        for s in plan:
            collector.offer(s)
            if s.seq % 97 == 0:
                collector.snapshot()  # readers race with the writers too

    workers = [threading.Thread(target=offer_all, args=(plan,)) for plan in plans]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=30)
    assert not any(w.is_alive() for w in workers)
    expected = newest([s for plan in plans for s in plan])
    assert dict(collector.snapshot().samples) == expected
    assert len(expected) == len(keys)


def test_a_ranks_resumed_epoch_reaches_the_kernels_snapshot() -> None:
    """Ranks send their streams' samples pickled over their channel; the kernel's snapshot keeps the field."""
    collector = Collector(clock=lambda: 5.0)
    for rank in range(2):
        collector.offer(pickle.loads(pickle.dumps(sample((rank, 0), 1, resumed_epoch=3))))
    collector.offer(sample((0, MAIN_WORKER), 1))
    assert collector.snapshot().resumed_epochs == (3,)
    collector.offer(sample((1, 0), 2))  # rank 1's next pass did not resume
    collector.offer(sample((0, 0), 2))
    assert collector.snapshot().resumed_epochs == ()
