"""Talking to a volume's storage: one listing per dataset, and file reads retried on transient errors.

Example:
    >>> from uc_jupyter.catalog import get_catalog
    >>> listing = list_volume(get_catalog().resolve_volume_path("/Volumes/main/ml/images"))  # doctest: +SKIP
    >>> listing.files[0]                                                                    # doctest: +SKIP
    RemoteFile(relative='circle/circle_00000.png', size=231, version='1732871234.5')
"""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import re
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from uc_jupyter import options as opt
from uc_jupyter.data.volume.committed import committed_entries
from uc_jupyter.data.volume.folder import folder_storage
from uc_jupyter.errors import UcJupyterWarning
from uc_jupyter.storage.downloads import entity_tag

if TYPE_CHECKING:
    from uc_jupyter.catalog import ResolvedVolumePath
    from uc_jupyter.storage.reads import VolumeStorage

__all__ = [
    "Listing",
    "ListingDigest",
    "RemoteFile",
    "file_filter",
    "is_hidden",
    "kept_files",
    "list_volume",
]

_MARKERS = ("_SUCCESS", "_committed_*", "_started_*", "_uc_export.json")
_MARKER = re.compile("|".join(fnmatch.translate(marker) for marker in _MARKERS))


@dataclass(frozen=True)
class RemoteFile:
    relative: str  # path below the dataset's folder
    size: int
    version: str | None  # ETag or modification time: a changed file gets a new cache key
    # The version when it is an entity tag, sent with each download (If-Match); worked out once per
    # listed file here, not per file of every pass.
    etag: str | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "etag", entity_tag(self.version))


@dataclass(frozen=True)
class Listing:
    """The sorted files of a dataset folder, taken once and shipped to workers with the dataset."""

    volume_path: str  # the /Volumes folder
    url: str  # its storage URL
    files: tuple[RemoteFile, ...]
    digest: str = field(default="")  # identifies this exact listing (paths, sizes, versions)
    skipped: int = 0  # files found but left out: not matching include/exclude, the decoder or the labels

    @functools.cached_property
    def total_bytes(self) -> int:
        """The listed files' bytes, summed once: a worker's telemetry sample reads it (through the
        dataset's stats) several times a second, and summing 20,000 sizes each time cost about 4%
        of a loader-bound pass."""
        return sum(f.size for f in self.files)

    def only(self, keep: Callable[[RemoteFile], bool]) -> Listing:
        """The listing narrowed to the files ``keep`` accepts (with its own digest)."""
        files = tuple(f for f in self.files if keep(f))
        left_out = self.skipped + len(self.files) - len(files)
        return Listing(self.volume_path, self.url, files, _digest(files), skipped=left_out)


def list_volume(
    resolved: ResolvedVolumePath,
    *,
    recursive: bool = False,
    include: str | Sequence[str] | None = None,
    exclude: str | Sequence[str] | None = None,
    keep: Callable[[str], bool] | None = None,
    kept: str = "matching files",
    storage: VolumeStorage | None = None,
) -> Listing:
    """List the files of a /Volumes folder once, sorted, without hidden and Spark marker files.

    ``include`` / ``exclude`` are glob patterns matched against the path below the folder; ``keep``
    narrows further (``kept`` names what it keeps, for the error when nothing is left). Files left
    out (hidden ones aside) are counted in ``Listing.skipped``. The folder is listed through
    ``storage`` (:func:`~uc_jupyter.storage.open_storage` of ``resolved`` when not given); a local
    (``file://``) volume's follows no symlink, and what it skips (symlinks and other entries that
    are not regular files) gets one warning (see :mod:`uc_jupyter.storage.local_volume`). A table
    export's folder (its manifest at the top) gives the files its manifest commits and nothing else
    (:mod:`uc_jupyter.data.volume.committed`).

    Raises:
        NotFound: the folder does not exist.
        NotADirectoryError: the path is a file.
        EscapesVolume: the path to a local folder goes through a symlink.
        TypeError: ``include`` or ``exclude`` is not a glob pattern or a list of them.
        ValueError: nothing is left to read, or ``include`` is an empty list.
        ManifestError: an export's manifest is damaged or names a file outside its export.
        ExportIncomplete: an export's manifest names a file that is missing.
    """
    recursive = opt.flag("recursive", recursive)
    includes = opt.globs("include", include, allow_empty=False)
    excludes = opt.globs("exclude", exclude)
    where = resolved.volume_path
    skipped: list[str] = []
    folders: list[str] = []  # sub-folders a listing without recursive leaves out
    storage = storage or folder_storage(resolved)
    found = _entries(storage, recursive, folders, skipped)
    wanted = file_filter(includes, excludes, keep)
    exported = committed_entries(resolved, found)  # an export folder: what its manifest names
    files, visible = kept_files(found, wanted) if exported is None else kept_files(exported, wanted, hide=False)
    _warn_skipped(where, sorted(r for r in skipped if not _hidden(r) and wanted(r)))
    if not files:
        what = kept if includes or excludes or keep else "files"
        if not recursive:
            # Only on the way to an error: is what the user wants one level down (class folders)?
            below = _entries(storage, True, [], [])
            deeper = sorted({r.split("/", 1)[0] for r, _, _ in below if not _hidden(r) and wanted(r)})
            if deeper:
                shown = ", ".join(deeper[:3]) + (", ..." if len(deeper) > 3 else "")
                raise ValueError(
                    f"{where} holds no {what} at its top, only in sub-folders ({shown}): "
                    "add --recursive (recursive=True)"
                )
        raise ValueError(f"{where} holds no {what} to read")
    files.sort(key=lambda f: f.relative)
    if folders:
        from uc_jupyter.notices import notice

        shown = ", ".join(folders[:3]) + (", ..." if len(folders) > 3 else "")
        count = f"{len(files)} file" + ("s" if len(files) > 1 else "")
        notice(
            f"{where}: reading the {count} at its top only, not its sub-folders ({shown}): "
            "add --recursive (recursive=True) to read them",
            key=("sub-folders", where),
        )
    left_out = visible - len(files)
    return Listing(where, resolved.url, tuple(files), _digest(files), skipped=left_out)


def file_filter(
    includes: Sequence[str], excludes: Sequence[str], keep: Callable[[str], bool] | None
) -> Callable[[str], bool]:
    """Whether a (not hidden) path below the folder is read: it matches an ``includes`` pattern
    (when there are any), ``keep`` accepts it, and it matches no ``excludes`` pattern."""

    def wanted(relative: str) -> bool:
        if includes and not any(fnmatch.fnmatchcase(relative, p) for p in includes):
            return False
        if keep is not None and not keep(relative):
            return False
        return not any(fnmatch.fnmatchcase(relative, p) for p in excludes)

    return wanted


def kept_files(
    entries: Sequence[tuple[str, int, str | None]], wanted: Callable[[str], bool], *, hide: bool = True
) -> tuple[list[RemoteFile], int]:
    """The files of ``entries`` a dataset reads (not hidden unless ``hide`` is False, ``wanted``),
    and how many were not hidden (those left out of them count as skipped)."""
    visible = [entry for entry in entries if not (hide and _hidden(entry[0]))]
    return [RemoteFile(relative, size, version) for relative, size, version in visible if wanted(relative)], len(
        visible
    )


def _entries(
    storage: VolumeStorage, recursive: bool, folders: list[str], skipped: list[str]
) -> list[tuple[str, int, str | None]]:
    """``(path below the folder, size, version)`` of every file under the folder, through its
    storage (:mod:`uc_jupyter.storage.reads`); the names of the sub-folders a listing without
    ``recursive`` met go into ``folders``, what it skipped (not regular files) into ``skipped``."""
    found: list[tuple[str, int, str | None]] = []
    for page in storage.pages(recursive=recursive):
        found.extend(page.files)
        folders.extend(page.folders)
        skipped.extend(page.skipped)
    folders.sort()
    return found


def _warn_skipped(where: str, skipped: list[str]) -> None:
    """One warning for what a local listing skipped (it would otherwise vanish from the dataset)."""
    if not skipped:
        return
    count = (
        f"{len(skipped)} entries that are not regular files"
        if len(skipped) > 1
        else "1 entry that is not a regular file"
    )
    warnings.warn(
        f"{where}: skipped {count}, e.g. {skipped[0]!r} (datasets do not follow "
        "symbolic links inside a volume; copy the file in instead, or exclude it)",
        UcJupyterWarning,
        stacklevel=4,
    )


class ListingDigest:
    """What identifies a listing (paths, sizes, versions, in order), fed as its files come.

    Example:
        >>> digest = ListingDigest()
        >>> digest.add([RemoteFile("a.png", 3, None)])
        >>> len(digest.value())
        16
    """

    def __init__(self) -> None:
        self._sha = hashlib.sha256()

    def add(self, files: Sequence[RemoteFile]) -> None:
        for f in files:
            self._sha.update(f"{f.relative}\x00{f.size}\x00{f.version}\n".encode())

    def value(self) -> str:
        return self._sha.hexdigest()[:16]


def _digest(files: Sequence[RemoteFile]) -> str:
    digest = ListingDigest()
    digest.add(files)
    return digest.value()


def is_hidden(name: str) -> bool:
    """Is a file or folder name skipped in volume listings (dot files, Spark's marker files)?

    Example:
        >>> [is_hidden(n) for n in (".ipynb_checkpoints", "_SUCCESS", "_committed_123", "part-0.parquet")]
        [True, True, True, False]
    """
    if not name.startswith((".", "_")):
        return False  # most names: no pattern to match (this runs per listed file)
    return name.startswith(".") or _MARKER.fullmatch(name) is not None


def _hidden(relative: str) -> bool:
    """A path below the folder with a hidden part (a dot folder anywhere, a marker file at its end)."""
    return relative.startswith(".") or "/." in relative or is_hidden(relative[relative.rfind("/") + 1 :])
