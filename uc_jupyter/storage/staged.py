"""Files and folders staged on local disk (:func:`~uc_jupyter.storage.writes.staging_folder`), held by
the process that staged them, and the sweep that removes what dead processes left there.

An export stages the table's Parquet files, and an upload to object storage stages each checkpoint
file, in the staging folder; ``kill -9`` leaves them there. Each staged entry is locked (``flock``)
by its process from before its name is visible until it is removed: the kernel drops the lock when
the process dies, however it dies, so an entry whose lock can be taken is a dead process's, and
:func:`sweep` removes it. An entry is made under a hidden name, locked, then renamed to its visible
name (the lock goes with it), so a sweep never meets a visible entry that is not locked yet. Only
entries named as this module names them are looked at; a symbolic link is never followed or removed.

Example:
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> with staged_folder(folder, "export-") as path:
    ...     sweep(folder)            # held by this process: not removed
    []
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator

__all__ = ["PREFIXES", "staged_file", "staged_folder", "sweep"]

PREFIXES = ("export-", "put-")  # the visible names of staged entries: an export's folder, an upload's file
_NEW = ".new-"  # an entry made but not yet locked and renamed
_NEW_GRACE_S = 60.0  # a hidden new entry unlocked this long is a dead process's (the rename follows at once)


@contextlib.contextmanager
def staged_folder(folder: str, prefix: str) -> Iterator[str]:
    """A new private folder (0700) in ``folder`` named ``<prefix>...``, locked by this process for the
    block and removed when it ends.

    Example:
        >>> with staged_folder(tempfile.mkdtemp(), "export-") as path:
        ...     os.path.basename(path).startswith("export-")
        True
    """
    made = tempfile.mkdtemp(prefix=_NEW + prefix, dir=folder)
    fd = os.open(made, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        path = _locked_and_shown(fd, made, folder)
        try:
            yield path
        finally:
            shutil.rmtree(path, ignore_errors=True)
    finally:
        os.close(fd)  # the lock goes last: the entry is gone before a sweep may take it


@contextlib.contextmanager
def staged_file(folder: str, prefix: str) -> Iterator[str]:
    """A new empty file (0600) in ``folder`` named ``<prefix>...``, locked by this process for the
    block and removed when it ends; the caller opens it by path to write and read it.

    Example:
        >>> with staged_file(tempfile.mkdtemp(), "put-") as path:
        ...     os.path.getsize(path)
        0
    """
    fd, made = tempfile.mkstemp(prefix=_NEW + prefix, dir=folder)
    try:
        path = _locked_and_shown(fd, made, folder)
        try:
            yield path
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
    finally:
        os.close(fd)


def sweep(folder: str, *, now: float | None = None) -> list[tuple[str, int]]:
    """Remove the staged entries in ``folder`` that no live process holds; return each one's path and
    the bytes it took. A missing folder holds none.

    Example:
        >>> sweep("/nonexistent/staging")
        []
    """
    now = time.time() if now is None else now
    removed: list[tuple[str, int]] = []
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return removed
    for entry in entries:
        visible = entry.name.startswith(PREFIXES)
        if not visible and not entry.name.startswith(tuple(_NEW + p for p in PREFIXES)):
            continue  # not ours
        gone = _remove_if_dead(entry.path, young_after=None if visible else now - _NEW_GRACE_S)
        if gone is not None:
            removed.append((entry.path, gone))
    return removed


def _locked_and_shown(fd: int, made: str, folder: str) -> str:
    """Lock the new entry ``made`` through ``fd``, then give it its visible name (its hidden one less the mark)."""
    fcntl.flock(fd, fcntl.LOCK_EX)  # waits only while a sweep looks at it (it leaves a young entry alone)
    path = os.path.join(folder, os.path.basename(made)[len(_NEW) :])
    os.rename(made, path)
    return path


def _remove_if_dead(path: str, *, young_after: float | None) -> int | None:
    """Remove ``path`` (a real file or folder, never a link) if its lock can be taken; its bytes, or None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:  # gone meanwhile, or a symbolic link (ELOOP): nothing of ours
        if exc.errno not in (errno.ENOENT, errno.ELOOP):
            raise
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None  # its process lives
        held = os.fstat(fd)
        if young_after is not None and held.st_mtime > young_after:
            return None  # a new entry its process has not locked yet
        try:
            now_there = os.lstat(path)
        except FileNotFoundError:
            return None
        if (now_there.st_dev, now_there.st_ino) != (held.st_dev, held.st_ino):
            return None  # replaced since it was opened: not the entry judged
        if stat.S_ISDIR(held.st_mode):
            size = _bytes_below(path)
            shutil.rmtree(path, ignore_errors=True)  # removes links inside, never what they point at
            return size
        if stat.S_ISREG(held.st_mode):
            os.unlink(path)
            return held.st_size
        return None
    finally:
        os.close(fd)


def _bytes_below(path: str) -> int:
    """The bytes of the regular files below ``path`` (links not followed)."""
    total = 0
    for top, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                found = os.lstat(os.path.join(top, name))
                if stat.S_ISREG(found.st_mode):
                    total += found.st_size
    return total
