"""Where a producer process publishes from: one publisher per process, installed by whoever owns
the telemetry channel (a DataLoader in its workers), and nudged by the code that does the work.

Data code calls :func:`notify` after progress (cheap: the publisher rate-limits) and
``notify(final=True)`` when a pass ends, so the last counters always go out.

Example:
    >>> sent = []
    >>> install(lambda final: sent.append(final))
    >>> notify(); notify(final=True); sent
    [False, True]
    >>> install(None)
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["install", "notify"]

_publisher: Callable[[bool], None] | None = None


def install(publisher: Callable[[bool], None] | None) -> None:
    """Make ``publisher(final)`` this process's publisher (None removes it)."""
    global _publisher
    _publisher = publisher


def notify(final: bool = False) -> None:
    """Let the installed publisher send the current counters (when due, or now if ``final``)."""
    if _publisher is not None:
        _publisher(final)
