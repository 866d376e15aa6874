"""The files of a local (``file://``) volume, reached without following symbolic links.

One rule wherever a dataset touches a local volume: **a dataset reads the regular files of a volume
and never follows a symbolic link inside it**, whether the link points outside the volume or not.
Every other read of a local volume's file goes through here too: ``ResolvedVolumePath.open()``, the
completer's listing, and Hugging Face's reads for ``load_hf_dataset``
(:mod:`~uc_jupyter.storage.local_volume_fs`); each passes the remedy its errors give (``again``).

- The dataset's folder is reached from the volume's root through real folders only; a symlink on
  the way is refused (:class:`~uc_jupyter.catalog.embedded.local.EscapesVolume`, one line naming it).
- Listings skip symlinks (to files or to folders) and entries that are not regular files (FIFOs,
  sockets, devices); the caller warns once with how many were skipped.
- Every check and every read walks from the volume root's descriptor with ``openat``, ``O_NOFOLLOW``
  on every component, so a symlink swapped in after the listing (or after any earlier check)
  cannot redirect it: it fails with :class:`~uc_jupyter.storage.errors.VolumeReadError`, as does a file
  that is no longer a regular file or no longer the listed size. Opening never blocks (a FIFO
  swapped in is refused, not waited on).

The volume root's descriptor is opened once per dataset and process (forked DataLoader workers
inherit it; spawned ones open their own): a check costs one ``openat`` per folder between the
volume's root and the file, and one ``fstatat``.

What this cannot tell apart: a *hard link* to a file outside the volume is a regular file inside
it. Making one needs write access to the volume and (with Linux's default
``fs.protected_hardlinks``) ownership of, or read and write access to, the target, so whoever made
it could read the target already. A folder *moved* out of the volume while a check walks through it
is followed, since the walk holds it open (moving needs write access to both places). And a path
that is yielded is checked when it is yielded: what a consumer reads when it opens that path later
is whatever is there then (``cache="always"`` copies through the checked descriptor instead).

Example:
    >>> volume = LocalVolume.of(get_catalog().resolve_volume_path("/Volumes/main/ml/images"))  # doctest: +SKIP
    >>> files, skipped = volume.entries(recursive=True)                                       # doctest: +SKIP
    >>> volume.check(files[0][0], files[0][1])                                                # doctest: +SKIP
"""

from __future__ import annotations

import errno
import os
import stat
import threading
import weakref
from typing import Any, Protocol

from uc_jupyter.errors import EscapesVolume, NotFound
from uc_jupyter.storage import urls as st
from uc_jupyter.storage.downloads import changed_since_listing
from uc_jupyter.storage.errors import VolumeReadError
from uc_jupyter.storage.locations import local_path_below
from uc_jupyter.storage.nofollow import LISTABLE, READ, WALKED, descend
from uc_jupyter.storage.pages import Entry  # here the version is the modification time


class _Volume(Protocol):
    @property
    def storage_location(self) -> str: ...


class ResolvedFolder(Protocol):
    """A ``/Volumes`` folder as a catalog resolved it (``ResolvedVolumePath``); storage knows no catalog."""

    @property
    def volume_path(self) -> str: ...
    @property
    def relative(self) -> str: ...
    @property
    def volume(self) -> _Volume: ...


__all__ = ["RELIST", "LocalVolume"]

# What a dataset's reader is told to do when a file is no longer what its listing saw.
RELIST = "make the dataset again to list the folder again"

_SYMLINK_ERRORS = (errno.ELOOP, errno.ENOTDIR)  # what O_NOFOLLOW and O_DIRECTORY give on a symlink


class LocalVolume:
    """The dataset folder ``folder`` of the volume whose storage root is ``root`` (a local path).

    ``where`` is the folder's ``/Volumes`` path, for messages; ``again``, what its errors tell the
    reader to do once the file is not what was listed or resolved (a dataset lists its folder again).
    Paths given to the methods are relative to the dataset's folder and come from :meth:`entries`
    or a catalog's resolve (no ``.`` or ``..`` parts). Picklable: the descriptor stays behind and the
    receiving process opens its own.
    """

    def __init__(self, root: str, folder: str, where: str, *, again: str = RELIST) -> None:
        self.root, self.folder, self.where, self.again = root, folder, where, again
        self._prefix = f"{folder}/" if folder else ""
        self._fd = -1
        self._lock = threading.Lock()

    @classmethod
    def of(cls, resolved: ResolvedFolder) -> LocalVolume:
        """The local volume folder a catalog resolved (its storage location is ``file://``)."""
        root = st.local_path(resolved.volume.storage_location)
        return cls(root, resolved.relative, resolved.volume_path)

    @classmethod
    def below(cls, root: str, folder: str, *, where: str) -> LocalVolume:
        """The folder ``folder``, walked down to from ``root`` (both local paths; ``folder`` lexically
        at or below ``root`` by :func:`~uc_jupyter.storage.locations.local_path_below`, else ValueError)."""
        root, below = os.path.normpath(root), local_path_below(root, folder)
        if below is None:
            raise ValueError(f"cannot read {where}: {os.path.normpath(folder)} is not below its volume's root {root}")
        return cls(root, below, where)

    @property
    def path(self) -> str:
        """The folder's own local path (what a remote volume's ``bucket/prefix`` is to its store)."""
        return f"{self.root.rstrip('/')}/{self.folder}" if self.folder else self.root

    def __getstate__(self) -> dict[str, Any]:
        return {"root": self.root, "folder": self.folder, "where": self.where, "again": self.again}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.root, self.folder, self.where, self.again = state["root"], state["folder"], state["where"], state["again"]
        self._prefix = f"{self.folder}/" if self.folder else ""
        self._fd = -1
        self._lock = threading.Lock()

    # ---------------------------------------------------------------- listing
    def entries(self, *, recursive: bool) -> tuple[list[Entry], list[str]]:
        """``(files, skipped)`` below the dataset's folder: each regular file as ``(path, size,
        version)``, and the paths of what was skipped (symlinks, other non-regular entries).
        Hidden folders (``.git``) are not entered; hidden files are listed for the caller to drop.

        Raises:
            NotFound: the folder does not exist.
            NotADirectoryError: the folder is a file.
            EscapesVolume: the way to the folder goes through a symlink.
        """
        top = self._open_folder()
        files: list[Entry] = []
        skipped: list[str] = []
        pending = [""]  # folders to list, by path below the top; reopened from it, never followed
        try:
            while pending:
                base = pending.pop()
                try:
                    fd = descend(top, base.rstrip("/").split("/"), LISTABLE) if base else top
                except OSError as exc:
                    if exc.errno not in (*_SYMLINK_ERRORS, errno.ENOENT):
                        raise
                    if exc.errno != errno.ENOENT:  # swapped for a symlink since it was seen
                        skipped.append(base.rstrip("/"))
                    continue
                try:
                    self._list_one(fd, base, recursive, files, skipped, pending)
                finally:
                    if fd != top:
                        os.close(fd)
        finally:
            os.close(top)
        return files, skipped

    def sub_folders(self) -> list[str]:
        """The names of the real folders (no symlink) right inside the dataset's folder, hidden ones
        (``.x``) left out: what a listing without ``recursive`` leaves out and one with it reads."""
        top = self._open_folder()
        try:
            with os.scandir(top) as found:
                return sorted(e.name for e in found if e.is_dir(follow_symlinks=False) and not e.name.startswith("."))
        finally:
            os.close(top)

    @staticmethod
    def _list_one(
        fd: int, base: str, recursive: bool, files: list[Entry], skipped: list[str], pending: list[str]
    ) -> None:
        with os.scandir(fd) as found:
            for entry in found:
                relative = base + entry.name
                if entry.is_dir(follow_symlinks=False):
                    if recursive and not entry.name.startswith("."):
                        pending.append(relative + "/")
                    continue
                if entry.is_file(follow_symlinks=False):
                    info = entry.stat(follow_symlinks=False)
                    if stat.S_ISREG(info.st_mode):  # not swapped between the two looks
                        files.append((relative, info.st_size, str(info.st_mtime)))
                        continue
                skipped.append(relative)

    def _open_folder(self) -> int:
        """A readable descriptor of the dataset's folder, walked to without following symlinks."""
        root = self._root_fd()
        # "." for the root itself: a descriptor of its own (a dup would share the listing's offset).
        parts = self.folder.split("/") if self.folder else ["."]
        try:
            return descend(root, parts, LISTABLE)
        except OSError as exc:
            kind, at = self._diagnose(self.folder)
            if kind == "missing" or (kind == "file" and at != self.folder):
                raise NotFound(f"{self.where} does not exist") from None
            if kind == "symlink":
                raise EscapesVolume(
                    f"{self.where} goes through the symbolic link {self._volumes_path_of(at)}; datasets do "
                    "not follow symlinks inside a volume: give the folder it points to"
                ) from None
            if kind == "file" and at == self.folder:
                raise NotADirectoryError(
                    f"{self.where} is a file, not a folder; give the folder that holds the files"
                ) from None
            raise VolumeReadError(f"cannot list {self.where}: {os.strerror(exc.errno or 0)}") from exc

    # ---------------------------------------------------------------- per file
    def check(self, relative: str, size: int) -> None:
        """Raise :class:`VolumeReadError` unless ``relative`` is, right now, a regular file of
        ``size`` bytes reached without a symlink."""
        info = self.lstat(relative)
        if not stat.S_ISREG(info.st_mode) or info.st_size != size:
            raise self._changed(relative, info, size)

    def lstat(self, relative: str) -> os.stat_result:
        """What ``relative`` is right now (a symlink's own state, not its target's), reached
        through real folders only (:class:`VolumeReadError` when one on the way is a symlink or gone)."""
        root = self._fd if self._fd >= 0 else self._root_fd()
        path = self._prefix + relative
        cut = path.rfind("/")
        try:
            if cut < 0:
                return os.stat(path, dir_fd=root, follow_symlinks=False)
            fd = descend(root, path[:cut].split("/"), WALKED)
            try:
                return os.stat(path[cut + 1 :], dir_fd=fd, follow_symlinks=False)
            finally:
                os.close(fd)
        except OSError as exc:
            raise self._unreadable(relative, exc) from None

    def open(self, relative: str, size: int | None) -> int:
        """A descriptor (the caller closes it) of ``relative``, checked as :meth:`check` does (the
        size only when given), for reading: it stays this file whatever is swapped in at its path
        afterwards."""
        root = self._fd if self._fd >= 0 else self._root_fd()
        path = self._prefix + relative
        cut = path.rfind("/")
        try:
            if cut < 0:
                fd = os.open(path, READ, dir_fd=root)
            else:
                folder = descend(root, path[:cut].split("/"), WALKED)
                try:
                    fd = os.open(path[cut + 1 :], READ, dir_fd=folder)
                finally:
                    os.close(folder)
        except OSError as exc:
            raise self._unreadable(relative, exc) from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or (size is not None and info.st_size != size):
                raise self._changed(relative, info, info.st_size if size is None else size)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def refused(self, relative: str, info: os.stat_result) -> VolumeReadError:
        """The one-line error for ``relative``, found to be ``info`` (a symlink, a FIFO): not read."""
        return self._changed(relative, info, info.st_size)

    # ---------------------------------------------------------------- internals
    def _root_fd(self) -> int:
        """The volume root's descriptor, opened once per instance and process (see the module)."""
        with self._lock:
            if self._fd < 0:
                try:
                    fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                except FileNotFoundError:
                    raise NotFound(f"{self.where}: the volume's storage {self.root} does not exist") from None
                self._fd = fd
                weakref.finalize(self, os.close, fd)
            return self._fd

    def _diagnose(self, path: str) -> tuple[str, str]:
        """Why ``path`` (below the volume root) could not be walked: ``(kind, the part's path)``
        with kind "missing", "symlink", "file" or "other". Only runs after a failure, so the extra
        looks (racy, but only for the message) cost nothing on the way that works."""
        parts = path.split("/")
        for i in range(len(parts)):
            at = "/".join(parts[: i + 1])
            try:
                info = os.lstat(os.path.join(self.root, at))
            except FileNotFoundError:
                return "missing", at
            except OSError:
                return "other", at
            if stat.S_ISLNK(info.st_mode):
                return "symlink", at
            if not stat.S_ISDIR(info.st_mode):
                return ("file" if stat.S_ISREG(info.st_mode) else "other"), at
        return "other", path

    def _volumes_path_of(self, below_root: str) -> str:
        """The /Volumes path of a path below the volume's root."""
        volume = self.where[: len(self.where) - len(self.folder)].rstrip("/") if self.folder else self.where
        return f"{volume}/{below_root}"

    def _unreadable(self, relative: str, exc: OSError) -> VolumeReadError:
        """The one-line error for a walk to ``relative`` that failed with ``exc``."""
        where = f"{self.where}/{relative}"
        path = self._prefix + relative
        kind, at = self._diagnose(path)
        again = self.again
        if kind == "symlink":
            return _symlink_now(where, self._volumes_path_of(at), again)
        if kind == "missing" or exc.errno == errno.ENOENT:
            return VolumeReadError(f"cannot read {where}: it no longer exists; {again}")
        if kind in ("file", "other") and at != path:
            return VolumeReadError(f"cannot read {where}: {self._volumes_path_of(at)} is not a folder now; {again}")
        if exc.errno in _SYMLINK_ERRORS:  # changed back between the walk and the diagnosis
            return VolumeReadError(f"cannot read {where}: it was a symbolic link when read; {again}")
        return VolumeReadError(f"cannot read {where}: {type(exc).__name__}: {os.strerror(exc.errno or 0)}")

    def _changed(self, relative: str, info: os.stat_result, size: int) -> VolumeReadError:
        where = f"{self.where}/{relative}"
        if stat.S_ISLNK(info.st_mode):
            return _symlink_now(where, where, self.again)
        if not stat.S_ISREG(info.st_mode):
            return VolumeReadError(
                f"cannot read {where}: it is not a regular file now (only regular files are read); {self.again}"
            )
        return changed_since_listing(where, size, info.st_size)


def _symlink_now(where: str, link: str, again: str) -> VolumeReadError:
    return VolumeReadError(
        f"cannot read {where}: {link} is a symbolic link now (no read follows a symlink inside a volume); {again}"
    )
