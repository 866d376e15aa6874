"""How far the loop has got: the counts it keeps and what a stream reads of them."""

from __future__ import annotations

import multiprocessing
import sys
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from uc_jupyter.data.stream import loop_progress as consumer
from uc_jupyter.data.stream.loop_progress import UNKNOWN, Progress

Op = tuple[str, int]
ops = st.lists(st.one_of(st.tuples(st.just("moved"), st.integers(0, 2)), st.tuples(st.just("pass"), st.just(0))))


@settings(max_examples=200)
@given(batch_size=st.integers(1, 8), before=ops, after=ops)
def test_a_stream_sees_its_workers_batches_times_the_batch_size_until_another_pass(
    batch_size: int, before: list[Op], after: list[Op]
) -> None:
    progress = Progress(workers=3, batch_size=batch_size)

    def apply(op: Op) -> None:
        if op[0] == "pass":
            progress.new_pass()
        else:
            progress.moved_past(op[1])

    for op in before:
        apply(op)
    progress.new_pass()
    streams = [progress.consumer(w).start() for w in range(3)]
    moved = [0, 0, 0]
    seen = [0, 0, 0]
    passed = False
    for op in after:
        apply(op)
        passed = passed or op[0] == "pass"
        if op[0] == "moved" and not passed:
            moved[op[1]] += 1
        for w, first_in_use in enumerate(streams):
            now = first_in_use()
            assert now == (sys.maxsize if passed else moved[w] * batch_size)
            assert now >= seen[w]  # never goes back
            seen[w] = now


def _read_in_child(progress: Progress, started: Any, go: Any, answer: Any) -> None:
    first_in_use = progress.consumer(1).start()
    started.set()
    answer.put(first_in_use() if go.wait(60) else -1)


def test_workers_read_the_counts_the_loop_writes() -> None:
    context = multiprocessing.get_context("spawn")
    progress = Progress(workers=2, batch_size=4, shared=context)
    progress.new_pass()
    started, go, answer = context.Event(), context.Event(), context.Queue()
    child = context.Process(target=_read_in_child, args=(progress, started, go, answer))
    child.start()
    assert started.wait(60)  # the child's pass began: it sees the counts from here on
    for _ in range(3):
        progress.moved_past(1)
    go.set()
    assert answer.get(timeout=60) == 12
    child.join(60)


def test_a_stream_finds_the_consumer_bound_to_its_own_dataset_only() -> None:
    mine, other = object(), object()
    bound = Progress(workers=0, batch_size=2).consumer(0)
    assert consumer.of(mine) is UNKNOWN
    previous = consumer.install(mine, bound)
    try:
        assert consumer.of(mine) is bound
        assert consumer.of(other) is UNKNOWN
    finally:
        consumer.restore(previous)
    assert consumer.of(mine) is UNKNOWN
    assert not UNKNOWN.exact and UNKNOWN.start()() == sys.maxsize


def test_the_files_in_use_are_every_batch_torch_asked_for_plus_the_loops() -> None:
    """What a stream keeps room for in the cache beside its resident files (see prefetch._may_keep)."""
    with_workers = Progress(workers=2, batch_size=64, prefetch_factor=4).consumer(1)
    assert (with_workers.in_use, with_workers.streams) == ((4 * 2 + 1) * 64, 2)
    alone = Progress(workers=0, batch_size=8).consumer(0)
    assert (alone.in_use, alone.streams) == (2 * 8, 1)  # the loop's batch and the one being made
    assert (UNKNOWN.in_use, UNKNOWN.streams) == (0, 1)  # says nothing: the cache's headroom decides
