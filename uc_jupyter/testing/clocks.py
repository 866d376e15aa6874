"""A clock the test moves by hand: the one stand-in for ``time.time``/``time.monotonic`` in the tests.

Code that measures time takes its clock (and, where it waits, its sleep) as an argument, so a test
owns time: it reads what it set, rates and deadlines are tested exactly, and nothing flakes on a
busy machine. :class:`ManualClock` is that clock; pass the clock itself as ``clock=`` and its
:meth:`~ManualClock.sleep` as ``sleep=``, and a wait then moves time on instead of waiting.

Example:
    >>> clock = ManualClock(now=100.0)
    >>> clock()
    100.0
    >>> clock.advance(2.5)
    102.5
    >>> clock.sleep(0.5)  # as an injected sleep: the time passes, nobody waits
    >>> clock()
    103.0
    >>> clock.now = 10.0  # a test may also set the time outright
    >>> clock.advance(-1)
    Traceback (most recent call last):
    ...
    ValueError: a clock moves on only: advance by 0 seconds or more, not -1
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ManualClock"]


@dataclass(eq=False)  # two clocks are never the same clock, whatever they read
class ManualClock:
    """Seconds that pass only when the test says so: call it to read ``now``.

    A plain attribute, so another thread (a monitor's, a download's) reads the latest value; two
    threads advancing it at once may lose one advance, which no test here relies on.

    Example:
        >>> clock = ManualClock()
        >>> clock.advance(1.0), clock()
        (1.0, 1.0)
    """

    now: float = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        """Move the clock on by ``seconds`` and return the new time."""
        if seconds < 0:
            raise ValueError(f"a clock moves on only: advance by 0 seconds or more, not {seconds:g}")
        self.now += seconds
        return self.now

    def sleep(self, seconds: float) -> None:
        """What an injected ``sleep`` does on this clock: ``seconds`` pass at once."""
        self.advance(seconds)
