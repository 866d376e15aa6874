"""Storage URLs in one canonical form, and containment between them: pure functions, no I/O.

Every overlap and containment check of the catalog (external locations, external tables and volumes,
the metastore's own folders) compares canonical forms, so that two spellings of one place are one
place: ``s3a://b/raw`` and ``s3://b/raw``, ``/data``, ``//data``, ``file:/data``, ``file://localhost/data``
and ``file:///data/x/..``, ``FILE:///d%61ta``. What cannot be compared safely is refused with a one-line
:class:`InvalidLocation`: protocol chains (``simplecache::file://...``, which fsspec would open through a
second filesystem), ``~`` and environment variables (expanded by some tools and not others), other hosts
in ``file://`` URLs, the kernel's aliases of other folders (``/proc/self/root/...``, ``/dev/fd/3``),
``..`` and empty segments in object keys (object stores take them literally), query strings, and
schemes the catalog does not know.

Symlinks are the filesystem's business: :func:`uc_jupyter.storage.urls.resolve_location` resolves a
local location with ``realpath`` before it is compared or stored; this module never touches the disk.

Example:
    >>> canonical_location("S3A://bucket/raw/")
    's3://bucket/raw'
    >>> canonical_location("file://localhost//data/./x/../y")
    'file:///data/y'
    >>> location_contains("s3://b/raw", "s3n://b/raw/2024"), locations_overlap("s3://b/raw", "s3://b/rawer")
    (True, False)
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from typing import Literal
from urllib.parse import unquote

__all__ = [
    "LOCAL_SCHEME",
    "SCHEMES",
    "Family",
    "InvalidLocation",
    "bucket_and_key",
    "canonical_location",
    "family_of",
    "local_path_below",
    "local_path_of",
    "local_path_within",
    "location_contains",
    "locations_overlap",
    "refused_local_path",
]

LOCAL_SCHEME = "file"
# Spellings of each supported scheme, mapped to the one kept. "az" names an Azure container without
# its account (the account comes from the storage options), so it is compared by container alone.
_ALIASES = {
    "file": "file",
    "local": "file",
    "s3": "s3",
    "s3a": "s3",
    "s3n": "s3",
    "gs": "gs",
    "gcs": "gs",
    "abfs": "abfss",
    "abfss": "abfss",
    "az": "az",
    "memory": "memory",
}
SCHEMES = tuple(sorted(set(_ALIASES.values())))
_BUCKET = re.compile(r"[a-z0-9]([a-z0-9._-]{0,220}[a-z0-9])?")
# Folders whose paths are aliases of other places (a process's root, cwd and descriptors), or hold
# no storage at all: a location inside them is refused, before and after symlinks are resolved.
_REFUSED_ROOTS = ("/proc", "/sys", "/dev")


class InvalidLocation(ValueError):
    """A storage URL that cannot be registered; the message names it and says what to give."""


_Refuse = Callable[[str], InvalidLocation]  # makes the error for one location from the reason


def canonical_location(location: str) -> str:
    """The canonical spelling of ``location`` (see the module docstring), or InvalidLocation.

    Local locations become ``file:///abs/path`` (``.``, ``..`` and repeated slashes folded the way
    the kernel reads them, symlinks not yet resolved); object-store locations ``scheme://bucket/key``
    with the scheme and bucket lower-case and the key as given, without a trailing slash.

    Example:
        >>> canonical_location("/tmp//data/")
        'file:///tmp/data'
        >>> canonical_location("simplecache::file:///tmp")
        Traceback (most recent call last):
        uc_jupyter.storage.locations.InvalidLocation: invalid storage location 'simplecache::file:///tmp': \
protocol chains ('::') are not storage; give the storage URL itself
    """
    if not isinstance(location, str) or not location.strip():
        raise InvalidLocation(f"invalid storage location {location!r}: give a URL like s3://bucket/prefix")
    text = location.strip()

    def refuse(why: str) -> InvalidLocation:
        return InvalidLocation(f"invalid storage location {location!r}: {why}")

    if "::" in text:
        raise refuse("protocol chains ('::') are not storage; give the storage URL itself")
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in text):
        raise refuse("contains a control character")
    scheme, separator, rest = _split_scheme(text)
    if not separator:
        return _local(text, refuse)
    kept = _ALIASES.get(scheme)
    if kept is None:
        raise refuse(f"unknown scheme {scheme!r}; use one of {', '.join(s + '://' for s in SCHEMES)} or a local path")
    if kept == LOCAL_SCHEME:
        return _file_url(rest, separator, refuse)
    if "?" in rest or "#" in rest:
        raise refuse("query strings and fragments are not part of a storage location")
    if kept == "memory":  # fsspec's in-process store: no bucket, every segment is a folder
        authority, key = "", rest.lstrip("/")
    else:
        authority, _, key = rest.partition("/")
        authority = unquote(authority)
        if not authority:
            raise refuse(f"no bucket or container after {scheme}://")
        if authority != authority.lower():
            raise refuse(f"bucket and container names are lower-case; give {authority.lower()!r}")
        if kept == "abfss":
            container, at, account = authority.partition("@")
            if not at or not container or not account:
                raise refuse("Azure URLs look like abfss://<container>@<account>.dfs.core.windows.net/<path>")
        elif not _BUCKET.fullmatch(authority):
            raise refuse(f"{authority!r} is not a valid bucket name (lower-case letters, digits, '.', '-', '_')")
    segments = [unquote(s) for s in key.split("/")]
    while segments and segments[-1] == "":
        segments.pop()  # trailing slashes name the same prefix
    for segment in segments:
        if segment in ("", ".", ".."):
            what = "an empty segment (double slash)" if segment == "" else f"a {segment!r} segment"
            raise refuse(f"{what}: object stores take it literally; give the key without it")
        if "/" in segment or "\x00" in segment:
            raise refuse("an encoded '/' or NUL in a key segment")
    key = "/".join(segments)
    if kept == "memory":
        return f"memory://{key}"
    return f"{kept}://{authority}/{key}" if key else f"{kept}://{authority}"


def _split_scheme(text: str) -> tuple[str, str, str]:
    """``(scheme, separator, rest)``: separator is ``"://"``, ``":"`` (``file:/x``) or ``""``."""
    match = re.match(r"([A-Za-z][A-Za-z0-9+.-]*):(//)?", text)
    if match is None or (match.group(2) is None and match.group(1).lower() not in ("file", "local")):
        return "", "", text
    return match.group(1).lower(), match.group(0)[len(match.group(1)) :], text[match.end() :]


def _file_url(rest: str, separator: str, refuse: _Refuse) -> str:
    if separator == ":":  # file:/x
        return _local(rest, refuse)
    host, slash, path = rest.partition("/")
    host = unquote(host)
    if host.lower() not in ("", "localhost"):
        raise refuse(f"file URLs name no host ({host!r}); give file:///absolute/path")
    return _local(slash + path, refuse)


def _local(path: str, refuse: _Refuse) -> str:
    path = unquote(path)
    if "\x00" in path:
        raise refuse("contains a NUL character")
    if path.startswith("~"):
        raise refuse("'~' is not expanded; give an absolute path")
    if not path.startswith("/"):
        raise refuse("a local location must be an absolute path (environment variables are not expanded)")
    folded = _fold(path)
    refused = refused_local_path(folded)
    if refused:
        raise refuse(refused)
    return f"{LOCAL_SCHEME}://{folded}"


def _fold(path: str) -> str:
    """``path`` with repeated slashes, ``.`` and ``..`` folded; POSIX keeps a leading ``//``
    (implementation-defined), Linux reads it as ``/``, and so does this."""
    folded = posixpath.normpath("/" + path.lstrip("/"))
    return "/" + folded.lstrip("/")


def refused_local_path(real_path: str) -> str | None:
    """Why a folded absolute local path may not be storage (None when it may): ``/`` itself, and
    the kernel's alias folders ``/proc``, ``/sys``, ``/dev``.

    Example:
        >>> refused_local_path("/proc/self/root/etc")
        '/proc/self/root/etc is inside /proc, whose paths are aliases of other places; give the real folder'
        >>> refused_local_path("/data") is None
        True
    """
    if real_path == "/":
        return "the whole filesystem ('/') cannot be storage; give a folder"
    for root in _REFUSED_ROOTS:
        if real_path == root or real_path.startswith(root + "/"):
            return f"{real_path} is inside {root}, whose paths are aliases of other places; give the real folder"
    return None


def local_path_of(canonical: str) -> str | None:
    """The absolute path of a canonical ``file://`` location, None for other schemes."""
    prefix = f"{LOCAL_SCHEME}://"
    return canonical[len(prefix) :] if canonical.startswith(prefix) else None


Family = Literal["local", "s3", "gcs", "azure", "memory", "other"]
_FAMILIES: dict[str, Family] = {
    "file": "local",
    "s3": "s3",
    "gs": "gcs",
    "abfss": "azure",
    "az": "azure",
    "memory": "memory",
}


def family_of(location: str) -> Family:
    """Which kind of storage a location is on, in any spelling (a plain path is local): what code
    outside the storage layer asks instead of comparing schemes.

    Example:
        >>> [family_of(u) for u in ("/tmp/x", "S3A://b/k", "gcs://b", "az://c/p", "abfs://c@a.dfs.core.windows.net")]
        ['local', 's3', 'gcs', 'azure', 'azure']
    """
    scheme, _, _ = _split_scheme(location.strip())
    return _FAMILIES.get(_ALIASES.get(scheme, scheme) if scheme else LOCAL_SCHEME, "other")


def bucket_and_key(location: str) -> tuple[str, str]:
    """The bucket (or container) and the key prefix below it of an object-storage location, in its
    canonical form; ``("", path)`` for a local one.

    Example:
        >>> bucket_and_key("s3a://lake/raw/"), bucket_and_key("s3://lake")
        (('lake', 'raw'), ('lake', ''))
    """
    canonical = canonical_location(location)
    local = local_path_of(canonical)
    if local is not None:
        return "", local
    authority, _, key = canonical.partition("://")[2].partition("/")
    return authority, key


def _parts(canonical: str) -> tuple[str, str, str, tuple[str, ...]]:
    """``(family, authority, account, segments)`` of a canonical location; Azure's two spellings share
    a family and compare by container, and by account too when both name one (``az://`` does not)."""
    scheme, _, rest = canonical.partition("://")
    authority, _, key = rest.partition("/")
    if scheme in ("az", "abfss"):
        container, _, host = authority.partition("@")
        return "azure", container, host.partition(".")[0], _segments(key)
    return scheme, authority, "", _segments(key)


def location_contains(outer: str, inner: str) -> bool:
    """Is ``inner`` the same place as ``outer`` or below it (both in any spelling; compared in their
    canonical forms, lexically: resolve local symlinks first)? Azure URLs must name the same storage
    account, or both none (``az://``, whose account the options give): a location's credential that
    can sign for several accounts must reach only the one its location names.

    Example:
        >>> location_contains("abfss://c@one.dfs.core.windows.net", "abfss://c@two.dfs.core.windows.net/x")
        False
    """
    a, b = _parts(canonical_location(outer)), _parts(canonical_location(inner))
    return a[:3] == b[:3] and _below(a[3], b[3])


def local_path_within(outer: str, inner: str) -> bool:
    """Is the absolute local path ``inner`` the folder ``outer`` or below it? The rule of
    :func:`location_contains` (whole segments, ``.`` and ``..`` folded, lexically: resolve symlinks
    first), without a location's validation: any path a file system holds may be asked about.

    Example:
        >>> local_path_within("/data/vol", "/data/vol/../vol/a"), local_path_within("/data/vol", "/data/volume")
        (True, False)
    """
    return local_path_below(outer, inner) is not None


def local_path_below(outer: str, inner: str) -> str | None:
    """``inner``'s path below ``outer`` (``"/"``-separated, ``""`` for ``outer`` itself), or None when it
    is not within it (:func:`local_path_within`'s rule): where a walk from ``outer`` goes down.

    Example:
        >>> local_path_below("/data/vol", "/data/vol/run//a/"), local_path_below("/data/vol", "/data/vol")
        ('run/a', '')
    """
    a, b = _segments(_fold(outer)), _segments(_fold(inner))
    return "/".join(b[len(a) :]) if _below(a, b) else None


def _segments(path: str) -> tuple[str, ...]:
    return tuple(s for s in path.split("/") if s)


def _below(outer: tuple[str, ...], inner: tuple[str, ...]) -> bool:
    """The one containment rule: ``inner``'s segments begin with all of ``outer``'s."""
    return inner[: len(outer)] == outer


def locations_overlap(a: str, b: str) -> bool:
    """Might the two locations share storage: one the same place as the other or below it? An Azure URL
    without an account (``az://``) may be in any account, so it overlaps both spellings of its container.

    Example:
        >>> locations_overlap("az://c/p", "abfss://c@one.dfs.core.windows.net/p/q")
        True
    """
    x, y = _parts(canonical_location(a)), _parts(canonical_location(b))
    if x[:2] != y[:2] or (x[2] and y[2] and x[2] != y[2]):
        return False
    shorter = min(len(x[3]), len(y[3]))
    return x[3][:shorter] == y[3][:shorter]
