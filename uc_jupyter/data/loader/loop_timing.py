"""The training loop's side of a DataLoader: each pass timed batch by batch, and the loop's counters.

:meth:`LoopTiming.timed` is the pass the training loop iterates: around each ``next()`` of torch's
iterator it records how long the loop waited (fetch time) and the time since the previous
``next()`` returned (compute time), counts the batch's samples, hands a :class:`BatchTiming` to the
hooks, adds what the batch's stages took and splits the wait among them (the stage times travel
with the batch: :mod:`uc_jupyter.data.stream.stages`), publishes the loop's counters (the ``(rank,
MAIN_WORKER)`` telemetry sample) when they are due, and, once the loop asks for the next batch,
tells the streams it moved past the last one (:mod:`uc_jupyter.data.stream.loop_progress`). This
runs for every batch the loop receives, so it is kept to what a batch needs: the rest (a worker's
position, the hooks' record, MLflow) only when there is one.

Example:
    >>> import torch
    >>> batch_len([torch.zeros(4, 3), torch.zeros(4)])  # (image, label) pairs collated: 4 samples
    4
"""

from __future__ import annotations

import itertools
import time
from bisect import bisect_left
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from uc_jupyter.data.loader.torch_tasks import delivered_worker, tasks
from uc_jupyter.data.loader.worker_errors import caused, unwrapped
from uc_jupyter.data.loader.workers import Counted
from uc_jupyter.telemetry.model import BUCKET_BOUNDS, EXPOSED_STAGES, MADE_STAGES, MAIN_WORKER, Histogram, Sample

# The loop's samples are numbered across the process's loaders: a collector keeps the newest sample
# of (rank, loop), so a rank's next loader (the next call's, in a pool) replaces the previous one's at
# once rather than once it has sent as many samples.
_SEQUENCE = itertools.count(1)

if TYPE_CHECKING:
    from uc_jupyter.data.stream.loop_progress import Progress
    from uc_jupyter.data.stream.position import LoaderPosition
    from uc_jupyter.telemetry.mlflow_sink import MlflowSink
    from uc_jupyter.telemetry.model import Snapshot
    from uc_jupyter.telemetry.reporter import Reporter

__all__ = ["BatchTiming", "LoopPass", "LoopTiming", "batch_len"]


@dataclass(frozen=True)
class BatchTiming:
    """One batch as the training loop saw it."""

    index: int  # batches delivered before this one, over all epochs
    epoch: int
    fetch_seconds: float  # time the loop waited in next()
    compute_seconds: float  # time between the previous next() returning and this call
    batch_size: int
    worker: int | None  # the DataLoader worker that produced it (None: the loop's own process)


@dataclass(frozen=True)
class LoopPass:
    """What one pass of the loop tells and asks, besides the counters (see :meth:`LoopTiming.timed`)."""

    epoch: int
    setup: float  # seconds iter() took before the pass was handed to the loop (workers starting)
    starts_workers: bool  # the pass starts worker processes (they do not persist, or this is the first)
    progress: Progress  # told which batches the loop moved past
    position: LoaderPosition  # told each batch, unless it asks the dataset (no workers: see LoaderPosition.begin)
    workers: bool  # False: the streams run inside next(), in this process
    items: Callable[[Any], int]  # samples in what the loader yields
    reporter: Reporter  # the loop's telemetry rate
    sample: Callable[[], Sample]  # the loop's counters as a sample, when the reporter takes one
    sink: MlflowSink | None  # an active MLflow run's, if any
    stats: Callable[[], Snapshot]  # the loader's snapshot, for a window the sink closes
    finish: Callable[[], None]  # the pass ended, whatever ended it


class LoopTiming:
    """The training loop's cumulative timing counters (one producer: ``(rank, MAIN_WORKER)``), its
    hooks (a tuple, replaced on change: a hook that removes itself mid-batch never makes the loop skip
    another), and the timed pass (:meth:`timed`)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.batches = 0
        self.samples = 0
        self.seq = 0
        self.hooks: tuple[Callable[[BatchTiming], object], ...] = ()
        self._clock = clock
        self._fetch = [0] * (len(BUCKET_BOUNDS) + 1)
        self._between = [0] * (len(BUCKET_BOUNDS) + 1)
        self._sums = [0.0, 0.0, 0.0, 0.0]  # fetch total, fetch squares, between total, between squares
        self.setup = 0.0  # seconds passes spent in iter(), and waited for their first batch: start-up
        self.first_waits = 0.0
        self.worker_starts = 0
        self._made = [0.0] * len(MADE_STAGES)  # per MADE_STAGES: what the received batches took to make
        self.pinned = 0.0
        self._exposed = [0.0] * len(EXPOSED_STAGES)  # the steady-state waits, split per EXPOSED_STAGES

    def timed(self, inner: Iterator[Any], run: LoopPass) -> Iterator[Any]:
        """The pass ``inner`` (torch's iterator), timed and counted batch by batch (see the module docstring)."""
        clock, reporter, progress, items = self._clock, run.reporter, run.progress, run.items
        workers, sink, local = run.workers, run.sink, run.progress.stages
        seen = (local.fetch, local.decode, local.collate)  # the stages' seconds before this pass's first batch
        counted = workers or not run.position.asks
        worker: int | None = None
        first = True
        self.setup += run.setup
        self.worker_starts += run.starts_workers
        returned = clock()
        try:
            while True:
                before = tasks(inner) if workers else None
                asked = clock()
                try:
                    batch = next(inner)
                except StopIteration:
                    run.position.ended()
                    return
                except Exception as error:
                    plain = unwrapped(error)  # torch's re-raise holds the worker's traceback in its message
                    if plain is None:
                        raise
                    # A transform of one's own keeps that traceback as the cause; Pillow's is noise.
                    raise plain from (error if caused(error) else None)
                got = clock()
                after = None
                waited = got - asked
                if workers:
                    worker = delivered_worker(inner, before or {})
                    if isinstance(batch, Counted):
                        self._staged(batch.stages, batch.pinned, waited, first, batch.made)
                        batch, after = batch.batch, batch.position
                else:  # the stages ran in this process, inside next(): taken inline, per batch
                    # (StageTimes.take written out: its seconds only grow, what they grew by is this batch's)
                    fetch, decode, collate = local.fetch, local.decode, local.collate
                    self._staged((fetch - seen[0], decode - seen[1], collate - seen[2]), 0.0, waited, first)
                    seen = (fetch, decode, collate)
                if first:  # the pass's start-up ends with its first batch
                    self.first_waits += waited
                    first = False
                size = items(batch)
                if counted:
                    run.position.received(worker, size, after)
                if sink is not None and sink.due():
                    # A periodic window closes before this batch counts: the pass's end keeps a batch of its own.
                    sink.hand_over(run.stats())
                hooks = self.hooks
                if hooks:
                    timing = BatchTiming(self.batches, run.epoch, waited, asked - returned, size, worker)
                    for hook in hooks:
                        hook(timing)
                self.add(waited, asked - returned, size)
                if clock() >= reporter.next_due:  # the reporter's rate, checked here: it runs per batch
                    reporter.publish(run.sample())
                returned = clock()
                yield batch
                # The loop asked for the next batch: it is done with this one (a worker it could not
                # tell keeps its files until the pass ends).
                if worker is not None or not workers:
                    progress.moved_past(worker or 0)
        finally:
            run.finish()

    def _staged(
        self, made: tuple[float, float, float], pinned: float, waited: float, first: bool, at: float = 0.0
    ) -> None:
        """Count what one batch's stages took (``made``: fetch, decode, collate; ``pinned``), and split
        the loop's wait for it among them: the transfer is the part after the batch was made (``at``,
        on the machine's monotonic clock; 0: made in this process), the rest is shared in proportion
        to the stages' seconds, and what they do not cover is *other*. A pass's first batch is
        start-up: its wait is not the steady state's, so it is not split."""
        totals = self._made
        fetch, decode, collate = made
        totals[0] += fetch
        totals[1] += decode
        totals[2] += collate
        self.pinned += pinned
        if first:
            return
        transfer = min(waited, max(0.0, time.monotonic() - at)) if at else 0.0
        making, stages = waited - transfer, fetch + decode + collate
        scale = making / stages if stages > making else 1.0
        exposed = self._exposed
        exposed[0] += fetch * scale
        exposed[1] += decode * scale
        exposed[2] += collate * scale
        exposed[3] += transfer
        exposed[4] += max(0.0, making - stages)

    def add(self, fetch_seconds: float, compute_seconds: float, samples: int) -> None:
        """Count one batch of ``samples`` that the loop waited ``fetch_seconds`` for, ``compute_seconds``
        after it had the last one (the loader's first batch has no compute time before it)."""
        sums = self._sums
        self._fetch[bisect_left(BUCKET_BOUNDS, fetch_seconds)] += 1  # Histogram.bucket, inline: it runs per batch
        sums[0] += fetch_seconds
        sums[1] += fetch_seconds * fetch_seconds
        if self.batches:
            self._between[bisect_left(BUCKET_BOUNDS, compute_seconds)] += 1
            sums[2] += compute_seconds
            sums[3] += compute_seconds * compute_seconds
        self.batches += 1
        self.samples += samples

    def sample(
        self, rank: int, now: float, started: float, depths: tuple[int, ...], *, persistent: bool = False
    ) -> Sample:
        self.seq = next(_SEQUENCE)
        return Sample(
            rank=rank,
            worker=MAIN_WORKER,
            seq=self.seq,
            time=now,
            batches=self.batches,
            samples=self.samples,
            fetch=Histogram(tuple(self._fetch), self._sums[0], self._sums[1]),
            between=Histogram(tuple(self._between), self._sums[2], self._sums[3]),
            setup=self.setup,
            first_waits=self.first_waits,
            worker_starts=self.worker_starts,
            persistent_workers=persistent,
            made=tuple(self._made),
            pinned=self.pinned,
            exposed=tuple(self._exposed),
            queue_depth=sum(depths),
            worker_queue_depths=depths,
            started=started,
        )


def batch_len(batch: Any) -> int:
    """How many samples a collated batch holds.

    torch's default collate turns samples that are tuples, e.g. ``(image, label)``, into a *list of
    fields* (``[images, labels]``): the count is the first field's length, not the list's.
    """
    if isinstance(batch, (list, tuple)) and batch and isinstance(batch[0], (torch.Tensor, list, tuple, dict)):
        return field_len(batch[0])
    if isinstance(batch, (list, tuple)):
        return len(batch)
    return field_len(batch)


def field_len(field: Any) -> int:
    if isinstance(field, torch.Tensor):
        return int(field.shape[0]) if field.dim() else 1
    if isinstance(field, dict):
        return field_len(next(iter(field.values()))) if field else 0
    if isinstance(field, (list, tuple)):
        return len(field)
    return 1
