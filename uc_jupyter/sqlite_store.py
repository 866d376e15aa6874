"""One SQLite database shared by several threads and processes: the metastore, the cache index.

Each thread of each process gets its own connection (connections must not cross a fork), every
transaction is explicit (``BEGIN IMMEDIATE`` for writers, so two writers never deadlock on a lock
upgrade), and waits for a busy database up to a timeout. WAL mode, which lets readers run beside a
writer, is switched on once per database file and retried: SQLite does not apply the busy timeout
to that statement, so processes opening a fresh database together would otherwise fail.

A damaged file (not a database, a malformed page) raises :class:`CorruptDatabase`: one line naming
the file and what its owner says to do, instead of sqlite3's bare ``DatabaseError``. The file is
created with mode 0600 (its folder should be 0700): nothing in it is for other OS users.

Example:
    >>> import tempfile, os
    >>> store = SqliteStore(os.path.join(tempfile.mkdtemp(), "x.db"), schema=["CREATE TABLE t (v)"])
    >>> with store.transaction() as conn:
    ...     _ = conn.execute("INSERT INTO t VALUES (1)")
    >>> with store.transaction(write=False) as conn:
    ...     conn.execute("SELECT v FROM t").fetchall()
    [(1,)]
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

__all__ = ["CorruptDatabase", "SqliteStore"]


class CorruptDatabase(OSError):
    """The database file is damaged or is not a SQLite database; the message names it and says
    what to do (``remedy``)."""

    def __init__(self, path: Path, detail: str, remedy: str) -> None:
        super().__init__(f"{path} is damaged ({detail}); {remedy}")
        self.path = path
        self.detail = detail
        self.remedy = remedy

    def __reduce__(self) -> tuple[object, ...]:  # keep the fields when crossing a process boundary
        return (type(self), (self.path, self.detail, self.remedy))


def _is_corruption(exc: sqlite3.DatabaseError) -> bool:
    """sqlite3 raises plain DatabaseError for a file that is not a database and for malformed pages;
    its subclasses (OperationalError: locked, busy; IntegrityError) are about the statement."""
    text = str(exc).lower()
    return type(exc) is sqlite3.DatabaseError or "malformed" in text or "not a database" in text


class SqliteStore:
    """Per-thread, per-process connections to the database at ``path`` and explicit transactions.

    ``schema`` statements run once, in one write transaction, when the store is created (use
    ``IF NOT EXISTS`` forms: every process runs them). ``remedy`` ends the message of a
    :class:`CorruptDatabase` (what the owner of this file should do about a damaged one). ``pragmas`` run
    on every connection it opens (per-connection settings, such as how long the write-ahead log may grow).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        schema: Sequence[str] = (),
        busy_timeout: float = 60.0,
        foreign_keys: bool = False,
        remedy: str = "move it away and start again",
        pragmas: Sequence[str] = (),
    ) -> None:
        self.path = Path(path)
        self.pragmas = tuple(pragmas)  # run on every connection (per-connection settings)
        self.busy_timeout = busy_timeout
        self.foreign_keys = foreign_keys
        self.remedy = remedy
        self._local = threading.local()
        with self._translating():
            self._enable_wal()
        if schema:
            with self.transaction() as conn:
                for statement in schema:
                    conn.execute(statement)

    def __getstate__(self) -> dict[str, object]:
        state = self.__dict__.copy()
        state.pop("_local")
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._local = threading.local()

    @contextlib.contextmanager
    def transaction(self, *, write: bool = True) -> Iterator[sqlite3.Connection]:
        """One transaction, committed on success and rolled back on any exception."""
        with self._translating():
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield conn
            except BaseException:
                with contextlib.suppress(sqlite3.Error):  # a damaged file may refuse the rollback too
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    @contextlib.contextmanager
    def _translating(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.DatabaseError as exc:
            if _is_corruption(exc):
                raise CorruptDatabase(self.path, str(exc), self.remedy) from exc
            raise

    def _connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None or getattr(self._local, "pid", None) != os.getpid():
            conn = self._connect()
            self._local.conn, self._local.pid = conn, os.getpid()
        return conn

    def _connect(self) -> sqlite3.Connection:
        if not self.path.exists():
            # Created private before SQLite opens it (SQLite would honour the umask: often 0644).
            with contextlib.suppress(FileExistsError):
                os.close(os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_CLOEXEC, 0o600))
        conn = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None)
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
        conn.execute("PRAGMA synchronous = NORMAL")
        if self.foreign_keys:
            conn.execute("PRAGMA foreign_keys = ON")
        for pragma in self.pragmas:
            conn.execute(pragma)
        return conn

    def _enable_wal(self) -> None:
        deadline = time.monotonic() + self.busy_timeout
        delay = 0.005
        while True:
            conn = self._connection()
            try:
                if conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal":
                    return
                conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.2)
