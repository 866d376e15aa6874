"""The error a DataLoader worker raised, out of torch's re-raise of it.

torch sends a worker's exception to the loop as its type and its whole traceback as text, and raises
``Type("Caught Type in DataLoader worker process N.\\nOriginal Traceback ...")`` there (or a
``RuntimeError`` of that text when the type cannot be made from one string, as
:class:`~uc_jupyter.catalog.PermissionDenied`). Its first line, all a one-line error shows (the
notebook's ``OneLine`` rendering, the dashboard's failed pass, a rank's report), names only the
worker: the file, the store's answer or the missing grant are on the traceback's last line. For the
project's own errors, whose messages are one line by design, :func:`unwrapped` makes that error
again from that line, so the loop raises what the worker raised.

Example:
    >>> from uc_jupyter.storage.errors import VolumeReadError
    >>> raised = VolumeReadError("Caught VolumeReadError in DataLoader worker process 1.\\nOriginal Traceback "
    ...     "(most recent call last):\\n  ...\\nuc_jupyter.storage.errors.VolumeReadError: cannot read "
    ...     "/Volumes/main/ml/v/a.png after 3 attempts: ConnectionResetError")
    >>> error = unwrapped(raised)
    >>> type(error).__name__, str(error)
    ('VolumeReadError', 'cannot read /Volumes/main/ml/v/a.png after 3 attempts: ConnectionResetError')
    >>> unwrapped(ValueError("Caught ValueError in DataLoader worker process 0.\\n...\\nValueError: bad")) is None
    True
"""

from __future__ import annotations

import importlib
import re

__all__ = ["caused", "unwrapped"]

_CAUGHT = re.compile(r"Caught (\w+) in DataLoader worker process \d+\.")
_RAISED = re.compile(r"(uc_jupyter(?:\.\w+)+)\.(\w+): (.*)")  # the traceback's last line: module.Type: message
_ERRNO = re.compile(r"\[Errno (\d+)\] (.*)")  # how an OSError made with an errno prints


def unwrapped(error: BaseException) -> BaseException | None:
    """The project's error that a worker raised, made again from torch's re-raise ``error``; None
    when ``error`` is no such re-raise, or the worker's error is not one of the project's (its
    traceback is then the user's to read, as torch gives it)."""
    text = str(error)
    caught = _CAUGHT.match(text)
    if caught is None:
        return None
    raised = _RAISED.fullmatch(text.rstrip().splitlines()[-1])
    if raised is None or raised[2] != caught[1]:
        return None
    module, name, message = raised.groups()
    try:
        kind = type(error) if type(error).__name__ == name else getattr(importlib.import_module(module), name, None)
    except ImportError:  # a module path that is not ours after all
        return None
    if not isinstance(kind, type) or not issubclass(kind, Exception):
        return None
    made = getattr(kind, "from_message", None)
    errno = _ERRNO.fullmatch(message) if issubclass(kind, OSError) else None
    try:
        if made is not None:
            return made(message)  # type: ignore[no-any-return]
        return kind(int(errno[1]), errno[2]) if errno else kind(message)
    except (TypeError, ValueError):  # a type that is not made from its message
        return None


def caused(error: BaseException) -> bool:
    """Whether the worker's error had a cause of its own (a user's transform, a library's error
    under the project's): its traceback is then worth keeping as the cause."""
    return "The above exception was the direct cause" in str(error)
