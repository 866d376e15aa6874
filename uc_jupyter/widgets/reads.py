"""Whether a rank's downloads are latency-bound or bandwidth-bound. Pure, no I/O.

A download spends its time in two parts: waiting for the store's first answer (its *latency*, the
time to first byte) and receiving its bytes. Its streams report both, per download
(:class:`~uc_jupyter.telemetry.model.Sample`'s ``reads``, ``read_seconds``, ``answered`` and
``answer_seconds``; object-store downloads tell the first answer, others do not). Over a pass:

- Little's law gives the reads in flight on average: their seconds over the pass's seconds;
- a read that mostly waits for the answer is *latency-bound*: the store would send more if more
  reads were asked at once, so the fix is more in flight, as many as the loop's pace times one
  read's time (Little's law again, plus the two the fetch-ahead window keeps beyond its pace);
- a read that mostly receives bytes is *bandwidth-bound*: more reads at once share the same link,
  so the fix is fewer bytes (smaller or compressed files, a cache that keeps them for the next
  epochs, storage closer to the machine).

Example:
    >>> from uc_jupyter.telemetry.model import Histogram, Sample
    >>> loop = Sample(rank=0, worker=-1, seq=1, time=4.0, batches=100, samples=400,
    ...               fetch=Histogram.of([0.03] * 100), between=Histogram.of([0.01] * 99))
    >>> worker = Sample(rank=0, worker=0, seq=1, time=4.0, reads=400, read_seconds=13.2,
    ...                 answered=400, answer_seconds=12.4, bytes_downloaded=400 * 16_000, files=400)
    >>> reads = Reads.of(loop, [worker])
    >>> reads.bound, round(reads.in_flight, 1), reads.needed(), round(reads.answer_share, 2)
    ('latency', 3.3, 16, 0.94)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from uc_jupyter.telemetry.model import Sample

__all__ = ["LATENCY_SHARE", "MIN_READS", "Reads"]

# Reads that wait for the store's answer at least this share of their time are latency-bound.
LATENCY_SHARE = 0.5
# Fewer timed reads than this say nothing steady (a pass's first window, a handful of files).
MIN_READS = 8
# Downloads the fetch-ahead window keeps beyond what its pace needs (uc_jupyter.data.volume.pace).
_SLACK = 2

Bound = Literal["latency", "bandwidth"]


@dataclass(frozen=True)
class Reads:
    """One rank's downloads over a pass (or a run) beside its loop's time; see the module docstring."""

    count: int  # downloads
    seconds: float  # their seconds, summed
    answered: int  # of those, the ones whose time to first byte the store told
    answer_seconds: float  # their time to first byte, summed
    bytes: int  # bytes downloaded
    files: int  # files delivered, downloaded or not
    streams: int  # the rank's streams that downloaded (each keeps its own window)
    elapsed: float  # the loop's seconds over the same span: its waits and its steps
    pace: float  # files per second the loop takes when it does not wait (0: not known)

    @classmethod
    def of(cls, loop: Sample, workers: Sequence[Sample]) -> Reads:
        """The reads of ``loop``'s rank, from its streams' samples (``workers``)."""
        readers = [w for w in workers if w.reads]
        files = sum(w.files for w in workers)
        step = loop.between.mean
        per_batch = files / loop.batches if loop.batches else 0.0
        return cls(
            count=sum(w.reads for w in readers),
            seconds=sum(w.read_seconds for w in readers),
            answered=sum(w.answered for w in readers),
            answer_seconds=sum(w.answer_seconds for w in readers),
            bytes=sum(w.bytes_downloaded for w in workers),
            files=files,
            streams=len(readers),
            elapsed=loop.fetch.total + loop.between.total,
            pace=per_batch / step if step > 0 else 0.0,
        )

    @property
    def read_seconds(self) -> float:
        """One download's seconds, on average."""
        return self.seconds / self.count if self.count else 0.0

    @property
    def latency(self) -> float:
        """One download's wait for the store's first answer, on average (0.0 when not told)."""
        return self.answer_seconds / self.answered if self.answered else 0.0

    @property
    def answer_share(self) -> float:
        """The share of a download's time spent waiting for the store's first answer."""
        mean = self.read_seconds
        return min(1.0, self.latency / mean) if mean > 0 else 0.0

    @property
    def in_flight(self) -> float:
        """Downloads in flight on average over the span (Little's law)."""
        return self.seconds / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def throughput(self) -> float:
        """Bytes per second downloaded over the span."""
        return self.bytes / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def bound(self) -> Bound | None:
        """'latency' or 'bandwidth' (see the module docstring); None when the store did not tell
        when it answered, or too few downloads were timed to judge."""
        if self.answered < MIN_READS or self.count < MIN_READS or self.read_seconds <= 0:
            return None
        return "latency" if self.answer_share >= LATENCY_SHARE else "bandwidth"

    def needed(self) -> int:
        """The downloads in flight the loop's pace needs at one download's time, as the window
        counts them: its pace times a read's seconds, plus the window's slack (0: pace unknown)."""
        if self.pace <= 0:
            return 0
        return math.ceil(self.pace * self.read_seconds) + _SLACK

    def per_stream(self, total: int) -> int:
        """``total`` downloads in flight, spread over the rank's streams (the dataset's ``prefetch=``)."""
        return math.ceil(total / max(1, self.streams))
