"""One persistent, bounded local file cache per machine, shared by every worker, rank and kernel.

Layout under ``root`` (default ``$UC_JUPYTER_HOME/cache``)::

    index.db          entries (key, size, group) and the byte ledger (SQLite, WAL)
    objects/ab/<key>  resident files
    tmp/              partial downloads: ``<key>.<pid>.<n>``, renamed into place when complete
    stream/<pid>/     files streamed past a full cache, deleted on release
    pins/<pid>/       hard links that keep a handed-out file alive until released
    locks/ab/<key>    per-key lock files: one download per key, waiters reuse the winner's copy

Why it is built this way:

- A hit costs two system calls and no lock: ``os.link`` of the object into ``pins/`` both checks
  that the object exists and pins it, so the path handed out stays valid until ``release`` even if
  the object is evicted meanwhile (the link keeps the inode alive).
- Downloads go to ``tmp/`` and are renamed into place, so a reader never sees a partial file, even
  after ``kill -9``; the dead process's temporary files and reservations are reclaimed later.
- The byte budget and the free-disk floor are checked, under the index's write lock, *before* a
  download starts, with the download's size reserved; they are never crossed.
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
import fcntl
import hashlib
import itertools
import os
import shutil
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from uc_jupyter.processes import alive
from uc_jupyter.sqlite_store import SqliteStore

__all__ = ["CacheBudgetError", "CacheStats", "CachedFile", "FileCache", "default_cache_dir"]

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS entries ("
    " key TEXT PRIMARY KEY, size INTEGER NOT NULL, grp TEXT NOT NULL, path TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS entries_grp ON entries(grp)",
    "CREATE TABLE IF NOT EXISTS reservations ("
    " id INTEGER PRIMARY KEY, pid INTEGER NOT NULL, key TEXT NOT NULL, size INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS ledger (id INTEGER PRIMARY KEY CHECK (id = 1),"
    " resident INTEGER NOT NULL, reserved INTEGER NOT NULL, evictions INTEGER NOT NULL)",
    "INSERT OR IGNORE INTO ledger VALUES (1, 0, 0, 0)",
)
_BUSY_TIMEOUT_S = 60.0
_FORMAT = "2"  # bump when the layout or index changes: an older cache is emptied, not misread
_FOLDERS = ("objects", "tmp", "stream", "pins", "locks")
# Names of pins, streamed and temporary files: unique within a process (whose pid names the folder),
# whichever FileCache object made them.
_SEQUENCE = itertools.count()


class CacheBudgetError(OSError):
    """A file cannot be cached without crossing the byte budget or the free-disk floor."""


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
    pin: str | None = None  # the hard link that keeps a resident file from eviction


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
        wait_seconds: how long a download waits for room before CacheBudgetError.
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
        self._pid_dirs: dict[str, Path] = {}
        self._store = SqliteStore(self.root / "index.db", schema=_SCHEMA, busy_timeout=_BUSY_TIMEOUT_S)
        self.reclaim_dead()

    def __getstate__(self) -> dict[str, object]:  # travels to DataLoader workers and ranks
        state = self.__dict__.copy()
        state.pop("_pid_dirs")
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._pid_dirs = {}

    # ---------------------------------------------------------------- public
    @staticmethod
    def key(url: str, size: int | None, version: str | None) -> str:
        """The cache key of a remote file: its URL plus size and ETag or modification time, so a
        changed remote file gets a new key and is fetched again."""
        return hashlib.sha256(f"{url}\x00{size}\x00{version}".encode()).hexdigest()

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
        reserve_turn: Callable[[], contextlib.AbstractContextManager[object]] | None = None,
    ) -> CachedFile:
        """Return the file for ``key``, calling ``fetch(tmp_path)`` to download it on a miss.

        The result is pinned: call :meth:`release` when the consumer is done with it. ``name``
        (the remote file's base name) gives the handed-out path its extension. With
        ``keep=False`` a miss is only streamed through, never kept. While the budget is taken by
        files in flight, ``relieve()`` is called so the caller can release files it still holds.
        On a miss the budget is reserved inside ``reserve_turn()`` (a stream uses it to reserve in
        delivery order, so the file its consumer waits for is never starved by later ones).
        """
        hit = self._pin(key, name, size, downloaded=False)
        if hit is not None:
            return hit
        if size > self.max_bytes:
            raise CacheBudgetError(
                f"a {size}-byte file cannot fit the cache budget of {self.max_bytes} bytes ({self.root}); "
                "raise cache_max_bytes"
            )
        with self._key_lock(key):
            hit = self._pin(key, name, size, downloaded=False)  # fetched by another while we waited
            if hit is not None:
                return hit
            with reserve_turn() if reserve_turn is not None else contextlib.nullcontext():
                resident, reservation = self._reserve(key, size, group, keep=keep, relieve=relieve)
            tmp = self.root / "tmp" / f"{key}.{os.getpid()}.{next(_SEQUENCE)}"
            try:
                fetch(str(tmp))
                actual = tmp.stat().st_size
                if actual != size:
                    raise OSError(
                        f"the remote file changed while it was listed: {size} bytes were listed, "
                        f"{actual} were read; list the folder again"
                    )
                if resident:
                    target = self._object_path(key, name)
                    target.parent.mkdir(exist_ok=True)
                    os.replace(tmp, target)
                    self._commit(key, size, group, reservation, target)
                    fresh = self._pin(key, name, size, downloaded=True)
                    if fresh is None:  # pragma: no cover - the key lock keeps the object in place
                        raise OSError(f"cache object {key} vanished after it was written")
                    return fresh
                streamed = self._pid_dir("stream") / f"{next(_SEQUENCE)}{_suffix(name)}"
                os.replace(tmp, streamed)
                return CachedFile(key, str(streamed), size, resident=False, downloaded=True, reservation=reservation)
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    tmp.unlink()
                self._cancel(reservation)
                raise

    def lookup(self, key: str, size: int, *, name: str = "") -> CachedFile | None:
        """The pinned file for ``key`` when it is cached, else None (no download, no lock)."""
        return self._pin(key, name, size, downloaded=False)

    def release(self, cached: CachedFile) -> None:
        """The consumer is done with ``cached``: unpin it, or delete a streamed file."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(cached.pin if cached.resident and cached.pin else cached.path)
        if not cached.resident:
            self._cancel(cached.reservation)

    def stats(self) -> CacheStats:
        with self._transaction(write=False) as conn:
            resident, reserved, evictions = conn.execute("SELECT resident, reserved, evictions FROM ledger").fetchone()
            entries = conn.execute("SELECT count(*) FROM entries").fetchone()[0]
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
        with self._transaction() as conn:
            rows = conn.execute("SELECT key, size, path FROM entries").fetchall()
            return self._evict(conn, [(k, s, p) for k, s, p in rows], need=None)[1]

    def reclaim_dead(self) -> None:
        """Take back what processes that died (``kill -9``) left: reservations, temporary and
        streamed files, pins."""
        live_pids = {pid for pid in self._pids_in_use() if alive(pid)}
        with self._transaction() as conn:
            dead = [
                (rid, size)
                for rid, pid, size in conn.execute("SELECT id, pid, size FROM reservations")
                if pid not in live_pids
            ]
            for rid, size in dead:
                conn.execute("DELETE FROM reservations WHERE id = ?", (rid,))
                conn.execute("UPDATE ledger SET reserved = reserved - ?", (size,))
        for sub in ("stream", "pins"):
            for entry in (self.root / sub).iterdir():
                if entry.name.isdigit() and int(entry.name) not in live_pids:
                    shutil.rmtree(entry, ignore_errors=True)
        for tmp in (self.root / "tmp").iterdir():
            pid = tmp.name.split(".")[1] if tmp.name.count(".") >= 2 else ""
            if pid.isdigit() and int(pid) not in live_pids:
                with contextlib.suppress(FileNotFoundError):
                    tmp.unlink()

    # ---------------------------------------------------------------- internals
    def _object_path(self, key: str, name: str) -> Path:
        return self.root / "objects" / key[:2] / f"{key}{_suffix(name)}"

    def _pid_dir(self, kind: str) -> Path:
        folder = self._pid_dirs.get(kind)
        if folder is None or folder.name != str(os.getpid()):
            folder = self.root / kind / str(os.getpid())
            folder.mkdir(exist_ok=True)
            self._pid_dirs[kind] = folder
        return folder

    def _pin(self, key: str, name: str, size: int, *, downloaded: bool) -> CachedFile | None:
        """Pin the object with a hard link in this process's pins; None when it is not cached.

        The object's own path is handed out: eviction skips files with more than one link. If an
        evictor unlinked the object between its check and our link, the pin itself is handed out.
        """
        pin = self._pid_dir("pins") / str(next(_SEQUENCE))
        target = self._object_path(key, name)
        try:
            os.link(target, pin)
        except FileNotFoundError:
            if not pin.parent.exists():  # reclaimed by a process that thought we were dead
                self._pid_dirs.pop("pins", None)
                return self._pin(key, name, size, downloaded=downloaded)
            return None
        try:
            os.utime(target)  # recency, for evicting other groups' cold files
            path = str(target)
        except FileNotFoundError:
            path = str(pin)
        return CachedFile(key, path, size, resident=True, downloaded=downloaded, pin=str(pin))

    @contextlib.contextmanager
    def _key_lock(self, key: str) -> Iterator[None]:
        """Hold the lock file of ``key``; it is deleted on the way out, so ``locks/`` stays empty at
        rest. A waiter that wakes on a deleted file sees its inode no longer matches and retries."""
        path = os.path.join(self.root, "locks", f"{key}.lock")
        while True:
            fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                if os.stat(path).st_ino == os.fstat(fd).st_ino:
                    break
            except FileNotFoundError:
                pass
            os.close(fd)
        try:
            yield
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            os.close(fd)  # closing releases the lock

    def _reserve(
        self, key: str, size: int, group: str, *, keep: bool, relieve: Callable[[], object] | None
    ) -> tuple[bool, int | None]:
        """Reserve ``size`` bytes: (True, id) to keep the file resident, (False, id) to stream it.
        Waits while the budget is taken by files in flight; raises CacheBudgetError after
        ``wait_seconds``."""
        started = self._clock()
        deadline = started + self.wait_seconds
        delay = 0.01
        while True:
            starving = self._clock() - started >= self.starve_seconds
            with self._transaction() as conn:
                resident, reserved = conn.execute("SELECT resident, reserved FROM ledger").fetchone()
                disk_room = shutil.disk_usage(self.root).free - reserved - self.min_free_bytes
                # Resident files may take the budget less the headroom; files in flight (reserved)
                # count against both, so the budget is never crossed while downloads run.
                cap = int(self.max_bytes * (1.0 - self.headroom))
                resident_ok = keep and resident + reserved + size <= cap and size <= disk_room
                if keep and not resident_ok:
                    need = max(resident + reserved + size - cap, size - disk_room)
                    freed, _ = self._evict(conn, self._candidates(conn, group), need=need)
                    resident -= freed
                    disk_room += freed
                    resident_ok = resident + reserved + size <= cap and size <= disk_room
                fits = resident_ok or (resident + reserved + size <= self.max_bytes and size <= disk_room)
                if not fits and starving:
                    # Files in flight elsewhere hold the rest of the budget and may be waiting on
                    # this very file (a DataLoader delivers its workers' batches in turn): give
                    # up unpinned resident files, this group's included, rather than deadlock.
                    need = max(resident + reserved + size - self.max_bytes, size - disk_room)
                    freed, _ = self._evict(conn, self._candidates(conn, group, starving=True), need=need)
                    resident -= freed
                    disk_room += freed
                    fits = resident + reserved + size <= self.max_bytes and size <= disk_room
                if fits:
                    rid = conn.execute(
                        "INSERT INTO reservations (pid, key, size) VALUES (?, ?, ?)", (os.getpid(), key, size)
                    ).lastrowid
                    conn.execute("UPDATE ledger SET reserved = reserved + ?", (size,))
                    return resident_ok, rid
            if self._clock() >= deadline:
                raise CacheBudgetError(
                    f"cache {self.root}: no room for a {size}-byte file within the budget of "
                    f"{self.max_bytes} bytes and the free-disk floor of {self.min_free_bytes} bytes "
                    f"({disk_room + size} bytes usable on disk); raise cache_max_bytes, lower "
                    "min_free_bytes or prefetch, or free disk space"
                )
            if relieve is not None:
                relieve()
            self.reclaim_dead()
            self._sleep(delay)
            delay = min(delay * 2, 0.5)

    def _commit(self, key: str, size: int, group: str, reservation: int | None, target: Path) -> None:
        relative = target.relative_to(self.root / "objects").as_posix()
        with self._transaction() as conn:
            conn.execute("DELETE FROM reservations WHERE id = ?", (reservation,))
            conn.execute("INSERT OR REPLACE INTO entries VALUES (?, ?, ?, ?)", (key, size, group, relative))
            conn.execute("UPDATE ledger SET reserved = reserved - ?, resident = resident + ?", (size, size))

    def _cancel(self, reservation: int | None) -> None:
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
                mtime = (self.root / "objects" / relative).stat().st_mtime
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
            path = self.root / "objects" / relative
            try:
                if path.stat().st_nlink > 1:
                    continue  # pinned by a consumer: deleting it would free nothing
                path.unlink()
            except FileNotFoundError:
                pass
            conn.execute("DELETE FROM entries WHERE key = ?", (key,))
            freed += size
            evicted += 1
        if evicted:
            conn.execute("UPDATE ledger SET resident = resident - ?, evictions = evictions + ?", (freed, evicted))
        return freed, evicted

    def _pids_in_use(self) -> set[int]:
        pids = {int(e.name) for sub in ("stream", "pins") for e in (self.root / sub).iterdir() if e.name.isdigit()}
        with self._transaction(write=False) as conn:
            pids |= {pid for (pid,) in conn.execute("SELECT DISTINCT pid FROM reservations")}
        for tmp in (self.root / "tmp").iterdir():
            parts = tmp.name.split(".")
            if len(parts) >= 3 and parts[1].isdigit():
                pids.add(int(parts[1]))
        return pids

    def _transaction(self, *, write: bool = True) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        return self._store.transaction(write=write)


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
        for sub in _FOLDERS:
            shutil.rmtree(root / sub, ignore_errors=True)
        for index in root.glob("index.db*"):
            index.unlink()
        tmp = root / f"FORMAT.{os.getpid()}"
        tmp.write_text(_FORMAT)
        os.replace(tmp, marker)
    finally:
        os.close(fd)


def _suffix(name: str) -> str:
    """The extension of ``name`` (``.png``), kept on cached files for tools that look at it."""
    suffix = os.path.splitext(name)[1]
    return suffix if 1 < len(suffix) <= 16 and suffix[1:].isalnum() else ""
