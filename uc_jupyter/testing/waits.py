"""Wait for a state that something else brings about (a server, a thread, another process): the one
poll loop of the tests.

A test that waits asks for a state, never for a duration: :func:`wait_until` polls a condition until
it holds and returns what it returned, or fails naming what it waited for once a deadline has passed.
The deadline is generous on purpose (a busy 2-core machine may take many times the usual time); it
only bounds how long a broken test hangs, and nothing asserts how long the wait took.

Example:
    >>> now = [0.0]
    >>> def sleep(seconds: float) -> None:
    ...     now[0] += seconds
    >>> wait_until(lambda: now[0] >= 1.0 and "up", "the server", clock=lambda: now[0], sleep=sleep)
    'up'
    >>> wait_until(lambda: False, "the server", timeout_s=2, clock=lambda: now[0], sleep=sleep)
    Traceback (most recent call last):
    ...
    AssertionError: timed out after 2 s waiting for the server
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["wait_until"]

T = TypeVar("T")


def wait_until(
    condition: Callable[[], T],
    what: str | Callable[[], str],
    timeout_s: float = 30.0,
    *,
    interval_s: float = 0.05,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] = time.sleep,
) -> T:
    """Poll ``condition`` every ``interval_s`` until it returns a true value, and return that value.

    Args:
        condition: asked at once, then after each interval; an exception it raises ends the wait
            (a process that died while it was awaited, say).
        what: what is awaited, for the failure ("the server to answer"); a callable is asked only
            then, so the message can say what the state was at the deadline.
        timeout_s: how long to wait at most; the condition is always asked once more at the deadline.
        interval_s: seconds between two polls.
        clock, sleep: monotonic seconds and how to pass time; tests of this function pass their own.

    Raises:
        AssertionError: ``timed out after <timeout_s> s waiting for <what>``.

    Example:
        >>> wait_until(lambda: 42, "the answer")
        42
    """
    deadline = clock() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        left = deadline - clock()
        if left <= 0:
            break
        sleep(min(interval_s, left))
    awaited = what if isinstance(what, str) else what()
    raise AssertionError(f"timed out after {timeout_s:g} s waiting for {awaited}")
