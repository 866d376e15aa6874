"""The DataLoader's worker side (uc_jupyter.data.loader.workers): final slots, init, collate and samples."""

from __future__ import annotations

import multiprocessing
import queue
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import torch.utils.data
from torch.utils.data import default_collate

from uc_jupyter.data.cache import CacheStats
from uc_jupyter.data.loader.workers import Counted, FinalSamples, ReportingCollate, WorkerInit, dataset_sample
from uc_jupyter.data.stream import loop_progress as consumer
from uc_jupyter.data.stream.loop_progress import Progress
from uc_jupyter.data.stream.stats import DatasetStats, StreamStats
from uc_jupyter.telemetry import producer
from uc_jupyter.telemetry.model import Sample

FORK = multiprocessing.get_context("fork")


def sample(worker: int, files: int, **more: Any) -> Sample:
    return Sample(rank=0, worker=worker, seq=files, time=0.0, files=files, **more)


@pytest.fixture
def no_publisher() -> Iterator[None]:
    """The process's telemetry publisher, put back to none after a test that installs one."""
    try:
        yield
    finally:
        producer.install(None)


def test_each_slot_is_read_once_per_write() -> None:
    slots = FinalSamples(FORK, workers=3)
    assert slots.read() == []
    assert slots.write(2, sample(2, files=5)) and slots.write(0, sample(0, files=1))
    assert sorted((s.worker, s.files) for s in slots.read()) == [(0, 1), (2, 5)]
    assert slots.read() == []  # nothing new since
    assert slots.write(2, sample(2, files=9)) and slots.write(2, sample(2, files=11))
    assert [(s.worker, s.files) for s in slots.read()] == [(2, 11)]  # the latest of the slot only


def test_a_sample_too_large_for_its_slot_is_left_to_the_queue_and_spoils_nothing() -> None:
    slots = FinalSamples(FORK, workers=2)
    assert slots.write(0, sample(0, files=3)) and slots.write(1, sample(1, files=4))
    assert not slots.write(0, sample(0, files=7, worker_queue_depths=tuple(range(5000))))
    assert sorted((s.worker, s.files) for s in slots.read()) == [(0, 3), (1, 4)]


def test_a_worker_process_writes_the_slot_the_loop_reads() -> None:
    slots = FinalSamples(FORK, workers=2)
    writer = FORK.Process(target=slots.write, args=(1, sample(1, files=42, shard_size=7)))
    writer.start()
    writer.join(10)
    assert writer.exitcode == 0
    [read] = slots.read()
    assert (read.worker, read.files, read.shard_size) == (1, 42, 7)


@dataclass
class Stats:
    streams: tuple[StreamStats, ...]
    cache: CacheStats | None = None


class WithStats:
    def __init__(self, found: Any) -> None:
        self.found = found

    def stats(self) -> Any:
        return self.found


def test_a_workers_sample_is_its_newest_stream_with_the_cache_fill() -> None:
    cache = CacheStats("/c", 10, 2, 100, 1000, 5, 3, evictions=4)
    streams = (
        StreamStats(rank=1, worker=0, files=3),
        StreamStats(rank=1, worker=1, files=8, shard_size=20),
        StreamStats(rank=1, worker=1, files=9, shard_size=21, resumed_epoch=2),
    )
    dataset = WithStats(DatasetStats(streams=streams, cache=cache))
    first = dataset_sample(dataset, 1)
    assert first is not None
    assert (first.rank, first.worker, first.files, first.shard_size, first.resumed_epoch) == (1, 1, 9, 21, 2)
    assert (first.cache_used_bytes, first.cache_max_bytes, first.cache_evictions) == (
        cache.used_bytes,
        100,
        4,
    )
    later = dataset_sample(WithStats(Stats(streams=streams)), 1)  # a worker process started later
    assert later is not None and later.seq > first.seq  # it supersedes the earlier one
    assert later.cache_max_bytes == 0


@pytest.mark.parametrize(
    "dataset",
    [
        object(),  # keeps no stats (a plain torch dataset)
        type("NotCallable", (), {"stats": 3})(),
        WithStats(Stats(streams=())),  # no pass yet
        WithStats(Stats(streams=(StreamStats(rank=0, worker=0, files=1),))),  # only another worker's
    ],
)
def test_a_dataset_without_this_workers_stream_has_no_sample(dataset: object) -> None:
    assert dataset_sample(dataset, 1) is None


def test_a_counted_batch_keeps_what_it_carries_and_times_its_pinning() -> None:
    batch = Counted({"path": ["a.png", "b.png"], "label": [0, 1]}, position=6, stages=(0.1, 0.2, 0.3), made=5.0)
    pinned = batch.pin_memory()
    assert pinned is not batch and (pinned.batch, pinned.position) == (batch.batch, 6)
    assert (pinned.stages, pinned.made) == ((0.1, 0.2, 0.3), 5.0)
    assert pinned.pinned > 0 and batch.pinned == 0


def test_outside_a_worker_the_collate_nudges_the_publisher_and_returns_the_batch_as_is(no_publisher: None) -> None:
    nudges: list[bool] = []
    producer.install(nudges.append)
    collate = ReportingCollate(lambda items: [item * 10 for item in items])
    assert collate([1, 2]) == [10, 20]
    assert nudges == [False]  # rate-limited by the publisher, never final


def test_outside_a_worker_init_runs_the_users_function_and_publishes_nothing(no_publisher: None) -> None:
    telemetry: queue.Queue[Any] = queue.Queue()
    called: list[int] = []
    WorkerInit(called.append, telemetry, Progress(workers=0, batch_size=2))(3)
    assert called == [3]
    producer.notify()
    producer.notify(final=True)
    assert telemetry.empty()  # no worker's dataset to sample


class Positioned(torch.utils.data.IterableDataset[int]):
    """Five items; keeps its stream position and stream stats as a dataset of ours does."""

    def __init__(self) -> None:
        self.position: int | None = None

    def __iter__(self) -> Iterator[int]:
        self.position = 0
        for item in range(5):
            self.position += 1
            yield item
        producer.notify(final=True)  # the pass's end, as a dataset's stream says it

    def stream_position(self) -> int | None:
        return self.position

    def stats(self) -> DatasetStats:
        info = torch.utils.data.get_worker_info()
        worker = 0 if info is None else info.id
        return DatasetStats(streams=(StreamStats(rank=0, worker=worker, files=self.position or 0),))


def report_init(telemetry: Any) -> Any:
    def user_init(worker_id: int) -> None:
        info = torch.utils.data.get_worker_info()
        assert info is not None
        bound = consumer.of(info.dataset)  # installed before the user's init runs
        telemetry.put(("init", worker_id, bound.exact, bound.batch_size))

    return user_init


def test_in_a_worker_batches_carry_positions_and_the_pass_ends_in_the_final_slot() -> None:
    telemetry = FORK.Queue()
    finals = FinalSamples(FORK, workers=1)
    progress = Progress(workers=1, batch_size=2, shared=FORK, prefetch_factor=2)
    loader = torch.utils.data.DataLoader(
        Positioned(),
        batch_size=2,
        num_workers=1,
        multiprocessing_context=FORK,
        collate_fn=ReportingCollate(default_collate),
        worker_init_fn=WorkerInit(report_init(telemetry), telemetry, progress, finals),
    )
    got = list(loader)
    assert all(isinstance(batch, Counted) for batch in got)
    assert [(batch.batch.tolist(), batch.position) for batch in got] == [([0, 1], 2), ([2, 3], 4), ([4], 5)]
    # Each batch carries its collate's seconds, made in the worker before the loop received it.
    assert all(batch.stages[2] > 0 and 0 < batch.made <= time.monotonic() for batch in got)
    [final] = finals.read()
    assert (final.worker, final.files) == (0, 5)  # the whole pass, whatever the queue's feeder did
    sent = [telemetry.get(timeout=10)]
    while not telemetry.empty():
        sent.append(telemetry.get(timeout=10))
    assert ("init", 0, True, 2) in sent
    assert all(isinstance(item, Sample) and item.worker == 0 for item in sent if not isinstance(item, tuple))
