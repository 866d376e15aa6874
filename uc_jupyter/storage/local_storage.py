"""A local (``file://``) volume folder as a storage backend like the others: what
:func:`~uc_jupyter.storage.reads.open_storage` gives for a local folder.

Its listing and its copies walk from the volume's root without following a symbolic link
(:class:`~uc_jupyter.storage.local_volume.LocalVolume`, over :mod:`~uc_jupyter.storage.nofollow`):
a listing is one page, with the entries it skipped (symlinks, FIFOs, sockets) named in it; downloads
are copies through checked descriptors (:class:`~uc_jupyter.storage.local_downloads.LocalDownloads`),
each job naming its file by local path as a remote job names its object by ``bucket/key``. A local
folder can also be read where it lies: :attr:`LocalStorage.volume` checks and opens its files.

Example:
    >>> storage = open_storage("file:///data/vol/images", {}, root="file:///data/vol")  # doctest: +SKIP
    >>> [page.files for page in storage.pages(recursive=True)]                          # doctest: +SKIP
    [[('cat/1.png', 2310, '1765012345.0'), ...]]
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from uc_jupyter.storage.downloads import Downloads
from uc_jupyter.storage.local_downloads import LocalDownloads
from uc_jupyter.storage.local_volume import LocalVolume
from uc_jupyter.storage.pages import Page
from uc_jupyter.storage.retry import RetryPolicy

__all__ = ["LocalStorage"]

_COPY_THREADS = 16  # copies are disk and kernel work: more threads than this only contend


class LocalStorage:
    """The storage of the local folder ``volume`` (its ``file://`` URL is ``url``)."""

    in_key_order = False  # one page of the whole folder: nothing to start on before it is listed

    def __init__(self, volume: LocalVolume, url: str) -> None:
        self.volume, self.url = volume, url

    def pages(self, *, recursive: bool) -> Iterator[Page]:
        files, skipped = self.volume.entries(recursive=recursive)
        yield Page(files, [] if recursive else self.volume.sub_folders(), skipped)

    def downloads(self, policy: RetryPolicy, *, on_retry: Callable[[], None], threads: int) -> Downloads:
        """Copies of its files; nothing is retried (a local read that fails says why at once)."""
        del policy, on_retry
        return LocalDownloads(self.volume, threads=min(threads, _COPY_THREADS))
