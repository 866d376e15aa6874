"""What of a volume pass stays resident in the shared cache, and the budget that keeps all of it.

A stream keeps its misses resident only while the resident set leaves room, within the budget less
its headroom, for the files the consumer holds at once and every stream's window of downloads, but
never more than :data:`WINDOW_SHARE` of the budget for those: past that, misses stream through the
cache (a resident set that took the room of the files in use would leave each stream one download at
a time). So a budget just above the data does not keep the data: the windows and the headroom take
their share first. :func:`budget_to_keep` is the inverse, what the dashboard's advice asks for.

Example:
    >>> may_keep(resident=500, window=300, max_bytes=1000, headroom=0.1)
    True
    >>> budget_to_keep(900, window=0)
    1000
    >>> budget_to_keep(400, window=10**9)  # a window beyond any budget's half: 40% of it stays resident
    1000
"""

from __future__ import annotations

import math

from uc_jupyter.data.cache.admission import DEFAULT_HEADROOM

__all__ = ["WINDOW_SHARE", "budget_to_keep", "may_keep"]

WINDOW_SHARE = 0.5  # the most of the budget the files in use and the windows are given room for


def may_keep(*, resident: float, window: float, max_bytes: int, headroom: float) -> bool:
    """Whether a resident set of ``resident`` bytes may grow by a kept miss while the files in use
    and the streams' windows take ``window`` bytes."""
    return resident + min(window, max_bytes * WINDOW_SHARE) <= max_bytes * (1.0 - headroom)


def budget_to_keep(data: int, *, window: int, headroom: float = DEFAULT_HEADROOM) -> int:
    """The smallest budget under which ``data`` bytes all stay resident (:func:`may_keep` for the
    whole of it) while the files in use and the windows take ``window`` bytes."""
    enough = min((data + window) / (1.0 - headroom), data / (1.0 - headroom - WINDOW_SHARE))
    return math.ceil(round(enough, 6))
