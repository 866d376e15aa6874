"""The producer side: publish cumulative samples at most ``rate`` times a second, never blocking.

A full queue drops the sample (the next one carries everything, samples are cumulative) and counts
the drop. The clock is read on every call, which costs tens of nanoseconds; a sample is built only
when it will be sent.

Example:
    >>> import queue
    >>> q: queue.Queue = queue.Queue(maxsize=1)
    >>> clock = iter([0.0, 0.05, 0.2, 0.35]).__next__
    >>> r = Reporter(q.put_nowait, clock=clock)
    >>> [r.maybe_publish(lambda: "s") for _ in range(4)]
    [True, False, False, False]
    >>> r.sent, r.dropped  # the queue held one: the two later, due samples were dropped
    (1, 2)
"""

from __future__ import annotations

import math
import queue
import time
from collections.abc import Callable
from typing import Any

__all__ = ["Reporter"]


class Reporter:
    """Publishes what ``build()`` returns through ``put`` (a non-blocking put) when due."""

    def __init__(
        self,
        put: Callable[[Any], None],
        *,
        rate: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not (math.isfinite(rate) and rate > 0):
            raise ValueError(f"rate must be positive and finite (samples per second), got {rate}")
        self._put = put
        self._interval = 1.0 / rate
        self._clock = clock
        # When the next sample is due (on ``clock``): a loop that runs per batch may compare its own
        # clock reading with it instead of calling maybe_publish (uc_jupyter.data.loader.loop_timing).
        self.next_due = float("-inf")
        self.sent = 0
        self.dropped = 0

    def maybe_publish(self, build: Callable[[], Any]) -> bool:
        """Publish ``build()`` when the last publication is at least one interval old."""
        now = self._clock()
        if now < self.next_due:
            return False
        self.next_due = now + self._interval
        return self._send(build())

    def publish(self, sample: Any) -> bool:
        """Publish now, whatever the rate (at the end of an epoch, before exiting)."""
        self.next_due = self._clock() + self._interval
        return self._send(sample)

    def _send(self, sample: Any) -> bool:
        if sample is None:  # nothing to report yet
            return False
        try:
            self._put(sample)
        except queue.Full:
            self.dropped += 1
            return False
        self.sent += 1
        return True
