"""Writes into a local (``file://``) volume folder that follow no symbolic link.

Every write, read, listing and delete walks from the volume root's descriptor with ``openat`` and
``O_NOFOLLOW`` on every component (as :class:`~uc_jupyter.storage.local_volume.LocalVolume` reads), so a
folder inside the volume swapped for a symlink, before or during a write, fails the walk instead of
redirecting it outside the volume (:class:`~uc_jupyter.catalog.embedded.local.EscapesVolume`, one line). Missing
folders are made on the way (``mkdirat``). A file is written to a hidden temporary name in its folder
(``O_EXCL``: never an existing file or link) and renamed over its key within that folder's descriptor:
visible whole or not at all, and on disk (``fsync``, the file and then its folder) before the call
returns, so a file written after it (a checkpoint's marker) never survives a crash without it.
Listings skip symlinks and (unless asked for them) the temporaries; deletes unlink names in their
folder (a symlink named by a key is removed itself, never its target) and remove the folders they
empty.

Example:
    >>> writes = LocalWrites.below("/data/vol", "/data/vol/run", where="/Volumes/main/ml/vol/run")  # doctest: +SKIP
    >>> writes.put_bytes("step-1/.metadata", b"...")                                                 # doctest: +SKIP
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import os
import stat
import uuid
from collections.abc import Iterable, Iterator
from typing import BinaryIO

from uc_jupyter.errors import EscapesVolume
from uc_jupyter.storage.keys import TEMPORARY, Listed, checked_key, checked_prefix
from uc_jupyter.storage.locations import local_path_below
from uc_jupyter.storage.nofollow import LISTABLE, READ, descend

__all__ = ["LocalWrites"]

_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_TEMPORARY = TEMPORARY  # prefix of files not yet renamed into place


class LocalWrites:
    """Writes into ``folder`` (a local path at or below the volume root ``root``); ``where`` names it."""

    def __init__(self, root: str, below: str, where: str) -> None:
        self.root, self.where = root, where
        self._below = below  # the folder's path below the root, "/"-separated ("" : the root itself)
        self.url = "file://" + os.path.join(root, below) if below else "file://" + root

    @classmethod
    def below(cls, root: str, folder: str, *, where: str) -> LocalWrites:
        """The writes of ``folder``, walked down to from ``root`` (lexically below it, by the one
        containment rule, :func:`~uc_jupyter.storage.locations.local_path_below`; ValueError otherwise)."""
        root, below = os.path.normpath(root), local_path_below(root, folder)
        if below is None:
            raise ValueError(f"cannot write {where}: {os.path.normpath(folder)} is not below its volume's root {root}")
        return cls(root, below, where)

    # ---------------------------------------------------------------- the seam
    def put_file(self, key: str, local_path: str | os.PathLike[str]) -> None:
        with open(local_path, "rb") as source, self.new_file(key) as out:
            out.flush()
            size = os.fstat(source.fileno()).st_size
            copied = 0
            while copied < size:  # in the kernel where it can (no user-space copy of checkpoint shards)
                sent = os.copy_file_range(source.fileno(), out.fileno(), size - copied)
                if sent == 0:
                    break
                copied += sent

    def put_bytes(self, key: str, data: bytes) -> None:
        with self.new_file(key) as out:
            out.write(data)

    @contextlib.contextmanager
    def new_file(self, key: str) -> Iterator[BinaryIO]:
        """A file to write ``key`` through: renamed into place when the block ends without an error,
        removed otherwise (written in place: no copy on local disk first)."""
        folder, name = self._parent(checked_key(key), create=True)
        temporary = f"{_TEMPORARY}{uuid.uuid4().hex}-{name}"[:255]
        try:
            fd = os.open(temporary, _NEW, 0o644, dir_fd=folder)
            try:
                with os.fdopen(fd, "wb", closefd=True) as out:
                    yield out
                    out.flush()
                    os.fsync(out.fileno())  # on disk before its name is: what is named later may rely on it
                os.rename(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
                os.fsync(folder)  # the rename itself, before whatever is written next
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary, dir_fd=folder)
                raise
        finally:
            os.close(folder)

    def read_bytes(self, key: str) -> bytes:
        with self._opened(key) as fd, os.fdopen(os.dup(fd), "rb") as handle:
            return handle.read()

    @contextlib.contextmanager
    def _opened(self, key: str) -> Iterator[int]:
        """A descriptor of the regular file ``key``, reached without following a symlink."""
        try:
            folder, name = self._parent(checked_key(key), create=False)
        except FileNotFoundError:
            raise FileNotFoundError(f"{self.where}/{key} does not exist") from None
        try:
            fd = os.open(name, READ, dir_fd=folder)
        except OSError as exc:
            raise self._error(exc, key) from None
        finally:
            os.close(folder)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise FileNotFoundError(f"{self.where}/{key} is not a regular file")
            yield fd
        finally:
            os.close(fd)

    def read_range(self, key: str, offset: int, length: int) -> bytes:
        with self._opened(key) as fd:
            return os.pread(fd, max(0, length), offset) if length > 0 else b""

    def delete(self, keys: Iterable[str]) -> None:
        """Unlink the files ``keys``, then remove the folders below this one that this left empty (as on
        object storage, where a folder is only its keys' common prefix)."""
        emptied: set[str] = set()
        for key in [checked_key(key) for key in keys]:
            try:
                folder, name = self._parent(key, create=False)
            except FileNotFoundError:
                continue
            try:
                os.unlink(name, dir_fd=folder)
            except FileNotFoundError:
                pass
            except IsADirectoryError:
                raise IsADirectoryError(f"cannot delete {self.where}/{key}: it is a folder") from None
            finally:
                os.close(folder)
            parts = key.split("/")[:-1]
            emptied.update("/".join(parts[:depth]) for depth in range(1, len(parts) + 1))
        for folder_key in sorted(emptied, key=lambda k: k.count("/"), reverse=True):  # the deepest first
            *above, name = folder_key.split("/")
            try:
                parent = self._walk(above, create=False)
            except OSError:  # gone, or swapped for a symlink meanwhile: nothing of ours to remove
                continue
            try:
                os.rmdir(name, dir_fd=parent)  # only an empty real folder: never a symlink, never a file
            except OSError:
                pass
            finally:
                os.close(parent)

    def list(self, prefix: str = "") -> builtins.list[str]:
        return [key for key, _, _ in self.listing(prefix)]

    def listing(self, prefix: str = "", *, temporaries: bool = False) -> builtins.list[Listed]:
        start = checked_prefix(prefix)
        folders = start.split("/") if start else []
        try:
            top = self._walk(folders, create=False)
        except FileNotFoundError:
            return []
        except EscapesVolume:
            if self._file_on_the_way(folders):  # a file where a folder would be: nothing below it, as on object stores
                return []
            raise
        found: builtins.list[Listed] = []
        pending: builtins.list[tuple[int, str]] = [(top, f"{start}/" if start else "")]
        while pending:
            fd, base = pending.pop()
            try:
                with os.scandir(fd) as entries:
                    for entry in entries:
                        if entry.is_symlink() or (entry.name.startswith(_TEMPORARY) and not temporaries):
                            continue
                        if entry.is_dir(follow_symlinks=False):
                            with contextlib.suppress(FileNotFoundError, NotADirectoryError, OSError):
                                pending.append((os.open(entry.name, LISTABLE, dir_fd=fd), f"{base}{entry.name}/"))
                        elif entry.is_file(follow_symlinks=False):
                            with contextlib.suppress(FileNotFoundError):  # removed since it was listed
                                got = entry.stat(follow_symlinks=False)
                                found.append(Listed(base + entry.name, got.st_size, got.st_mtime))
            finally:
                os.close(fd)
        return sorted(found)

    # ---------------------------------------------------------------- the walk
    def _parent(self, key: str, *, create: bool) -> tuple[int, str]:
        """The descriptor of ``key``'s folder (the caller closes it) and the file's name in it."""
        *folders, name = key.split("/")
        return self._walk(folders, create=create), name

    def _walk(self, folders: builtins.list[str], *, create: bool) -> int:
        """From the root's descriptor down ``self._below`` and then ``folders``: no symlink followed."""
        parts = [p for p in self._below.split("/") if p] + folders
        try:
            root = os.open(self.root, LISTABLE)
        except OSError as exc:
            raise self._error(exc, "") from None
        try:
            return descend(root, parts or ["."], LISTABLE, make=create)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise EscapesVolume(
                    f"cannot write {self.where}: {exc.filename} is a symbolic link or a file, "
                    "not a folder of the volume; remove it"
                ) from None
            raise
        finally:
            os.close(root)

    def _file_on_the_way(self, folders: builtins.list[str]) -> bool:
        """Whether the walk down ``folders`` meets a regular file before any symbolic link (only to tell
        the two apart after a walk refused them: nothing is opened here)."""
        way = self.root
        for part in [p for p in self._below.split("/") if p] + folders:
            way = os.path.join(way, part)
            try:
                mode = os.lstat(way).st_mode
            except OSError:
                return False
            if not stat.S_ISDIR(mode):
                return stat.S_ISREG(mode)
        return False

    def _error(self, exc: OSError, key: str) -> OSError:
        where = f"{self.where}/{key}" if key else self.where
        if exc.errno == errno.ENOENT:
            return FileNotFoundError(f"{where} does not exist")
        if exc.errno == errno.ELOOP:
            return EscapesVolume(f"cannot open {where}: it is a symbolic link; remove it")
        return OSError(exc.errno, f"cannot open {where}: {exc.strerror}")
