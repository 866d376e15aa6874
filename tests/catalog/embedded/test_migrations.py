"""Bringing an older metastore up to date: ids back-filled as the server derived them before ids were
stored (no id a client saw changes), the creator back-filled from the owner, and every step harmless
to repeat (several processes opening one home at once each run it)."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timezone
from typing import Any

from uc_jupyter.catalog.embedded.migrations import migrate
from uc_jupyter.catalog.wire.shapes import object_id

CREATED = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


def _old_metastore() -> sqlite3.Connection:
    """A metastore as homes older than stored ids held it: no id, no audit columns, no staging."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.row_factory = sqlite3.Row
    conn.execute("CREATE TABLE securables (key TEXT PRIMARY KEY, kind TEXT, owner TEXT, created_at TEXT)")
    conn.execute("CREATE TABLE storage_credentials (name TEXT PRIMARY KEY, owner TEXT, created_at TEXT)")
    conn.execute("INSERT INTO securables VALUES ('main.ml', 'schema', 'alice', ?)", (CREATED.isoformat(),))
    conn.execute("INSERT INTO securables VALUES ('main', 'catalog', 'bob', ?)", (CREATED.isoformat(),))
    conn.execute("INSERT INTO storage_credentials VALUES ('lake', 'admin', ?)", (CREATED.isoformat(),))
    return conn


def _rows(conn: sqlite3.Connection, table: str, name: str) -> dict[str, tuple[Any, ...]]:
    found = conn.execute(f"SELECT {name}, id, created_by, updated_at, updated_by FROM {table}").fetchall()
    return {row[0]: tuple(row[1:]) for row in found}


def test_ids_are_back_filled_as_they_were_derived_and_the_creator_is_the_owner() -> None:
    conn = _old_metastore()
    migrate(conn)
    assert _rows(conn, "securables", "key") == {
        "main.ml": (object_id("schema", "main.ml", CREATED), "alice", None, None),
        "main": (object_id("catalog", "main", CREATED), "bob", None, None),
    }
    assert _rows(conn, "storage_credentials", "name") == {
        "lake": (object_id("storage_credential", "lake", CREATED), "admin", None, None),
    }
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "staging_tables" in tables and "external_locations" not in tables  # absent tables stay absent


def test_migrating_again_changes_nothing_and_keeps_stored_ids() -> None:
    conn = _old_metastore()
    migrate(conn)
    conn.execute("UPDATE securables SET id = 'stored-uuid', updated_by = 'carol' WHERE key = 'main'")
    before = _rows(conn, "securables", "key"), _rows(conn, "storage_credentials", "name")
    migrate(conn)
    assert (_rows(conn, "securables", "key"), _rows(conn, "storage_credentials", "name")) == before
    assert before[0]["main"][0] == "stored-uuid"


def test_ids_are_unique_once_migrated() -> None:
    conn = _old_metastore()
    migrate(conn)
    indexes = {row[1] for row in conn.execute("PRAGMA index_list(securables)") if row[2]}
    assert "securables_id" in indexes
