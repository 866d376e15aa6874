"""uc_jupyter.catalog.embedded.rows: metastore rows as info dataclasses, and the keys rows are stored under."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from uc_jupyter.catalog.embedded.rows import (
    audit,
    catalog_info,
    columns_json,
    credential_info,
    key,
    location_info,
    name_of,
    new_id,
    now,
    schema_info,
    table_info,
    volume_info,
)
from uc_jupyter.catalog.model import ColumnInfo
from uc_jupyter.catalog.rules.names import parse_name

CREATED = "2024-01-02T03:04:05.123456+00:00"
UPDATED = "2024-02-03T04:05:06+00:00"
AUDIT = {"id": "id-1", "created_by": "alice", "updated_at": None, "updated_by": None}


@pytest.fixture
def conn() -> Iterator[sqlite3.Connection]:
    with contextlib.closing(sqlite3.connect(":memory:")) as connection:
        connection.row_factory = sqlite3.Row
        yield connection


def row(conn: sqlite3.Connection, **columns: Any) -> sqlite3.Row:
    """A real sqlite3.Row with these columns, as the metastore's SELECT * gives them."""
    names = ", ".join(f"? AS {name}" for name in columns)
    found: sqlite3.Row = conn.execute(f"SELECT {names}", tuple(columns.values())).fetchone()
    return found


@pytest.mark.parametrize("name", ["main", "Main.ML", "main.`Feature-Store`.T_1", "a-b.c_d.e1"])
def test_a_key_is_the_lower_case_parts_and_names_the_same_name_back(name: str) -> None:
    parsed = parse_name(name)
    stored = key(parsed)
    assert stored == ".".join(p.lower() for p in parsed.parts) == stored.lower()
    assert "`" not in stored
    assert name_of(stored) == parsed


def test_keys_of_different_names_differ_and_nest_by_prefix() -> None:
    assert key(parse_name("main.ml")) != key(parse_name("main.mll"))
    assert key(parse_name("main.ml.t")).startswith(key(parse_name("main.ml")) + ".")
    assert not key(parse_name("main.mll.t")).startswith(key(parse_name("main.ml")) + ".")


def test_now_is_an_aware_utc_instant_in_iso_form() -> None:
    before = datetime.now(timezone.utc)
    stamp = datetime.fromisoformat(now())
    after = datetime.now(timezone.utc)
    assert stamp.utcoffset() == timedelta(0)
    assert before <= stamp <= after


def test_new_ids_are_random_uuid4s_never_repeated() -> None:
    ids = [new_id() for _ in range(200)]
    assert len(set(ids)) == 200
    assert all(uuid.UUID(i).version == 4 and str(uuid.UUID(i)) == i for i in ids)


def test_columns_survive_the_json_they_are_stored_as(conn: sqlite3.Connection) -> None:
    columns = (ColumnInfo("id", "long", False), ColumnInfo("name", "string"), ColumnInfo("p", "decimal(10,2)"))
    stored = columns_json(columns)
    assert json.loads(stored) == [["id", "long", False], ["name", "string", True], ["p", "decimal(10,2)", True]]
    table = table_info(
        row(
            conn,
            key="main.ml.t",
            owner="alice",
            managed=1,
            storage_location="file:///s/t",
            columns=stored,
            created_at=CREATED,
            comment=None,
            **AUDIT,
        )
    )
    assert table.columns == columns


def test_a_table_row_is_its_table_info(conn: sqlite3.Connection) -> None:
    common = {"owner": "alice", "created_at": CREATED, "comment": "c", **AUDIT}
    managed = table_info(row(conn, key="main.ml.t", managed=1, storage_location="file:///s/t", columns=None, **common))
    assert (managed.catalog_name, managed.schema_name, managed.name, managed.full_name) == (
        "main",
        "ml",
        "t",
        "main.ml.t",
    )
    assert managed.table_type == "MANAGED" and managed.columns == () and managed.comment == "c"
    assert managed.created_at == datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=timezone.utc)
    assert managed.data_source_format == "DELTA"
    external = table_info(row(conn, key="main.ml.t", managed=0, storage_location="s3://b/t", columns="[]", **common))
    assert external.table_type == "EXTERNAL" and external.storage_location == "s3://b/t"


def test_a_volume_row_is_its_volume_info(conn: sqlite3.Connection) -> None:
    info = volume_info(
        row(
            conn,
            key="main.ml.raw",
            owner="bob",
            managed=0,
            storage_location="s3://b/raw",
            created_at=CREATED,
            comment=None,
            **AUDIT,
        )
    )
    assert (info.full_name, info.path, info.volume_type, info.owner) == (
        "main.ml.raw",
        "/Volumes/main/ml/raw",
        "EXTERNAL",
        "bob",
    )


def test_catalog_and_schema_rows_split_their_keys(conn: sqlite3.Connection) -> None:
    catalog = catalog_info(row(conn, key="main", owner="alice", created_at=CREATED, comment="top", **AUDIT))
    assert (catalog.name, catalog.owner, catalog.comment) == ("main", "alice", "top")
    schema = schema_info(row(conn, key="main.feature-store", owner="bob", created_at=CREATED, comment=None, **AUDIT))
    assert (schema.catalog_name, schema.name, schema.full_name) == ("main", "feature-store", "main.`feature-store`")


def test_updated_fields_are_the_creations_until_the_first_update(conn: sqlite3.Connection) -> None:
    fresh = audit(row(conn, created_at=CREATED, **AUDIT))
    assert fresh == {
        "id": "id-1",
        "created_by": "alice",
        "updated_at": datetime.fromisoformat(CREATED),
        "updated_by": "alice",
    }
    changed = audit(row(conn, created_at=CREATED, id="id-1", created_by="alice", updated_at=UPDATED, updated_by="bob"))
    assert (changed["updated_at"], changed["updated_by"]) == (datetime.fromisoformat(UPDATED), "bob")


def test_audit_fields_reach_every_info(conn: sqlite3.Connection) -> None:
    volume = volume_info(
        row(
            conn,
            key="main.ml.v",
            owner="carol",  # owners change; the creator stays
            managed=1,
            storage_location="file:///v",
            created_at=CREATED,
            comment=None,
            id="vid",
            created_by="alice",
            updated_at=UPDATED,
            updated_by="bob",
        )
    )
    assert (volume.id, volume.owner, volume.created_by, volume.updated_by) == ("vid", "carol", "alice", "bob")
    assert volume.updated_at == datetime.fromisoformat(UPDATED)


def test_a_credential_row_names_its_options_never_holds_them(conn: sqlite3.Connection) -> None:
    info = credential_info(
        row(
            conn,
            name="lake",
            owner="admin",
            created_at=CREATED,
            option_names='["key", "secret"]',
            comment=None,
            **AUDIT,
        )
    )
    assert (info.name, info.full_name, info.option_names) == ("lake", "lake", ("key", "secret"))


def test_a_location_row_with_or_without_a_credential(conn: sqlite3.Connection) -> None:
    common = {"owner": "admin", "created_at": CREATED, "comment": None, **AUDIT}
    bound = location_info(row(conn, name="raw", url="s3://lake/raw", credential="lake", **common))
    assert (bound.name, bound.url, bound.credential_name) == ("raw", "s3://lake/raw", "lake")
    environment = location_info(row(conn, name="tmp", url="file:///tmp/x", credential=None, **common))
    assert environment.credential_name is None
