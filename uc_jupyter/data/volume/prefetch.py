"""Fetch-ahead for one stream of volume files through the shared cache.

A stream (one rank's DataLoader worker) knows its files in delivery order. :class:`Prefetcher` keeps
a window of them in flight: hits are pinned on the spot; misses are reserved in the cache in order,
several per index transaction, and downloaded concurrently through the volume's
:class:`~uc_jupyter.storage.downloads.Downloads` (object_store's for object storage, chosen by
:func:`uc_jupyter.storage.open_storage`; fsspec's threads otherwise); each download is put
in place as soon as it ends, on the thread that ended it, so other streams and processes waiting for
the same file never wait for this stream's consumer. :meth:`Prefetcher.run` yields the files ready
at the head of the window in runs (a warm window is one run): the next stage
(:meth:`~uc_jupyter.data.volume.handed_out.Held.hand_out`) hands them out one by one and keeps them
pinned until the consumer has moved past the batch that holds them, so a path stays valid while that
batch is still used; per file, nothing of this stage runs.

Why not one thread per download, each doing its own bookkeeping: on a small machine the per-file CPU
decides a cold epoch. Reserving in order from this one thread needs no turnstile between threads (a
turnstile whose every step woke all waiting threads cost more than the download), and a batch of
reservations is one index transaction instead of one per file. Hits are looked up a window chunk
at a time too (:meth:`FileCache.lookup_many`: each is proven intact by its seal, and the index is
read once for the chunk only when some hit needs it).

Files in use take room too: a resident one nothing more, a streamed one room beside the resident
set. When the consumer says how many files it holds at once (uc_jupyter's DataLoader: every batch
torch asked for, plus the loop's), misses stay resident only while the resident set leaves room for
those and for every stream's window (see ``Prefetcher._may_keep``); past that they stream through
in whole windows. A resident set up to the cache's own cap left one download at a time per stream,
each waiting for the loop to move past a batch.

Whatever ends a download, its slot is settled, so the consumer never waits for ever: an error is
raised in the consuming loop as :class:`~uc_jupyter.storage.errors.VolumeReadError` naming the file's
/Volumes path, and a full disk (while writing the file or the cache's index) says so.

Example:
    >>> fetch = Prefetcher(cache, ThreadDownloads(fs, RetryPolicy()), group="g", keep=True)  # doctest: +SKIP
    >>> for ready in fetch.run(items):                                                       # doctest: +SKIP
    ...     for got in ready: use(got.path); cache.release(got)
"""

from __future__ import annotations

import collections
import concurrent.futures as cf
import contextlib
import errno
import functools
import operator
import os
import resource
import time
from collections.abc import Callable, Generator, Sequence
from pathlib import Path

from uc_jupyter.data.cache import CachedFile, FileCache, Ticket
from uc_jupyter.data.stream.loop_progress import UNKNOWN, Consumer
from uc_jupyter.data.volume.keeping import may_keep
from uc_jupyter.data.volume.pace import Pace, budget_cap, depth_cap
from uc_jupyter.data.volume.share import Share
from uc_jupyter.storage.downloads import Download, Downloads, Job, Wanted
from uc_jupyter.storage.errors import VolumeReadError

__all__ = ["Prefetcher"]

_CHUNK = 8  # files at least per top-up of the window
# While the window meets only hits, it reaches this far ahead: a top-up's fixed cost (and any index
# read for hits their seals could not prove) is shared by more files, and a pin costs a descriptor.
_HIT_RUN = 64
_SLOW_THREADS = 4  # files another process is downloading: waited for on a few threads
# How deep the window reaches (downloads in flight per stream and per rank, within the cache's
# headroom) is uc_jupyter.data.volume.pace's: Pace, depth_cap, budget_cap.
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


class _Slot:
    """One file in the window, in delivery order: pinned (``got``), coming (``future``: a download,
    put in place as soon as it ends, or a wait for another process's copy), or still unreserved."""

    __slots__ = ("answered", "download", "future", "got", "seconds", "wanted")

    def __init__(self, wanted: Wanted) -> None:
        self.wanted = wanted
        self.got: CachedFile | None = None
        self.future: cf.Future[CachedFile] | None = None
        self.download: Download | None = None  # to cancel
        self.seconds = 0.0  # how long the download took
        self.answered: float | None = None  # of which the wait for the store's first answer, when told


class Prefetcher:
    """Fetch-ahead for one pass of one stream (see the module docstring).

    Args:
        cache: the shared cache.
        downloads: how misses are downloaded.
        group: the cache group (one dataset's listing): its files never evict each other.
        keep: False streams misses through without keeping them (``cache="never"``).
        window: how many delivered files the next stage may keep pinned (pins are descriptors:
            the process's limit on open files is raised to fit them and the window).
        prefetch: files kept in flight; None adapts to latency and pace.
        consumer: who uses the delivered files (:mod:`uc_jupyter.data.stream.loop_progress`): how
            many it holds at once, over how many streams.
        relieve: the next stage's :meth:`~uc_jupyter.data.volume.handed_out.Held.relieve`: asked to
            release files the consumer is done with when the cache needs room for a file needed now.
        clock: monotonic seconds, for how long downloads take and how fast the consumer takes
            files (the pace); read on the downloads' threads too. Tests pass their own.
        on_read: told of each download the consumer reached, on its thread: ``on_read(seconds,
            answered)``, how long it took and how much of it the store took to answer (None: not
            told by the downloads); the stream's read counters (the verdict's latency or bandwidth).

    Each file :meth:`run` yields is pinned: release it (``cache.release``) once the consumer is done with it.
    """

    def __init__(
        self,
        cache: FileCache,
        downloads: Downloads,
        *,
        group: str,
        keep: bool,
        window: int = 512,
        prefetch: int | None = None,
        consumer: Consumer = UNKNOWN,
        relieve: Callable[[int], int] = lambda size: 0,
        clock: Callable[[], float] = time.perf_counter,
        on_read: Callable[[float, float | None], None] = lambda seconds, answered: None,
        share: int | None = None,
    ) -> None:
        self.cache, self.downloads = cache, downloads
        self._consumer, self._share_bytes = consumer, share
        self._on_read = on_read
        self.group, self.keep = group, keep
        self._relieve_handed = relieve
        cache.mark_used(group)  # a pass over the group's listing starts: not evicted for another
        self._in_use, self._streams = consumer.in_use, consumer.streams
        self._keeping = keep  # whether misses may stay resident now (see _may_keep)
        self._clock = clock
        self.pace = Pace(prefetch, clock=clock, most=depth_cap(consumer.streams))
        self._slow: cf.ThreadPoolExecutor | None = None
        self._unreserved: collections.deque[_Slot] = collections.deque()  # misses to reserve, in order
        self._yielded = 0  # files yielded since the pace last heard
        self._hit_run = 0  # how far ahead the window reaches while it meets only hits
        # The pass under way (see run): its window, its files, and the position after the window.
        self._pending: collections.deque[CachedFile | _Slot] = collections.deque()
        self._wanted: Sequence[Wanted] = ()
        self._position = 0
        _ensure_open_files(window + 2 * max(self.pace.most, prefetch or 0) + 256)

    def run(self, wanted: Sequence[Wanted]) -> Generator[list[CachedFile], None, None]:
        """Yield the file of each of ``wanted`` in order, pinned, in runs of the files ready at the
        head of the window; release each once the consumer is done with it."""
        # Hits wait in the window as their pinned files, misses as slots: a warm epoch is all hits,
        # and per file the stream may cost little more than the pin itself.
        pending: collections.deque[CachedFile | _Slot] = collections.deque()
        self._pending, self._wanted, self._position = pending, wanted, 0
        self._unreserved.clear()
        self._hit_run = 0
        self._bound_by_budget(wanted)
        # This pass's share of the budget (data/volume/share.py), when it has one.
        share = None
        if self._share_bytes is not None:
            share = Share(
                wanted,
                batch_size=self._consumer.batch_size,
                share_bytes=self._share_bytes,
                first_in_use=self._consumer.start(),
                where=f"cache {self.cache.root}",
            )
        self._yielded = 0
        position = 0
        refill_at = 0  # top up once the window is down to this many files
        failed = False
        try:
            while True:
                if len(pending) <= refill_at and position < len(wanted):
                    self.pace.consumed(self._yielded)
                    self._yielded = 0
                    depth = self.pace.depth()
                    end = min(len(wanted), position + max(depth, self._hit_run) - len(pending))
                    if share is not None:  # with nothing left in the window, it waits for the loop first
                        end = share.reach(position, end, idle=not pending, let_go=self._relieve_handed)
                    try:
                        position = self._position = self._top_up(pending, wanted, position, end)
                    except OSError as exc:  # the index could not be written: a full disk, say so
                        full = _disk_full_error(exc, wanted[position].where, self.cache.root)
                        if full is None:
                            raise
                        raise full from exc
                    refill_at = _refill_at(depth)
                if not pending:
                    if _arrives_beyond(wanted, position):  # a listing still arriving has more
                        continue
                    return
                ready: list[CachedFile] = []
                try:
                    while pending:
                        head = pending[0]
                        if isinstance(head, _Slot):
                            if ready and head.got is None:
                                break  # hand out what is ready before waiting for a download
                            pending.popleft()
                            got, waited = self._settle(head)
                            if waited:  # the window grows: top up sooner
                                refill_at = _refill_at(self.pace.depth())
                        else:
                            pending.popleft()
                            got = head
                        ready.append(got)
                        if len(pending) <= refill_at and position < len(wanted):
                            break  # top up before the consumer reaches the window's end
                except BaseException:
                    for got in ready:  # pinned, and no longer in the window
                        self.cache.release(got)
                    raise
                self._yielded += len(ready)
                yield ready
        except BaseException:
            failed = True
            raise
        finally:
            try:
                self._abandon(pending)
                self.cache.flush()
            except OSError as exc:
                # Unwinding an error, the consumer needs that one; after a complete pass, what the
                # index could not take (a full disk) stays queued for its next transaction.
                if not failed and _full_disk(exc) is None:
                    raise
            if self._slow is not None:
                self._slow.shutdown(wait=True)

    # ---------------------------------------------------------------- internals
    def _bound_by_budget(self, wanted: Sequence[Wanted]) -> None:
        """Keep the downloads in flight of all the consumer's streams within the cache's headroom
        (the room it keeps beside its resident files), at the pass's first files' mean size: a
        deeper window would reserve room the files in use need, and the streams would crawl one
        download at a time (measured in the half-cache scenario: epoch 1 up to 2.4 times as long)."""
        sample = wanted[: 2 * _CHUNK]
        if not sample:
            return
        mean = sum(map(operator.attrgetter("size"), sample)) / len(sample)
        room = self.cache.max_bytes * self.cache.headroom
        self.pace.most = budget_cap(room, streams=self._streams, mean_size=mean)

    def _top_up(
        self, pending: collections.deque[CachedFile | _Slot], wanted: Sequence[Wanted], position: int, end: int
    ) -> int:
        items = wanted[position:end]
        found = self.cache.lookup_many(items)
        missed = False
        for item, got in zip(items, found, strict=True):
            if got is None:
                slot = _Slot(item)
                self._unreserved.append(slot)
                pending.append(slot)
                missed = True
            else:
                pending.append(got)
        self._hit_run = 0 if missed else min(_HIT_RUN, max(2 * self._hit_run, 2 * _CHUNK))
        if self._unreserved:
            self._reserve()
        return max(end, position)

    def _reserve(self) -> None:
        """Reserve the window's misses in order, in one transaction, and start their downloads."""
        needing = list(self._unreserved)
        self._keeping = self.keep and self._may_keep(needing)
        outcomes = self.cache.reserve(
            [(s.wanted.key, s.wanted.size, s.wanted.name) for s in needing], group=self.group, keep=self._keeping
        )
        starting: list[tuple[_Slot, Ticket]] = []
        for slot, outcome in zip(needing, outcomes, strict=True):
            if outcome is None:
                break  # no room now: these wait until the consumer reaches them
            self._unreserved.popleft()
            if isinstance(outcome, Ticket):
                starting.append((slot, outcome))
            elif outcome == "present":
                slot.got = self.cache.lookup(slot.wanted.key, slot.wanted.size, name=slot.wanted.name)
                if slot.got is None:  # evicted again at once: wait for it like any busy file
                    slot.future = self._wait_elsewhere(slot.wanted)
            else:
                slot.future = self._wait_elsewhere(slot.wanted)
        if not starting:
            return
        started = self._clock()
        jobs = [Job(s.wanted.source, t.tmp, s.wanted.where, s.wanted.size, s.wanted.etag) for s, t in starting]
        try:
            downloads = self.downloads.start(jobs)  # the first miss makes the storage client: it may fail
        except BaseException:
            for _, ticket in starting:
                self.cache.abort(ticket)
            raise
        for (slot, ticket), download in zip(starting, downloads, strict=True):
            slot.download, slot.future = download, cf.Future()
            slot.future.set_running_or_notify_cancel()  # only _ended settles it; cancel() must not
            download.add_done_callback(functools.partial(self._ended, slot, ticket, started))

    def _may_keep(self, needing: Sequence[_Slot]) -> bool:
        """Whether these misses may stay resident: only while the resident set leaves room, within
        the budget less its headroom, for the files the consumer holds at once and for every
        stream's window (at these files' mean size), but never more than half the budget
        (:mod:`~uc_jupyter.data.volume.keeping`). Past that
        they stream through the cache: a resident set that took the room of the files in use would
        leave each stream one download at a time, waiting for the loop to move past a batch."""
        if not self._in_use:
            return True  # a consumer that says nothing: the cache's own headroom decides
        cache = self.cache
        mean = sum(s.wanted.size for s in needing) / len(needing)
        per_stream = self._in_use / self._streams + self.pace.depth()
        if self._share_bytes is not None and self._share_bytes < per_stream * mean:
            # The stream's share of the budget cannot hold what its consumer asks for: the shares take
            # the whole budget, and a resident file would only stand in the way of a share's file.
            return False
        window = self._streams * per_stream * mean
        return may_keep(
            resident=cache.resident_bytes(), window=window, max_bytes=cache.max_bytes, headroom=cache.headroom
        )

    def _ended(self, slot: _Slot, ticket: Ticket, started: float, download: Download) -> None:
        """Put the file in place as soon as its download ends, so that others waiting for it (other
        streams, other processes) need not wait for this stream's consumer. This runs on the thread
        that ended the download: a pool thread, or the object-store downloads' files thread (never
        their event loop). The slot is settled whatever happens here: an exception escaping a
        future's callback is only printed, and the consumer waiting on the slot would wait for ever."""
        future = slot.future
        assert future is not None, "a download's slot has its future before the download can end"
        slot.seconds = self._clock() - started
        try:
            slot.answered = download.result()
            got = self.cache.finish(ticket)
        except BaseException as exc:
            try:
                self.cache.abort(ticket)
            finally:
                future.set_exception(_disk_full_error(exc, slot.wanted.where, self.cache.root) or exc)
        else:
            future.set_result(got)

    def _settle(self, slot: _Slot) -> tuple[CachedFile, bool]:
        """A missed file at the head of the window, waiting for it as needed; and whether the
        consumer had to wait for its download."""
        if slot.got is not None:
            return slot.got, False
        if slot.future is None:
            # No room when it was reserved with the others; now that it is next, wait for room
            # (relieving what this stream holds) like a single download does.
            self._unreserved.popleft()  # the oldest unreserved slot is this one, the head
            try:
                slot.got = self.cache.get(
                    slot.wanted.key,
                    slot.wanted.size,
                    self._download_now(slot.wanted),
                    group=self.group,
                    name=slot.wanted.name,
                    keep=self._keeping,
                    relieve=functools.partial(self._relieve, slot.wanted.size),
                )
            except OSError as exc:
                full = _disk_full_error(exc, slot.wanted.where, self.cache.root)
                if full is None:
                    raise
                raise full from exc
            return slot.got, False
        waited = not slot.future.done()
        try:
            slot.got = slot.future.result()
        except OSError as exc:  # the download or a wait for another's copy met a full disk, say
            full = _disk_full_error(exc, slot.wanted.where, self.cache.root)
            if full is None:
                raise
            raise full from exc
        if slot.download is not None:
            self.pace.fetched(slot.seconds, waited=waited)
            self._on_read(slot.seconds, slot.answered)
        return slot.got, waited

    def _relieve(self, size: int) -> int:
        """Make room for the file the consumer needs now: release delivered files it is done with,
        else the hits pinned ahead in the window (see :meth:`_unpin_ahead`); how many were released."""
        return self._relieve_handed(size) or self._unpin_ahead()

    def _unpin_ahead(self) -> int:
        """Let go of the hits the window pinned ahead of the consumer: pinned, the cache cannot evict
        them, and with a budget of a few files they may be all that could make room for the file
        needed now (every later pass would wait for it and fail). Each becomes a slot again, looked
        up when the consumer reaches it: a hit then, or a download if it was evicted meanwhile."""
        pending, first = self._pending, self._position - len(self._pending)
        released = 0
        for index, entry in enumerate(pending):
            if isinstance(entry, CachedFile):
                self.cache.release(entry)
                pending[index] = _Slot(self._wanted[first + index])
                released += 1
            elif entry.got is not None and entry.future is None:  # found present when it was reserved
                self.cache.release(entry.got)
                entry.got = None
                released += 1
        if released:
            self._unreserved = collections.deque(
                s for s in pending if isinstance(s, _Slot) and s.future is None and s.got is None
            )
            self._hit_run = 0  # and do not pin that far ahead again at once
        return released

    def _download_now(self, wanted: Wanted) -> Callable[[str], None]:
        def download(tmp: str) -> None:
            self.downloads.start([Job(wanted.source, tmp, wanted.where, wanted.size, wanted.etag)])[0].result()

        return download

    def _wait_elsewhere(self, wanted: Wanted) -> cf.Future[CachedFile]:
        """Another process or thread downloads this file: wait for its copy on a helper thread."""
        if self._slow is None:
            self._slow = cf.ThreadPoolExecutor(max_workers=_SLOW_THREADS, thread_name_prefix="uc-jupyter-wait")
        return self._slow.submit(
            self.cache.get,
            wanted.key,
            wanted.size,
            self._download_now(wanted),
            group=self.group,
            name=wanted.name,
            keep=self._keeping,
        )

    def _abandon(self, pending: collections.deque[CachedFile | _Slot]) -> None:
        """Stop what is still in flight and give back its room and pins."""
        slots = [item for item in pending if isinstance(item, _Slot)]
        running = [slot.download for slot in slots if slot.download is not None and not slot.download.done()]
        if running:
            self.downloads.cancel(running)
        self._unreserved.clear()
        for slot in slots:
            if slot.got is None and slot.future is not None and not slot.future.cancel():
                with contextlib.suppress(Exception):
                    slot.got = slot.future.result()  # waits for a cancelled download to stop
        for item in pending:  # hits are their pinned files; a slot's file is its got, if any
            got = item.got if isinstance(item, _Slot) else item
            if got is not None:
                self.cache.release(got)
        pending.clear()


def _full_disk(exc: BaseException) -> OSError | None:
    """The full-disk error (ENOSPC, EDQUOT) behind ``exc``, if any: the error itself or what caused it."""
    seen: BaseException | None = exc
    for _ in range(4):
        if seen is None:
            return None
        if isinstance(seen, OSError) and seen.errno in _DISK_FULL:
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _disk_full_error(exc: BaseException, where: str, root: Path) -> VolumeReadError | None:
    """The error the consuming loop raises when ``exc``, met while reading ``where``, comes from a
    full disk: one that says so (the download's own error names only the errno); else None."""
    full = _full_disk(exc)
    if full is None:
        return None
    reason = os.strerror(full.errno) if full.errno else "disk full"
    error = VolumeReadError(
        f"cannot read {where}: the disk holding the cache {root} is full ({reason}); free disk space, "
        "or lower cache_max_bytes or raise min_free_bytes so that the cache leaves room"
    )
    error.__cause__ = exc
    return error


def _refill_at(depth: int) -> int:
    """Top the window up once it is down to this many files: in chunks, so that reservations and
    starts are batched (and a warm epoch's hits pay the top-up's overhead once per chunk)."""
    return max(0, depth - max(_CHUNK, depth // 4))


def _ensure_open_files(needed: int) -> None:
    """Pins are open descriptors: raise this process's soft limit on them toward the hard limit
    when it is lower than a stream can hold (a soft limit of 1024 is common)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return
    target = needed if hard == resource.RLIM_INFINITY else min(hard, needed)
    if target > soft:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def _arrives_beyond(wanted: Sequence[Wanted], position: int) -> bool:
    """Whether ``wanted`` has files beyond ``position`` once those still arriving have come (a
    stream that started on a listing's first page: see ``data/wanted.py``)."""
    wait = getattr(wanted, "wait_beyond", None)
    return bool(wait(position)) if wait is not None else False
