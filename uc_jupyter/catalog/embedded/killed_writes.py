"""Appends and overwrites of a table killed half-way (``kill -9``), and the removal of the files they left.

deltalake writes a table's new Parquet files first and names them in one commit last: a writer killed
in between leaves files no commit names, which readers never see and nothing removed (hundreds of
megabytes for a large append). So each write of an existing table records itself before its first
file (the table, its location, the stamp of its process, :func:`uc_jupyter.processes.stamp`, and
when it began) and deletes the record when it ends, however it ends short of a kill. The next write
of that table, holding the table's entry lock (so no other embedded write of it runs), finds the
records whose process is gone and removes the files that no commit names and that were written
since the earliest of them began (:func:`uc_jupyter.catalog.delta_files.remove_unreferenced`); then
the records. ``uc-jupyter gc`` does the same for every table (:meth:`KilledWrites.remove_killed_writes`).

A record whose process cannot be judged (another machine sharing the home) is left for later. A
Delta writer outside this catalog (a client of ``uc-jupyter serve`` writing with vended credentials)
takes no entry lock: a table written by such a client at the moment an embedded write of it was
killed may lose that client's uncommitted files, and its commit then fails naming them.

Example:
    >>> cat.create_table("main.ml.t", more, mode="append")   # removes what a killed append left  # doctest: +SKIP
    >>> cat.remove_killed_writes()                           # every table's (uc-jupyter gc)       # doctest: +SKIP
    [('main.ml.t', 'part-00001-....snappy.parquet', 104883741)]
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import time
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from uc_jupyter.catalog.delta_files import remove_unreferenced
from uc_jupyter.catalog.embedded.metastore import Metastore
from uc_jupyter.catalog.rules.privileges import SecurableKind
from uc_jupyter.processes import stamp, stamp_alive

__all__ = ["TABLE_WRITES_SQL", "KilledWrites"]

log = logging.getLogger("uc_jupyter.catalog.embedded.local")

TABLE_WRITES_SQL = """
CREATE TABLE IF NOT EXISTS table_writes (
    id TEXT PRIMARY KEY,
    key TEXT NOT NULL,                 -- the table's entry key (main.ml.t): its entry lock
    location TEXT NOT NULL,
    writer TEXT NOT NULL,              -- processes.stamp() of the writing process
    began REAL NOT NULL                -- epoch seconds, before its first file
);
"""
_SLACK_S = 2.0  # file times are coarser than the clock on some file systems: a little earlier than began


class KilledWrites(Metastore):
    """The killed-writes half of :class:`uc_jupyter.catalog.embedded.local.LocalCatalog` (see the module)."""

    @contextlib.contextmanager
    def _recorded_write(self, key: str, location: str, options: dict[str, Any]) -> Iterator[None]:
        """Around one write of the table ``key`` at ``location``, under its entry lock: first remove
        what killed writes of it left, then record this one for the block."""
        self._remove_killed(key, location, options)
        record = uuid.uuid4().hex
        with self._transaction(write=True) as conn:
            conn.execute(
                "INSERT INTO table_writes VALUES (?, ?, ?, ?, ?)", (record, key, location, stamp(), time.time())
            )
        try:
            yield
        finally:
            with self._transaction(write=True) as conn:
                conn.execute("DELETE FROM table_writes WHERE id = ?", (record,))

    def remove_killed_writes(self) -> list[tuple[str, str, int]]:
        """Remove what killed writes of every table left (each under its entry lock); return the
        (table, file key, bytes) of each file removed.

        Example:
            >>> cat.remove_killed_writes()  # doctest: +SKIP
            []
        """
        with self._transaction() as conn:
            tables = [row[0] for row in conn.execute("SELECT DISTINCT key FROM table_writes")]
        removed: list[tuple[str, str, int]] = []
        for key in tables:
            with self._locks.hold([key], what=f"table {key}"):
                with self._transaction(write=True) as conn:
                    row = conn.execute(
                        "SELECT * FROM securables WHERE key = ? AND kind = ?", (key, SecurableKind.TABLE)
                    ).fetchone()
                    location = row["storage_location"] if row is not None else None
                    options = self._storage_options_of(conn, row) if row is not None else {}
                    # Writes of a table since dropped (its storage went with it, or is the sweep's): forgotten.
                    for record in conn.execute(
                        "SELECT id, writer FROM table_writes WHERE key = ? AND location IS NOT ?", (key, location)
                    ).fetchall():
                        if stamp_alive(record["writer"]) is False:
                            conn.execute("DELETE FROM table_writes WHERE id = ?", (record["id"],))
                if location is not None:
                    removed.extend((key, name, size) for name, size in self._remove_killed(key, location, options))
        return removed

    if TYPE_CHECKING:

        def _storage_options_of(self, conn: sqlite3.Connection, row: sqlite3.Row) -> dict[str, Any]: ...

    def _remove_killed(self, key: str, location: str, options: dict[str, Any]) -> list[tuple[str, int]]:
        """With the entry lock of ``key`` held: remove the files killed writes at ``location`` left."""
        with self._transaction() as conn:
            rows = conn.execute(
                "SELECT id, writer, began FROM table_writes WHERE key = ? AND location = ?", (key, location)
            ).fetchall()
        dead = [row for row in rows if stamp_alive(row["writer"]) is False]
        if not dead:
            return []
        try:
            removed = remove_unreferenced(location, options, since=min(row["began"] for row in dead) - _SLACK_S)
        except Exception as exc:  # the write that asked goes on; the records stay for the next one
            log.warning("could not remove what a killed write of table %s left: %s", key, exc)
            return []
        with self._transaction(write=True) as conn:
            conn.executemany("DELETE FROM table_writes WHERE id = ?", [(row["id"],) for row in dead])
        if removed:
            log.warning(
                "table %s: removed %d file(s), %d bytes, a killed write left",
                key,
                len(removed),
                sum(s for _, s in removed),
            )
        return removed
