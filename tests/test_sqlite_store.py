"""SqliteStore, the one SQLite database shared by threads and processes (the metastore, the secret
store and the cache index build on it): explicit transactions, a private file, per-thread and
per-process connections, one-line errors for a damaged file, and writers in several processes."""

from __future__ import annotations

import multiprocessing
import pickle
import sqlite3
import stat
import threading
from pathlib import Path

import pytest

from uc_jupyter.sqlite_store import CorruptDatabase, SqliteStore

SCHEMA = ["CREATE TABLE IF NOT EXISTS t (v INTEGER)"]


def _values(store: SqliteStore) -> list[int]:
    with store.transaction(write=False) as conn:
        return [row["v"] for row in conn.execute("SELECT v FROM t ORDER BY v")]


def test_a_transaction_commits_on_success_and_rolls_back_on_any_exception(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "x.db", schema=SCHEMA)
    with store.transaction() as conn:
        conn.execute("INSERT INTO t VALUES (1)")

    def interrupted() -> None:
        with store.transaction() as conn:
            conn.execute("INSERT INTO t VALUES (2)")
            raise KeyboardInterrupt  # not an Exception: rolled back all the same

    with pytest.raises(KeyboardInterrupt):
        interrupted()
    assert _values(store) == [1]


def test_the_file_is_private_and_in_wal_mode(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "x.db", schema=SCHEMA)
    assert stat.S_IMODE((tmp_path / "x.db").stat().st_mode) == 0o600
    with store.transaction(write=False) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_pragmas_and_foreign_keys_hold_on_every_connection(tmp_path: Path) -> None:
    store = SqliteStore(
        tmp_path / "x.db",
        schema=[
            "CREATE TABLE IF NOT EXISTS p (id INTEGER PRIMARY KEY)",
            "CREATE TABLE IF NOT EXISTS c (p REFERENCES p)",
        ],
        foreign_keys=True,
        pragmas=["PRAGMA cache_size = -1234"],
    )
    seen: list[tuple[int, int]] = []

    def look() -> None:  # another thread: a connection of its own
        with store.transaction(write=False) as conn:
            pragma = [conn.execute(f"PRAGMA {name}").fetchone()[0] for name in ("cache_size", "foreign_keys")]
            seen.append((pragma[0], pragma[1]))

    thread = threading.Thread(target=look)
    thread.start()
    thread.join()
    look()
    assert seen == [(-1234, 1), (-1234, 1)]
    with pytest.raises(sqlite3.IntegrityError), store.transaction() as conn:
        conn.execute("INSERT INTO c VALUES (7)")


def test_each_thread_has_its_own_connection(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "x.db", schema=SCHEMA)
    connections: list[sqlite3.Connection] = []

    def take() -> None:
        with store.transaction(write=False) as conn:
            connections.append(conn)

    take()
    take()
    thread = threading.Thread(target=take)
    thread.start()
    thread.join()
    assert connections[0] is connections[1] and connections[2] is not connections[0]


def _insert(store: SqliteStore, start: int) -> None:
    for v in range(start, start + 50):
        with store.transaction() as conn:
            conn.execute("INSERT INTO t VALUES (?)", (v,))


def test_writers_in_several_processes_lose_nothing(tmp_path: Path) -> None:
    """A pickled store opens its own connection in the process it arrives in (connections must not cross
    a fork or a pickle); BEGIN IMMEDIATE and the busy timeout serialise the writers."""
    store = SqliteStore(tmp_path / "x.db", schema=SCHEMA)
    _values(store)  # this process holds a connection before the children start
    revived = pickle.loads(pickle.dumps(store))
    assert revived.path == store.path and revived.busy_timeout == store.busy_timeout
    context = multiprocessing.get_context("fork")
    children = [context.Process(target=_insert, args=(store, start)) for start in (0, 50, 100)]
    for child in children:
        child.start()
    _insert(revived, 150)
    for child in children:
        child.join(timeout=60)
        assert child.exitcode == 0
    assert _values(store) == list(range(200))


@pytest.mark.parametrize("content", [b"this is no database, just text" * 100, b"SQLite format 3\x00" + b"\xff" * 4080])
def test_a_damaged_file_is_one_line_naming_it_and_the_remedy(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "x.db"
    path.write_bytes(content)
    with pytest.raises(CorruptDatabase) as caught:
        SqliteStore(path, schema=SCHEMA, remedy="run `uc-jupyter repair`")
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{path} is damaged (")
    assert message.endswith("; run `uc-jupyter repair`")
    again = pickle.loads(pickle.dumps(caught.value))  # it crosses a process boundary whole
    assert (again.path, again.detail, again.remedy) == (path, caught.value.detail, caught.value.remedy)


def test_statement_errors_stay_sqlite_errors(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "x.db", schema=SCHEMA)
    with pytest.raises(sqlite3.OperationalError, match="no such table"), store.transaction() as conn:
        conn.execute("SELECT * FROM missing")
