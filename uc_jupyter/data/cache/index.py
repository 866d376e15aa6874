"""The cache's index as one process uses it: transactions, this process's bookkeeping not yet written,
and recovery of an index that is lost or damaged.

Writes are batched: finished downloads, groups' last use, re-checked fingerprints and reservations
to give back are kept in this process (:class:`Bookkeeping`) and written by its next transaction,
or by a timer within a quarter of a second, so that a stream pays one transaction per window of
files rather than one per file. Until then this process knows its own downloads' records. The timer
is the cache's to inject (:data:`Timer`): tests run it on their own clock.

An index that cannot be read (``index.db`` deleted, or damaged: :class:`CorruptDatabase`) is
replaced by a new one rebuilt from the objects on disk (:func:`~uc_jupyter.data.cache.ledger.rebuild`),
with one :class:`~uc_jupyter.data.cache.errors.CacheIntegrityWarning`: at opening, and when a
transaction meets the damage later (the work is then run again once, on the new index).

Example:
    >>> import tempfile, pathlib
    >>> from uc_jupyter.data.cache import layout
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> with layout.locked(root):
    ...     layout.prepare(root)
    ...     index = Index(root)
    >>> index.run(lambda conn: conn.execute("SELECT entries FROM ledger").fetchone()[0], write=False)
    0
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import sqlite3
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from uc_jupyter.data.cache import disk, layout, ledger
from uc_jupyter.data.cache.errors import CacheIntegrityWarning
from uc_jupyter.data.cache.integrity import Fingerprint
from uc_jupyter.data.cache.ledger import Finished, Record, Stamp
from uc_jupyter.sqlite_store import CorruptDatabase, SqliteStore

__all__ = ["FLUSH_SECONDS", "Bookkeeping", "Index", "Timer", "start_timer"]

T = TypeVar("T")
# Starts calling a function once, after a delay in seconds, on some thread of this process.
Timer = Callable[[float, Callable[[], None]], None]

_BUSY_TIMEOUT_S = 60.0
FLUSH_SECONDS = 0.25  # the longest a finished download waits to be entered (by a timer)
_REMEDY = "delete it with its -wal and -shm files: the next FileCache rebuilds the index from the cached files"
_SQLITE_FULL = 13  # sqlite3.SQLITE_FULL, which typeshed does not list


class Index:
    """The index of the cache at ``root`` (open it under :func:`~uc_jupyter.data.cache.layout.locked`).

    Args:
        root: the cache folder.
        clock: the cache's clock (entries rebuilt from the disk are stamped with it).
        timer: starts the flush of finished downloads :data:`FLUSH_SECONDS` after the first is queued
            (default: a daemon thread's timer, :func:`start_timer`).
    """

    def __init__(self, root: Path, clock: Callable[[], float] = time.time, timer: Timer | None = None) -> None:
        self.root = root
        self._base = str(root)
        self._clock = clock
        self._timer = timer or start_timer
        self.block = disk.allocation_unit(self._base)  # what the file system allocates files in
        self._local = Bookkeeping()
        self._store, self._identity = self._open(lost_why=None)

    def __getstate__(self) -> dict[str, object]:  # travels with the cache to workers and ranks
        state = self.__dict__.copy()
        state.pop("_local")
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._local = Bookkeeping()

    # ---------------------------------------------------------------- transactions
    def local(self) -> Bookkeeping:
        """This process's bookkeeping (a forked child starts its own: the parent's is the parent's)."""
        local = self._local
        if local.pid != os.getpid():
            local = self._local = Bookkeeping()
        return local

    def write(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` in a write transaction that first writes this process's bookkeeping."""
        local = self.local()
        with local.taken() as batch:

            def both(conn: sqlite3.Connection) -> T:
                batch.write(conn)
                return work(conn)

            return self.run(both, write=True)

    def flush(self) -> None:
        """Write this process's bookkeeping now, if it has any."""
        if self.local().has_work():
            self.write(lambda conn: None)

    def run(self, work: Callable[[sqlite3.Connection], T], *, write: bool) -> T:
        """Run ``work`` in one transaction. A damaged index is rebuilt and the work run again; a
        full disk is an OSError (ENOSPC) naming the cache."""
        for attempt in range(2):
            store = self._store
            try:
                with store.transaction(write=write) as conn:
                    return work(conn)
            except CorruptDatabase as exc:
                if attempt:
                    raise
                self._recover(store, exc)
            except sqlite3.OperationalError as exc:
                if getattr(exc, "sqlite_errorcode", None) == _SQLITE_FULL:
                    full = f"the disk holding the cache {self.root} is full (its index cannot grow); free disk space"
                    raise OSError(errno.ENOSPC, full) from exc
                raise
        raise AssertionError("unreachable: the second attempt returns or raises")

    def give_back(self, reservation: int) -> None:
        """Cancel a reservation; when the index cannot be written (a full disk), the next
        transaction does it (and, should this process end first, the next process reclaims it)."""
        try:
            self.write(lambda conn: ledger.cancel(conn, [reservation]))
        except (OSError, sqlite3.Error):
            local = self.local()
            with local.lock:
                local.owed.append(reservation)

    def later(self, done: Finished) -> None:
        """Queue a finished download for the next transaction, and a timer that writes it within
        :data:`FLUSH_SECONDS` whatever this process does meanwhile: other processes waiting for the
        file see it only once it is in the index, and a consumer may pause mid-stream."""
        local = self.local()
        with local.lock:
            local.queue(done)
            start = not local.timed
            local.timed = True
        if start:  # outside the lock: an injected timer may run the flush at once
            self._timer(FLUSH_SECONDS, functools.partial(self._timed_flush, local))

    def _timed_flush(self, local: Bookkeeping) -> None:
        with local.lock:
            local.timed = False
        if local is self._local:
            with contextlib.suppress(Exception):  # kept for the next transaction, which retries it
                self.flush()

    # ---------------------------------------------------------------- opening and recovery
    def _open(self, *, lost_why: str | None) -> tuple[SqliteStore, tuple[int, int]]:
        """Open the index (under the folder lock), rebuilding it from the objects when it is missing
        or damaged; the store and the index file's identity (device, inode)."""
        path = self.root / layout.INDEX
        why = lost_why
        if os.path.islink(path) or not os.path.exists(path):
            # A symlink is never followed (it could point the index at another database), and a
            # -wal left beside a missing index would be replayed into the new one.
            layout.remove_index(self.root)
            why = why or "missing"
        try:
            store = self._connect(path)
            rebuilt = self._ledger_of(store)
        except CorruptDatabase as exc:
            layout.remove_index(self.root)
            why = f"damaged ({exc.detail})"
            store = self._connect(path)
            rebuilt = self._ledger_of(store)
        if rebuilt is not None and why is not None and (rebuilt[0] or why != "missing"):
            count, total = rebuilt
            warnings.warn(
                f"cache index {path} was {why}: rebuilt it empty and removed the {count} cached files ({total} "
                "bytes) it held, since nothing proves their bytes without it; they download again when next read",
                CacheIntegrityWarning,
                stacklevel=5,
            )
        found = os.stat(path)
        return store, (found.st_dev, found.st_ino)

    def _connect(self, path: Path) -> SqliteStore:
        # The log is kept short (disk.PRAGMAS): the budget counts it, and SQLite's default lets it
        # reach 4 MB and never shrinks the file.
        return SqliteStore(
            path, schema=ledger.SCHEMA, busy_timeout=_BUSY_TIMEOUT_S, remedy=_REMEDY, pragmas=disk.PRAGMAS
        )

    def _ledger_of(self, store: SqliteStore) -> tuple[int, int] | None:
        """Make the ledger of a new index and enter the objects on disk; (objects, bytes) entered,
        or None when the index had its ledger."""
        with store.transaction() as conn:
            if not ledger.create_ledger(conn, block=self.block):
                return None
            return ledger.rebuild(conn, self._base, now=self._clock())

    def _recover(self, store: SqliteStore, exc: CorruptDatabase) -> None:
        """The index turned out damaged while in use: rebuild it, unless another thread or process
        did already (then only reconnect)."""
        with layout.locked(self.root):
            if self._store is not store:
                return  # another thread of this process recovered it
            try:
                found = os.stat(self.root / layout.INDEX)
                same = (found.st_dev, found.st_ino) == self._identity
            except FileNotFoundError:
                same = False
            if same:
                layout.remove_index(self.root)
            self._store, self._identity = self._open(lost_why=f"damaged ({exc.detail})" if same else None)


def start_timer(seconds: float, work: Callable[[], None]) -> None:
    """Run ``work`` once after ``seconds`` on a daemon thread (the default :data:`Timer`)."""
    timer = threading.Timer(seconds, work)
    timer.daemon = True
    timer.start()


@dataclass
class _Batch:
    """Bookkeeping one transaction writes."""

    pending: list[Finished]
    used: dict[str, float]
    checked: dict[str, tuple[bytes | None, bytes, Fingerprint]]
    owed: list[int]

    def write(self, conn: sqlite3.Connection) -> None:
        if self.owed:
            ledger.cancel(conn, self.owed)
        if self.pending:
            ledger.commit(conn, self.pending)
        if self.checked:
            ledger.refresh(conn, self.checked)
        if self.used:
            ledger.use_groups(conn, self.used)


@dataclass
class Bookkeeping:
    """What one process keeps for a cache and has not written to the index yet, and what it knows."""

    pid: int = field(default_factory=os.getpid)
    lock: threading.Lock = field(default_factory=threading.Lock)
    dirs: dict[str, str] = field(default_factory=dict)  # this process's stream/ folder
    pending: list[Finished] = field(default_factory=list)  # downloads in place, not entered yet
    fresh: dict[str, Record] = field(default_factory=dict)  # their records, for this process's hits
    stamps: dict[str, Stamp] = field(default_factory=dict)  # index stamps read before (see FileCache)
    used: dict[str, float] = field(default_factory=dict)  # group -> when a pass last used it
    checked: dict[str, tuple[bytes | None, bytes, Fingerprint]] = field(default_factory=dict)
    owed: list[int] = field(default_factory=list)  # reservations to give back (the index was full)
    timed: bool = False  # a flush is set to run (see Index.later)

    def has_work(self) -> bool:
        return bool(self.pending or self.used or self.checked or self.owed)

    def queue(self, done: Finished) -> None:
        """(Under ``lock``.) A finished download, and its record for this process's hits."""
        self.pending.append(done)
        self.fresh[done.key] = done.record

    def forget(self, key: str, record: Record) -> list[Finished]:
        """(Under ``lock``.) Drop a download of this process not entered yet whose object turned out
        damaged; the downloads dropped (their reservations are the caller's to give back)."""
        if self.fresh.get(key) is not record:
            return []
        del self.fresh[key]
        gone = [done for done in self.pending if done.key == key]
        self.pending = [done for done in self.pending if done.key != key]
        return gone

    @contextlib.contextmanager
    def taken(self) -> Iterator[_Batch]:
        """The bookkeeping, taken for one transaction; put back if it fails."""
        with self.lock:
            batch = _Batch(self.pending, self.used, self.checked, self.owed)
            self.pending, self.used, self.checked, self.owed = [], {}, {}, []
        try:
            yield batch
        except BaseException:
            with self.lock:
                self.pending[:0] = batch.pending
                self.used = {**batch.used, **self.used}
                self.checked = {**batch.checked, **self.checked}
                self.owed[:0] = batch.owed
            raise
        if batch.pending:
            with self.lock:
                for done in batch.pending:
                    if self.fresh.get(done.key) is done.record:
                        del self.fresh[done.key]
