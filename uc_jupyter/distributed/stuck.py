"""Where a rank that would not stop was stuck: its call's stack, read back from the rank's log.

A call that runs past its ``timeout=``, or that is interrupted, asks its ranks to stop (SIGINT). A rank
stuck where SIGINT does not reach (a collective waiting for a peer, a C library, a lock) is killed after
the pool's ``stop_grace``, and the error used to say only that it "did not stop". Every rank registers
:mod:`faulthandler` for :data:`DUMP_SIGNAL` (SIGUSR1) at start, writing every thread's stack to its log
without needing the interpreter to run Python code; the pool sends it before the kill, and
:func:`stuck_in` finds the thread that ran the call (its frames pass through the rank's call runner)
in what the log gained, so the error names the frame the rank was in and shows its frames.

Example:
    >>> dump = '''Thread 0x00007f01 (most recent call first):
    ...   File "/usr/lib/python3.11/threading.py", line 320 in wait
    ...
    ... Current thread 0x00007f00 (most recent call first):
    ...   File "/site-packages/torch/distributed/distributed_c10d.py", line 2501 in all_reduce
    ...   File "/home/me/train.py", line 12 in step
    ...   File "/site-packages/uc_jupyter/distributed/_worker.py", line 196 in _run
    ... '''
    >>> stuck = stuck_in(dump, internal=lambda path: "site-packages" in path or "/usr/lib" in path)
    >>> stuck.where
    'all_reduce (distributed_c10d.py:2501), called from step (train.py:12)'
    >>> [frame.name for frame in stuck.frames]  # outermost first, as a traceback
    ['_run', 'step', 'all_reduce']
"""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Callable
from dataclasses import dataclass

from uc_jupyter.distributed.errors import RemoteFrame, is_internal

__all__ = ["DUMP_SIGNAL", "Stuck", "stuck_in"]

DUMP_SIGNAL = signal.SIGUSR1
_THREAD = re.compile(r"^(?:Current thread|Thread) 0x[0-9a-fA-F]+ \(most recent call first\):\s*$")
_FRAME = re.compile(r'^\s+File "(?P<file>[^"]*)", line (?P<line>\d+) in (?P<name>\S.*?)\s*$')
_RUNNER = (os.path.join("distributed", "_worker.py"), "_run")  # the frame every call runs under


@dataclass(frozen=True)
class Stuck:
    """Where the call was: ``where`` in one line (the innermost frame, and the innermost of the
    user's own when that is another), and the thread's ``frames``, outermost first."""

    where: str
    frames: tuple[RemoteFrame, ...]


def stuck_in(log: str, *, internal: Callable[[str], bool] = is_internal) -> Stuck | None:
    """The call's thread in the last stack dump of ``log`` (a rank's log, or the part of it written
    since the dump was asked for); None when there is none (the rank wrote no dump in time).
    ``internal`` tells library and uc_jupyter frames from the user's."""
    threads: list[list[tuple[str, int, str]]] = []
    for line in log.splitlines():
        if _THREAD.match(line):
            threads.append([])
            continue
        frame = _FRAME.match(line)
        if frame is not None and threads:
            threads[-1].append((frame["file"], int(frame["line"]), frame["name"]))
    running = [t for t in threads if any(f.endswith(_RUNNER[0]) and n == _RUNNER[1] for f, _, n in t)]
    if not running:
        return None
    innermost_first = running[-1]
    frames = tuple(
        RemoteFrame(path, line, name, internal=internal(path)) for path, line, name in reversed(innermost_first)
    )
    inner = frames[-1]
    where = _named(inner)
    own = next((f for f in reversed(frames) if not f.internal), None)
    if own is not None and own is not inner:
        where += f", called from {_named(own)}"
    return Stuck(where, frames)


def _named(frame: RemoteFrame) -> str:
    return f"{frame.name} ({os.path.basename(frame.filename)}:{frame.lineno})"
