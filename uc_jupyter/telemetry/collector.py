"""The consumer side: keep the newest sample per producer and build immutable snapshots.

Example:
    >>> from uc_jupyter.telemetry.model import Sample
    >>> c = Collector(clock=lambda: 5.0)
    >>> c.offer(Sample(rank=0, worker=0, seq=2, time=1.0, files=20))
    >>> c.offer(Sample(rank=0, worker=0, seq=1, time=0.5, files=10))  # older: ignored
    >>> c.snapshot().samples[(0, 0)].files
    20
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from types import MappingProxyType
from typing import Any

from uc_jupyter.telemetry.model import Sample, Snapshot

__all__ = ["Collector"]


class Collector:
    """Newest sample per ``(rank, worker)``; thread-safe."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._latest: dict[tuple[int, int], Sample] = {}
        self._lock = threading.Lock()

    def offer(self, sample: Sample) -> None:
        """Keep ``sample`` unless a newer one of its producer is already here."""
        with self._lock:
            current = self._latest.get(sample.producer)
            if current is None or sample.seq > current.seq:
                self._latest[sample.producer] = sample

    def drain(self, source: Any, *, limit: int = 10_000) -> int:
        """Take every sample waiting in ``source`` (a queue) without blocking; return how many."""
        taken = 0
        while taken < limit:
            try:
                item = source.get_nowait()
            except (queue.Empty, EOFError, OSError):
                break
            if isinstance(item, Sample):
                self.offer(item)
            taken += 1
        return taken

    def snapshot(self) -> Snapshot:
        with self._lock:
            samples = dict(self._latest)
        return Snapshot(MappingProxyType(samples), self._clock())

    def clear(self) -> None:
        with self._lock:
            self._latest.clear()
