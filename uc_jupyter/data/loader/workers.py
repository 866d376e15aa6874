"""The worker side of :class:`~uc_jupyter.data.DataLoader`: what runs inside each worker process.

A worker's init function installs two things before the user's own ``worker_init_fn`` runs: the
publisher of the worker's telemetry (cumulative dataset counters, over a queue the worker never
blocks on) and the loop's progress as the consumer of the worker's copy of the dataset, so the
dataset's streams keep each file they hand out until the loop has moved past its batch (see
:mod:`uc_jupyter.data.stream.loop_progress`). The collate wrapper nudges the publisher after each
batch and sends the batch with what its stages took (:mod:`uc_jupyter.data.stream.stages`).

A pass's last counters do not take the queue: a queue's items reach the loop through a feeder
thread, which on a loaded machine runs after the worker has already sent its last batch, so the loop
would end its pass without them. They are written into the worker's slot of :class:`FinalSamples`,
shared memory, before the worker's stream returns; the loop reads the slots once the workers' last
batches are in, so a pass's snapshot is whole whatever the load.

Example:
    >>> loader.worker_init_fn = WorkerInit(user_init, queue, progress=progress)          # doctest: +SKIP
    >>> loader.collate_fn = ReportingCollate(loader.collate_fn)                          # doctest: +SKIP
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import torch.utils.data

from uc_jupyter.data.stream import loop_progress as consumer
from uc_jupyter.data.stream.loop_progress import Progress
from uc_jupyter.data.stream.stats import StreamStats
from uc_jupyter.telemetry import producer
from uc_jupyter.telemetry.model import Sample
from uc_jupyter.telemetry.reporter import Reporter

__all__ = ["Counted", "FinalSamples", "ReportingCollate", "WorkerInit", "dataset_sample"]

_SLOT_BYTES = 4096  # a pickled worker Sample is about 700 bytes
_LOCK_SECONDS = 1.0  # held for microseconds; longer means its holder died holding it


class FinalSamples:
    """One shared-memory slot per worker for the last sample of its latest pass.

    Written by the worker (synchronously, before its stream returns), read by the loop; one lock
    for every slot, taken once per pass by each worker and by each of the loop's collections.

    Example:
        >>> import multiprocessing
        >>> slots = FinalSamples(multiprocessing.get_context("spawn"), workers=2)
        >>> slots.write(1, Sample(rank=0, worker=1, seq=5, time=0.0, files=3))
        True
        >>> [s.files for s in slots.read()]
        [3]
    """

    def __init__(self, context: Any, workers: int) -> None:
        self._data = context.Array("B", workers * _SLOT_BYTES)  # synchronized: has its own lock
        self._lengths = context.RawArray("q", workers)
        self._seen = [0] * workers  # the loop's side: each slot's version last read (its length + seq)
        self._versions = context.RawArray("q", workers)
        self._broken = False  # the loop's side: the lock was once found held for good

    def write(self, worker: int, sample: Sample) -> bool:
        """Keep ``sample`` as worker ``worker``'s latest; False when it does not fit (then it goes by queue)."""
        raw = pickle.dumps(sample, protocol=pickle.HIGHEST_PROTOCOL)
        if len(raw) > _SLOT_BYTES:
            return False
        start = worker * _SLOT_BYTES
        lock = self._data.get_lock()
        if not lock.acquire(timeout=_LOCK_SECONDS):
            return False
        try:
            self._data.get_obj()[start : start + len(raw)] = raw
            self._lengths[worker] = len(raw)
            self._versions[worker] += 1
        finally:
            lock.release()
        return True

    def read(self) -> list[Sample]:
        """The slots written since the last read (in the loop's process); none when the lock is held
        past a second (a worker killed while writing holds it for ever: the loop must not hang)."""
        found: list[Sample] = []
        lock = self._data.get_lock()
        if self._broken or not lock.acquire(timeout=_LOCK_SECONDS):
            self._broken = True  # asked again, it would cost every collection a second
            return found
        try:
            for worker, version in enumerate(self._versions):
                if version == self._seen[worker]:
                    continue
                self._seen[worker] = version
                start = worker * _SLOT_BYTES
                found.append(pickle.loads(bytes(self._data.get_obj()[start : start + self._lengths[worker]])))
        finally:
            lock.release()
        return found


class WorkerInit:
    """Runs in each worker: installs its telemetry publisher and the loop's progress as the consumer
    of the worker's dataset, then the user's worker_init_fn."""

    def __init__(
        self,
        user: Callable[[int], None] | None,
        queue: Any,
        progress: Progress,
        finals: FinalSamples | None = None,
    ) -> None:
        self.user, self.queue, self.progress, self.finals = user, queue, progress, finals

    def __call__(self, worker_id: int) -> None:
        reporter = Reporter(self.queue.put_nowait)
        producer.install(_WorkerPublisher(reporter, worker_id, self.finals))
        info = torch.utils.data.get_worker_info()
        if info is not None:  # the worker's own copy of the dataset: the only one its streams see
            consumer.install(info.dataset, self.progress.consumer(worker_id))
        if self.user is not None:
            self.user(worker_id)


class _WorkerPublisher:
    """Publishes the worker's dataset counters: when due after a batch, and at the end of a pass
    (into its final slot, falling back to the queue)."""

    def __init__(self, reporter: Reporter, worker: int, finals: FinalSamples | None) -> None:
        self.reporter, self.worker, self.finals = reporter, worker, finals
        # Made in the worker (by WorkerInit), where torch has already set the worker's info: looked
        # up once here, not after every batch.
        info = torch.utils.data.get_worker_info()
        self._dataset = None if info is None else info.dataset
        # The worker's own time: its share on CPU tells decoding apart from waiting for storage.
        self._began, self._cpu_began = time.monotonic(), time.process_time()

    def __call__(self, final: bool) -> None:
        if self._dataset is None:
            return
        if final:
            sample = self._build()
            if sample is not None and not (self.finals is not None and self.finals.write(self.worker, sample)):
                self.reporter.publish(sample)
        else:
            self.reporter.maybe_publish(self._build)

    def _build(self) -> Sample | None:
        sample = dataset_sample(self._dataset, self.worker)
        if sample is None:
            return None
        return replace(sample, started=self._began, cpu_seconds=time.process_time() - self._cpu_began)


class Counted:
    """A batch on its way from a worker to the loop, with what the loop learns from it: its stream's
    position after it (items yielded so far, what the data position records once the loop has it,
    whatever the collate made of them; None for a dataset that keeps none), the seconds its stages
    took in the worker (``(fetch, decode, collate)``, see :mod:`uc_jupyter.data.stream.stages`),
    when it was made (``time.monotonic()``: one clock for every process of the machine) and, once
    torch's pin thread has pinned it (it calls :meth:`pin_memory`), the seconds that took."""

    __slots__ = ("batch", "made", "pinned", "position", "stages")

    def __init__(
        self,
        batch: Any,
        position: int | None,
        stages: tuple[float, float, float] = (0.0, 0.0, 0.0),
        made: float = 0.0,
        pinned: float = 0.0,
    ) -> None:
        self.batch, self.position, self.stages, self.made, self.pinned = batch, position, stages, made, pinned

    def pin_memory(self, device: Any = None) -> Counted:
        from torch.utils.data._utils.pin_memory import pin_memory

        began = time.monotonic()
        pinned = pin_memory(self.batch, device)  # type: ignore[no-untyped-call]
        return Counted(pinned, self.position, self.stages, self.made, time.monotonic() - began)


class ReportingCollate:
    """Collates as before, timing it, then nudges the worker's publisher (rate-limited, never
    blocking) and sends the batch :class:`Counted`: with its stages' seconds, taken from the worker's
    :class:`~uc_jupyter.data.stream.stages.StageTimes`, and its stream's position.

    Without workers it is not used: the loop takes the stages' seconds itself after each ``next()``,
    where torch's collate is part of the wait the stages do not cover (*other*).
    """

    def __init__(self, collate: Callable[[Any], Any]) -> None:
        self.collate = collate

    def __call__(self, items: Any) -> Any:
        began = time.monotonic()
        batch = self.collate(items)
        made = time.monotonic()
        producer.notify()
        info = torch.utils.data.get_worker_info()
        if info is None:  # called outside a worker (not by the loader): nothing to send it with
            return batch
        # The worker's stages added to the StageTimes of the consumer bound to its dataset (WorkerInit).
        stages = consumer.of(info.dataset).stages
        stages.collate += made - began
        position = getattr(info.dataset, "stream_position", None)
        at = position() if callable(position) else None
        return Counted(batch, at, stages.take(), made)


def dataset_sample(dataset: Any, worker: int) -> Sample | None:
    """Worker ``worker``'s sample from a dataset that keeps stream stats (UCVolumeDataset), else None.

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
    # Its seq is the machine's monotonic clock (see above); the fields are StreamStats.sample's.
    newest: StreamStats = streams[-1]
    return newest.sample(seq=time.monotonic_ns(), time=time.monotonic(), cache=getattr(found, "cache", None))
