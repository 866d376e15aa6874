"""A rank's supervisor: ``python -m uc_jupyter.distributed._supervisor FD``, the process the kernel starts.

It becomes a subreaper, starts the rank (``uc_jupyter.distributed._worker FD``) as its only child and
then does nothing but wait, so that whatever the rank starts ends with the rank:

- a descendant orphaned anywhere below (a daemon that double-forked, a child of a rank SIGKILLed by the
  OOM killer) is re-parented here rather than to init, so it stays in the tree;
- when the rank exits, however it exits, every process left in the tree is killed
  (:func:`uc_jupyter.distributed.proctree.kill_tree`), and the supervisor exits the way the rank did
  (same exit code, or the same signal), so the kernel reports how the *rank* died;
- SIGTERM or SIGHUP from the kernel (stop now), or the kernel going away (this process re-parented),
  kill the rank and its tree the same way;
- SIGINT (the kernel's interrupt of a call) is passed on to the rank.

The supervisor reaps every child it adopts, which only a process that owns no other children may do
(that is why the kernel itself is never made a subreaper). It imports nothing heavy: it costs one small
interpreter per rank.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time

from uc_jupyter.distributed import proctree
from uc_jupyter.distributed.stuck import DUMP_SIGNAL

_WATCHED = {signal.SIGCHLD, signal.SIGINT, signal.SIGTERM, signal.SIGHUP, DUMP_SIGNAL}
_PARENT_POLL = 0.5  # seconds between checks that the kernel is still this process's parent
_END_WITHIN = 10.0  # seconds to keep killing and reaping the tree before giving up on what will not die


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not argv[1].isdigit():
        print("usage: python -m uc_jupyter.distributed._supervisor FD", file=sys.stderr)
        return 2
    signal.pthread_sigmask(signal.SIG_BLOCK, _WATCHED)  # taken with sigtimedwait below, never as handlers
    proctree.become_subreaper()
    kernel = os.getppid()
    rank = os.posix_spawn(
        sys.executable,
        [sys.executable, "-m", "uc_jupyter.distributed._worker", argv[1]],
        os.environ,
        setsigmask=(),  # the rank starts with no signal blocked and default handlers, as if started directly
        setsigdef=tuple(_WATCHED),
    )
    os.close(int(argv[1]))  # the channel must close when the rank dies, not when this process does
    status = _watch(rank, kernel)  # None: told to stop, or the kernel is gone; the rank goes with its tree
    return _exit_like(_end_tree(rank, status))


def _watch(rank: int, kernel: int) -> int | None:
    """Wait until the rank exits (its wait status) or the supervisor must stop it (None)."""
    while True:
        info = signal.sigtimedwait(_WATCHED, _PARENT_POLL)
        if info is None:
            if os.getppid() != kernel:
                return None
            continue
        if info.si_signo in (signal.SIGINT, DUMP_SIGNAL):
            _forward(rank, info.si_signo)
        elif info.si_signo in (signal.SIGTERM, signal.SIGHUP):
            return None
        else:
            status, _ = _reap(rank)
            if status is not None:
                return status


def _end_tree(rank: int, status: int | None) -> int | None:
    """Kill every process left under this one (the rank too, if it still runs) and reap them all;
    the rank's wait status. As a subreaper adopts every orphan below it, having no child left means
    the whole tree is gone."""
    deadline = time.monotonic() + _END_WITHIN
    while True:
        proctree.kill_tree(os.getpid())
        reaped, children_left = _reap(rank)
        status = reaped if reaped is not None else status
        if not children_left or time.monotonic() > deadline:  # past it: a process stuck in the kernel (D state)
            return status
        signal.sigtimedwait({signal.SIGCHLD}, 0.05)


def _reap(rank: int) -> tuple[int | None, bool]:
    """Reap every child that exited, adopted orphans too: (the rank's wait status if it was among them,
    whether any child is left)."""
    found = None
    while True:
        try:
            pid, code = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return found, False
        if pid == 0:
            return found, True
        if pid == rank:
            found = code


def _forward(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signum)


def _exit_like(status: int | None) -> int:
    """Exit as the rank did: its exit code, or by the signal that killed it."""
    if status is None:  # never reaped: it could not be killed
        return 1
    code = os.waitstatus_to_exitcode(status)
    if code >= 0:
        return code
    signum = -code
    with contextlib.suppress(OSError, ValueError):  # SIGKILL and SIGSTOP have no handler to reset
        signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
    os.kill(os.getpid(), signum)
    return 128 + signum  # a signal whose default is not to end the process


if __name__ == "__main__":
    sys.stdout.flush()
    os._exit(main(sys.argv))
