"""Copies of a local volume's files into the cache (``cache="always"``), read through a checked descriptor.

A :class:`~uc_jupyter.storage.downloads.Downloads` for ``file://`` volumes. Each job's remote is the
file's local path, below the volume folder's own (as a remote job's is ``bucket/key`` below its
folder's ``bucket/prefix``); a path outside that folder, or with an empty, ``.`` or ``..`` part, is
refused before anything is opened. The file is opened with
:meth:`LocalVolume.open <uc_jupyter.storage.local_volume.LocalVolume.open>` (an ``openat`` walk from
the volume's root, no symlink followed, a regular file of the listed size only), then
copied from that descriptor, never opened by path again. So the cached copy is the volume's file
even when a symlink is swapped in at its path meanwhile. At most the listed size + 1 bytes are
copied: a file that grew (or shrank) while it was copied ends the copy with
:func:`~uc_jupyter.storage.downloads.changed_since_listing`'s error, as its checked open does for one
that changed before. The copies run on a small thread pool, like fsspec downloads.

Example:
    >>> downloads = LocalDownloads(LocalVolume.of(resolved))                    # doctest: +SKIP
    >>> job = Job("/data/v/a.png", "/cache/tmp/1", "/Volumes/main/ml/v/a.png", 231)
    >>> downloads.start([job])[0].result()                                        # doctest: +SKIP
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import errno
import os
from collections.abc import Sequence

from uc_jupyter.storage.downloads import Download, Job, changed_since_listing
from uc_jupyter.storage.errors import VolumeReadError
from uc_jupyter.storage.local_volume import LocalVolume

__all__ = ["LocalDownloads"]

_CHUNK = 1 << 20
_NO_SENDFILE = (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EXDEV)


class LocalDownloads:
    """Copies into the cache's temporary files, one pool thread per copy in flight."""

    def __init__(self, volume: LocalVolume, *, threads: int = 8) -> None:
        self._volume = volume
        self._prefix = volume.path.rstrip("/") + "/"
        self._pool = cf.ThreadPoolExecutor(max_workers=threads, thread_name_prefix="uc-jupyter-copy")

    def start(self, jobs: Sequence[Job]) -> list[Download]:
        """Start copying each job (its remote: the file's local path, below the volume folder's)."""
        return [self._pool.submit(self._copy, job) for job in jobs]

    def _relative(self, job: Job) -> str:
        """The job's path below the folder; one that leaves it (or could: ``..``) is refused."""
        relative = job.remote[len(self._prefix) :] if job.remote.startswith(self._prefix) else ""
        if not relative or any(part in ("", ".", "..") for part in relative.split("/")):
            raise VolumeReadError(f"cannot copy {job.where}: {job.remote!r} is not a file below {self._prefix}")
        return relative

    def cancel(self, futures: Sequence[Download]) -> None:
        for future in futures:
            future.cancel()  # one already copying finishes; the caller removes its file

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def _copy(self, job: Job) -> None:
        source = self._volume.open(self._relative(job), job.size)  # raises VolumeReadError naming the file
        try:
            try:
                target = os.open(job.local, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
                try:
                    # One byte past the listed size, no more: a file growing meanwhile is neither
                    # copied for ever nor cut to a prefix that would pass for the listed file.
                    copied = _copy_descriptor(source, target, job.size + 1)
                finally:
                    os.close(target)
            except OSError as exc:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(job.local)
                text = os.strerror(exc.errno) if exc.errno else str(exc)
                raise VolumeReadError(f"cannot copy {job.where} into the cache: {type(exc).__name__}: {text}") from exc
            if copied != job.size:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(job.local)
                now = os.fstat(source).st_size
                if now == job.size:  # changed back meanwhile: say what the copy met
                    now = copied if copied < job.size else job.size + 1
                raise changed_since_listing(job.where, job.size, now)
        finally:
            os.close(source)


def _copy_descriptor(source: int, target: int, limit: int) -> int:
    """Copy up to ``limit`` bytes, in the kernel where it can (``sendfile``), else by chunks; how
    many were copied (fewer at the end of the file)."""
    copied = 0
    try:
        while copied < limit:
            sent = os.sendfile(target, source, copied, min(_CHUNK, limit - copied))
            if sent == 0:
                return copied
            copied += sent
        return copied
    except OSError as exc:
        if exc.errno not in _NO_SENDFILE or copied:
            raise
    while copied < limit:  # a filesystem without sendfile between files
        chunk = os.pread(source, min(_CHUNK, limit - copied), copied)
        if not chunk:
            return copied
        view = memoryview(chunk)
        while view:
            view = view[os.write(target, view) :]
        copied += len(chunk)
    return copied
