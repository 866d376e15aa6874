"""Small facts about local processes."""

from __future__ import annotations

import contextlib
import os

__all__ = ["alive"]


def alive(pid: int) -> bool:
    """Is process ``pid`` running? A zombie (exited, not yet reaped) counts as dead: it will never
    release anything or answer.

    Example:
        >>> alive(os.getpid())
        True
    """
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError, IndexError), open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    return True
