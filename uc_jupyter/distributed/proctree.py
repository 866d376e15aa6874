"""Process trees on Linux: who descends from a process, and how to end all of them for certain.

A rank's children may start their own sessions (``setsid()``, daemons, ``start_new_session=True``), so a
process-group kill misses them. What finds them instead is the parent links in ``/proc``: every process
that descends from a rank, in whatever session or group, is reached from the rank through them. A
process whose parent died is re-parented to the nearest *subreaper* above it (else to init), which is
why each rank runs under a small supervisor that is one (:mod:`uc_jupyter.distributed._supervisor`):
the rank's orphans stay in its tree even when the rank itself is SIGKILLed.

Ending a tree is done in two passes: first every descendant is stopped (SIGSTOP), scanning again until
no new one appears, so nothing can fork or re-parent a child out of the tree meanwhile; then all are
killed. Signals go through pidfds where the kernel has them, so a pid that was reused by an unrelated
process between the scan and the signal is never hit.

Without ``/proc`` (macOS) none of this is possible: :func:`descendants` finds nothing and callers fall
back to the process group.

Example:
    >>> import subprocess, sys, time
    >>> daemon = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'],"
    >>> daemon += " start_new_session=True); time.sleep(60)"
    >>> child = subprocess.Popen([sys.executable, "-c", daemon])
    >>> while not descendants(child.pid): time.sleep(0.01)
    >>> kill_tree(child.pid, include_root=True)  # the child and its grandchild in another session
    2
    >>> child.wait()
    -9
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator

__all__ = ["become_subreaper", "descendants", "descendants_in", "kill_tree", "parents"]

_PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>
_MAX_ROUNDS = 100  # scans while freezing a tree; each round stops what the last one found


def become_subreaper() -> bool:
    """Make this process adopt its orphaned descendants (Linux ``PR_SET_CHILD_SUBREAPER``).

    A subreaper must reap what it adopts: only a process that waits on every child of its own (like the
    rank supervisor) may call this, never a kernel whose libraries wait for specific children.
    True when it took effect; False where the system has no subreapers.
    """
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def parents() -> dict[int, int]:
    """``{pid: parent pid}`` of every process this one can see in ``/proc`` (empty without ``/proc``)."""
    found: dict[int, int] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for name in entries:
        if not name.isdigit():
            continue
        parent = _parent_of(int(name))
        if parent is not None:
            found[int(name)] = parent
    return found


def descendants(pid: int) -> set[int]:
    """Every process descending from ``pid`` (children, theirs, ...), in any session or group."""
    return set(descendants_in(parents(), pid))


def kill_tree(pid: int, *, include_root: bool = False) -> int:
    """SIGKILL every descendant of ``pid`` (and ``pid`` itself with ``include_root``); how many were signalled.

    The tree is frozen first (SIGSTOP, rescanning until nothing new shows up), so a process that forks
    or exits meanwhile cannot carry a child out of it. The caller reaps its own children afterwards.
    """
    stopped: dict[int, _Target] = {}
    try:
        if include_root:
            root = _Target.open(pid, parent=None)
            if root is not None:
                stopped[pid] = root
                root.send(signal.SIGSTOP)
        for _ in range(_MAX_ROUNDS):
            fresh = [t for t in _targets(pid, stopped) if t.pid not in stopped]
            if not fresh:
                break
            for target in fresh:
                stopped[target.pid] = target
                target.send(signal.SIGSTOP)
        for target in stopped.values():
            target.send(signal.SIGKILL)
        return len(stopped)
    finally:
        for target in stopped.values():
            target.close()


class _Target:
    """One process to signal, pinned by a pidfd where there is one (a reused pid is then never hit)."""

    def __init__(self, pid: int, fd: int | None) -> None:
        self.pid = pid
        self.fd = fd

    @classmethod
    def open(cls, pid: int, parent: int | None) -> _Target | None:
        """The process ``pid``, if it exists and (when ``parent`` is given) is still ``parent``'s child."""
        fd: int | None = None
        if hasattr(os, "pidfd_open"):
            try:
                fd = os.pidfd_open(pid)
            except ProcessLookupError:
                return None
            except OSError:
                fd = None  # an old kernel: plain pids
        if parent is not None and _parent_of(pid) != parent:  # exited (and the pid reused) since the scan
            if fd is not None:
                os.close(fd)
            return None
        return cls(pid, fd)

    def send(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if self.fd is not None:
                signal.pidfd_send_signal(self.fd, signum)
            else:
                os.kill(self.pid, signum)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _targets(root: int, known: dict[int, _Target]) -> Iterator[_Target]:
    """The descendants of ``root`` not in ``known``, each confirmed under its parent once pinned."""
    links = parents()
    for pid in descendants_in(links, root):
        if pid in known:
            continue
        target = _Target.open(pid, parent=links[pid])
        if target is not None:
            yield target


def descendants_in(links: dict[int, int], root: int) -> list[int]:
    """The descendants of ``root`` in the parent map ``links``, parents before their children.

    Example:
        >>> descendants_in({2: 1, 3: 2, 4: 1, 5: 9}, 1)
        [2, 4, 3]
    """
    children: dict[int, list[int]] = {}
    for child, parent in sorted(links.items()):
        children.setdefault(parent, []).append(child)
    order: list[int] = []
    seen = {root}
    level = [root]
    while level:
        following = []
        for pid in level:
            for child in children.get(pid, ()):
                if child not in seen:
                    seen.add(child)
                    order.append(child)
                    following.append(child)
        level = following
    return order


def _parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            text = stat.read()
    except OSError:
        return None
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ")".
    fields = text.rpartition(b")")[2].split()
    try:
        return int(fields[1])
    except (IndexError, ValueError):
        return None
