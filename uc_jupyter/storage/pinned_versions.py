"""Remote files read as the versions a listing saw: an fsspec filesystem over another, which opens
only the files listed and reads each with its listed entity tag (``If-Match``).

:func:`~uc_jupyter.tables.export.load_hf_dataset` lists an export folder, then hands Hugging Face
``datasets`` the files to read later (as it copies them into its cache, or as a stream's rows are
asked for, in DataLoader workers too). Given the files' own URLs, Hugging Face reads whatever each
object holds then, and an object rewritten with as many bytes since the listing would be read
silently. Given URLs of this filesystem (``ucpinned://bucket/key``), each read is a ranged GET that
names the listed ETag (:func:`~uc_jupyter.storage.fsspec_ranges.read_range`): another version is
:func:`~uc_jupyter.storage.downloads.changed_since_listing`'s one line, as for a dataset's own
downloads, and a file that was not listed is not opened at all. On a store where ``read_range``
cannot name the version (no ETag listed, or a filesystem other than s3fs), the listed size is what
is checked: the file object ends at it, and a look at the object tells a changed size.

Spawned processes know nothing of this protocol until this module is imported: the options carry a
:class:`Pins`, whose unpickling imports it (and so registers the protocol), as
:mod:`~uc_jupyter.storage.local_volume_fs` does for local volumes.

Example:
    >>> pins = Pins("s3", {"anon": True}, {"lake/t/a.parquet": (1024, '"9b2c"')}, "/Volumes/main/ml/t")
    >>> url_of("lake/t/a.parquet")
    'ucpinned://lake/t/a.parquet'
    >>> datasets.load_dataset("parquet", data_files=[url_of("lake/t/a.parquet")],  # doctest: +SKIP
    ...                       storage_options={PROTOCOL: {"pins": pins}})
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import fsspec
from fsspec.spec import AbstractBufferedFile, AbstractFileSystem

from uc_jupyter.storage.downloads import changed_since_listing
from uc_jupyter.storage.fsspec_ranges import NotTheListedVersion, read_range, size_now

__all__ = ["PROTOCOL", "PinnedVersions", "Pins", "url_of"]

PROTOCOL = "ucpinned"


@dataclass(frozen=True)
class Pins:
    """What a listing saw: the filesystem it listed (``protocol`` and its ``options``), and each
    file's ``(size, ETag or None)`` by its path on that filesystem; ``where`` is the ``/Volumes``
    folder the paths are named below in errors."""

    protocol: str
    options: Mapping[str, Any] = field(repr=False)
    files: Mapping[str, tuple[int, str | None]] = field(repr=False)
    where: str = ""
    root: str = ""  # the listed folder's path on the filesystem: what is cut off to name a file

    def volume_path(self, path: str) -> str:
        """``path`` named as its ``/Volumes`` path (for messages)."""
        below = path[len(self.root) :].lstrip("/") if self.root and path.startswith(self.root) else path
        return f"{self.where}/{below}" if self.where else path


def url_of(path: str) -> str:
    """The URL of the file at ``path`` (its path on the listed filesystem) on this one.

    Example:
        >>> url_of("lake/t/a.parquet")
        'ucpinned://lake/t/a.parquet'
    """
    return f"{PROTOCOL}://{path.lstrip('/')}"


class PinnedVersions(AbstractFileSystem):  # type: ignore[misc]  # fsspec ships no types
    """The files ``pins`` lists, read only, each as the version listed (see the module docstring)."""

    protocol = PROTOCOL
    # Never one instance for two listings: fsspec keys its instances by the arguments' text, and a
    # Pins does not print its files (a listing of 20,000 would make a key as long).
    cachable = False

    def __init__(self, pins: Pins, **options: Any) -> None:
        super().__init__(**options)
        self.pins = pins
        self.target = fsspec.filesystem(pins.protocol, **dict(pins.options))

    def _listed(self, path: str) -> tuple[int, str | None]:
        found = self.pins.files.get(self._strip_protocol(path))
        if found is None:
            raise FileNotFoundError(f"{self._strip_protocol(path)} was not listed: only listed files are read here")
        return found

    def info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        name = self._strip_protocol(path)
        if name in self.pins.files:
            size, etag = self.pins.files[name]
            return {"name": name, "type": "file", "size": size, "ETag": etag}
        found = self.target.info(name)  # a folder, for a glob: never opened
        if found.get("type") != "directory":
            raise FileNotFoundError(f"{name} was not listed: only listed files are read here")
        return {"name": name, "type": "directory", "size": 0}

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> list[Any]:
        name = self._strip_protocol(path).rstrip("/")
        entries = [self.info(p) for p in self.pins.files if p.rsplit("/", 1)[0] == name]
        return entries if detail else [entry["name"] for entry in entries]

    def _open(self, path: str, mode: str = "rb", block_size: Any = None, **kwargs: Any) -> Any:
        if mode != "rb":
            raise PermissionError(f"{path}: files read through {PROTOCOL}:// are read only")
        size, etag = self._listed(path)
        return _ListedFile(self, self._strip_protocol(path), size=size, etag=etag, block_size=block_size)


class _ListedFile(AbstractBufferedFile):  # type: ignore[misc]  # fsspec ships no types
    """One listed file: ranges read with its listed ETag, never past its listed size."""

    def __init__(self, fs: PinnedVersions, path: str, *, size: int, etag: str | None, block_size: Any) -> None:
        super().__init__(fs, path, mode="rb", block_size=block_size or "default", size=size)
        self._etag = etag

    def _fetch_range(self, start: int, end: int) -> bytes:
        fs: PinnedVersions = self.fs
        end = min(end, self.size)
        if start >= end:
            return b""
        where = fs.pins.volume_path(self.path)
        try:
            got = read_range(fs.target, self.path, start, end, etag=self._etag)
        except NotTheListedVersion:
            raise changed_since_listing(where, self.size, size_now(fs.target, self.path), another=True) from None
        if len(got) < end - start:  # shorter than listed: it shrank since
            raise changed_since_listing(where, self.size, size_now(fs.target, self.path))
        return got


# Registered as this module is imported (see the module's docstring: unpickling a Pins imports it).
fsspec.register_implementation(PROTOCOL, PinnedVersions, clobber=True)
