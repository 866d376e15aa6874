"""How the S3 test server shapes its answers like a remote store: latency, bandwidth, concurrency.

Three small pieces, each with an injected clock so their arithmetic is tested exactly
(:mod:`uc_jupyter.testing.s3_server` runs them on ``time.monotonic``):

- :class:`Latency`: seconds each request waits before it is answered; lognormal around a median,
  drawn from a seeded generator so two runs draw the same sequence.
- :class:`Link`: one link of ``bandwidth`` bytes/s shared by every connection, and a cap of
  ``connection_bandwidth`` bytes/s on each connection (as one TCP stream to a real store has).
- :class:`InFlight`: requests being served now, the peak, and the time-weighted mean since the
  last reset (Little's law's L, which is what a loader must keep up to reach the bandwidth).

Example:
    >>> clock = iter([0.0, 0.0, 1.0, 2.0]).__next__
    >>> meter = InFlight(clock=clock)          # the clock reads 0.0 here
    >>> meter.enter(); meter.leave()           # in flight from 0.0 to 1.0
    >>> meter.snapshot()["mean"]               # ... of a 2-second window
    0.5
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Hashable
from typing import Any

__all__ = ["InFlight", "Latency", "Link"]

Clock = Callable[[], float]


class Latency:
    """Seconds a request waits: lognormal with median ``median`` and shape ``sigma`` (0: always the
    median), from a generator seeded with ``seed``.

    With sigma 0.6 the mean is ``median * exp(0.18)`` (1.2x) and the 99th percentile about 4x the
    median: a few slow requests, as object stores have, which a loader must keep enough requests in
    flight to hide.

    Example:
        >>> Latency(0.03).draw()
        0.03
        >>> Latency(0.03, sigma=0.6, seed=1).draw() == Latency(0.03, sigma=0.6, seed=1).draw()
        True
    """

    def __init__(self, median: float, sigma: float = 0.0, seed: int = 0) -> None:
        if median < 0 or sigma < 0:
            raise ValueError(f"invalid latency median {median!r} / sigma {sigma!r}: give numbers >= 0")
        self.median = float(median)
        self.sigma = float(sigma)
        self._random = random.Random(seed)

    def draw(self) -> float:
        """The next request's wait, in seconds."""
        if not self.sigma or not self.median:
            return self.median
        return self._random.lognormvariate(math.log(self.median), self.sigma)

    @property
    def mean(self) -> float:
        """The mean of the draws: ``median * exp(sigma**2 / 2)``."""
        return self.median * math.exp(self.sigma**2 / 2)


class Link:
    """Bandwidth caps: ``bandwidth`` bytes/s for all connections together and
    ``connection_bandwidth`` bytes/s for each one (0: no cap of that kind).

    :meth:`delay` reserves the time ``size`` bytes take on both and says how long the sender must
    wait until they have passed: bytes queue behind those already reserved on the shared link and on
    their own connection, and pass at the slower of the two.

    Example:
        >>> link = Link(bandwidth=50e6, connection_bandwidth=25e6, clock=lambda: 0.0)
        >>> link.delay(25_000_000, connection="a"), link.delay(25_000_000, connection="b")
        (1.0, 1.0)
        >>> link.delay(25_000_000, connection="c")  # the shared link is full until 1.0
        1.5
    """

    _FORGET_AFTER = 1024  # connections remembered before the idle ones are forgotten

    def __init__(self, bandwidth: float = 0.0, connection_bandwidth: float = 0.0, *, clock: Clock = time.monotonic):
        if bandwidth < 0 or connection_bandwidth < 0:
            raise ValueError(f"invalid bandwidth {bandwidth!r} / {connection_bandwidth!r}: give bytes/s >= 0")
        self.bandwidth = float(bandwidth)
        self.connection_bandwidth = float(connection_bandwidth)
        self._clock = clock
        self._link_free_at = 0.0
        self._free_at: dict[Hashable, float] = {}
        self.delayed_seconds = 0.0  # every delay handed out since the last reset

    def delay(self, size: int, connection: Hashable) -> float:
        """Reserve ``size`` bytes on the link and on ``connection``; the seconds to wait (>= 0)."""
        if not self.bandwidth and not self.connection_bandwidth:
            return 0.0
        now = self._clock()
        done = now
        if self.bandwidth:
            self._link_free_at = max(now, self._link_free_at) + size / self.bandwidth
            done = self._link_free_at
        if self.connection_bandwidth:
            own = max(now, self._free_at.get(connection, 0.0)) + size / self.connection_bandwidth
            if len(self._free_at) >= self._FORGET_AFTER:  # closed connections' entries lie in the past
                self._free_at = {key: at for key, at in self._free_at.items() if at > now}
            self._free_at[connection] = own
            done = max(done, own)
        wait = done - now
        self.delayed_seconds += wait
        return wait

    def reset(self) -> None:
        """Forget the delays counted (reservations already made still hold)."""
        self.delayed_seconds = 0.0


class InFlight:
    """Requests in flight: now, the peak and the time-weighted mean since :meth:`reset`.

    ``mean`` averages over the whole window since the reset (idle time counts as 0), ``busy_mean``
    only over the time at least one request was in flight.

    Example:
        >>> meter = InFlight(clock=iter([0.0, 0.0, 0.0, 1.0, 3.0, 4.0]).__next__)
        >>> meter.enter(); meter.enter()    # two from 0 s to 1 s, then one until 3 s
        >>> meter.leave(); meter.leave()
        >>> snap = meter.snapshot()         # at 4 s
        >>> snap["mean"], snap["busy_mean"], snap["peak"]
        (1.0, 1.3333333333333333, 2)
    """

    def __init__(self, *, clock: Clock = time.monotonic) -> None:
        self._clock = clock
        self.now = 0
        self.reset()

    def reset(self) -> None:
        """Start a new window (requests in flight now stay counted)."""
        self._started = self._changed = self._clock()
        self._area = 0.0  # integral of requests in flight over time
        self._busy = 0.0  # time with at least one in flight
        self.peak = self.now

    def _advance(self) -> float:
        now = self._clock()
        span = now - self._changed
        self._area += self.now * span
        if self.now:
            self._busy += span
        self._changed = now
        return now

    def enter(self) -> None:
        """A request arrived."""
        self._advance()
        self.now += 1
        self.peak = max(self.peak, self.now)

    def leave(self) -> None:
        """A request was answered."""
        self._advance()
        self.now -= 1

    def snapshot(self) -> dict[str, Any]:
        """``now``, ``peak``, ``mean``, ``busy_mean`` and ``window_seconds``, as plain JSON values."""
        now = self._advance()
        window = now - self._started
        return {
            "now": self.now,
            "peak": self.peak,
            "mean": self._area / window if window > 0 else 0.0,
            "busy_mean": self._area / self._busy if self._busy > 0 else 0.0,
            "window_seconds": window,
        }
