"""A stream's files as the fetch-ahead window sees them: each file's cache key, size, name and
paths, made a few at a time as the window reaches them (so the first file does not wait for the
keys of the whole stream), from a listing that may still be arriving.

Example:
    >>> from uc_jupyter.data.volume.listing import RemoteFile
    >>> files = [RemoteFile("a/x.png", 3, "v1"), RemoteFile("b/y.png", 5, "v1")]
    >>> wanted = WantedFiles(files, ListingKeys("s3://b/f"), [1, 0], root="f", where="/Volumes/c/s/v/f")
    >>> [(w.name, w.size, w.source) for w in wanted]
    [('y.png', 5, 'f/b/y.png'), ('x.png', 3, 'f/a/x.png')]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import overload

from uc_jupyter.data.cache import FileCache
from uc_jupyter.data.volume.listing import RemoteFile
from uc_jupyter.storage.downloads import Wanted

__all__ = ["ListingKeys", "WantedFiles"]


class ListingKeys:
    """The cache keys of a listing's files (32 raw bytes each), made up to where they are asked
    for: all at once for a whole listing (made once, shipped to workers with the dataset), file by
    file for one still arriving."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._digests = bytearray()

    def upto(self, files: Sequence[RemoteFile], count: int) -> bytearray:
        """The keys of ``files[:count]`` (at least), made where not made yet."""
        made = len(self._digests) // 32
        if made < count:
            url, digest = self._url, FileCache.key_digest
            self._digests += b"".join(digest(f"{url}/{f.relative}", f.size, f.version) for f in files[made:count])
        return self._digests


class WantedFiles(Sequence[Wanted]):
    """The files of ``files`` at ``positions``, in that order. ``root`` is the folder's storage path
    (a file's source is ``root/relative``: ``bucket/key`` on object storage, the local path of a
    local volume's file, which :class:`~uc_jupyter.storage.local_downloads.LocalDownloads` copies
    through its no-follow walk). Positions still
    arriving (:class:`~uc_jupyter.data.stream.partition.StreamPositions`) make a sequence that grows:
    :meth:`wait_beyond` waits for it."""

    def __init__(
        self,
        files: Sequence[RemoteFile],
        keys: ListingKeys,
        positions: Sequence[int],
        *,
        root: str,
        where: str,
    ) -> None:
        self._files, self._keys, self._positions = files, keys, positions
        self._root, self._where = root, where

    def __len__(self) -> int:
        return len(self._positions)

    def wait_beyond(self, length: int) -> bool:
        """Whether the stream has more than ``length`` files, waiting for a listing still arriving."""
        wait = getattr(self._positions, "wait_beyond", None)
        return bool(wait(length)) if wait is not None else len(self._positions) > length

    @overload
    def __getitem__(self, item: int) -> Wanted: ...

    @overload
    def __getitem__(self, item: slice) -> Sequence[Wanted]: ...

    def __getitem__(self, item: int | slice) -> Wanted | Sequence[Wanted]:
        if isinstance(item, slice):
            return self._made(self._positions[item])
        return self._made([self._positions[item]])[0]

    def _made(self, indices: Sequence[int]) -> list[Wanted]:
        """This runs per file of every pass: kept to plain indexing and slicing."""
        if not indices:
            return []
        files, root, where = self._files, self._root, self._where
        digests = self._keys.upto(files, max(indices) + 1)
        wanted = []
        for index in indices:
            remote = files[index]
            relative = remote.relative
            key = digests[32 * index : 32 * index + 32].hex()
            name = relative[relative.rfind("/") + 1 :]
            wanted.append(Wanted(key, remote.size, name, f"{root}/{relative}", f"{where}/{relative}", remote.etag))
        return wanted
