"""The training loop's side of a DataLoader's timing: what one batch looked like to the loop, the
loop's cumulative counters (published as the ``(rank, MAIN_WORKER)`` telemetry sample), and how many
samples a collated batch holds.

Example:
    >>> import torch
    >>> batch_len([torch.zeros(4, 3), torch.zeros(4)])  # (image, label) pairs collated: 4 samples
    4
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from uc_jupyter.telemetry.model import MAIN_WORKER, Histogram, Sample

__all__ = ["BatchTiming", "LoopTiming", "batch_len"]


@dataclass(frozen=True)
class BatchTiming:
    """One batch as the training loop saw it."""

    index: int  # batches delivered before this one, over all epochs
    epoch: int
    fetch_seconds: float  # time the loop waited in next()
    compute_seconds: float  # time between the previous next() returning and this call
    batch_size: int
    worker: int | None  # the DataLoader worker that produced it (None: the loop's own process)


class LoopTiming:
    """The training loop's cumulative timing counters (one producer: ``(rank, MAIN_WORKER)``)."""

    def __init__(self) -> None:
        self.batches = 0
        self.samples = 0
        self.seq = 0
        self._fetch = [0] * (len(Histogram().counts))
        self._between = [0] * (len(Histogram().counts))
        self._sums = [0.0, 0.0, 0.0, 0.0]  # fetch total, fetch squares, between total, between squares

    def add(self, timing: BatchTiming) -> None:
        self.batches += 1
        self.samples += timing.batch_size
        self._fetch[Histogram.bucket(timing.fetch_seconds)] += 1
        self._sums[0] += timing.fetch_seconds
        self._sums[1] += timing.fetch_seconds**2
        if timing.index:  # the first batch has no compute time before it
            self._between[Histogram.bucket(timing.compute_seconds)] += 1
            self._sums[2] += timing.compute_seconds
            self._sums[3] += timing.compute_seconds**2

    def sample(self, rank: int, now: float, started: float, depths: tuple[int, ...]) -> Sample:
        self.seq += 1
        return Sample(
            rank=rank,
            worker=MAIN_WORKER,
            seq=self.seq,
            time=now,
            batches=self.batches,
            samples=self.samples,
            fetch=Histogram(tuple(self._fetch), self._sums[0], self._sums[1]),
            between=Histogram(tuple(self._between), self._sums[2], self._sums[3]),
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
