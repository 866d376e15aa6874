"""How deep a stream fetches ahead: how many downloads one stream keeps in flight.

Three bounds decide it, each for its own reason:

- **Little's law.** To keep a store busy, the downloads in flight must be the rate wanted times one
  download's latency. :class:`Pace` measures both on an injected clock (how long a download takes, how
  fast the consumer takes files) and adds a margin that grows each time the consumer had to wait: when
  this stream is itself the bottleneck the consumer's pace only mirrors the window, and the store's
  bandwidth needs far more in flight than that pace alone asks for.
- **The rank's cap.** A store refuses past a few hundred requests at once (S3 answers 503 SlowDown), so
  a rank's streams share :data:`RANK_DEPTH` and none goes past :data:`MAX_DEPTH` (:func:`depth_cap`).
- **The cache's headroom.** Every download in flight holds its file's room in the cache; all the
  streams' windows together stay within the room the cache keeps beside its resident files
  (:func:`budget_cap`), else they would take the room of the files in use and crawl one download at
  a time.

This module is pure (no I/O): :class:`~uc_jupyter.data.volume.prefetch.Prefetcher` tells a pace what it
measured and asks it for the depth of its next top-up.

Example:
    >>> depth_cap(2), budget_cap(1_000_000, streams=2, mean_size=10_000)
    (128, 50)
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

__all__ = ["MAX_DEPTH", "MIN_DEPTH", "RANK_DEPTH", "START_DEPTH", "Pace", "budget_cap", "depth_cap"]

# Measured at issue 16's conditions (lognormal 30 ms latency, 2 workers): a window of 64 slots per
# stream kept only about 30 requests in flight at the store, since the head of the window waits for a
# slow answer while much of what lies behind it is done; 128 per stream kept about 57 (epoch 1 0.34 ->
# 0.50 of the bandwidth bound), 256 met the store's 503s.
MAX_DEPTH = 128  # downloads in flight per stream, at most
RANK_DEPTH = 256  # downloads in flight over all of a rank's streams, at most
MIN_DEPTH = 4  # never fewer: one slow answer must not stall a stream
START_DEPTH = 64  # before anything is measured: a first window that already hides the latency


def depth_cap(streams: int) -> int:
    """The most downloads one of ``streams`` streams of a rank keeps in flight: :data:`MAX_DEPTH`,
    less where the rank's streams together would pass :data:`RANK_DEPTH`.

    Example:
        >>> depth_cap(1), depth_cap(2), depth_cap(4), depth_cap(64)
        (128, 128, 64, 4)
    """
    return max(MIN_DEPTH, min(MAX_DEPTH, RANK_DEPTH // max(1, streams)))


def budget_cap(room: float, *, streams: int, mean_size: float) -> int:
    """The most downloads one of ``streams`` streams keeps in flight when all of them together must
    fit in ``room`` bytes (the cache's headroom) at files of ``mean_size`` bytes; never past
    :func:`depth_cap`.

    Example:
        >>> budget_cap(10**9, streams=2, mean_size=10_000)  # room for far more: the rank's cap
        128
        >>> budget_cap(100_000, streams=2, mean_size=10_000)  # 5 files each
        5
        >>> budget_cap(0, streams=2, mean_size=10_000)  # no room at all: still a few
        4
    """
    per_stream = int(room / (max(1, streams) * max(1.0, mean_size)))
    return max(MIN_DEPTH, min(depth_cap(streams), per_stream))


class Pace:
    """How many downloads to keep in flight, between :data:`MIN_DEPTH` and ``most`` unless fixed by
    ``prefetch=``: enough to cover one download's latency at the pace the consumer takes items
    (Little's law), plus a margin that grows by half (at least 2) each time the consumer had to wait
    for a download and shrinks slowly while it did not. Growing by half reaches the cap within a few
    waits, where the stream itself is the bottleneck (see the module docstring).

    Args:
        fixed: the depth whatever is measured (the dataset's ``prefetch=``), or None to adapt.
        clock: monotonic seconds, for the consumer's pace. Tests pass their own.
        most: the cap (:func:`depth_cap`, lowered by :func:`budget_cap`); the owner may lower it later.

    Example:
        >>> now = [0.0]
        >>> pace = Pace(None, clock=lambda: now[0])
        >>> pace.depth()  # nothing measured yet
        64
        >>> pace.fetched(0.1, waited=False)  # a download takes 100 ms
        >>> now[0] = 0.05; pace.consumed(10)  # the consumer takes a file every 5 ms
        >>> pace.depth()  # 100 ms / 5 ms in flight, plus 2
        22
    """

    def __init__(
        self, fixed: int | None, *, clock: Callable[[], float] = time.perf_counter, most: int = MAX_DEPTH
    ) -> None:
        self.fixed = fixed
        self.most = max(MIN_DEPTH, most)
        self.fetch_seconds = 0.0
        self.consume_seconds = 0.0
        self.margin = 0.0
        self._clock = clock
        self._last = clock()

    def fetched(self, seconds: float, *, waited: bool) -> None:
        """A download took ``seconds``; ``waited``: the consumer reached it before it was done."""
        self.fetch_seconds = seconds if not self.fetch_seconds else 0.9 * self.fetch_seconds + 0.1 * seconds
        if waited:
            self.margin = min(float(self.most), max(self.margin + 2.0, 1.5 * self.margin))
        else:
            self.margin = max(0.0, self.margin - 0.05)

    def consumed(self, count: int) -> None:
        """The consumer took ``count`` more files since the last call (told in chunks: per file,
        the clock would cost more than a warm cache's hit)."""
        now = self._clock()
        elapsed, self._last = now - self._last, now
        if count <= 0:
            return
        interval = elapsed / count
        weight = min(1.0, 0.1 * count)
        self.consume_seconds = (
            interval if not self.consume_seconds else (1 - weight) * self.consume_seconds + weight * interval
        )

    def depth(self) -> int:
        """The downloads to keep in flight now."""
        if self.fixed is not None:
            return self.fixed
        if not self.fetch_seconds:
            return min(START_DEPTH, self.most)
        wanted = math.ceil(self.fetch_seconds / max(self.consume_seconds, 1e-4) + self.margin) + 2
        return max(MIN_DEPTH, min(self.most, wanted))
