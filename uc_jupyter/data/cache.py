"""One persistent, bounded local file cache per machine, shared by every worker, rank and kernel.

Layout under ``root`` (default ``$UC_JUPYTER_HOME/cache``)::

    index.db          entries (key, size, group), reservations and the byte ledger (SQLite, WAL)
    objects/ab/<key>  resident files
    tmp/              partial downloads: ``<key>.<pid>.<n>``, renamed into place when complete
    stream/<pid>/     files streamed past a full cache, deleted on release

Why it is built this way:

- A hit costs three system calls and no lock file, no index access: the object is opened and
  share-locked (``flock``), which both checks that it exists and pins it. Eviction takes an
  exclusive lock without waiting and skips files it cannot lock, so the path handed out stays valid
  until ``release`` closes the descriptor (or the pinning process ends: the kernel drops its locks,
  nothing is left to reclaim). A file used within a tenth of the grace period is not touched again.
- One download per key, across processes, without a lock file per key: a resident download is
  reserved in the index under its key (the *claim*), and the reservation transaction first looks for
  a live claim on the key and for the object on disk; a second asker waits for the claimant's copy.
  The claim is given up only after the object was renamed into place, so an asker sees one or the
  other. A dead claimant's claim is taken back (its finished object is adopted into the index).
- Downloads go to ``tmp/`` and are renamed into place, so a reader never sees a partial file, even
  after ``kill -9``; the dead process's temporary files and reservations are reclaimed later.
- The byte budget and the free-disk floor are checked, under the index's write lock, *before* a
  download starts, with the download's size reserved; they are never crossed. Several downloads
  can be reserved in one transaction (:meth:`FileCache.reserve`), and finished ones are entered into
  the index in batches (:meth:`FileCache.flush`): until then they stay counted as reserved, so the
  ledger never undercounts what is on disk.
- Eviction knows scans: files of the requesting group (one dataset's listing) never evict each
  other. Once the budget is full, the group keeps its resident set and further files stream through
  ``stream/``, so every later epoch re-downloads only what does not fit (an LRU cache would evict
  each file just before the scan comes back to it and re-download nearly everything). Files of
  other groups that were not used for ``grace_seconds`` are evicted, least recently used first.

Example:
    >>> import tempfile, pathlib
    >>> cache = FileCache(tempfile.mkdtemp(), max_bytes=1 << 20, min_free_bytes=0)
    >>> key = FileCache.key("s3://b/a.txt", size=5, version="etag1")
    >>> got = cache.get(key, 5, lambda tmp: pathlib.Path(tmp).write_bytes(b"hello"), group="demo")
    >>> pathlib.Path(got.path).read_bytes(), got.downloaded
    (b'hello', True)
    >>> cache.release(got)
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
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from uc_jupyter.processes import alive
from uc_jupyter.sqlite_store import SqliteStore

__all__ = ["CacheBudgetError", "CacheStats", "CachedFile", "FileCache", "Ticket", "default_cache_dir"]

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS entries ("
    " key TEXT PRIMARY KEY, size INTEGER NOT NULL, grp TEXT NOT NULL, path TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS entries_grp ON entries(grp)",
    # resident = 1: the download will be kept, and claims its key (one downloader per key).
    "CREATE TABLE IF NOT EXISTS reservations (id INTEGER PRIMARY KEY, pid INTEGER NOT NULL,"
    " key TEXT NOT NULL, size INTEGER NOT NULL, resident INTEGER NOT NULL, grp TEXT NOT NULL, path TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS reservations_key ON reservations(key)",
    # entries: the count of the entries table, kept here because counting the table reads all of
    # it, and every new worker process (a fresh connection) would read it again for its stats.
    "CREATE TABLE IF NOT EXISTS ledger (id INTEGER PRIMARY KEY CHECK (id = 1),"
    " resident INTEGER NOT NULL, reserved INTEGER NOT NULL, evictions INTEGER NOT NULL, entries INTEGER NOT NULL)",
    "INSERT OR IGNORE INTO ledger VALUES (1, 0, 0, 0, 0)",
)
_BUSY_TIMEOUT_S = 60.0
_FORMAT = "4"  # bump when the layout or index changes: an older cache is emptied, not misread
_FOLDERS = ("objects", "tmp", "stream")
_OLD_FOLDERS = ("pins", "locks")  # of earlier formats
# Names of streamed and temporary files: unique within a process (whose pid names them), whichever
# FileCache object made them.
_SEQUENCE = itertools.count()
_FLUSH_COUNT = 32  # finished downloads entered into the index in one transaction...
_FLUSH_SECONDS = 0.25  # ...or sooner, once the oldest has waited this long
_SUFFIXES: dict[str, str] = {}  # extension seen -> the suffix kept (see _suffix)
_SUFFIXES_KEPT = 4096
_READ_FLAGS = os.O_RDONLY | os.O_CLOEXEC
_SHARE_NOWAIT = fcntl.LOCK_SH | fcntl.LOCK_NB
_TOUCH_FRACTION = 0.1  # a hit re-touches a file (for recency) only when older than this part of the grace


class CacheBudgetError(OSError):
    """A file cannot be cached without crossing the byte budget or the free-disk floor."""


class _Pin:
    """A share-locked descriptor of a resident file: while it is open, eviction skips the file."""

    __slots__ = ("fd",)

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def release(self) -> None:
        """Close the descriptor (idempotent: the number may belong to another file afterwards)."""
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)

    def __del__(self) -> None:  # a CachedFile dropped without release() still unpins
        if self.fd >= 0:  # only then: the check is what a released pin pays here
            with contextlib.suppress(OSError):  # never raise from a finaliser
                self.release()


@dataclass(frozen=True)
class CachedFile:
    """A file handed out by the cache; ``path`` stays valid until :meth:`FileCache.release` (and
    after it, for a resident file, until the file is evicted)."""

    key: str
    path: str
    size: int
    resident: bool  # False: streamed past a full cache, deleted on release
    downloaded: bool  # True when this call fetched it
    reservation: int | None = None  # the budget a streamed file holds
    pin: _Pin | None = None  # the share lock that keeps a resident file from eviction

    @classmethod
    def _hit(cls, key: str, path: str, size: int, pin: _Pin) -> CachedFile:
        """A pinned resident file that was already cached: made once per hit, so without the
        frozen dataclass's ``__init__`` (a third of the cost of a hit's Python work)."""
        hit = object.__new__(cls)
        fields = hit.__dict__
        fields["key"], fields["path"], fields["size"], fields["pin"] = key, path, size, pin
        fields["resident"], fields["downloaded"], fields["reservation"] = True, False, None
        return hit


@dataclass(frozen=True)
class Ticket:
    """Room reserved for one download (see :meth:`FileCache.reserve`): write the file to ``tmp``,
    then hand the ticket to :meth:`FileCache.finish`, or to :meth:`FileCache.abort` on failure."""

    key: str
    size: int
    name: str
    group: str
    resident: bool  # False: the file will be streamed through, not kept
    reservation: int
    tmp: str


@dataclass(frozen=True)
class CacheStats:
    """The cache's fill, shared by every process using it."""

    root: str
    resident_bytes: int  # files kept for reuse
    in_flight_bytes: int  # downloads under way and files streamed past a full cache
    max_bytes: int
    free_disk_bytes: int
    min_free_bytes: int
    entries: int
    evictions: int

    @property
    def used_bytes(self) -> int:
        return self.resident_bytes + self.in_flight_bytes

    @property
    def fill(self) -> float:
        """Used bytes over the budget, 0.0 to 1.0."""
        return self.used_bytes / self.max_bytes if self.max_bytes else 0.0


def default_cache_dir() -> Path:
    from uc_jupyter.config import settings

    return settings().home / "cache"


class FileCache:
    """The shared cache under ``root``. Cheap to create; every process makes its own object.

    Args:
        root: the cache folder (default ``$UC_JUPYTER_HOME/cache``).
        max_bytes: the byte budget (default: half of the disk's free space when first used).
        min_free_bytes: never let the disk's free space fall below this (default 10% of the disk).
        headroom: the fraction of the budget kept for files streamed past a full cache.
        grace_seconds: files of other groups used more recently than this are not evicted.
        wait_seconds: how long a download waits for room (or for another process's download of
            the same file) before CacheBudgetError (or before streaming its own copy).
        starve_seconds: after waiting this long, unpinned resident files of any group are evicted
            to make room (files in flight elsewhere may be waiting on this one).
        clock, sleep: injected time for tests.
    """

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        *,
        max_bytes: int | None = None,
        min_free_bytes: int | None = None,
        headroom: float = 0.1,
        grace_seconds: float = 600.0,
        wait_seconds: float = 120.0,
        starve_seconds: float = 1.0,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.root = Path(root) if root is not None else default_cache_dir()
        self.root.mkdir(parents=True, exist_ok=True)
        _ensure_format(self.root)
        for sub in _FOLDERS:
            (self.root / sub).mkdir(exist_ok=True)
        disk = shutil.disk_usage(self.root)
        self.max_bytes = int(max_bytes) if max_bytes is not None else disk.free // 2
        self.min_free_bytes = int(min_free_bytes) if min_free_bytes is not None else disk.total // 10
        if self.max_bytes <= 0:
            raise ValueError(f"cache_max_bytes must be positive, got {max_bytes}")
        if self.min_free_bytes < 0:
            raise ValueError(f"min_free_bytes must not be negative, got {min_free_bytes}")
        if not 0.0 <= headroom < 1.0:
            raise ValueError(f"headroom must be in [0, 1), got {headroom}")
        self.headroom = headroom
        self.grace_seconds = grace_seconds
        self.wait_seconds = wait_seconds
        self.starve_seconds = starve_seconds
        self._clock, self._sleep = clock, sleep
        self._base = str(self.root)  # string paths on the hot paths: pathlib costs more than the syscalls
        self._local = _ProcessState()
        self._store = SqliteStore(self.root / "index.db", schema=_SCHEMA, busy_timeout=_BUSY_TIMEOUT_S)
        self.reclaim_dead()

    def __getstate__(self) -> dict[str, object]:  # travels to DataLoader workers and ranks
        state = self.__dict__.copy()
        state.pop("_local")
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._local = _ProcessState()

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
        files in flight, ``relieve()`` is called so the caller can release files it still holds.
        While another process or thread downloads the same file, this waits for its copy (for at
        most ``wait_seconds``; then it streams a copy of its own).
        """
        self._check_size(size)
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
            fetch(ticket.tmp)
            got = self.finish(ticket)
        except BaseException:
            self.abort(ticket)
            raise
        self._flush_if_due()
        return got

    def lookup(self, key: str, size: int, *, name: str = "") -> CachedFile | None:
        """The pinned file for ``key`` when it is cached, else None (no download, no index access)."""
        path = self._object_path(key, name)
        pin = self._pin(path)
        if pin is None:
            return None
        return CachedFile._hit(key, path, size, pin)

    def reserve(
        self, wanted: Sequence[tuple[str, int, str]], *, group: str, keep: bool = True
    ) -> list[Ticket | Literal["present", "busy"] | None]:
        """Reserve room for several downloads ``(key, size, name)`` at once, in order, without waiting.

        For each: a :class:`Ticket` (download to ``ticket.tmp``, then :meth:`finish`), ``"present"``
        (the file is cached now: :meth:`lookup` it), ``"busy"`` (another process or thread is
        downloading it: :meth:`get` waits for its copy) or None (no room now). After the first None
        the rest are None too: room is handed out in order, so that what a consumer needs first is
        never starved by later files.
        """
        for _, size, _ in wanted:
            self._check_size(size)
        with self._committing() as pending, self._transaction() as conn:
            self._commit(conn, pending)  # the same transaction enters finished downloads
            return self._admit(conn, wanted, group, keep=keep, claim=True, starving=False)

    def finish(self, ticket: Ticket) -> CachedFile:
        """Put a download in place once ``ticket.tmp`` is complete; the result is pinned. Safe on any
        thread (no index access: the entry is written by the next :meth:`reserve` or :meth:`flush`).

        Raises:
            OSError: the file's size differs from the listed size (call :meth:`abort`).
        """
        try:
            actual = os.stat(ticket.tmp).st_size
        except FileNotFoundError:
            actual = -1
        if actual != ticket.size:
            read = "nothing" if actual < 0 else str(actual)
            raise OSError(
                f"the remote file changed while it was listed: {ticket.size} bytes were listed, "
                f"{read} were read; list the folder again"
            )
        if not ticket.resident:
            streamed = f"{self._pid_dir('stream')}/{next(_SEQUENCE)}{_suffix(ticket.name)}"
            os.replace(ticket.tmp, streamed)
            return CachedFile(
                ticket.key, streamed, ticket.size, resident=False, downloaded=True, reservation=ticket.reservation
            )
        target = self._object_path(ticket.key, ticket.name)
        try:
            os.replace(ticket.tmp, target)
        except FileNotFoundError:  # the first object under this prefix
            os.makedirs(os.path.dirname(target), exist_ok=True)
            os.replace(ticket.tmp, target)
        # Nothing can evict it before it is in the index, so this pin cannot miss.
        pin = self._pin(target)
        self._queue_commit(ticket, target)
        if pin is None:  # pragma: no cover - see above
            raise OSError(f"cache object {ticket.key} vanished after it was written")
        return CachedFile(ticket.key, target, ticket.size, resident=True, downloaded=True, pin=pin)

    def abort(self, ticket: Ticket) -> None:
        """Give back a ticket whose download failed or was cancelled."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(ticket.tmp)
        self._cancel(ticket.reservation)

    def release(self, cached: CachedFile) -> None:
        """The consumer is done with ``cached``: unpin it, or delete a streamed file."""
        if cached.resident:
            if cached.pin is not None:
                cached.pin.release()
            return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(cached.path)
        self._cancel(cached.reservation)

    def flush(self) -> None:
        """Enter this process's finished downloads into the index now (they count as reserved,
        not resident, until then)."""
        with self._committing() as pending:
            if pending:
                with self._transaction() as conn:
                    self._commit(conn, pending)

    def stats(self) -> CacheStats:
        self.flush()
        with self._transaction(write=False) as conn:
            resident, reserved, evictions, entries = conn.execute(
                "SELECT resident, reserved, evictions, entries FROM ledger"
            ).fetchone()
        return CacheStats(
            root=str(self.root),
            resident_bytes=resident,
            in_flight_bytes=reserved,
            max_bytes=self.max_bytes,
            free_disk_bytes=shutil.disk_usage(self.root).free,
            min_free_bytes=self.min_free_bytes,
            entries=entries,
            evictions=evictions,
        )

    def clear(self) -> int:
        """Delete every resident file not pinned right now; return how many were deleted."""
        self.flush()
        with self._transaction() as conn:
            rows = conn.execute("SELECT key, size, path FROM entries").fetchall()
            return self._evict(conn, [(k, s, p) for k, s, p in rows], need=None)[1]

    def reclaim_dead(self) -> None:
        """Take back what processes that died (``kill -9``) left: reservations (a finished download
        whose entry was not written yet is adopted), temporary and streamed files."""
        verdicts: dict[int, bool] = {}

        def dead(pid: int) -> bool:
            if pid not in verdicts:
                verdicts[pid] = not alive(pid)
            return verdicts[pid]

        # Files first, then the ledger: the other way round, the bytes would count as free while
        # the files still take the disk. Each process is judged when it is met, not from a list
        # made earlier, which could miss a process that started meanwhile and take back its room.
        for entry in os.scandir(f"{self._base}/stream"):
            if entry.name.isdigit() and dead(int(entry.name)):
                shutil.rmtree(entry.path, ignore_errors=True)
        for tmp in os.scandir(f"{self._base}/tmp"):
            pid = tmp.name.split(".")[1] if tmp.name.count(".") >= 2 else ""
            if pid.isdigit() and dead(int(pid)):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp.path)
        with self._transaction() as conn:
            rows = conn.execute("SELECT id, pid, key, size, resident, grp, path FROM reservations").fetchall()
            for row in rows:
                if dead(row[1]):
                    self._reclaim(conn, tuple(row))

    # ---------------------------------------------------------------- internals
    def _state(self) -> _ProcessState:
        local = self._local
        if local.pid != os.getpid():  # a forked child: the parent's pending commits are the parent's
            local = self._local = _ProcessState()
        return local

    def _object_path(self, key: str, name: str) -> str:
        return f"{self._base}/objects/{key[:2]}/{key}{_suffix(name)}"

    def _relative(self, path: str) -> str:
        return path[len(self._base) + len("/objects/") :]

    def _pid_dir(self, kind: str) -> str:
        local = self._state()
        folder = local.dirs.get(kind)
        if folder is None or not os.path.isdir(folder):  # also when reclaimed by a process that thought us dead
            folder = f"{self._base}/{kind}/{os.getpid()}"
            os.makedirs(folder, exist_ok=True)
            local.dirs[kind] = folder
        return folder

    def _check_size(self, size: int) -> None:
        if size > self.max_bytes:
            raise CacheBudgetError(
                f"a {size}-byte file cannot fit the cache budget of {self.max_bytes} bytes ({self.root}); "
                "raise cache_max_bytes"
            )

    def _pin(self, path: str) -> _Pin | None:
        """Share-lock the object at ``path``; None when it is not there (or being evicted right now)."""
        try:
            fd = os.open(path, _READ_FLAGS)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno in (errno.EMFILE, errno.ENFILE):
                raise OSError(
                    exc.errno,
                    f"too many open files while pinning cache files ({exc.strerror}); "
                    "lower pin_window or raise the limit (ulimit -n)",
                ) from exc
            raise
        try:
            fcntl.flock(fd, _SHARE_NOWAIT)
            stat = os.fstat(fd)
            if stat.st_nlink == 0:  # evicted between our open and our lock
                os.close(fd)
                return None
        except BlockingIOError:  # an evictor holds it and is about to delete it
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        if self._clock() - stat.st_mtime > self.grace_seconds * _TOUCH_FRACTION:
            os.utime(fd)  # recency, for evicting other groups' cold files
        return _Pin(fd)

    def _queue_commit(self, ticket: Ticket, target: str) -> None:
        local = self._state()
        with local.lock:
            if not local.pending:
                local.since = time.monotonic()
            local.pending.append((ticket.reservation, ticket.key, ticket.size, ticket.group, self._relative(target)))

    def _flush_if_due(self) -> None:
        local = self._state()
        with local.lock:
            due = len(local.pending) >= _FLUSH_COUNT or (
                local.pending and time.monotonic() - local.since >= _FLUSH_SECONDS
            )
        if due:
            self.flush()

    @contextlib.contextmanager
    def _committing(self) -> Iterator[list[tuple[int, str, int, str, str]]]:
        """This process's finished downloads, taken for one transaction; put back if it fails."""
        local = self._state()
        with local.lock:
            pending, local.pending = local.pending, []
        try:
            yield pending
        except BaseException:
            with local.lock:
                local.pending[:0] = pending
            raise

    def _commit(self, conn: sqlite3.Connection, pending: list[tuple[int, str, int, str, str]]) -> None:
        moved = released = new = 0
        for reservation, key, size, group, relative in pending:
            if conn.execute("DELETE FROM reservations WHERE id = ?", (reservation,)).rowcount:
                released += size
            added, is_new = self._enter(conn, key, size, group, relative)
            moved += added
            new += is_new
        if moved or released or new:
            conn.execute(
                "UPDATE ledger SET resident = resident + ?, reserved = reserved - ?, entries = entries + ?",
                (moved, released, new),
            )

    def _enter(self, conn: sqlite3.Connection, key: str, size: int, group: str, relative: str) -> tuple[int, bool]:
        """Insert an entry (replacing a stale one of the same key); return the resident bytes added
        and whether the key is new (for the ledger, which the caller updates)."""
        old = conn.execute("SELECT size FROM entries WHERE key = ?", (key,)).fetchone()
        conn.execute("INSERT OR REPLACE INTO entries VALUES (?, ?, ?, ?)", (key, size, group, relative))
        return size - (old[0] if old is not None else 0), old is None

    def _reclaim(self, conn: sqlite3.Connection, row: _Reservation) -> None:
        """Drop a dead process's reservation; adopt its download if it was complete and in place."""
        rid, pid, key, size, resident, group, relative = row
        complete = False
        if resident and relative:
            with contextlib.suppress(FileNotFoundError):
                complete = os.stat(f"{self._base}/objects/{relative}").st_size == size
        if not complete:  # its partial download must go before its bytes count as free
            prefix = f"{key}.{pid}."
            for tmp in os.scandir(f"{self._base}/tmp"):
                if tmp.name.startswith(prefix):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(tmp.path)
        conn.execute("DELETE FROM reservations WHERE id = ?", (rid,))
        conn.execute("UPDATE ledger SET reserved = reserved - ?", (size,))
        if complete:
            added, is_new = self._enter(conn, key, size, group, relative)
            conn.execute("UPDATE ledger SET resident = resident + ?, entries = entries + ?", (added, is_new))

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
        CacheBudgetError after ``wait_seconds``."""
        started = self._clock()
        deadline = started + self.wait_seconds
        delay = 0.01
        while True:
            starving = self._clock() - started >= self.starve_seconds
            # Finished files become entries first: then they count as resident and can be evicted.
            with self._committing() as pending, self._transaction() as conn:
                self._commit(conn, pending)
                outcome = self._admit(conn, [(key, size, name)], group, keep=keep, claim=claim, starving=starving)[0]
            if outcome is not None:
                return outcome
            if self._clock() >= deadline:
                disk_room = shutil.disk_usage(self.root).free - self.min_free_bytes
                raise CacheBudgetError(
                    f"cache {self.root}: no room for a {size}-byte file within the budget of "
                    f"{self.max_bytes} bytes and the free-disk floor of {self.min_free_bytes} bytes "
                    f"({disk_room} bytes free above the floor); raise cache_max_bytes, lower "
                    "min_free_bytes or prefetch, or free disk space"
                )
            if relieve is not None:
                relieve()
            self.reclaim_dead()
            self._sleep(delay)
            delay = min(delay * 2, 0.5)

    def _admit(
        self,
        conn: sqlite3.Connection,
        wanted: Sequence[tuple[str, int, str]],
        group: str,
        *,
        keep: bool,
        claim: bool,
        starving: bool,
    ) -> list[Ticket | Literal["present", "busy"] | None]:
        """Inside a write transaction: claim and reserve ``wanted`` in order (see :meth:`reserve`)."""
        resident, reserved = conn.execute("SELECT resident, reserved FROM ledger").fetchone()
        disk_room = shutil.disk_usage(self._base).free - reserved - self.min_free_bytes
        # Resident files may take the budget less the headroom; files in flight (reserved) count
        # against both, so the budget is never crossed while downloads run.
        cap = int(self.max_bytes * (1.0 - self.headroom))
        claims: dict[str, _Reservation] = {}
        if claim:
            keys = [k for k, _, _ in wanted]
            for start in range(0, len(keys), 500):  # SQLite's limit on bound parameters
                part = keys[start : start + 500]
                query = (
                    "SELECT id, pid, key, size, resident, grp, path FROM reservations "
                    f"WHERE resident = 1 AND key IN ({','.join('?' * len(part))})"
                )
                claims.update((row[2], tuple(row)) for row in conn.execute(query, part))
        outcomes: list[Ticket | Literal["present", "busy"] | None] = []
        pid = os.getpid()
        added = 0  # reserved here, written to the ledger at the end
        for key, size, name in wanted:
            if outcomes and outcomes[-1] is None:
                outcomes.append(None)  # room goes in order
                continue
            # In place means complete (claimants rename finished files into place before they
            # give up their claim), whoever's claim is still in the index.
            target = self._object_path(key, name)
            if claim and os.path.exists(target):
                outcomes.append("present")
                continue
            found = claims.get(key)
            if found is not None:
                if alive(found[1]):
                    outcomes.append("busy")
                    continue
                self._reclaim(conn, found)
                resident, reserved = conn.execute("SELECT resident, reserved FROM ledger").fetchone()
                reserved += added
            resident_ok = keep and resident + reserved + size <= cap and size <= disk_room
            if keep and not resident_ok:
                need = max(resident + reserved + size - cap, size - disk_room)
                freed, _ = self._evict(conn, self._candidates(conn, group), need=need)
                resident -= freed
                disk_room += freed
                resident_ok = resident + reserved + size <= cap and size <= disk_room
            fits = resident_ok or (resident + reserved + size <= self.max_bytes and size <= disk_room)
            if not fits and starving:
                # Files in flight elsewhere hold the rest of the budget and may be waiting on this
                # very file (a DataLoader delivers its workers' batches in turn): give up unpinned
                # resident files, this group's included, rather than deadlock.
                need = max(resident + reserved + size - self.max_bytes, size - disk_room)
                freed, _ = self._evict(conn, self._candidates(conn, group, starving=True), need=need)
                resident -= freed
                disk_room += freed
                fits = resident + reserved + size <= self.max_bytes and size <= disk_room
            if not fits:
                outcomes.append(None)
                continue
            rid = conn.execute(
                "INSERT INTO reservations (pid, key, size, resident, grp, path) VALUES (?, ?, ?, ?, ?, ?)",
                (pid, key, size, int(resident_ok), group, self._relative(target) if resident_ok else ""),
            ).lastrowid
            assert rid is not None
            reserved += size
            added += size
            disk_room -= size
            tmp = f"{self._base}/tmp/{key}.{pid}.{next(_SEQUENCE)}"
            outcomes.append(Ticket(key, size, name, group, resident_ok, rid, tmp))
            if resident_ok:  # the same key later in this batch waits for this download
                claims[key] = (rid, pid, key, size, 1, group, self._relative(target))
        if added:
            conn.execute("UPDATE ledger SET reserved = reserved + ?", (added,))
        return outcomes

    def _cancel(self, reservation: int | None) -> None:
        if reservation is None:
            return
        with self._transaction() as conn:
            row = conn.execute("SELECT size FROM reservations WHERE id = ?", (reservation,)).fetchone()
            if row is not None:
                conn.execute("DELETE FROM reservations WHERE id = ?", (reservation,))
                conn.execute("UPDATE ledger SET reserved = reserved - ?", (row[0],))

    def _candidates(
        self, conn: sqlite3.Connection, group: str, *, starving: bool = False
    ) -> list[tuple[str, int, str]]:
        """Other groups' resident files not used within the grace period, least recent first; when
        ``starving``, this group's files first and then every other, grace or not."""
        now = self._clock()
        aged: list[tuple[bool, float, str, int, str]] = []
        query = "SELECT key, size, path, grp FROM entries" + ("" if starving else " WHERE grp != ?")
        for key, size, relative, grp in conn.execute(query, () if starving else (group,)):
            try:
                mtime = os.stat(f"{self._base}/objects/{relative}").st_mtime
            except FileNotFoundError:
                mtime = 0.0
            if starving or now - mtime >= self.grace_seconds:
                aged.append((grp != group, mtime, key, size, relative))
        return [(key, size, relative) for *_, key, size, relative in sorted(aged)]

    def _evict(
        self, conn: sqlite3.Connection, candidates: list[tuple[str, int, str]], *, need: int | None
    ) -> tuple[int, int]:
        """Delete unpinned candidates until ``need`` bytes are freed (all when None); return the
        bytes freed and the number of files deleted."""
        freed = evicted = 0
        for key, size, relative in candidates:
            if need is not None and freed >= need:
                break
            if not _delete_unpinned(f"{self._base}/objects/{relative}"):
                continue  # pinned by a consumer: deleting it would free nothing
            conn.execute("DELETE FROM entries WHERE key = ?", (key,))
            freed += size
            evicted += 1
        if evicted:
            conn.execute(
                "UPDATE ledger SET resident = resident - ?, evictions = evictions + ?, entries = entries - ?",
                (freed, evicted, evicted),
            )
        return freed, evicted

    def _transaction(self, *, write: bool = True) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        return self._store.transaction(write=write)


# A row of the reservations table: id, pid, key, size, resident, grp, path.
_Reservation = tuple[int, int, str, int, int, str, str]


class _ProcessState:
    """What one process keeps for a cache: its folders and finished downloads not yet in the index."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self.dirs: dict[str, str] = {}
        self.pending: list[tuple[int, str, int, str, str]] = []
        self.since = 0.0


def _delete_unpinned(path: str) -> bool:
    """Delete ``path`` unless someone holds a pin (share lock) on it; True when it is gone."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return True
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        # Holding the exclusive lock: a pinner that opened the file before this unlink finds it
        # unlinked (no links left) once it gets its share lock, and treats it as a miss.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        return True
    finally:
        os.close(fd)


def _ensure_format(root: Path) -> None:
    """Empty a cache written by another version of this module (it is only a cache)."""
    marker = root / "FORMAT"
    with contextlib.suppress(FileNotFoundError):
        if marker.read_text().strip() == _FORMAT:
            return
    fd = os.open(root / "format.lock", os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with contextlib.suppress(FileNotFoundError):
            if marker.read_text().strip() == _FORMAT:
                return  # another process converted it while we waited
        for sub in (*_FOLDERS, *_OLD_FOLDERS):
            shutil.rmtree(root / sub, ignore_errors=True)
        for index in root.glob("index.db*"):
            index.unlink()
        tmp = root / f"FORMAT.{os.getpid()}"
        tmp.write_text(_FORMAT)
        os.replace(tmp, marker)
    finally:
        os.close(fd)


def _suffix(name: str) -> str:
    """The extension of ``name`` (``.png``), kept on cached files for tools that look at it; like
    ``os.path.splitext`` (leading dots start no extension). It runs per hit: the verdict on each
    distinct extension is remembered."""
    dot = name.rfind(".")
    if dot <= 0 or name[dot - 1] == ".":  # no extension, or dots before it: the rare, careful path
        return _checked_suffix(name, dot)
    tail = name[dot:]
    suffix = _SUFFIXES.get(tail)
    if suffix is None:
        suffix = _checked_suffix(name, dot)
        if len(_SUFFIXES) < _SUFFIXES_KEPT:
            _SUFFIXES[tail] = suffix
    return suffix


def _checked_suffix(name: str, dot: int) -> str:
    if dot <= 0 or len(name) - dot > 16 or not name[:dot].strip("."):
        return ""
    suffix = name[dot:]
    return suffix if len(suffix) > 1 and suffix[1:].isalnum() else ""
