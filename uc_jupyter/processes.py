"""Small facts about local processes and ports."""

from __future__ import annotations

import contextlib
import os
import socket

__all__ = ["alive", "free_port"]


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


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
