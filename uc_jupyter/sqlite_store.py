"""One SQLite database shared by several threads and processes: the metastore, the cache index.

Each thread of each process gets its own connection (connections must not cross a fork), every
transaction is explicit (``BEGIN IMMEDIATE`` for writers, so two writers never deadlock on a lock
upgrade), and waits for a busy database up to a timeout. WAL mode, which lets readers run beside a
writer, is switched on once per database file and retried: SQLite does not apply the busy timeout
to that statement, so processes opening a fresh database together would otherwise fail.

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

__all__ = ["SqliteStore"]


class SqliteStore:
    """Per-thread, per-process connections to the database at ``path`` and explicit transactions.

    ``schema`` statements run once, in one write transaction, when the store is created (use
    ``IF NOT EXISTS`` forms: every process runs them).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        schema: Sequence[str] = (),
        busy_timeout: float = 60.0,
        foreign_keys: bool = False,
    ) -> None:
        self.path = Path(path)
        self.busy_timeout = busy_timeout
        self.foreign_keys = foreign_keys
        self._local = threading.local()
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
        conn = self._connection()
        conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def _connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None or getattr(self._local, "pid", None) != os.getpid():
            conn = self._connect()
            self._local.conn, self._local.pid = conn, os.getpid()
        return conn

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None)
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
        conn.execute("PRAGMA synchronous = NORMAL")
        if self.foreign_keys:
            conn.execute("PRAGMA foreign_keys = ON")
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
