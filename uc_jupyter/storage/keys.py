"""Keys below a storage folder: what a write, a read or a delete may name, and what a listing gives.

Every backend checks the keys it is given here, so a key can never leave its folder, whatever the
storage's own rules (``..`` means nothing to S3 but everything to a file system).

Example:
    >>> checked_key("step-100/model.pt")
    'step-100/model.pt'
    >>> is_addressable("../secret"), checked_prefix("runs/")
    (False, 'runs')
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["TEMPORARY", "Listed", "checked_key", "checked_prefix", "is_addressable"]

# The prefix of a file written beside its place and not yet renamed into it (file:// folders:
# ``.uc-writing-<32 hex>-<name>``). Listings leave such files out unless asked for them: a writer
# killed before its rename leaves one, and the next save of its folder removes it.
TEMPORARY = ".uc-writing-"


class Listed(NamedTuple):
    """A file of a listing: its key below the folder, its size and when it was last modified."""

    key: str
    size: int
    modified: float


def checked_key(key: str) -> str:
    """``key`` when it names a file below the folder; ValueError in one line otherwise."""
    parts = key.split("/")
    if not key or "\0" in key or "\\" in key or any(part in ("", ".", "..") for part in parts):
        raise ValueError(
            f"invalid key {key!r}: give a path below the folder, without empty, '.' or '..' parts"
            + (", backslashes or NUL" if "\0" in key or "\\" in key else "")
        )
    return key


def is_addressable(key: str) -> bool:
    """Whether the storage can be asked about ``key`` (:func:`checked_key` takes it): a listed name
    that it refuses (a backslash in a local file's name) is left alone, never written or deleted."""
    try:
        checked_key(key)
    except ValueError:
        return False
    return True


def checked_prefix(prefix: str) -> str:
    """A listing's folder prefix: "" or a :func:`checked_key`."""
    return "" if prefix == "" else checked_key(prefix.rstrip("/") if prefix.endswith("/") else prefix)
