"""Downloads through an obstore store, all on one event-loop thread per process.

A download is one ranged GET on the process's loop of the job's listed size + 1 bytes, asked for
with ``get_range_async`` and answered through a done-callback of the future it returns (no task or
coroutine per file: those cost more CPU per file than the answer's own handling). A body of another
length than listed ends the download with
:func:`~uc_jupyter.storage.downloads.changed_since_listing`'s error: a listed file swapped for a much
larger one costs one byte more than listed, never its new length. The body is written into the
target file on a files thread (never on the loop: creating a file can block for a long time while
the file system commits its journal, and would hold up every other transfer), where the future is
completed too, so its callbacks (which lock and rename files) never run on the loop. Files listed up
to ``_MEMORY_BODY`` are taken whole; larger ones take the same range in a task, its size checked
before the body is read and the body written chunk by chunk as it comes; an empty one is only asked
for its size (a HEAD: there is no range of nothing). Transient failures are retried by
:func:`uc_jupyter.storage.retry.retry_delay` with the dataset's policy (object_store's own retries are
off for GETs), so they are counted and classified as with fsspec. A cancelled download's GET is
dropped (and its connection with it). After a fork the child starts a loop of its own (the parent's
thread does not exist there).

Why a loop and not a pool of threads making blocking GETs: measured side by side (3,000 files of
about 18 KiB, 64 in flight, the files written; issue 16's latency), the two cost the same CPU per
file within the noise (232-247 against 234-284 us at 30 ms; 154-162 against 175-209 us at latency
0), and the loop also drops a cancelled request, runs two threads per process instead of one per
download in flight, and keeps no thread waiting in Rust. Taking the answers as callbacks instead
of a coroutine per file saves about 10 us per file (142-151 us at latency 0).

Example:
    >>> downloads = ObjectDownloads(store, "lake/images", RetryPolicy())              # doctest: +SKIP
    >>> [f] = downloads.start([Job("lake/images/a.png", "/tmp/a.png", "/Volumes/c/s/v/a.png", 231)])  # doctest: +SKIP
    >>> f.result()                                                                     # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import contextlib
import functools
import os
import random
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from uc_jupyter.storage.downloads import Download, Job, changed_since_listing
from uc_jupyter.storage.errors import VolumeReadError, as_os_error
from uc_jupyter.storage.retry import RetryPolicy, retry_delay

if TYPE_CHECKING:
    from obstore import GetOptions

__all__ = ["DownloadCancelled", "ObjectDownloads"]

_MEMORY_BODY = 1 << 20
_CHUNK = 1 << 20
_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
_RNG = random.Random()  # backoff jitter; one for all downloads


class DownloadCancelled(Exception):
    """The download was cancelled before it finished (its partial file is removed)."""


class _Job:
    """One download, on the loop thread: what it waits for now (a GET's answer, a task, or the
    timer of its next attempt; None once its body is being written), its attempts so far, and how
    long its last attempt waited for the store's first answer (None: not timed, see :meth:`ObjectDownloads._ask`)."""

    __slots__ = ("answered", "attempt", "etag", "future", "key", "local", "size", "waiting", "where")

    def __init__(self, key: str, local: str, where: str, size: int, etag: str | None, future: Download) -> None:
        self.key, self.local, self.where, self.size, self.future = key, local, where, size, future
        self.etag = etag
        self.waiting: asyncio.Future[Any] | asyncio.Handle | None = None
        self.attempt = 0
        self.answered: float | None = None


class ObjectDownloads:
    """:class:`~uc_jupyter.storage.downloads.Downloads` through ``store`` (an obstore store rooted at
    the folder ``root``, ``bucket/prefix``): a job's remote path is ``root/relative``; one outside
    ``root`` is refused. :meth:`close` lets go of the store once nothing runs on it any more."""

    def __init__(
        self, store: Any, root: str, policy: RetryPolicy, *, on_retry: Callable[[], None] = lambda: None
    ) -> None:
        self._store: Any = store
        self._root = root.rstrip("/") + "/"
        self._policy, self._on_retry = policy, on_retry
        self._jobs: dict[Download, _Job] = {}  # loop thread only: not yet over, for cancel
        self._running = 0  # started and not yet ended (counted as start() hands them over)
        self._count = threading.Lock()
        self._idle = threading.Event()
        self._idle.set()
        self._closed = False

    def start(self, jobs: Sequence[Job]) -> list[Download]:
        futures = []
        work = []
        for remote, local, where, size, etag in jobs:
            future: Download = cf.Future()
            future.set_running_or_notify_cancel()  # it ends when the download has stopped, not before
            futures.append(future)
            if not remote.startswith(self._root) or self._closed:
                why = "the downloads are closed" if self._closed else "it lies outside the volume's folder"
                future.set_exception(VolumeReadError(f"cannot read {where}: {why}"))
                continue
            work.append(_Job(remote[len(self._root) :], local, where, size, etag, future))
        if work:
            with self._count:
                self._running += len(work)
                self._idle.clear()
            _loop().call_soon_threadsafe(self._launch, work)
        return futures

    def cancel(self, futures: Sequence[Download]) -> None:
        _loop().call_soon_threadsafe(self._cancel, list(futures))

    def close(self) -> None:
        """Wait for the downloads still running (a cancelled one ends quickly), then drop the store:
        a renewed dataset's old keys and connections end with the pass."""
        self._closed = True
        self._idle.wait()
        self._store = None

    # ---------------------------------------------------------------- on the loop thread
    def _launch(self, work: list[_Job]) -> None:
        for job in work:
            self._jobs[job.future] = job
            self._ask(job)

    def _ask(self, job: _Job) -> None:
        """One ranged GET of the listed size + 1 bytes, whose answer is the body itself: a plain
        GET answers a result and then its body, two crossings between object_store and Python,
        which cost about 60-100 us more CPU per file (measured side by side, 16 KiB objects).
        :meth:`_answered` takes the answer on the loop, no task or coroutine between. A file listed
        larger than ``_MEMORY_BODY`` is streamed in a task; an empty one is asked its size (HEAD).
        A file listed with an entity tag is asked for that version only (``If-Match``, in a task:
        a GET with options answers a result, then its body): a rewrite of the same size since the
        listing is refused by the store (412) instead of read as the listed version.

        Only the task's GET tells when the store answered (its result comes before its body): the
        download's future ends with that time to first byte, the ranged GET's with None."""
        import obstore

        if job.size > _MEMORY_BODY or (job.etag is not None and job.size):
            task = asyncio.get_running_loop().create_task(self._whole(job))
            task.add_done_callback(functools.partial(self._task_over, job))
            job.waiting = task
            return
        try:
            # A Future already (ensure_future returns it as it is); typed a coroutine in obstore's stubs.
            answer = asyncio.ensure_future(
                obstore.get_range_async(self._store, job.key, start=0, end=job.size + 1)
                if job.size
                else obstore.head_async(self._store, job.key)
            )
        except Exception as exc:  # refused before any request (a closed store, say)
            self._failed(job, exc)
            return
        job.waiting = answer
        answer.add_done_callback(functools.partial(self._answered, job))

    def _answered(self, job: _Job, answer: asyncio.Future[Any]) -> None:
        """A ranged GET (or an empty file's HEAD) ended: a body of the listed size goes to the files
        thread; any other length ends the download, nothing written."""
        if answer.cancelled():
            self._ended(job, DownloadCancelled("the download was cancelled"))
            return
        error = answer.exception()
        if error is not None:
            if job.size and isinstance(error, Exception) and _range_refused(as_os_error(error)):
                # The range starts at 0: a store refuses it only for an object that is empty now.
                self._ended(job, changed_since_listing(job.where, job.size, 0))
            else:
                self._failed(job, error)
            return
        job.waiting = None
        if not job.size:  # the HEAD's metadata
            now = int(answer.result()["size"])
            self._ended(job, changed_since_listing(job.where, 0, now) if now else None, b"")
            return
        body = answer.result()
        if len(body) != job.size:
            self._ended(job, changed_since_listing(job.where, job.size, len(body) if len(body) < job.size else None))
            return
        self._ended(job, None, body)

    async def _size_now(self, job: _Job) -> int | None:
        """The object's size now, for the error's words (None: not known, a HEAD that failed too)."""
        import obstore

        try:
            return int((await obstore.head_async(self._store, job.key))["size"])
        except Exception:
            return None

    def _task_over(self, job: _Job, task: asyncio.Task[None]) -> None:
        if task.cancelled():  # cancelled before it started: its own handler never ran
            self._ended(job, DownloadCancelled("the download was cancelled"))

    def _failed(self, job: _Job, error: BaseException) -> None:
        """Retry after the policy's delay, or end the download with its final error."""
        if not isinstance(error, Exception):  # not the storage's failure (an interrupt): end with it
            self._ended(job, error)
            return
        try:
            delay = retry_delay(
                as_os_error(error), job.attempt, job.local, volume_path=job.where, policy=self._policy, rng=_RNG
            )
        except VolumeReadError as final:
            self._ended(job, final)
            return
        self._on_retry()
        job.attempt += 1
        job.waiting = asyncio.get_running_loop().call_later(delay, self._ask, job)

    async def _whole(self, job: _Job) -> None:
        """The same range (listed size + 1) as a GET whose answer says the object's size before its
        body is read (one of another size is dropped unread), with the listed entity tag as
        ``If-Match`` when there is one: a body up to ``_MEMORY_BODY`` is taken whole and written
        like the ranged GET's, a larger one streamed into the file; retried like the others."""
        import obstore

        options: GetOptions = {"range": (0, job.size + 1)}
        if job.etag is not None:
            options["if_match"] = job.etag
        body = None
        loop = asyncio.get_running_loop()
        job.answered = None  # this attempt's, once the store answers it
        try:
            asked = loop.time()
            result = await obstore.get_async(self._store, job.key, options=options)
            job.answered = loop.time() - asked
            now = int(result.meta["size"])
            if now != job.size:
                raise changed_since_listing(job.where, job.size, now)
            if job.size > _MEMORY_BODY:
                await self._stream(result, job)
            else:
                body = await result.bytes_async()
                if len(body) != job.size:
                    raise changed_since_listing(job.where, job.size, len(body) if len(body) < job.size else None)
        except asyncio.CancelledError:
            self._ended(job, DownloadCancelled("the download was cancelled"))
        except VolumeReadError as changed:  # final, never retried
            self._ended(job, changed)
        except Exception as exc:
            error = as_os_error(exc)
            if _range_refused(error):  # the range starts at 0: the object is empty now
                self._ended(job, changed_since_listing(job.where, job.size, 0))
            elif _precondition_failed(exc, error):  # not the listed version: its size now says how it changed
                self._ended(job, changed_since_listing(job.where, job.size, await self._size_now(job), another=True))
            else:
                self._failed(job, exc)
        else:
            job.waiting = None
            self._ended(job, None, body, streamed=body is None)

    def _cancel(self, futures: list[Download]) -> None:
        for future in futures:
            job = self._jobs.get(future)
            if job is None or job.waiting is None:
                continue  # ended, or its body is being written: it ends by itself
            waiting, job.waiting = job.waiting, None
            waiting.cancel()
            if isinstance(waiting, asyncio.TimerHandle):  # between two attempts: nothing else will end it
                self._ended(job, DownloadCancelled("the download was cancelled"))
            # a GET or a task ends through its callback or its CancelledError, with DownloadCancelled

    def _ended(self, job: _Job, error: BaseException | None, body: Any = None, *, streamed: bool = False) -> None:
        """The download is over on the loop: its body is written, or its future ended, on the files thread."""
        self._jobs.pop(job.future, None)
        if error is None and not streamed:
            _later(self._write, body, job.local, job.where, job.future, job.attempt, self._done, job.answered)
        else:
            _later(self._complete, job.future, job.local, error, self._done, job.answered)

    def _done(self) -> None:
        with self._count:
            self._running -= 1
            if not self._running:
                self._idle.set()

    async def _stream(self, result: Any, job: _Job) -> None:
        """A large body into the file as it arrives, each chunk written on the files thread; never
        more than the listed size (a store that sent more than it was asked for is refused)."""
        loop = asyncio.get_running_loop()
        fd = await loop.run_in_executor(_files(), _open, job.local)
        read = 0
        try:
            async for chunk in result.stream(min_chunk_size=_CHUNK):
                read += len(chunk)
                if read > job.size:
                    raise changed_since_listing(job.where, job.size, None)
                await loop.run_in_executor(_files(), _write_all, fd, chunk)
        finally:
            await loop.run_in_executor(_files(), os.close, fd)
        if read != job.size:
            raise changed_since_listing(job.where, job.size, read)

    # ---------------------------------------------------------------- on the files thread
    def _write(
        self,
        body: Any,
        local: str,
        where: str,
        future: Download,
        attempt: int,
        done: Callable[[], None],
        answered: float | None,
    ) -> None:
        error: BaseException | None = None
        try:
            fd = _open(local)
            try:
                _write_all(fd, body)
            finally:
                os.close(fd)
        except OSError as exc:  # a full disk, a removed folder, a symlink put in its place: final
            error = _final(exc, attempt, local, where, self._policy)
        self._complete(future, local, error, done, answered)

    @staticmethod
    def _complete(
        future: Download, local: str, error: BaseException | None, done: Callable[[], None], answered: float | None
    ) -> None:
        """End the future with ``answered`` (removing the file of one that failed), then count the
        download as over."""
        try:
            if error is None:
                future.set_result(answered)
                return
            with contextlib.suppress(FileNotFoundError):
                os.unlink(local)
            future.set_exception(error)
        finally:
            done()


def _final(exc: OSError, attempt: int, local: str, where: str, policy: RetryPolicy) -> VolumeReadError:
    """The error a failed write ends its download with (classified as every other failure)."""
    try:
        retry_delay(exc, attempt, local, volume_path=where, policy=policy, rng=_RNG)
    except VolumeReadError as final:
        return final
    return VolumeReadError(f"cannot read {where}: {type(exc).__name__}: {exc}")


def _range_refused(error: Exception) -> bool:
    """Whether a ranged GET failed only because the object has no such range (it is empty)."""
    status = getattr(error, "status", None)
    if status == 416:
        return True
    answered = isinstance(error, (FileNotFoundError, PermissionError, ConnectionError, TimeoutError))
    return status is None and not answered and "range" in str(error).lower()


def _precondition_failed(exc: Exception, error: Exception) -> bool:
    """Whether a GET failed because the object is not the version its ``If-Match`` named (412)."""
    from obstore.exceptions import PreconditionError

    return isinstance(exc, PreconditionError) or getattr(error, "status", None) == 412


def _open(local: str) -> int:
    return os.open(local, _FLAGS, 0o600)


def _write_all(fd: int, data: Any) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


# ------------------------------------------------------------------------------------ the threads
class _Threads:
    """This process's event-loop thread and files thread; a forked child starts afresh."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pid = os.getpid()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.files: cf.ThreadPoolExecutor | None = None
        self.queued: list[tuple[Callable[..., None], tuple[Any, ...]]] = []  # for the files thread
        self.draining = False  # the files thread has been woken for them

    def check_pid(self) -> None:
        if self.pid != os.getpid():
            self.pid, self.loop, self.files = os.getpid(), None, None
            self.queued, self.draining = [], False

    def after_fork(self) -> None:
        self.lock = threading.Lock()  # a parent thread may have held it at the fork
        self.check_pid()


_threads = _Threads()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_threads.after_fork)


def _loop() -> asyncio.AbstractEventLoop:
    loop = _threads.loop
    if loop is not None and _threads.pid == os.getpid():
        return loop
    with _threads.lock:
        _threads.check_pid()
        if _threads.loop is None:
            made = asyncio.new_event_loop()
            threading.Thread(target=made.run_forever, name="uc-jupyter-storage", daemon=True).start()
            _threads.loop = made
        return _threads.loop


def _later(work: Callable[..., None], *args: Any) -> None:
    """Run ``work(*args)`` on the files thread, in order. Bodies finish in bursts: one wake-up of
    that thread takes every write queued by then (an executor task per file costs more CPU)."""
    with _threads.lock:
        _threads.check_pid()
        _threads.queued.append((work, args))
        if _threads.draining:
            return
        _threads.draining = True
    _files().submit(_drain)


def _drain() -> None:
    while True:
        with _threads.lock:
            queued, _threads.queued = _threads.queued, []
            if not queued:
                _threads.draining = False
                return
        for work, args in queued:
            try:
                work(*args)
            except BaseException:  # each completes its own future; one that raised must not stop the rest
                import traceback

                traceback.print_exc()


def _files() -> cf.ThreadPoolExecutor:
    """One thread: creating files side by side from two threads of a process costs more CPU per
    file than from one (measured with the former reader: about 470 against 340 us per 16 KiB file)."""
    files = _threads.files
    if files is not None and _threads.pid == os.getpid():
        return files
    with _threads.lock:
        _threads.check_pid()
        if _threads.files is None:
            _threads.files = cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix="uc-jupyter-storage-files")
        return _threads.files
