"""Storage locations as fsspec URLs: turning them into filesystems, joining, and containment checks.

Locations are kept as URLs (``file:///abs/dir``, ``s3://bucket/prefix``, ``memory://x``); a plain
absolute local path is accepted and turned into a ``file://`` URL.

Example:
    >>> normalise_location("/tmp/data/")
    'file:///tmp/data'
    >>> locations_overlap("s3://b/a", "s3://b/a/x"), locations_overlap("s3://b/a", "s3://b/ab")
    (True, False)
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

if TYPE_CHECKING:
    import fsspec

__all__ = [
    "delta_uri",
    "filesystem",
    "is_empty_location",
    "is_local",
    "join_location",
    "local_path",
    "locations_overlap",
    "normalise_location",
    "realpath_within",
    "remove_location",
]


def normalise_location(location: str) -> str:
    """A canonical URL for ``location``: scheme kept, no trailing slash, local paths absolute.

    Raises:
        ValueError: for a relative local path or an empty location.
    """
    if not isinstance(location, str) or not location.strip():
        raise ValueError(f"invalid storage location {location!r}: give a URL like s3://bucket/prefix")
    if "://" not in location:
        if not os.path.isabs(location):
            raise ValueError(f"invalid storage location {location!r}: a local location must be an absolute path")
        return "file://" + os.path.normpath(location)
    scheme, rest = location.split("://", 1)
    scheme = scheme.lower()
    if scheme in ("file", "local"):
        path = unquote(urlsplit(location).path) or "/"
        return "file://" + os.path.normpath(path)
    rest = rest.rstrip("/")
    if not rest:
        raise ValueError(f"invalid storage location {location!r}: no bucket or path after {scheme}://")
    return f"{scheme}://{rest}"


def is_local(location: str) -> bool:
    return normalise_location(location).startswith("file://")


def local_path(location: str) -> str:
    """The local path of a ``file://`` location."""
    url = normalise_location(location)
    if not url.startswith("file://"):
        raise ValueError(f"{location!r} is not a local location")
    return url[len("file://") :]


def delta_uri(location: str) -> str:
    """The form deltalake expects: a plain path for local tables, the URL otherwise."""
    return local_path(location) if is_local(location) else normalise_location(location)


def join_location(location: str, relative: str) -> str:
    """``location`` with a relative POSIX path appended ('' gives ``location`` itself)."""
    url = normalise_location(location)
    return f"{url}/{relative}" if relative else url


def locations_overlap(a: str, b: str) -> bool:
    """True when one location is the other or lies inside it."""
    a, b = normalise_location(a).rstrip("/") + "/", normalise_location(b).rstrip("/") + "/"
    return a.startswith(b) or b.startswith(a)


def filesystem(location: str, storage_options: dict[str, Any] | None = None) -> tuple[fsspec.AbstractFileSystem, str]:
    """The fsspec filesystem for ``location`` and the location's path on it."""
    import fsspec.core

    fs, path = fsspec.core.url_to_fs(normalise_location(location), **(storage_options or {}))
    return fs, str(path)


def realpath_within(root: str, target: str) -> bool:
    """For local paths: does ``target``, with every symlink followed, stay inside ``root``?"""
    real_root = os.path.realpath(root)
    real_target = os.path.realpath(target)
    return real_target == real_root or real_target.startswith(real_root.rstrip(os.sep) + os.sep)


def remove_location(location: str, storage_options: dict[str, Any] | None = None) -> None:
    """Delete everything under ``location``; a missing location is not an error."""
    fs, path = filesystem(location, storage_options)
    try:
        if fs.exists(path):
            fs.rm(path, recursive=True)
    except FileNotFoundError:
        pass


def is_empty_location(location: str, storage_options: dict[str, Any] | None = None) -> bool:
    """True when nothing is stored under ``location`` (a missing location is empty)."""
    fs, path = filesystem(location, storage_options)
    try:
        return not fs.exists(path) or not fs.ls(path, detail=False)
    except FileNotFoundError:
        return True
