"""ListObjectsV2 pages of the S3 test server (:mod:`uc_jupyter.testing.s3_server`) over a folder.

Real object stores answer a page in time that does not grow with the bucket: a listing is not
what the benchmarks should measure of this server. So a first page walks the folder once (a
listing with the ``/`` delimiter at a folder reads only that folder's own entries, as S3 does
not descend either), later pages of the same listing (``continued``: asked with a continuation
token) reuse that walk, and a page finds where it starts and skips a sub-folder's keys by bisection
instead of scanning every key before them. A first page that starts after a key (``start-after``,
as Delta readers list a log from a version on) is a new listing, and walks again.

Example:
    >>> listings = Listings(Path("/srv/s3"))                                        # doctest: +SKIP
    >>> page = listings.page("bucket", "images/", delimiter="/", after="", max_keys=1000)  # doctest: +SKIP
    >>> page.prefixes[:1], page.truncated                                           # doctest: +SKIP
    (['images/cats/'], False)
"""

from __future__ import annotations

import bisect
import os
from pathlib import Path
from typing import NamedTuple

__all__ = ["ListPage", "Listings"]

Key = tuple[str, os.stat_result]


class ListPage(NamedTuple):
    """One page: objects, common prefixes, and where the next page starts (when truncated)."""

    contents: list[Key]
    prefixes: list[str]
    truncated: bool
    last: str


class Listings:
    """The keys below each listed prefix of the buckets under ``root`` (sub-folders of it)."""

    def __init__(self, root: Path) -> None:
        self._root = root
        self._walks: dict[tuple[str, str, bool], tuple[list[str], list[Key]]] = {}

    def page(
        self, bucket: str, prefix: str, *, delimiter: str, after: str, max_keys: int, continued: bool = False
    ) -> ListPage:
        shallow = delimiter == "/" and (prefix == "" or prefix.endswith("/"))
        walk = (bucket, prefix, shallow)
        found = self._walks.get(walk) if continued else None
        if found is None:  # a first page walks again: files written since are listed
            found = self._walks[walk] = self._walk(self._root / bucket, prefix, shallow)
        names, keys = found
        contents: list[Key] = []
        prefixes: list[str] = []
        last = ""
        index = bisect.bisect_right(names, after) if after else 0
        while index < len(names):
            key = names[index]
            rest = key[len(prefix) :]
            if delimiter and delimiter in rest:
                common = prefix + rest.split(delimiter, 1)[0] + delimiter
                # Every key of this common prefix lies before the bound (one past the delimiter).
                bound = common[:-1] + chr(ord(common[-1]) + 1) if len(delimiter) == 1 else None
                index = bisect.bisect_left(names, bound, index) if bound is not None else index + 1
                if common <= after or (prefixes and prefixes[-1] == common):
                    continue
                prefixes.append(common)
                last = common
            else:
                contents.append(keys[index])
                last = key
                index += 1
            if len(contents) + len(prefixes) >= max_keys:
                return ListPage(contents, prefixes, index < len(names), last)
        return ListPage(contents, prefixes, False, last)

    @staticmethod
    def _walk(base: Path, prefix: str, shallow: bool) -> tuple[list[str], list[Key]]:
        """The sorted keys starting with ``prefix`` below ``base`` (symlinked folders are neither
        listed nor entered, as with ``os.walk``): a shallow walk reads the folder ``prefix`` names
        and, for each sub-folder, only one of its keys, which stands for it (S3 has no empty
        folders)."""
        keys: list[Key] = []
        folder = prefix.rsplit("/", 1)[0] + "/" if "/" in prefix else ""
        _scan(os.path.join(base, folder), folder, keys, first_only=False, shallow=shallow)
        if folder != prefix:
            keys = [k for k in keys if k[0].startswith(prefix)]
        keys.sort(key=lambda k: k[0])
        return [k[0] for k in keys], keys


def _scan(path: str, relative: str, keys: list[Key], *, first_only: bool, shallow: bool = False) -> bool:
    """Append the files below ``path`` (their keys begin with ``relative``) to ``keys``; a shallow
    scan takes one file of each sub-folder, ``first_only`` stops at the first file. True when one
    was found."""
    found = False
    try:
        entries = os.scandir(path)
    except (FileNotFoundError, NotADirectoryError):  # no such folder: no keys (os.walk's silence)
        return False
    with entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                inside = shallow or first_only
                found = _scan(entry.path, f"{relative}{entry.name}/", keys, first_only=inside) or found
            elif not entry.is_dir():  # a link to a folder is not entered
                keys.append((relative + entry.name, entry.stat()))
                found = True
            if found and first_only:
                return True
    return found
