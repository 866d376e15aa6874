"""``FileCache``: the shared cache, put together from its layout, pins, checks, index and admission.

See :mod:`uc_jupyter.data.cache` for the design. Here: the public operations, putting a download in
place (hashed and sealed while its bytes are in the page cache), and waiting for room.

The example is the package's (:mod:`uc_jupyter.data.cache`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import itertools
import os
import shutil
import sqlite3
import stat
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from uc_jupyter.catalog.rules.reserved import reserve as reserve_folder
from uc_jupyter.config import settings
from uc_jupyter.data.cache import layout, ledger, streams
from uc_jupyter.data.cache.admission import DEFAULT_HEADROOM, Budget, Outcome, admit, disk_free
from uc_jupyter.data.cache.checks import Checks
from uc_jupyter.data.cache.disk import DISK_BUDGET_MIN, charge, structure
from uc_jupyter.data.cache.errors import CacheBudgetError
from uc_jupyter.data.cache.handles import CachedFile, CacheStats, Ticket
from uc_jupyter.data.cache.index import Index, Timer
from uc_jupyter.data.cache.integrity import fingerprint, seal, stamp
from uc_jupyter.data.cache.ledger import Finished, Record
from uc_jupyter.data.cache.leftovers import reclaim_dead
from uc_jupyter.data.cache.pins import OPEN_FLAGS, Pin

if TYPE_CHECKING:
    from uc_jupyter.data.cache.checks import Wants

__all__ = ["FileCache", "default_cache_dir"]

DEFAULT_FLOOR_CAP = 5 << 30  # the default free-disk floor is 10% of the disk, at most this
_DISK_PATIENCE = 5.0  # seconds a download waits for a full disk to get room before it gives up
_PRIVATE_TMP = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
# Names of streamed files: unique within a process (whose pid names their folder).
_SEQUENCE = itertools.count()


def default_cache_dir() -> Path:
    """``UC_JUPYTER_CACHE_DIR``, else the catalog home's ``cache`` folder."""
    current = settings()
    return current.cache_dir or current.home / "cache"


class FileCache:
    """The shared cache under ``root``. Cheap to create; every process makes its own object.

    Args:
        root: the cache folder (default ``$UC_JUPYTER_HOME/cache``): new, empty, or a cache already;
            a folder holding other files is refused (:class:`NotACacheFolder`), never emptied.
        max_bytes: the byte budget (default ``UC_JUPYTER_CACHE_MAX_BYTES``, else half of the disk's
            free space when first used). From 8 MiB (:data:`~uc_jupyter.data.cache.disk.DISK_BUDGET_MIN`)
            on it is the folder's disk use, everything in it included (``du``): resident, streamed
            and partly downloaded files in whole blocks, the index and its log, the folders. A
            smaller budget bounds the files' listed bytes only (the index alone may take more).
        min_free_bytes: never let the disk's free space fall below this (default
            ``UC_JUPYTER_CACHE_MIN_FREE_BYTES``, else 10% of the disk but at most 5 GiB: a floor that
            grows with a large disk would keep most of a nearly full shared disk out of reach).
        headroom: the fraction of the budget kept for files streamed past a full cache (out of the
            budget, not on top of it).
        grace_seconds: files of other groups used more recently than this are not evicted.
        wait_seconds: how long a download waits for room (or for another process's download of
            the same file) before CacheBudgetError (or before streaming its own copy).
        starve_seconds: after waiting this long, unpinned resident files of any group are evicted
            to make room (files in flight elsewhere may be waiting on this one); at once when no
            other process holds room in the cache (waiting would free nothing).
        clock, sleep: injected time for tests.
        timer: starts the flush of finished downloads into the index (see
            :data:`~uc_jupyter.data.cache.index.Timer`; default a daemon thread's timer).

    Raises:
        NotACacheFolder: ``root`` holds files that are not a cache's.
        ValueError: a budget or fraction out of range.
    """

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        *,
        max_bytes: int | None = None,
        min_free_bytes: int | None = None,
        headroom: float = DEFAULT_HEADROOM,
        grace_seconds: float = 600.0,
        wait_seconds: float = 120.0,
        starve_seconds: float = 1.0,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        timer: Timer | None = None,
    ) -> None:
        if max_bytes is not None and max_bytes <= 0:
            raise ValueError(f"cache_max_bytes must be positive, got {max_bytes}")
        if min_free_bytes is not None and min_free_bytes < 0:
            raise ValueError(f"min_free_bytes must not be negative, got {min_free_bytes}")
        if not 0.0 <= headroom < 1.0:
            raise ValueError(f"headroom must be in [0, 1), got {headroom}")
        self.root = Path(root) if root is not None else default_cache_dir()
        self.headroom = headroom
        self.grace_seconds = grace_seconds
        self.wait_seconds = wait_seconds
        self.starve_seconds = starve_seconds
        self._clock, self._sleep = clock, sleep
        self._base = str(self.root)  # string paths on the hot paths: pathlib costs more than the syscalls
        with layout.locked(self.root):
            layout.prepare(self.root)
            self._index = Index(self.root, clock, timer)
        checks = Checks(self._index, self._base)
        # lookup(...) for several ``(key, size, name, ...)`` (further fields are ignored): each hit is
        # pinned and checked as uc_jupyter.data.cache.checks says, and the index, when it must tell,
        # is read once for all of them; a file without any record (planted under a key's name, never
        # downloaded) is never served. The checks' own method, not one of ours that calls it: a
        # window of hits is one call into the cache.
        self.lookup_many: Callable[[Sequence[Wants]], list[CachedFile | None]] = checks.lookup_many
        # The catalog refuses to register a table's or volume's storage over a reserved folder.
        reserve_folder(settings().home, self.root, layout.KIND)
        configured = settings()
        max_bytes = max_bytes if max_bytes is not None else configured.cache_max_bytes
        min_free_bytes = min_free_bytes if min_free_bytes is not None else configured.cache_min_free_bytes
        disk = shutil.disk_usage(self.root)
        self.max_bytes = int(max_bytes) if max_bytes is not None else disk.free // 2
        self.min_free_bytes = (
            int(min_free_bytes) if min_free_bytes is not None else min(disk.total // 10, DEFAULT_FLOOR_CAP)
        )
        self.reclaim_dead()

    # ---------------------------------------------------------------- public
    @staticmethod
    def key(url: str, size: int | None, version: str | None) -> str:
        """The cache key of a remote file: its URL plus size and ETag or modification time, so a
        changed remote file gets a new key and is fetched again."""
        return FileCache.key_digest(url, size, version).hex()

    @staticmethod
    def key_digest(url: str, size: int | None, version: str | None) -> bytes:
        """:meth:`key` as 32 raw bytes (``key == key_digest(...).hex()``): compact enough to keep
        for every file of a large listing."""
        return hashlib.sha256(f"{url}\x00{size}\x00{version}".encode()).digest()

    def get(
        self,
        key: str,
        size: int,
        fetch: Callable[[str], object],
        *,
        group: str,
        name: str = "",
        keep: bool = True,
        relieve: Callable[[], object] | None = None,
    ) -> CachedFile:
        """Return the file for ``key``, calling ``fetch(tmp_path)`` to download it on a miss.

        The result is pinned: call :meth:`release` when the consumer is done with it. ``name``
        (the remote file's base name) gives the handed-out path its extension. With
        ``keep=False`` a miss is only streamed through, never kept. While the budget is taken by
        files in flight, ``relieve()`` is called so the caller can release files it still holds
        (a true result: it did, try again at once). While another process or thread downloads the
        same file, this waits for its copy (for at most ``wait_seconds``; then it streams a copy
        of its own). Either way ``group`` counts as used now (see :meth:`mark_used`).
        """
        self._check_size(size)
        self.mark_used(group)
        claim = True
        waited, delay = 0.0, 0.002
        while True:
            hit = self.lookup(key, size, name=name)
            if hit is not None:
                return hit
            outcome = self._reserve_waiting(key, size, name, group, keep=keep, claim=claim, relieve=relieve)
            if isinstance(outcome, Ticket):
                ticket = outcome
                break
            if outcome == "busy":
                if waited >= self.wait_seconds:
                    claim, keep = False, False  # the claimant seems stuck: do not wait forever
                self._sleep(delay)
                waited += delay
                delay = min(delay * 2, 0.05)
        try:
            # Made private (0600) before the caller's fetch opens it (opening truncates, keeping the mode).
            os.close(os.open(ticket.tmp, _PRIVATE_TMP, layout.FILE_MODE))
            fetch(ticket.tmp)
            got = self._finish(ticket, later=False)
        except BaseException:
            self.abort(ticket)
            raise
        # Entered at once: one file at a time is the slow path, and other processes see the file
        # only once it is in the index.
        self._index.flush()
        return got

    def lookup(self, key: str, size: int, *, name: str = "") -> CachedFile | None:
        """The pinned file for ``key`` when it is cached and intact, else None (no download). A file
        that does not match what was downloaded is removed, with a :class:`CacheIntegrityWarning`."""
        return self.lookup_many([(key, size, name)])[0]

    def reserve(self, wanted: Sequence[tuple[str, int, str]], *, group: str, keep: bool = True) -> list[Outcome]:
        """Reserve room for several downloads ``(key, size, name)`` at once, in order, without waiting.

        For each: a :class:`Ticket` (download to ``ticket.tmp``, then :meth:`finish`), ``"present"``
        (the file is cached now: :meth:`lookup` it), ``"busy"`` (another process or thread is
        downloading it: :meth:`get` waits for its copy) or None (no room now). After the first None
        the rest are None too: room is handed out in order, so that what a consumer needs first is
        never starved by later files.
        """
        for _, size, _ in wanted:
            self._check_size(size)
        return self._admitting(wanted, group, keep=keep, claim=True, starving=False)

    def finish(self, ticket: Ticket) -> CachedFile:
        """Put a download in place once ``ticket.tmp`` is complete; the result is pinned. Safe on any
        thread (no index access: the entry is written by the next :meth:`reserve` or :meth:`flush`,
        or by a timer within a quarter of a second). A kept file is hashed here, its bytes still in
        the page cache, and sealed (see :mod:`~uc_jupyter.data.cache.integrity`): later hits are
        checked against that.

        Raises:
            OSError: the file's size differs from the listed size (call :meth:`abort`).
        """
        return self._finish(ticket, later=True)

    def abort(self, ticket: Ticket) -> None:
        """Give back a ticket whose download failed or was cancelled. It never fails on the index (a
        full disk): what cannot be written now is written by the next transaction."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(ticket.tmp)
        self._index.give_back(ticket.reservation)

    def release(self, cached: CachedFile) -> None:
        """The consumer is done with ``cached``: unpin it, or delete a streamed file."""
        if cached.resident:
            pin = cached.pin
            if pin is not None:  # Pin.release, written out: this runs per file handed out
                fd, pin.fd = pin.fd, -1
                if fd >= 0:
                    os.close(fd)
            return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(cached.path)
        if cached.reservation is not None:
            self._index.give_back(cached.reservation)

    def mark_used(self, group: str) -> None:
        """``group``'s files are in use now (a pass over its listing starts): for ``grace_seconds``
        no other group evicts them. Written by this process's next transaction.

        Example:
            >>> cache.mark_used("s3://bucket/images#3f2a")  # doctest: +SKIP
        """
        local = self._index.local()
        with local.lock:
            local.used[group] = self._clock()

    def flush(self) -> None:
        """Write this process's bookkeeping to the index now: finished downloads (they count as
        reserved, not resident, until then), groups' use, re-checked fingerprints."""
        self._index.flush()

    def stats(self) -> CacheStats:
        self.flush()

        def read(conn: sqlite3.Connection) -> tuple[int, ...]:
            query = "SELECT resident, reserved, evictions, entries, disk_resident + disk_reserved, block FROM ledger"
            return tuple(int(value) for value in conn.execute(query).fetchone())

        resident, reserved, evictions, entries, disk_files, block = self._index.run(read, write=False)
        return CacheStats(
            root=str(self.root),
            resident_bytes=resident,
            in_flight_bytes=reserved,
            max_bytes=self.max_bytes,
            free_disk_bytes=shutil.disk_usage(self.root).free,
            min_free_bytes=self.min_free_bytes,
            entries=entries,
            evictions=evictions,
            disk_bytes=disk_files + structure(self._base, block=block),
        )

    def resident_bytes(self) -> int:
        """The bytes of the resident files now (the queued index writes flushed, then one read):
        what :meth:`stats` says of them, without its disk and folder measurements, for decisions
        made per batch of downloads.

        Example:
            >>> FileCache("/tmp/cache").resident_bytes()  # doctest: +SKIP
            0
        """
        self.flush()
        return int(self._index.run(lambda conn: conn.execute("SELECT resident FROM ledger").fetchone()[0], write=False))

    def clear(self) -> int:
        """Delete every resident file not pinned right now; return how many were deleted."""
        query = "SELECT key, size, path FROM entries ORDER BY used, key"
        return self._index.write(lambda conn: ledger.evict(conn, self._base, query, (), need=None, disk=False).files)

    def reclaim_finished_workers(self) -> None:
        """Take back what this process's DataLoader workers that ended left (their streamed files
        and the room they hold): call it once nothing they handed out is in use (a pass begins)."""
        self.reclaim_dead(parent=os.getpid())

    def reclaim_dead(self, *, parent: int | None = None) -> None:
        """Take back what processes that died (``kill -9``) left: reservations (a finished download
        whose entry was not written yet is adopted), temporary and streamed files. A DataLoader
        worker's wait while its parent lives (see :mod:`~uc_jupyter.data.cache.streams`), unless
        ``parent`` is that parent: then only those workers' are taken back
        (:mod:`~uc_jupyter.data.cache.leftovers`)."""
        reclaim_dead(self._index, self._base, self._clock, parent=parent)

    # ---------------------------------------------------------------- misses
    def _finish(self, ticket: Ticket, *, later: bool) -> CachedFile:
        """:meth:`finish`; ``later``: the caller does not flush at once, so a timer will."""
        try:
            fd = os.open(ticket.tmp, OPEN_FLAGS)
        except OSError as exc:
            if not isinstance(exc, FileNotFoundError) and exc.errno != errno.ELOOP:
                raise
            fd = -1
        try:
            found = os.fstat(fd) if fd >= 0 else None
            actual = found.st_size if found is not None and stat.S_ISREG(found.st_mode) else -1
            if actual != ticket.size:  # a dataset's downloads check first; the same error for any other fetch
                from uc_jupyter.storage.downloads import changed_since_listing  # the one text; imported only here

                raise changed_since_listing(ticket.name or ticket.key, ticket.size, max(actual, 0))
            os.fchmod(fd, layout.FILE_MODE)  # whatever mode the downloader created it with
            if not ticket.resident:
                streamed = f"{self._pid_dir('stream')}/{next(_SEQUENCE)}{layout.suffix(ticket.name)}"
                os.replace(ticket.tmp, streamed)
                os.close(fd)
                return CachedFile(
                    ticket.key, streamed, ticket.size, resident=False, downloaded=True, reservation=ticket.reservation
                )
            target = layout.object_path(self._base, ticket.key, ticket.name)
            try:
                os.replace(ticket.tmp, target)
            except FileNotFoundError:  # the first object under this prefix
                os.makedirs(os.path.dirname(target), mode=layout.FOLDER_MODE, exist_ok=True)
                os.replace(ticket.tmp, target)
            # The pin, on the descriptor already open: nothing else knows this object yet.
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            digest, recorded = seal(fd)  # after the rename, which changes the ctime
            sealed = stamp(fd)  # which changes it again: the fingerprint recorded is the one after
            if sealed is not None:
                recorded = fingerprint(sealed)
        except BaseException:
            if fd >= 0:
                os.close(fd)
            raise
        record = Record(ticket.size, digest, recorded, self._clock())
        relative = layout.relative(self._base, target)
        done = Finished(ticket.reservation, ticket.key, ticket.size, ticket.group, relative, record)
        if later:
            self._index.later(done)
        else:
            local = self._index.local()
            with local.lock:
                local.queue(done)
        pin = Pin()
        pin.fd = fd
        return CachedFile(ticket.key, target, ticket.size, resident=True, downloaded=True, pin=pin)

    def _admitting(
        self, wanted: Sequence[tuple[str, int, str]], group: str, *, keep: bool, claim: bool, starving: bool
    ) -> list[Outcome]:
        budget = Budget(self.max_bytes, self.min_free_bytes, self.headroom, self.grace_seconds)

        def work(conn: sqlite3.Connection) -> list[Outcome]:
            return admit(
                conn,
                wanted,
                group=group,
                keep=keep,
                claim=claim,
                starving=starving,
                budget=budget,
                base=self._base,
                now=self._clock(),
            )

        # Finished downloads become entries in the same transaction: then they count as resident
        # and can be evicted.
        return self._index.write(work)

    def _reserve_waiting(
        self,
        key: str,
        size: int,
        name: str,
        group: str,
        *,
        keep: bool,
        claim: bool,
        relieve: Callable[[], object] | None,
    ) -> Ticket | Literal["present", "busy"]:
        """Reserve one download, waiting while the budget is taken by files in flight; raises
        CacheBudgetError after ``wait_seconds``, or (with errno ENOSPC) once the disk alone has been
        too full for ``_DISK_PATIENCE`` seconds: a full disk seldom empties by itself, and the
        consumer should hear of it within seconds."""
        started = self._clock()
        deadline = started + self.wait_seconds
        disk_since: float | None = None
        delay = 0.01
        while True:
            now = self._clock()
            starving = now - started >= self.starve_seconds
            outcome = self._admitting([(key, size, name)], group, keep=keep, claim=claim, starving=starving)[0]
            if outcome is not None:
                return outcome
            stats = self.stats()
            disk_room = disk_free(self._base) - stats.in_flight_bytes - self.min_free_bytes
            if size <= disk_room:
                disk_since = None
            elif disk_since is None:
                disk_since = now
            elif now - disk_since >= _DISK_PATIENCE:
                raise CacheBudgetError(
                    errno.ENOSPC,
                    f"the disk holding the cache {self.root} is full: {stats.free_disk_bytes} bytes free, "
                    f"{stats.in_flight_bytes} of them taken by files in flight and {self.min_free_bytes} kept free "
                    f"(the free-disk floor, min_free_bytes), no room for a {size}-byte file; free disk space "
                    "or lower min_free_bytes",
                )
            if now >= deadline:
                raise CacheBudgetError(
                    f"cache {self.root}: no room for a {size}-byte file within the budget of "
                    f"{self.max_bytes} bytes ({stats.resident_bytes} resident, {stats.in_flight_bytes} held by "
                    f"files in flight or in use{self._on_disk(stats)}) and the free-disk floor of "
                    f"{self.min_free_bytes} bytes ({disk_room} bytes free above it) after {self.wait_seconds:g} s; "
                    "raise cache_max_bytes, lower min_free_bytes or prefetch, or free disk space"
                )
            if relieve is not None and relieve():
                continue  # the caller let go of files it held: try again at once
            if not starving and not self._index.run(partial(ledger.others_in_flight, pid=os.getpid()), write=False):
                # Only this process holds the budget, and it let go of all it could: no one else will
                # make room, so waiting out starve_seconds would only stall the loop.
                started = now - self.starve_seconds
                continue
            self.reclaim_dead()
            self._sleep(delay)
            delay = min(delay * 2, 0.5)

    def _on_disk(self, stats: CacheStats) -> str:
        """For a budget that is the disk, what the folder takes as admission counts it."""
        if self.max_bytes < DISK_BUDGET_MIN:
            return ""
        return f"; {stats.disk_bytes} on disk in whole blocks, index and folders included"

    def _check_size(self, size: int) -> None:
        if size <= self.max_bytes // 2:  # the common case, without measuring the index and folders
            return
        room, cost, beside = self.max_bytes, size, ""
        if self.max_bytes >= DISK_BUDGET_MIN:  # the budget is the disk: the file's blocks, beside the index
            taken = structure(self._base, block=self._index.block)
            room, beside = self.max_bytes - taken, f", of which the index and folders take {taken}"
            cost = charge(size, block=self._index.block)
        if cost > room:
            raise CacheBudgetError(
                f"a {size}-byte file cannot fit the cache budget of {self.max_bytes} bytes{beside} ({self.root}); "
                "raise cache_max_bytes"
            )

    def _pid_dir(self, kind: str) -> str:
        local = self._index.local()
        folder = local.dirs.get(kind)
        if folder is None or not os.path.isdir(folder):  # also when reclaimed by a process that thought us dead
            folder = f"{self._base}/{kind}/{streams.folder_name() if kind == 'stream' else os.getpid()}"
            os.makedirs(folder, mode=layout.FOLDER_MODE, exist_ok=True)
            local.dirs[kind] = folder
        return folder
