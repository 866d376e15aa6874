"""A local (``file://``) volume as a read-only fsspec filesystem that follows no symbolic link:
what :func:`~uc_jupyter.tables.export.load_hf_dataset` hands Hugging Face ``datasets`` for a local
volume, so that every file it opens is reached as a dataset's are.

Hugging Face opens the files it is given by name, later and elsewhere: it copies them into its
cache for a memory-mapped Arrow dataset, or (``streaming=True``) opens them as the rows are asked
for, in DataLoader workers too. Given plain local paths, a file (or a folder above it) swapped for a
symlink after the listing would be read outside the volume. Given URLs of this filesystem
(``ucvolume:///<volume root>/<path>``), each ``open`` walks from the volume's root with ``openat``
and ``O_NOFOLLOW`` (:class:`~uc_jupyter.storage.local_volume.LocalVolume`) and reads the descriptor
it checked, in whichever process opens it: a symlink is refused in one line, never followed.

Why a filesystem rather than descriptors or copies: descriptors opened here do not reach spawned
DataLoader workers, nor make names Hugging Face can key its cache by; copying every file into a
private folder first would make a streamed dataset wait for a copy of the whole export. Through
this filesystem, Hugging Face copies a file into its cache as it does an object store's (through
the walk), and streams read the volume in place.

Spawned processes know nothing of this protocol until this module is imported: the options carry a
:class:`VolumeRoot`, whose unpickling imports it (and so registers the protocol) in any process that
receives a dataset built on it.

Example:
    >>> options = {PROTOCOL: {"volume": VolumeRoot("/data/vol", "/Volumes/main/ml/vol")}}  # doctest: +SKIP
    >>> datasets.load_dataset("parquet", data_files=[url_of(root, "t/a.parquet")],         # doctest: +SKIP
    ...                       storage_options=options)
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from typing import Any

import fsspec
from fsspec.spec import AbstractFileSystem

from uc_jupyter.errors import NotFound
from uc_jupyter.storage.errors import VolumeReadError
from uc_jupyter.storage.local_volume import LocalVolume
from uc_jupyter.storage.locations import local_path_below

__all__ = ["PROTOCOL", "LocalVolumeFileSystem", "VolumeRoot", "url_of"]

PROTOCOL = "ucvolume"
_AGAIN = "load it again to list the folder again"


@dataclass(frozen=True)
class VolumeRoot:
    """The volume's root: its local ``path`` and its ``/Volumes`` path ``where`` (for messages)."""

    path: str
    where: str


def url_of(root: VolumeRoot, relative: str) -> str:
    """The URL of the file ``relative`` (below the volume's root) on this filesystem.

    Example:
        >>> url_of(VolumeRoot("/data/vol", "/Volumes/main/ml/vol"), "t/a.parquet")
        'ucvolume:///data/vol/t/a.parquet'
    """
    return f"{PROTOCOL}://{root.path.rstrip('/')}/{relative}"


class LocalVolumeFileSystem(AbstractFileSystem):  # type: ignore[misc]  # fsspec ships no types
    """The regular files and real folders of the volume ``volume``, read only, no symlink followed."""

    protocol = PROTOCOL

    def __init__(self, volume: VolumeRoot, **options: Any) -> None:
        super().__init__(**options)
        self.volume = volume
        self._files = LocalVolume(volume.path, "", volume.where, again=_AGAIN)

    def _relative(self, path: str) -> str:
        relative = local_path_below(self.volume.path, self._strip_protocol(path))
        if relative is None:
            raise FileNotFoundError(f"{path} is not inside the volume {self.volume.where}")
        return relative

    def info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        relative = self._relative(path)
        name = self._strip_protocol(path)
        if not relative:
            return {"name": name, "type": "directory", "size": 0}
        found = self._files.lstat(relative)
        if stat.S_ISDIR(found.st_mode):
            return {"name": name, "type": "directory", "size": 0}
        if not stat.S_ISREG(found.st_mode):  # a symlink, a FIFO: never read (one line naming it)
            raise self._files.refused(relative, found)
        # The ETag names this very file (inode, modification, size): Hugging Face keys its copy and
        # its Arrow cache by it, so a file replaced since is read again, never served from the cache.
        tag = f'"{found.st_ino:x}-{found.st_mtime_ns:x}-{found.st_size:x}"'
        return {"name": name, "type": "file", "size": found.st_size, "mtime": found.st_mtime, "ETag": tag}

    def exists(self, path: str, **kwargs: Any) -> bool:
        """Whether ``path`` is there; a symlink (or one on its way) is refused in one line rather than
        called absent: Hugging Face asks before it reads, and "Unable to find" would not say why."""
        try:
            self.info(path)
        except FileNotFoundError:
            return False
        except VolumeReadError:
            # Only which error to show is decided by this second look (racy by nature); what is
            # read is always reached by the walk.
            if not os.path.lexists(self._strip_protocol(path)):
                return False
            raise
        return True

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> list[Any]:
        relative = self._relative(path)
        base = self._strip_protocol(path).rstrip("/")
        folder = LocalVolume(self.volume.path, relative, f"{self.volume.where}/{relative}".rstrip("/"), again=_AGAIN)
        try:
            files, _ = folder.entries(recursive=False)
            folders = folder.sub_folders()
        except NotFound:
            raise FileNotFoundError(f"{folder.where} does not exist") from None
        entries = [{"name": f"{base}/{name}", "type": "file", "size": size} for name, size, _ in files]
        entries += [{"name": f"{base}/{name}", "type": "directory", "size": 0} for name in folders]
        return entries if detail else [entry["name"] for entry in entries]

    def _open(self, path: str, mode: str = "rb", **kwargs: Any) -> Any:
        if mode != "rb":
            raise PermissionError(f"{path}: a volume read through {PROTOCOL}:// is read only")
        return os.fdopen(self._files.open(self._relative(path), None), "rb")


# Registered as this module is imported (see the module's docstring: unpickling a VolumeRoot imports it).
fsspec.register_implementation(PROTOCOL, LocalVolumeFileSystem, clobber=True)
