"""A volume folder through fsspec: for the protocols object_store does not serve (``memory://`` in
tests, other fsspec filesystems), options it cannot honour, and forked processes where object_store
cannot run (see :mod:`uc_jupyter.storage.objects`).

Example:
    >>> storage = FsspecStorage("memory://bucket/data", {}, where="/Volumes/c/s/v")  # doctest: +SKIP
    >>> next(storage.pages(recursive=True)).files                                     # doctest: +SKIP
    [('a.bin', 3, None)]
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from uc_jupyter.errors import NotFound
from uc_jupyter.storage.downloads import MAX_PREFETCH, Downloads, ThreadDownloads
from uc_jupyter.storage.pages import Entry, Page
from uc_jupyter.storage.retry import RetryPolicy
from uc_jupyter.storage.urls import fsspec_options

if TYPE_CHECKING:
    import fsspec

__all__ = ["FsspecStorage"]


class FsspecStorage:
    """Listing and downloads of the folder at ``url`` through one fsspec filesystem per process
    (async filesystems do not survive a fork)."""

    def __init__(self, url: str, options: Mapping[str, Any], *, where: str = "") -> None:
        self.url = url
        self.where = where or url
        self._options = _with_pool(url, fsspec_options(options))
        self._fs: tuple[int, fsspec.AbstractFileSystem] | None = None

    def filesystem(self) -> fsspec.AbstractFileSystem:
        if self._fs is None or self._fs[0] != os.getpid():
            import fsspec.core

            fs, _ = fsspec.core.url_to_fs(self.url, skip_instance_cache=True, **self._options)
            self._fs = (os.getpid(), fs)
        return self._fs[1]

    def pages(self, *, recursive: bool) -> Iterator[Page]:
        """The whole listing as one page (fsspec lists everything before it answers)."""
        fs = self.filesystem()
        root = str(fs._strip_protocol(self.url)).rstrip("/")
        fs.invalidate_cache(root)  # a fresh listing: filesystems like s3fs keep listings around
        try:
            info: dict[str, Any] = fs.info(root)
        except FileNotFoundError:
            raise NotFound(f"{self.where} does not exist") from None
        if info.get("type") == "file":
            raise NotADirectoryError(f"{self.where} is a file, not a folder; give the folder that holds the files")
        entries = fs.find(root, detail=True) if recursive else fs.ls(root, detail=True)
        if isinstance(entries, dict):
            entries = list(entries.values())
        found: list[Entry] = []
        folders: list[str] = []
        prefix = str(fs._strip_protocol(root)).rstrip("/") + "/"
        for entry in entries:
            name = str(fs._strip_protocol(entry["name"]))
            if entry.get("type") == "directory":
                below = name.rstrip("/")[len(prefix) :]
                if not recursive and name.startswith(prefix) and below and not below.startswith("."):
                    folders.append(below)
                continue
            if name.startswith(prefix):
                found.append((name[len(prefix) :], int(entry.get("size") or 0), _version(entry)))
        yield Page(found, sorted(folders))

    def downloads(self, policy: RetryPolicy, *, on_retry: Callable[[], None], threads: int) -> Downloads:
        return ThreadDownloads(self.filesystem(), policy, on_retry=on_retry, threads=threads)


def _with_pool(url: str, options: dict[str, Any]) -> dict[str, Any]:
    """S3 clients allow 10 connections by default, which caps a stream at 10 requests in flight;
    raise that to the prefetch ceiling unless the volume's options say otherwise."""
    if not url.startswith(("s3://", "s3a://")):
        return options
    config = dict(options.get("config_kwargs") or {})
    config.setdefault("max_pool_connections", MAX_PREFETCH)
    return {**options, "config_kwargs": config}


def _version(entry: dict[str, Any]) -> str | None:
    for key in ("ETag", "etag", "mtime", "LastModified", "last_modified", "updated", "created"):
        value = entry.get(key)
        if value is not None:
            return str(value)
    return None
