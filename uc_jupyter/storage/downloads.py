"""How a stream's missed files are downloaded: one small interface, :class:`Downloads`, whose jobs
(:class:`Job`) carry each file's listed size, and its fsspec implementation (pool threads); object
storage has obstore's on the process's event loop
(:class:`~uc_jupyter.storage.transfers.ObjectDownloads`, chosen by
:func:`~uc_jupyter.storage.open_storage`), local volumes theirs in
:mod:`uc_jupyter.storage.local_downloads`. The fetch-ahead window (:mod:`uc_jupyter.data.volume.prefetch`)
starts them and settles what they end with.

Every implementation asks for at most the listed size + 1 bytes and ends a download whose file has
another length with :func:`changed_since_listing`'s error, leaving no file: a writer to the volume
who swaps a listed 16 KiB file for a 10 GB one costs the reader one byte more, never the 10 GB (its
disk, the cache's budget, the bandwidth). An empty file is asked for its size only (there is no
range of nothing to ask for).

Example:
    >>> downloads = ThreadDownloads(fs, RetryPolicy())                                  # doctest: +SKIP
    >>> [future] = downloads.start([Job("bucket/a.png", "/tmp/a.png", "/Volumes/c/s/v/a.png", 231)])  # doctest: +SKIP
    >>> future.result()                                                                 # doctest: +SKIP
    >>> error = changed_since_listing("/Volumes/c/s/v/a.png", 231, None)  # 232 bytes came
    >>> "/Volumes/c/s/v/a.png: it changed since the dataset listed it (231 bytes then, more than 231 now)" in str(error)
    True
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import os
import random
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple, Protocol

from uc_jupyter.storage.errors import VolumeReadError
from uc_jupyter.storage.fsspec_ranges import NotTheListedVersion, read_range, size_now
from uc_jupyter.storage.retry import RetryPolicy, retry_delay

if TYPE_CHECKING:
    import fsspec

__all__ = [
    "MAX_PREFETCH",
    "Download",
    "Downloads",
    "Job",
    "LazyDownloads",
    "ThreadDownloads",
    "Wanted",
    "changed_since_listing",
    "entity_tag",
]

MAX_PREFETCH = 64  # threads of ThreadDownloads (fsspec); pace.MAX_DEPTH bounds the downloads in flight
_CHUNK = 4 << 20  # bytes per ranged read of ThreadDownloads: a large file is read in pieces, never whole in memory
_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC


class Wanted(NamedTuple):
    """One file of a stream: its cache key, listed size, base name, remote path, /Volumes path and
    listed entity tag, if any (a named tuple: one is made per file and pass)."""

    key: str
    size: int
    name: str
    source: str
    where: str
    etag: str | None = None


def entity_tag(version: str | None) -> str | None:
    """A listed version when it is an HTTP entity tag (``"..."`` or ``W/"..."``, as object stores
    list them), which a download sends as ``If-Match``; None for a modification time (stores that
    list no ETag) or nothing.

    Example:
        >>> entity_tag('"24814b-4000"'), entity_tag("1733500000.5"), entity_tag(None)
        ('"24814b-4000"', None, None)
    """
    if version and version.endswith('"') and version.startswith(('"', 'W/"')) and len(version) > 1:
        return version
    return None


class Job(NamedTuple):
    """One download: the file at ``remote`` (as the Downloads spells its files) into the local file
    ``local``; ``where`` is its /Volumes path (for errors) and ``size`` its listed size, of which
    no more than one byte more is ever asked for; ``etag`` its listed entity tag, when the listing
    gave one (:func:`entity_tag`): a store that compares it answers only that version.

    Example:
        >>> Job("bucket/data/a.png", "/cache/tmp/1.42", "/Volumes/c/s/v/a.png", 231).size
        231
    """

    remote: str
    local: str
    where: str
    size: int
    etag: str | None = None


def changed_since_listing(where: str, listed: int, now: int | None, *, another: bool = False) -> VolumeReadError:
    """The one error for a file at ``where`` whose bytes are not the ``listed`` size any more:
    ``now`` bytes (None: more than listed, when only listed + 1 were asked for; ``listed`` itself:
    rewritten with the same size, its entity tag another; ``another`` with None: another version,
    of a size not known). Whichever layer sees it (a download, a local volume's checked open, the
    cache putting a file in place) raises this one, so the user reads the same line and the same remedy."""
    if now is None and another:
        then = f"{listed} bytes then, another version now: its ETag is another"
    elif now == listed:
        then = f"{listed} bytes, rewritten since with as many: its ETag is another"
    else:
        then = f"{listed} bytes then, {f'more than {listed}' if now is None else now} now"
    return VolumeReadError(
        f"cannot read {where}: it changed since the dataset listed it ({then}); "
        "make the dataset again to list the folder again"
    )


# A download's future: it ends with the seconds its last attempt waited for the store's first answer
# (the time to first byte: the request's latency, apart from the time its bytes took to arrive), or
# None where the kind of download cannot tell them apart; or with its error (VolumeReadError).
Download = cf.Future[float | None]


class Downloads(Protocol):
    """Downloads of remote files into local files, each ending in a :data:`Download` future. A file
    that is not its listed size ends with :func:`changed_since_listing`'s error, no file left."""

    def start(self, jobs: Sequence[Job]) -> list[Download]:
        """Start downloading each :class:`Job`."""

    def cancel(self, futures: Sequence[Download]) -> None:
        """Ask these downloads to stop; each future still ends, once its download has stopped."""

    def close(self) -> None:
        """Wait for what is running and free the resources."""


class LazyDownloads:
    """:class:`Downloads` made by ``make`` at the first :meth:`start`: a pass whose every file is
    already in the cache builds no storage client, thread pool or credential lookup at all.

    Example:
        >>> made = []
        >>> lazy = LazyDownloads(lambda: made.append(1) or ThreadDownloads(None, RetryPolicy()))
        >>> lazy.cancel([]); lazy.close(); made  # nothing started: nothing made
        []
    """

    def __init__(self, make: Callable[[], Downloads]) -> None:
        self._make = make
        self._made: Downloads | None = None

    def start(self, jobs: Sequence[Job]) -> list[Download]:
        if self._made is None:
            self._made = self._make()
        return self._made.start(jobs)

    def cancel(self, futures: Sequence[Download]) -> None:
        if self._made is not None:  # nothing was started by downloads never made
            self._made.cancel(futures)

    def close(self) -> None:
        if self._made is not None:
            self._made.close()


class ThreadDownloads:
    """Downloads through an fsspec filesystem, one pool thread per download in flight: ranged reads
    of at most the listed size + 1 bytes (in pieces of ``_CHUNK``; on S3 each names the listed ETag,
    :func:`~uc_jupyter.storage.fsspec_ranges.read_range`, so a rewrite of the same size fails as
    object_store's downloads fail), retried as a whole on transient errors by the dataset's policy."""

    def __init__(
        self,
        fs: fsspec.AbstractFileSystem,
        policy: RetryPolicy,
        *,
        on_retry: Callable[[], None] = lambda: None,
        threads: int = MAX_PREFETCH,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._fs, self._policy, self._on_retry, self._sleep = fs, policy, on_retry, sleep
        self._rng = random.Random()
        self._pool = cf.ThreadPoolExecutor(max_workers=threads, thread_name_prefix="uc-jupyter-fetch")

    def start(self, jobs: Sequence[Job]) -> list[Download]:
        return [self._pool.submit(self._fetch, job) for job in jobs]

    def cancel(self, futures: Sequence[Download]) -> None:
        for future in futures:
            future.cancel()  # one already running finishes; its file is removed by the caller

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def _fetch(self, job: Job) -> None:
        for attempt in range(self._policy.attempts):
            try:
                self._attempt(job)
                return
            except VolumeReadError:  # final: the file changed, or the target cannot be made
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(job.local)
                raise
            except Exception as exc:
                delay = retry_delay(exc, attempt, job.local, volume_path=job.where, policy=self._policy, rng=self._rng)
            self._on_retry()
            self._sleep(delay)

    def _attempt(self, job: Job) -> None:
        # Made private (0600) and opened here, never through the filesystem's own get_file, which
        # would take whatever length the object has now.
        try:
            fd = os.open(job.local, _FLAGS, 0o600)
        except OSError as exc:
            raise VolumeReadError(f"cannot read {job.where}: cannot create {job.local}: {exc.strerror or exc}") from exc
        try:
            if job.size == 0:
                self._check_empty(job)
                return
            read = 0
            while True:  # the last piece asked for ends one byte past the listed size
                asked = min(_CHUNK, job.size + 1 - read)
                try:
                    piece = read_range(self._fs, job.remote, read, read + asked, etag=job.etag)
                except NotTheListedVersion:  # its size now says how it changed
                    now = size_now(self._fs, job.remote)
                    raise changed_since_listing(job.where, job.size, now, another=True) from None
                read += len(piece)
                if read > job.size:  # also a store that ignored the range: nothing more is written
                    raise changed_since_listing(job.where, job.size, None)
                _write_all(fd, piece)
                if len(piece) < asked:  # the end of the file
                    break
            if read != job.size:
                raise changed_since_listing(job.where, job.size, read)
        finally:
            os.close(fd)

    def _check_empty(self, job: Job) -> None:
        """An empty listed file: its size asked of the store (fresh, not a listing the filesystem
        keeps), and nothing to read."""
        self._fs.invalidate_cache(job.remote)
        now = int(self._fs.info(job.remote).get("size") or 0)
        if now:
            raise changed_since_listing(job.where, 0, now)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
