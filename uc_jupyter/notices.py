"""Messages meant for people, not bugs: one plain line, once per process.

``warnings.warn`` is made for programmers: in a notebook it draws a red box naming the source file
and line that warned, and its once-only filter depends on where it was called from. A person who
asked for two GPUs on a laptop only needs to read, once, that the ranks run on CPU instead. That is
:func:`notice`: the text as one line, the first time its key is seen in this process, and never
again; on ``sys.stderr`` (a terminal, a script's log, the rank's ``[rank N]`` stream on a rank), but in
a notebook's kernel on ``sys.stdout``: a cell's stderr is drawn as a pink error band, and a notice
("using 2 workers instead of 6") is information, not an error.

Example:
    >>> notice("no CUDA device is visible: running 2 CPU ranks with gloo", key="cpu-ranks")  # doctest: +SKIP
    no CUDA device is visible: running 2 CPU ranks with gloo
    >>> notice("no CUDA device is visible: running 4 CPU ranks with gloo", key="cpu-ranks")  # doctest: +SKIP
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Hashable

__all__ = ["notice", "reset"]

_given: set[Hashable] = set()
_lock = threading.Lock()


def notice(text: str, *, key: Hashable | None = None) -> bool:
    """Print ``text`` as one line to stderr unless a notice with the same ``key`` (default: the text
    itself) was printed before in this process; True when it was printed now.

    Line breaks in ``text`` become spaces, so a notice is always one line.

    Example:
        >>> import contextlib, io
        >>> reset()
        >>> err = io.StringIO()
        >>> with contextlib.redirect_stderr(err):
        ...     notice("using 2 workers instead of 6", key="clamp"), notice("again", key="clamp")
        (True, False)
        >>> err.getvalue()
        'using 2 workers instead of 6\\n'
    """
    line = " ".join(str(text).split())
    with _lock:
        seen = line if key is None else key
        if seen in _given:
            return False
        _given.add(seen)
    stream = sys.stdout if _in_a_kernel() else sys.stderr
    if stream is None:  # pythonw, or a daemon that closed its streams: nobody to tell
        return True
    try:
        stream.write(line + "\n")
        stream.flush()
    except (OSError, ValueError):  # a closed or broken stream must not break the caller
        pass
    return True


def _in_a_kernel() -> bool:
    """Whether this process's stderr is a Jupyter kernel's (a cell's output), where it shows as an error."""
    return type(sys.stderr).__module__.startswith("ipykernel") and sys.stdout is not None


def reset() -> None:
    """Forget which notices were given, so each prints again once (tests use it).

    Example:
        >>> reset()
    """
    with _lock:
        _given.clear()
