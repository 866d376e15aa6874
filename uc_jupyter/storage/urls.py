"""Storage locations as fsspec URLs: turning them into filesystems, joining, and containment checks.

Locations are kept in the canonical form of :mod:`uc_jupyter.storage.locations` (``file:///abs/dir``,
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
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from uc_jupyter.storage import forked_sessions
from uc_jupyter.storage.config import VENDOR_OPTIONS, object_store_options
from uc_jupyter.storage.locations import (
    InvalidLocation,
    canonical_location,
    local_path_of,
    local_path_within,
    locations_overlap,
    refused_local_path,
)

if TYPE_CHECKING:
    import fsspec

# The filesystems made here include s3fs's: a child forked from this process must not wait on their
# sessions (storage/forked_sessions.py).
forked_sessions.install()

__all__ = [
    "VENDOR_OPTIONS",
    "delta_uri",
    "deltalake_options",
    "filesystem",
    "fsspec_options",
    "is_empty_location",
    "is_local",
    "join_location",
    "local_path",
    "locations_overlap",
    "normalise_location",
    "realpath_within",
    "remove_location",
    "resolve_location",
    "storage_path",
]

normalise_location = canonical_location


def fsspec_options(options: Mapping[str, Any] | None) -> dict[str, Any]:
    """``options`` without :data:`VENDOR_OPTIONS`: what a storage credential's options give fsspec.

    Example:
        >>> fsspec_options({"key": "AK", "vending": "static", "role_arn": "arn:aws:iam::1:role/r"})
        {'key': 'AK'}
    """
    return {k: v for k, v in (options or {}).items() if k not in VENDOR_OPTIONS}


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
    """The fsspec filesystem for ``location`` and the location's path on it (a credential's
    :data:`VENDOR_OPTIONS` are left out: they are the vendor's, not the filesystem's)."""
    import fsspec.core

    fs, path = fsspec.core.url_to_fs(location, **fsspec_options(storage_options))
    return fs, str(path)


def storage_path(location: str) -> str:
    """The path of ``location`` on its fsspec filesystem, without making one: ``bucket/key`` for object
    stores (also when gcsfs or adlfs, which would make gs:// and Azure filesystems, is not installed),
    the absolute path for ``file://``.

    Example:
        >>> storage_path("s3://lake/raw/a.csv"), storage_path("file:///tmp/x"), storage_path("gs://lake/raw")
        ('lake/raw/a.csv', '/tmp/x', 'lake/raw')
        >>> storage_path("abfss://raw@lake.dfs.core.windows.net/images")
        'raw/images'
    """
    import fsspec
    import fsspec.core

    protocol = fsspec.core.split_protocol(location)[0] or "file"
    try:
        implementation = fsspec.get_filesystem_class(protocol)
    except (ImportError, ValueError):  # gcsfs / adlfs missing, or a scheme only object_store serves (abfss)
        authority, _, key = location.partition("://")[2].partition("/")
        return f"{authority.partition('@')[0]}/{key}".rstrip("/")
    return str(implementation._strip_protocol(location))


def realpath_within(root: str, target: str) -> bool:
    """For local paths: does ``target``, with every symlink followed, stay inside ``root``? (The one
    containment rule, :func:`~uc_jupyter.storage.locations.local_path_within`, on the real paths.)"""
    return local_path_within(os.path.realpath(root), os.path.realpath(target))


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


def deltalake_options(options: Mapping[str, Any] | None) -> dict[str, str]:
    """Storage options as deltalake takes them: s3fs-style options (``key``, ``secret``, ``token``,
    ``endpoint_url``, ``client_kwargs.region_name`` / ``endpoint_url``, ``anon``) as object_store's
    ``AWS_*`` strings, plain HTTP allowed for an ``http://`` endpoint. Options already in that form (upper
    case, as vended credentials and deltalake users give them) pass unchanged, so converting twice is
    harmless; other fsspec-only options (``config_kwargs``, ``use_ssl``...) and the vendor's
    :data:`VENDOR_OPTIONS` have no deltalake meaning and are left out rather than sent as strings
    deltalake would refuse.

    Example:
        >>> deltalake_options({"key": "AK", "secret": "S", "client_kwargs": {"region_name": "eu-west-1"},
        ...                    "endpoint_url": "http://127.0.0.1:9000"})  # doctest: +NORMALIZE_WHITESPACE
        {'AWS_ACCESS_KEY_ID': 'AK', 'AWS_SECRET_ACCESS_KEY': 'S', 'AWS_ENDPOINT_URL': 'http://127.0.0.1:9000',
         'AWS_ALLOW_HTTP': 'true', 'AWS_REGION': 'eu-west-1'}
    """
    return object_store_options(fsspec_options(options))
