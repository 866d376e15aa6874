"""Storage locations as fsspec URLs: turning them into filesystems, joining, and containment checks.

Locations are kept in the canonical form of :mod:`uc_jupyter.catalog.locations` (``file:///abs/dir``,
``s3://bucket/prefix``, ``memory://x``); a plain absolute local path is accepted and turned into a
``file://`` URL. :func:`resolve_location` is the one way a location given by a caller becomes one the
catalog stores or compares: canonical, with local symlinks resolved.

Example:
    >>> normalise_location("/tmp/data/")
    'file:///tmp/data'
    >>> locations_overlap("s3://b/a", "s3a://b/a/x"), locations_overlap("s3://b/a", "s3://b/ab")
    (True, False)
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from uc_jupyter.catalog.locations import (
    InvalidLocation,
    canonical_location,
    local_path_of,
    locations_overlap,
    refused_local_path,
)

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
    "resolve_location",
]

normalise_location = canonical_location


def resolve_location(location: str) -> str:
    """``location`` as the catalog stores and compares it: canonical, and for a local location with
    every symlink resolved (``realpath``), refused when the real folder is one of the kernel's alias
    folders (a symlink to ``/proc/self/root`` is as good as ``/``).

    Example:
        >>> resolve_location("file://localhost/tmp//x/")
        'file:///tmp/x'
    """
    canonical = canonical_location(location)
    path = local_path_of(canonical)
    if path is None:
        return canonical
    real = os.path.realpath(path)
    refused = refused_local_path(real)
    if refused:
        raise InvalidLocation(f"invalid storage location {location!r}: {refused}")
    return f"file://{real}"


def is_local(location: str) -> bool:
    """Is ``location`` (a stored location, or one joined with a relative path) on the local disk?"""
    scheme, separator, _ = location.partition(":")
    if not separator or "/" in scheme:
        return location.startswith("/")
    return scheme.lower() in ("file", "local")


def local_path(location: str) -> str:
    """The local path of a ``file://`` location (stored form: nothing is decoded again)."""
    if location.startswith("/"):
        return location
    if location.startswith("file://"):
        return location[len("file://") :]
    raise ValueError(f"{location!r} is not a local location")


def delta_uri(location: str) -> str:
    """The form deltalake expects: a plain path for local tables, the URL otherwise."""
    return local_path(location) if is_local(location) else location


def join_location(location: str, relative: str) -> str:
    """Stored ``location`` with a relative POSIX path appended as it is ('' gives ``location``)."""
    return f"{location.rstrip('/')}/{relative}" if relative else location


def filesystem(location: str, storage_options: dict[str, Any] | None = None) -> tuple[fsspec.AbstractFileSystem, str]:
    """The fsspec filesystem for ``location`` and the location's path on it."""
    import fsspec.core

    fs, path = fsspec.core.url_to_fs(location, **(storage_options or {}))
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
