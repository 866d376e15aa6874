"""Local folders that belong to uc_jupyter itself and must never become a table's or volume's storage.

A catalog home holds the metastore, managed storage and (by default) the cache; a cache may also
live elsewhere (``cache_dir=``). Registering storage over any of them would hand a principal the
metastore's rows, other owners' managed tables, or files the cache serves to everyone, so the
catalog refuses a location that overlaps a reserved folder. Reserved folders are recorded in
``<home>/reserved`` (one ``<kind>\\t<real path>`` line each, appended atomically) by whoever makes
them, and recognised by a marker file inside them (:data:`MARKER`), so a folder of another home is
refused too when a location lies inside it.

Example:
    >>> import tempfile, pathlib
    >>> home, cache = pathlib.Path(tempfile.mkdtemp()), pathlib.Path(tempfile.mkdtemp())
    >>> reserve(home, cache, "cache")
    >>> [kind for kind, _ in reserved_folders(home)]
    ['cache']
    >>> inside_marked_folder(str(cache / "objects" / "ab"))[1] == str(cache.resolve())
    True
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

__all__ = ["MARKER", "inside_marked_folder", "mark", "reserve", "reserved_folders"]

# The file that says "this folder is uc_jupyter's": its content is the folder's kind.
MARKER = ".uc_jupyter"
_REGISTRY = "reserved"


def mark(folder: str | os.PathLike[str], kind: str) -> None:
    """Leave the marker in ``folder`` (made 0700 when missing); idempotent."""
    path = Path(folder)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    marker = path / MARKER
    if marker.exists():
        return
    # A fresh name each time (O_EXCL, 0600): threads marking one folder at once never share a temporary,
    # and a symbolic link planted under a predictable name is never followed and written through.
    fd, tmp = tempfile.mkstemp(prefix=f"{MARKER}.", dir=path)
    try:
        os.write(fd, kind.encode())
    finally:
        os.close(fd)
    os.replace(tmp, marker)


def reserve(home: str | os.PathLike[str], folder: str | os.PathLike[str], kind: str) -> None:
    """Record ``folder`` (of ``kind``: "home", "cache") as reserved for the catalog under ``home``
    and mark it. Cheap when already recorded."""
    real = os.path.realpath(folder)
    mark(real, kind)
    if (kind, real) in reserved_folders(home):
        return
    Path(home).mkdir(mode=0o700, parents=True, exist_ok=True)
    line = f"{kind}\t{real}\n".encode()
    # One write() with O_APPEND: concurrent writers never interleave inside a line.
    fd = os.open(Path(home) / _REGISTRY, os.O_CREAT | os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def reserved_folders(home: str | os.PathLike[str]) -> list[tuple[str, str]]:
    """The ``(kind, real path)`` of every folder recorded under ``home``, in recording order."""
    try:
        text = (Path(home) / _REGISTRY).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    seen: list[tuple[str, str]] = []
    for line in text.splitlines():
        kind, sep, path = line.partition("\t")
        if sep and path.startswith("/") and (kind, path) not in seen:
            seen.append((kind, path))
    return seen


def inside_marked_folder(real_path: str) -> tuple[str, str] | None:
    """``(kind, folder)`` when ``real_path`` (already resolved) is a marked folder or lies inside
    one, else None. Walks up the parents: a few ``stat`` calls."""
    current = real_path.rstrip("/") or "/"
    while True:
        with contextlib.suppress(OSError):
            marker = os.path.join(current, MARKER)
            if os.path.isfile(marker):
                with open(marker, encoding="utf-8", errors="replace") as handle:
                    return handle.read(64).strip() or "folder", current
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent
