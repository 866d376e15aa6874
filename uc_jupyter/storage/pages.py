"""What a listing of a volume folder yields: pages of entries, first page first.

Example:
    >>> Page([("a.png", 3, '"e1"')], ["sub"]).files[0]
    ('a.png', 3, '"e1"')
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

__all__ = ["Entry", "Page"]

Entry = tuple[str, int, "str | None"]  # (path below the folder, size, version: ETag or modification time)


class Page(NamedTuple):
    """Some files of the folder, (for a listing without ``recursive``) the names of sub-folders met
    on the way, and what the listing skipped: entries that are not regular files (a local folder's
    symlinks, FIFOs, sockets; object stores have none)."""

    files: list[Entry]
    folders: list[str]
    skipped: Sequence[str] = ()
