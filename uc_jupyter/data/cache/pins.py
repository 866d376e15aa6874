"""Pins: a share lock (``flock``) on an open descriptor keeps a handed-out file from eviction.

A hit opens the object and share-locks it, which both checks that it is there and pins it; eviction
takes an exclusive lock without waiting and skips files it cannot lock, so a path handed out stays
valid until the pin is released (or the pinning process ends: the kernel drops its locks, nothing is
left to reclaim). Objects are opened without following symbolic links and without blocking (a FIFO
planted under an object's name must not hang the reader): only regular files are ever served.

Example:
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "object")
    >>> _ = open(path, "wb").write(b"data")
    >>> pin, stat = pin_file(path)
    >>> delete_unpinned(path), os.path.exists(path)  # pinned: left alone
    (False, True)
    >>> pin.release()
    >>> delete_unpinned(path), os.path.exists(path)
    (True, False)
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os

__all__ = ["OPEN_FLAGS", "NotAFile", "Pin", "delete_unpinned", "pin_file"]

# No symlink is followed and a FIFO does not block the open; O_NONBLOCK changes nothing for the
# regular files that are served.
OPEN_FLAGS = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
_SHARE_NOWAIT = fcntl.LOCK_SH | fcntl.LOCK_NB
# What opening a name that is not a regular file can fail with: a symlink (ELOOP), a socket (ENXIO).
_NOT_A_FILE = (errno.ELOOP, errno.ENXIO)


class NotAFile(OSError):
    """Something that is not a regular file (a symlink, a socket) lies under an object's name."""


class Pin:
    """A share-locked descriptor of a resident file: while it is open, eviction skips the file."""

    __slots__ = ("fd",)

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def release(self) -> None:
        """Close the descriptor (idempotent: the number may belong to another file afterwards)."""
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)

    def __del__(self) -> None:  # a CachedFile dropped without release() still unpins
        if self.fd >= 0:  # only then: the check is what a released pin pays here
            with contextlib.suppress(OSError):  # never raise from a finaliser
                self.release()


def pin_file(path: str) -> tuple[Pin, os.stat_result] | None:
    """Open and share-lock ``path``; the pin and the file's ``fstat`` (which may show something other
    than a regular file: a folder, a FIFO), or None when nothing is there (or it is being evicted).

    Raises:
        NotAFile: a symlink or socket lies at ``path``; it is never followed.
    """
    try:
        fd = os.open(path, OPEN_FLAGS)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in _NOT_A_FILE:
            raise NotAFile(exc.errno, f"{path} is not a regular file ({exc.strerror})") from None
        if exc.errno in (errno.EMFILE, errno.ENFILE):
            raise OSError(
                exc.errno,
                f"too many open files while pinning cache files ({exc.strerror}); "
                "lower pin_window or raise the limit (ulimit -n)",
            ) from exc
        raise
    try:
        fcntl.flock(fd, _SHARE_NOWAIT)
        stat = os.fstat(fd)
    except BlockingIOError:  # an evictor holds it and is about to delete it
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    if stat.st_nlink == 0:  # evicted between our open and our lock
        os.close(fd)
        return None
    return Pin(fd), stat


def delete_unpinned(path: str) -> bool:
    """Delete ``path`` unless someone holds a pin (share lock) on it; True when it is gone."""
    try:
        fd = os.open(path, OPEN_FLAGS)
    except FileNotFoundError:
        return True
    except OSError as exc:
        if exc.errno not in _NOT_A_FILE:
            raise
        with contextlib.suppress(FileNotFoundError):  # not a file we made: nobody can pin it
            os.unlink(path)
        return True
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        # Holding the exclusive lock: a pinner that opened the file before this unlink finds it
        # unlinked (no links left) once it gets its share lock, and treats it as a miss.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        return True
    finally:
        os.close(fd)
