"""A ranged read through an fsspec filesystem that asks for the listed version of the file only.

:class:`~uc_jupyter.storage.downloads.ThreadDownloads` reads a volume's files in ranges of at most
the listed size + 1 bytes, which catches a file that grew or shrank since the listing, but not one
rewritten with as many bytes. On S3 (s3fs: folders whose options object_store cannot honour, and a
forked child of a process that has used object_store) each range is a GET that sends the listed
ETag as ``If-Match``, as object_store's downloads do
(:class:`~uc_jupyter.storage.transfers.ObjectDownloads`): the store answers only that version, and
refuses any other with 412, which :func:`read_range` raises as :class:`NotTheListedVersion`.
s3fs's ``cat_file`` takes no request headers, so the GET is made through its own client
(``_call_s3``, the coroutine behind its public ``call_s3``: its retries and its errors as OSErrors)
on its own event loop, as s3fs's file objects make theirs. Other filesystems (``memory://`` in
tests) are read by ``cat_file``: the size is all they are checked by.

Example:
    >>> import fsspec
    >>> fs = fsspec.filesystem("memory")
    >>> fs.pipe_file("/bucket/a.bin", b"0123456789")
    >>> read_range(fs, "/bucket/a.bin", 2, 5, etag=None)
    b'234'
"""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import fsspec

__all__ = ["NotTheListedVersion", "read_range", "size_now"]


class NotTheListedVersion(OSError):
    """The store refused a read that named the listed ETag: the file is another version now."""


def read_range(fs: fsspec.AbstractFileSystem, remote: str, start: int, end: int, *, etag: str | None) -> bytes:
    """Bytes ``start`` to ``end`` (exclusive; fewer at the file's end) of ``remote`` on ``fs``;
    with ``etag`` on S3, of that version only (:class:`NotTheListedVersion` otherwise)."""
    if etag is None or not _is_s3fs(fs):
        return bytes(fs.cat_file(remote, start=start, end=end))
    from fsspec.asyn import sync

    return bytes(sync(fs.loop, _get_matching, fs, remote, start, end, etag))


def size_now(fs: fsspec.AbstractFileSystem, remote: str) -> int | None:
    """The size of ``remote`` on ``fs`` now, asked of the store (not a listing ``fs`` keeps), for the
    words of a changed file's error; None when not known (the look failed too)."""
    try:
        fs.invalidate_cache(remote)
        return int(fs.info(remote).get("size") or 0)
    except Exception:
        return None


async def _get_matching(fs: Any, remote: str, start: int, end: int, etag: str) -> bytes:
    """One GET of the range with ``If-Match``, on s3fs's loop."""
    bucket, key, version = fs.split_path(remote)
    versioned = {"VersionId": version} if version else {}
    try:
        answer = await fs._call_s3(
            "get_object", Bucket=bucket, Key=key, Range=f"bytes={start}-{end - 1}", IfMatch=etag, **versioned
        )
    except OSError as exc:
        if _precondition_failed(exc):
            raise NotTheListedVersion(errno.EINVAL, f"{remote} is not the version {etag} now") from exc
        raise
    body = answer["Body"]
    try:
        return bytes(await body.read())
    finally:
        body.close()


def _is_s3fs(fs: fsspec.AbstractFileSystem) -> bool:
    protocols = (fs.protocol,) if isinstance(fs.protocol, str) else tuple(fs.protocol)
    if "s3" not in protocols:
        return False
    import s3fs

    return isinstance(fs, s3fs.S3FileSystem)


def _precondition_failed(exc: OSError) -> bool:
    """Whether s3fs's OSError stands for a 412 (it keeps the client's error as the cause)."""
    answer = getattr(exc.__cause__, "response", None) or {}
    status = answer.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return bool(status == 412 or answer.get("Error", {}).get("Code") == "PreconditionFailed")
