"""The worker side of :class:`~uc_jupyter.data.DataLoader`: what runs inside each worker process.

A worker's init function installs two things before the user's own ``worker_init_fn`` runs: the
publisher of the worker's telemetry (cumulative dataset counters, over a queue the worker never
blocks on) and the loop's progress as the consumer of the worker's copy of the dataset, so the
dataset's streams keep each file they hand out until the loop has moved past its batch (see
:mod:`uc_jupyter.data.consumer`). The collate wrapper nudges the publisher after each batch.

Example:
    >>> loader.worker_init_fn = WorkerInit(user_init, queue, rank=0, progress=progress)  # doctest: +SKIP
    >>> loader.collate_fn = ReportingCollate(loader.collate_fn)                          # doctest: +SKIP
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch.utils.data

from uc_jupyter.data import consumer
from uc_jupyter.data.consumer import Progress
from uc_jupyter.telemetry import producer
from uc_jupyter.telemetry.model import Sample
from uc_jupyter.telemetry.reporter import Reporter

__all__ = ["ReportingCollate", "WorkerInit", "dataset_sample"]


class WorkerInit:
    """Runs in each worker: installs its telemetry publisher and the loop's progress as the consumer
    of the worker's dataset, then the user's worker_init_fn."""

    def __init__(self, user: Callable[[int], None] | None, queue: Any, rank: int, progress: Progress) -> None:
        self.user, self.queue, self.rank, self.progress = user, queue, rank, progress

    def __call__(self, worker_id: int) -> None:
        producer.install(_WorkerPublisher(Reporter(self.queue.put_nowait), self.rank, worker_id))
        info = torch.utils.data.get_worker_info()
        if info is not None:  # the worker's own copy of the dataset: the only one its streams see
            consumer.install(info.dataset, self.progress.consumer(worker_id))
        if self.user is not None:
            self.user(worker_id)


class _WorkerPublisher:
    """Publishes the worker's dataset counters: when due after a batch, and at the end of a pass."""

    def __init__(self, reporter: Reporter, rank: int, worker: int) -> None:
        self.reporter, self.rank, self.worker = reporter, rank, worker

    def __call__(self, final: bool) -> None:
        info = torch.utils.data.get_worker_info()
        if info is None:
            return

        def build() -> Sample | None:
            return dataset_sample(info.dataset, self.rank, self.worker)

        if final:
            sample = build()
            if sample is not None:
                self.reporter.publish(sample)
        else:
            self.reporter.maybe_publish(build)


class ReportingCollate:
    """Collates as before, then nudges the worker's publisher (rate-limited, never blocking)."""

    def __init__(self, collate: Callable[[Any], Any]) -> None:
        self.collate = collate

    def __call__(self, items: Any) -> Any:
        batch = self.collate(items)
        producer.notify()
        return batch


def dataset_sample(dataset: Any, rank: int, worker: int) -> Sample | None:
    """A worker sample from a dataset that keeps stream stats (UCVolumeDataset), else None.

    Its ``seq`` is the machine's monotonic clock, so a worker started for a later epoch (a new
    process, counting from scratch) still supersedes the samples of the one before it.
    """
    stats = getattr(dataset, "stats", None)
    if not callable(stats):
        return None
    found = stats()
    streams = [s for s in getattr(found, "streams", ()) if s.worker == worker]
    if not streams:
        return None
    s = streams[-1]
    cache = getattr(found, "cache", None)
    return Sample(
        rank=rank,
        worker=worker,
        seq=time.monotonic_ns(),
        time=time.monotonic(),
        files=s.files,
        bytes=s.bytes,
        hits=s.hits,
        misses=s.misses,
        bytes_downloaded=s.bytes_downloaded,
        retries=s.retries,
        shard_size=s.shard_size,
        padded=s.padded,
        dropped=s.dropped,
        cache_used_bytes=cache.used_bytes if cache else 0,
        cache_max_bytes=cache.max_bytes if cache else 0,
        cache_evictions=cache.evictions if cache else 0,
    )
