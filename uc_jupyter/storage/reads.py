"""The one storage seam of a remote volume: listing in pages, downloads, retries and credentials,
chosen once per volume folder by :func:`open_storage`.

- ``s3://`` / ``s3a://`` (and ``gs://``, ``az://``, ``abfs(s)://`` where
  :mod:`uc_jupyter.storage.cloud` maps their options): obstore, object_store's clients, with
  every AWS credential source (:mod:`uc_jupyter.storage.credentials`).
- any other fsspec protocol, and s3 options object_store cannot honour (named in a notice): fsspec.
  gs/Azure options it cannot honour are refused (no fsspec filesystem for them is installed).
- ``file://``: :class:`~uc_jupyter.storage.local_storage.LocalStorage`, which lists and copies
  walking from the volume's root (``root=``) without following a symbolic link.

object_store cannot run in a process forked from one that made a request: a dataset's maker lists
in a short forked child and stays clean for its forked DataLoader workers, and
:func:`~uc_jupyter.storage.objects.fork_safe` says whether a fork now would still be served
(:mod:`uc_jupyter.storage.objects`).

Example:
    >>> storage = open_storage("s3://lake/images", {"anon": True}, where="/Volumes/main/ml/images")
    >>> type(storage).__name__
    'ObjectStorage'
    >>> type(open_storage("memory://lake/images", {})).__name__
    'FsspecStorage'
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

from uc_jupyter.storage import urls as st
from uc_jupyter.storage.config import Unsupported
from uc_jupyter.storage.downloads import Downloads
from uc_jupyter.storage.filesystem import FsspecStorage
from uc_jupyter.storage.objects import ObjectStorage
from uc_jupyter.storage.pages import Entry, Page
from uc_jupyter.storage.retry import RetryPolicy
from uc_jupyter.storage.stores import is_object_store, reads_through_fsspec, store_args

__all__ = ["Entry", "Page", "VolumeStorage", "open_storage"]


class VolumeStorage(Protocol):
    """A volume folder's storage: what a dataset lists and downloads through."""

    url: str

    def pages(self, *, recursive: bool) -> Iterator[Page]:
        """The folder's files in pages, first page first (paths below the folder, in no order).

        Raises:
            NotFound: the folder does not exist.
            NotADirectoryError: it is a file.
            PermissionError: the storage refused the credentials.
        """

    def downloads(self, policy: RetryPolicy, *, on_retry: Callable[[], None], threads: int) -> Downloads:
        """Downloads of its files (``bucket/key`` remote paths, as fsspec spells them)."""


def open_storage(
    url: str, options: Mapping[str, Any] | None, *, where: str = "", root: str | None = None
) -> VolumeStorage:
    """The storage of the folder at ``url`` with the volume's storage ``options``; ``where`` (its
    /Volumes path) names it in errors. No request is made.

    ``root``: for a ``file://`` folder, the volume's own storage URL (``url`` lies below it): every
    walk starts there and follows no symlink on the way down. Without it, walks start at ``url``
    itself (a symlink in ``url``'s own path is the caller's to rule out), as for
    :func:`~uc_jupyter.storage.writes.open_writes`.

    Raises:
        ValueError: the options are invalid for object_store, or ``url`` is not below ``root``.
    """
    if st.is_local(url):
        from uc_jupyter.storage.local_storage import LocalStorage
        from uc_jupyter.storage.local_volume import LocalVolume

        volume = LocalVolume.below(st.local_path(root or url), st.local_path(url), where=where or url)
        return LocalStorage(volume, url)
    given = dict(options or {})
    if is_object_store(url):
        try:
            args = store_args(url, given)
        except Unsupported as why:
            if not reads_through_fsspec(url):
                raise ValueError(f"cannot read {where or url}: {why} is not supported; remove it") from None
            _fsspec_notice(where or url, str(why))
        except ValueError as why:  # a bad URL or account for its options: one line naming the volume
            raise ValueError(f"cannot read {where or url}: {why}") from None
        else:
            return ObjectStorage(args, url, given, where=where)
    return FsspecStorage(url, given, where=where)


def _fsspec_notice(where: str, why: str) -> None:
    from uc_jupyter.notices import notice

    notice(
        f"{where} is read through fsspec, not object_store ({why}): remove that option to read faster",
        key=("fsspec-fallback", where),
    )
