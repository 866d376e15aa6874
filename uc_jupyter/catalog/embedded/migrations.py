"""Bringing an older metastore up to date: stored ids, audit columns, staging tables.

Each step runs inside the write transaction that opens the catalog, checks before it changes, and is
harmless to repeat, so several processes opening one home at once (each runs :func:`migrate`) agree:
the first one through ``BEGIN IMMEDIATE`` migrates, the others find nothing to do.

- ``id`` on ``securables``, ``storage_credentials`` and ``external_locations``: a new object gets a
  uuid4; an existing one is back-filled with the id the server derived for it before ids were stored
  (:func:`uc_jupyter.catalog.wire.shapes.object_id` of kind, key and creation time), so no id a client saw
  changes. Unique indexes make the by-id lookups one probe.
- ``created_by`` (back-filled with the owner, as the ids were derived), ``updated_at`` and
  ``updated_by`` (NULL until the first update: readers then show the creation's values, as UC does).
- ``staging_tables``: managed tables being created through the API (:mod:`uc_jupyter.catalog.embedded.staging`).

Example:
    >>> import sqlite3
    >>> conn = sqlite3.connect(":memory:"); conn.row_factory = sqlite3.Row
    >>> _ = conn.execute("CREATE TABLE storage_credentials (name TEXT PRIMARY KEY, owner TEXT, created_at TEXT)")
    >>> migrate(conn)
    >>> [r[1] for r in conn.execute("PRAGMA table_info(storage_credentials)")][-4:]
    ['id', 'created_by', 'updated_at', 'updated_by']
"""

from __future__ import annotations

import sqlite3
from datetime import datetime

__all__ = ["STAGING_SCHEMA_SQL", "migrate"]

STAGING_SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS staging_tables (
    id TEXT PRIMARY KEY,               -- becomes the table's id when it is registered
    key TEXT NOT NULL,                 -- the table it will be (lower-case parts joined by '.')
    location TEXT NOT NULL UNIQUE,     -- managed storage under storage/tables/, owned by this row
    owner TEXT NOT NULL,               -- who created it: only they may write there and register it
    created_at TEXT NOT NULL,
    expires_at REAL NOT NULL           -- epoch seconds: after it the sweep removes row and storage
);
CREATE INDEX IF NOT EXISTS staging_tables_expires ON staging_tables(expires_at);
"""
# Each table with stored ids, and the column holding its objects' names.
_ID_TABLES = {
    "securables": "key",
    "storage_credentials": "name",
    "external_locations": "name",
}
_AUDIT_COLUMNS = ("id", "created_by", "updated_at", "updated_by")


def migrate(conn: sqlite3.Connection) -> None:
    """Add what newer code needs to the metastore open in ``conn`` (inside a write transaction)."""
    for statement in STAGING_SCHEMA_SQL.split(";"):
        if statement.strip():
            conn.execute(statement)
    for table, name_column in _ID_TABLES.items():
        present = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
        if not present:
            continue  # not created (a doctest's partial metastore)
        for column in _AUDIT_COLUMNS:
            if column not in present:
                conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} TEXT")
        _backfill(conn, table, name_column)
        conn.execute(f"CREATE UNIQUE INDEX IF NOT EXISTS {table}_id ON {table}(id)")


def _backfill(conn: sqlite3.Connection, table: str, name_column: str) -> None:
    from uc_jupyter.catalog.wire.shapes import object_id  # wire imports the dataclasses only; no cycle at call time

    rows = conn.execute(
        f"SELECT {name_column} AS name, owner, created_at, "
        + ("kind" if table == "securables" else "NULL AS kind")
        + f" FROM {table} WHERE id IS NULL OR created_by IS NULL"
    ).fetchall()
    for row in rows:
        kind = row["kind"] or table.rstrip("s")
        derived = object_id(kind, row["name"], datetime.fromisoformat(row["created_at"]))
        conn.execute(
            f"UPDATE {table} SET id = coalesce(id, ?), created_by = coalesce(created_by, ?) WHERE {name_column} = ?",
            (derived, row["owner"], row["name"]),
        )
