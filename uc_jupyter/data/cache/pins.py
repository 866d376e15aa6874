"""Pins: a share lock (``flock``) on an open descriptor keeps a handed-out file from eviction.

A hit opens the object and share-locks it, which both checks that it is there and pins it; eviction
takes an exclusive lock without waiting and skips files it cannot lock, so a path handed out stays
valid until the pin is released (or the pinning process ends: the kernel drops its locks, nothing is
left to reclaim). Objects are opened without following symbolic links and without blocking (a FIFO
planted under an object's name must not hang the reader): only regular files are ever served.

Example:
    >>> import tempfile, os, fcntl
    >>> path = os.path.join(tempfile.mkdtemp(), "object")
    >>> _ = open(path, "wb").write(b"data")
    >>> fd = os.open(path, OPEN_FLAGS)
    >>> fcntl.flock(fd, SHARE_NOWAIT)
    >>> pin = Pin(); pin.fd = fd  # what a hit hands out (uc_jupyter.data.cache.checks pins it)
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

__all__ = ["NOT_A_FILE", "OPEN_FLAGS", "SHARE_NOWAIT", "NotAFile", "Pin", "delete_unpinned"]

# No symlink is followed and a FIFO does not block the open; O_NONBLOCK changes nothing for the
# regular files that are served.
OPEN_FLAGS = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
SHARE_NOWAIT = fcntl.LOCK_SH | fcntl.LOCK_NB
# What opening a name that is not a regular file can fail with: a symlink (ELOOP), a socket (ENXIO).
NOT_A_FILE = (errno.ELOOP, errno.ENXIO)


class NotAFile(OSError):
    """Something that is not a regular file (a symlink, a socket) lies under an object's name."""


class Pin:
    """A share-locked descriptor of a resident file: while it is open, eviction skips the file.

    Made per hit and released per file handed out, so kept to what that needs: made without an
    ``__init__`` of ours (``pin = Pin(); pin.fd = fd``) and released by :meth:`FileCache.release`
    with the descriptor's number set to -1 (idempotent: the number may belong to another file
    afterwards). A pin dropped unreleased (a CachedFile nobody released) still unpins.
    """

    __slots__ = ("fd",)

    fd: int

    def release(self) -> None:
        """Close the descriptor (idempotent)."""
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)

    def __del__(self) -> None:  # a CachedFile dropped without release() still unpins
        if self.fd >= 0:  # only then: the check is what a released pin pays here
            with contextlib.suppress(OSError):  # never raise from a finaliser
                self.release()


def delete_unpinned(path: str) -> bool:
    """Delete ``path`` unless someone holds a pin (share lock) on it; True when it is gone."""
    try:
        fd = os.open(path, OPEN_FLAGS)
    except FileNotFoundError:
        return True
    except OSError as exc:
        if exc.errno not in NOT_A_FILE:
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
