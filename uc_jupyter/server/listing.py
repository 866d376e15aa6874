"""A volume folder's entries for the sidebar, one page at a time: a folder of 100 000 files is listed
on the server, but only a page of it (200 entries by default) is sized and sent.

Entries come folders first, then by name, without hidden and Spark marker files
(:func:`is_hidden`) and without symlinks that lead out of the volume. A page ends with a ``next``
token when more follow; the token is the sort key of the page's last entry (keyset paging), so a file
added or removed between two requests neither repeats nor skips the entries around it.

Local (``file://``) volumes are read with one ``os.scandir`` and only the page's files are sized
(``fs.ls`` stats every entry: about 1.1 s for 100 000 files here, against 0.08 s; a page of such a
folder takes about 0.2 s); other storage is listed through fsspec, whose listing carries the sizes.

Example:
    >>> page = volume_entries(catalog, "/Volumes/main/ml/images/circle", limit=2)     # doctest: +SKIP
    >>> [e["name"] for e in page["entries"]], page["total"], page["next"] is not None  # doctest: +SKIP
    (['circle_00000.png', 'circle_00001.png'], 50, True)
"""

from __future__ import annotations

import base64
import binascii
import bisect
import json
import operator
import os
import stat
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from uc_jupyter.catalog import NotFound
from uc_jupyter.catalog.rules.names import parse_volume_path
from uc_jupyter.data.volume.listing import is_hidden  # one rule for the sidebar and the datasets
from uc_jupyter.storage import urls as storage

if TYPE_CHECKING:
    from uc_jupyter.catalog import Catalog, ResolvedVolumePath

__all__ = [
    "MAX_PAGE",
    "PAGE_SIZE",
    "BadRequest",
    "Entry",
    "Folder",
    "is_hidden",
    "list_folder",
    "page_token",
    "parse_limit",
    "query_integer",
    "volume_entries",
]

PAGE_SIZE = 200  # what the sidebar shows before "Show more"
MAX_PAGE = 1000  # the most entries one request may ask for

Json = dict[str, Any]


class BadRequest(ValueError):
    """A malformed query parameter (HTTP 400); the message names the parameter and what it accepts."""


@dataclass(frozen=True)
class Entry:
    """One entry of a folder; ``size`` is None for folders (and for local files until a page sizes them)."""

    name: str
    directory: bool
    size: int | None = None

    @property
    def key(self) -> tuple[int, str]:
        """The listing order: folders first, then by name."""
        return (0 if self.directory else 1, self.name)


@dataclass(frozen=True)
class Folder:
    """A listed volume folder: its ``/Volumes`` path, where it lives, and every entry in listing order."""

    path: str
    resolved: ResolvedVolumePath
    entries: tuple[Entry, ...]

    def child(self, name: str) -> str:
        """The storage path of entry ``name``."""
        return f"{self.resolved.path.rstrip('/')}/{name}"


def parse_limit(text: str | None) -> int:
    """The ``limit`` parameter of a folder listing: an integer from 1 to 1000, 200 when absent.

    Example:
        >>> parse_limit(None), parse_limit("1"), parse_limit(" 1000 ")
        (200, 1, 1000)
        >>> parse_limit("0")
        Traceback (most recent call last):
        uc_jupyter.server.listing.BadRequest: limit must be an integer from 1 to 1000, got '0'
    """
    return query_integer("limit", text, low=1, high=MAX_PAGE, default=PAGE_SIZE)


def query_integer(name: str, text: str | None, *, low: int, high: int, default: int) -> int:
    """A query parameter holding a whole number from ``low`` to ``high`` (``default`` when absent);
    anything else (``1e3``, ``-1``, ``٣``) is a :class:`BadRequest` naming the parameter."""
    if text is None or text == "":
        return default
    stripped = text.strip()
    if not (stripped.isascii() and stripped.isdigit()) or not low <= int(stripped) <= high:
        raise BadRequest(f"{name} must be an integer from {low} to {high}, got {text!r}")
    return int(stripped)


def page_token(entry: Entry) -> str:
    """The token of the page that starts after ``entry`` (opaque to clients; URL-safe).

    Example:
        >>> page_token(Entry("circle", directory=True))
        'WzAsICJjaXJjbGUiXQ'
    """
    raw = json.dumps(list(entry.key), ensure_ascii=False).encode()
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _after_key(token: str) -> tuple[int, str]:
    wrong = BadRequest(f"after must be the 'next' token of an earlier page of this folder, got {token[:80]!r}")
    try:
        key = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (binascii.Error, ValueError, UnicodeDecodeError, RecursionError):  # "[[[[..." nests past the limit
        raise wrong from None
    if not (isinstance(key, list) and len(key) == 2 and key[0] in (0, 1) and isinstance(key[1], str)):
        raise wrong
    return (int(key[0]), key[1])


def list_folder(catalog: Catalog, path: str) -> Folder:
    """Every visible entry of the volume folder ``path`` (READ VOLUME checked), in listing order.

    Raises NotFound when it does not exist and NotADirectoryError when it is a file.
    """
    parsed = str(parse_volume_path(path))
    resolved = catalog.resolve_volume_path(parsed)
    location = resolved.volume.storage_location
    from uc_jupyter.catalog.embedded.local import EscapesVolume

    local = storage.local_path(location) if storage.is_local(location) else None
    root = resolved.path.rstrip("/")
    try:
        entries = _local_entries(local, root) if local is not None else _remote_entries(resolved, root)
    except FileNotFoundError:
        raise NotFound(f"{parsed} does not exist") from None
    except NotADirectoryError:
        raise NotADirectoryError(f"{parsed} is a file, not a folder") from None
    except EscapesVolume:
        raise EscapesVolume(
            f"{parsed} leads outside volume {resolved.volume.full_name} (through a symlink); refused"
        ) from None
    by_name = operator.attrgetter("name")  # C-level key: a sort of 100 000 entries stays cheap
    folders = sorted((e for e in entries if e.directory), key=by_name)
    files = sorted((e for e in entries if not e.directory), key=by_name)
    return Folder(parsed, resolved, (*folders, *files))


def volume_entries(catalog: Catalog, path: str, limit: int = PAGE_SIZE, after: str | None = None) -> Json:
    """One page of the volume folder ``path``: ``{path, entries: [{name, path, kind, size}], total, next}``.

    ``total`` counts the folder's visible entries; ``next`` is the token for the following page
    (pass it as ``after``), None on the last page.
    """
    if not 1 <= limit <= MAX_PAGE:
        raise BadRequest(f"limit must be an integer from 1 to {MAX_PAGE}, got {limit!r}")
    start = _after_key(after) if after else None
    folder = list_folder(catalog, path)
    first = 0 if start is None else bisect.bisect_right(folder.entries, start, key=lambda e: e.key)
    page = [_sized(folder, e) for e in folder.entries[first : first + limit]]
    return {
        "path": folder.path,
        "entries": [
            {
                "name": e.name,
                "path": f"{folder.path}/{e.name}",
                "kind": "directory" if e.directory else "file",
                "size": None if e.directory else (e.size or 0),
            }
            for e in page
        ],
        "total": len(folder.entries),
        "next": page_token(page[-1]) if first + limit < len(folder.entries) else None,
    }


def _local_entries(volume_root: str, root: str) -> list[Entry]:
    """The visible entries of a local folder. A non-link entry of a folder inside the volume stays inside
    it; only symlinks need their target checked (those leading out, or nowhere, are left out)."""

    found: list[Entry] = []
    # The folder opened is the one checked and listed: resolve_volume_path checked ``root`` by its
    # realpath, but a symlink swapped in on the way since would otherwise make scandir list (and
    # _sized size) a folder outside the volume (tests/security/test_notebook_features.py).
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        real = _opened_within(volume_root, fd, root)
        if real is None:
            from uc_jupyter.catalog.embedded.local import EscapesVolume

            raise EscapesVolume(root)  # list_folder names the /Volumes path instead of the storage one
        with os.scandir(fd) as listing:  # entries stat relative to fd: keep it open while they are read
            for item in listing:
                if is_hidden(item.name):
                    continue
                if not item.is_symlink():
                    if item.is_dir(follow_symlinks=False) or item.is_file(follow_symlinks=False):
                        found.append(Entry(item.name, item.is_dir(follow_symlinks=False)))
                    continue  # sockets, devices, FIFOs: nothing to read
                if not storage.realpath_within(volume_root, os.path.join(real, item.name)):
                    continue  # a symlink out of the volume: neither listed nor sized
                try:
                    directory = item.is_dir()
                    regular = directory or item.is_file()
                except OSError:
                    continue
                if regular:  # a broken link is neither
                    found.append(Entry(item.name, directory))
    finally:
        os.close(fd)
    return found


def _remote_entries(resolved: ResolvedVolumePath, root: str) -> list[Entry]:
    fs = resolved.fs
    fs.invalidate_cache(root)
    info = fs.info(root)
    if info.get("type") != "directory":
        raise NotADirectoryError(root)
    listed = fs.ls(root, detail=True)
    found: list[Entry] = []
    for entry in listed.values() if isinstance(listed, dict) else listed:
        name = str(entry["name"]).rstrip("/").rsplit("/", 1)[-1]
        if name and not is_hidden(name) and entry.get("type") in ("directory", "file"):
            directory = entry["type"] == "directory"
            found.append(Entry(name, directory, None if directory else int(entry.get("size") or 0)))
    return found


def _sized(folder: Folder, entry: Entry) -> Entry:
    """``entry`` with its size: local files are stat-ed here, one page at a time."""
    if entry.directory or entry.size is not None:
        return entry

    size = 0  # removed since the listing (or no longer inside the volume): shown, gone at the next refresh
    try:
        # Sized through a handle checked to lie inside the volume, not by path: a symlink swapped in
        # since the listing (for the file or a folder above it) would show the size of a file outside.
        fd = os.open(folder.child(entry.name), _HANDLE)
    except OSError:
        return Entry(entry.name, entry.directory, size)
    try:
        volume_root = storage.local_path(folder.resolved.volume.storage_location)
        info = os.fstat(fd)
        if stat.S_ISREG(info.st_mode) and _opened_within(volume_root, fd, None) is not None:
            size = info.st_size
    except OSError:
        pass
    finally:
        os.close(fd)
    return Entry(entry.name, entry.directory, size)


# A handle to stat and locate a file by (no read permission needed, never blocks on a FIFO).
_HANDLE = getattr(os, "O_PATH", os.O_RDONLY | os.O_NONBLOCK) | os.O_CLOEXEC


def _opened_within(volume_root: str, fd: int, path: str | None) -> str | None:
    """Where the handle ``fd`` (opened from ``path``) really is when that is inside ``volume_root``,
    else None. Linux tells a handle's place in /proc; elsewhere the path's realpath, looked at once
    more, is the best there is."""

    try:
        real = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        if path is None:
            return None
        real = os.path.realpath(path)
    return real if storage.realpath_within(volume_root, real) else None
