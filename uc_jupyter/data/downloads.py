"""How a stream's missed files are downloaded: one small interface, :class:`Downloads`, and its
fsspec implementation (pool threads); object storage has obstore's on the process's event loop
(:class:`~uc_jupyter.data.storage.transfers.ObjectDownloads`, chosen by
:func:`~uc_jupyter.data.storage.open_storage`), local volumes theirs in
:mod:`uc_jupyter.data.local_downloads`. The fetch-ahead window (:mod:`uc_jupyter.data.prefetch`)
starts them and settles what they end with.

Example:
    >>> downloads = ThreadDownloads(fs, RetryPolicy())                        # doctest: +SKIP
    >>> [future] = downloads.start([("bucket/a.png", "/tmp/a.png", "/Volumes/c/s/v/a.png")])  # doctest: +SKIP
    >>> future.result()                                                       # doctest: +SKIP
"""

from __future__ import annotations

import concurrent.futures as cf
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple, Protocol

from uc_jupyter.data.remote import RetryPolicy, VolumeReadError, fetch_file

if TYPE_CHECKING:
    import fsspec

__all__ = ["MAX_PREFETCH", "Downloads", "ThreadDownloads", "Wanted"]

MAX_PREFETCH = 64  # threads of ThreadDownloads (fsspec); prefetch.MAX_DEPTH bounds the downloads in flight


class Wanted(NamedTuple):
    """One file of a stream: its cache key, listed size, base name, remote path, and /Volumes path
    (a named tuple: one is made per file and pass)."""

    key: str
    size: int
    name: str
    source: str
    where: str


class Downloads(Protocol):
    """Downloads of remote files into local files, each ending in a future (None or VolumeReadError)."""

    def start(self, jobs: Sequence[tuple[str, str, str]]) -> list[cf.Future[None]]:
        """Start downloading each ``(remote_path, local_path, volume_path)``."""

    def cancel(self, futures: Sequence[cf.Future[None]]) -> None:
        """Ask these downloads to stop; each future still ends, once its download has stopped."""

    def close(self) -> None:
        """Wait for what is running and free the resources."""


class ThreadDownloads:
    """Downloads through an fsspec filesystem, one pool thread per download in flight."""

    def __init__(
        self,
        fs: fsspec.AbstractFileSystem,
        policy: RetryPolicy,
        *,
        on_retry: Callable[[], None] = lambda: None,
        threads: int = MAX_PREFETCH,
    ) -> None:
        self._fs, self._policy, self._on_retry = fs, policy, on_retry
        self._pool = cf.ThreadPoolExecutor(max_workers=threads, thread_name_prefix="uc-jupyter-fetch")

    def start(self, jobs: Sequence[tuple[str, str, str]]) -> list[cf.Future[None]]:
        return [self._pool.submit(self._fetch, remote, local, where) for remote, local, where in jobs]

    def _fetch(self, remote: str, local: str, where: str) -> None:
        # Made private (0600) before fsspec opens it, which keeps the mode of a file it truncates.
        try:
            os.close(os.open(local, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
        except OSError as exc:
            raise VolumeReadError(f"cannot read {where}: cannot create {local}: {exc.strerror or exc}") from exc
        fetch_file(self._fs, remote, local, volume_path=where, policy=self._policy, on_retry=self._on_retry)

    def cancel(self, futures: Sequence[cf.Future[None]]) -> None:
        for future in futures:
            future.cancel()  # one already running finishes; its file is removed by the caller

    def close(self) -> None:
        self._pool.shutdown(wait=True)
