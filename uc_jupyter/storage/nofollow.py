"""The one walk into a local folder that follows no symbolic link: local volumes' reads
(:class:`~uc_jupyter.storage.local_volume.LocalVolume`) and writes
(:class:`~uc_jupyter.storage.local_writes.LocalWrites`) both reach a file with it.

From a folder's descriptor, each part of the way is opened with ``openat`` and ``O_NOFOLLOW``: a
symlink on the way (or one swapped in while the walk runs) fails with ``ENOTDIR`` or ``ELOOP``
(``O_DIRECTORY`` with ``O_NOFOLLOW``: Linux answers ``ENOTDIR``) instead of leading elsewhere, and
the failing error's ``filename`` names the way up to that part.

Example:
    >>> import os, tempfile
    >>> top = tempfile.mkdtemp()
    >>> os.makedirs(f"{top}/a/b"); os.symlink("/etc", f"{top}/a/link")
    >>> start = os.open(top, WALKED)
    >>> os.close(descend(start, ["a", "b"]))
    >>> try:
    ...     descend(start, ["a", "link"])
    ... except OSError as exc:
    ...     print(exc.filename)
    a/link
    >>> os.close(start)
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence

__all__ = ["LISTABLE", "READ", "WALKED", "descend"]

# Folders passed through: never a symlink, only a handle to walk on (O_PATH where the platform has it:
# no read permission or file state needed, a little cheaper).
WALKED = os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | getattr(os, "O_PATH", os.O_RDONLY)
# Folders listed (scandir) or synced (fsync): readable ones.
LISTABLE = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# A file read: never a symlink, and never blocking (a FIFO swapped in would wait for a writer).
READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def descend(start: int, parts: Sequence[str], flags: int = WALKED, *, make: bool = False) -> int:
    """The folder at ``parts`` below the folder descriptor ``start``, opened with ``flags`` one
    ``openat`` per part, none followed; the caller closes it, and ``start`` stays open (so ``parts``
    may not be empty, which would give ``start`` back: ``["."]`` is a descriptor of its own folder).
    ``make``: a folder missing on the way is made (``mkdirat``, 0755; one another process makes
    meanwhile is used). An ``OSError`` names in ``filename`` the way up to the part that failed."""
    if not parts:
        raise ValueError("descend needs a part to open: give ['.'] for a descriptor of start's own folder")
    fd, walked = start, 0
    try:
        for part in parts:  # per file on a warm pass: kept to the opens themselves
            try:
                following = os.open(part, flags, dir_fd=fd)
            except FileNotFoundError:
                if not make:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
                following = os.open(part, flags, dir_fd=fd)
            if fd != start:
                os.close(fd)
            fd = following
            walked += 1
    except BaseException as exc:
        if fd != start:
            os.close(fd)
        if isinstance(exc, OSError):
            exc.filename = "/".join(parts[: walked + 1])
        raise
    return fd
