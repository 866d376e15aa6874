"""Stored ids: every object gets one at creation, keeps it across reopening, and an older home is
migrated with the ids its clients already saw (the ones wire.py derived before ids were stored)."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from uc_jupyter.catalog import NotFound, SecurableKind
from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.catalog.wire.shapes import catalog_json, object_id, schema_json, table_json, volume_json
from uc_jupyter.testing.catalogs import external_location


def _populated(home: Path, tmp_path: Path) -> LocalCatalog:
    cat = LocalCatalog(home)
    cat.create_catalog("main")
    cat.create_schema("main.ml")
    cat.create_volume("main.ml.raw")
    cat.create_table("main.ml.t", pa.table({"x": [1]}))
    cat.create_storage_credential("lake", {"key": "k"})
    external_location(cat, str(tmp_path), name="tmp")
    return cat


def _ids(cat: LocalCatalog) -> dict[str, str | None]:
    return {
        "catalog": cat.get_catalog_info("main").id,
        "schema": cat.get_schema("main.ml").id,
        "volume": cat.get_volume("main.ml.raw").id,
        "table": cat.get_table("main.ml.t").id,
        "credential": cat.get_storage_credential("lake").id,
        "location": cat.get_external_location("tmp").id,
    }


def test_every_object_gets_its_own_random_id_kept_across_reopening(isolated_home: Path, tmp_path: Path) -> None:
    cat = _populated(isolated_home, tmp_path)
    ids = _ids(cat)
    assert all(i is not None and uuid.UUID(i).version == 4 for i in ids.values())
    assert len(set(ids.values())) == len(ids)
    assert _ids(LocalCatalog(isolated_home)) == ids
    # The wire sends the stored ids.
    assert catalog_json(cat.get_catalog_info("main"))["id"] == ids["catalog"]
    assert schema_json(cat.get_schema("main.ml"))["schema_id"] == ids["schema"]
    assert volume_json(cat.get_volume("main.ml.raw"))["volume_id"] == ids["volume"]
    assert table_json(cat.get_table("main.ml.t"))["table_id"] == ids["table"]


def test_a_recreated_object_of_the_same_name_gets_a_new_id(isolated_home: Path) -> None:
    cat = LocalCatalog(isolated_home)
    first = cat.create_catalog("c").id
    cat.drop_catalog("c")
    assert cat.create_catalog("c").id != first
    with pytest.raises(NotFound, match="no securable with id"):
        cat.securable_by_id(str(first))


def test_securable_by_id_names_every_kind(isolated_home: Path, tmp_path: Path) -> None:
    cat = _populated(isolated_home, tmp_path)
    ids = _ids(cat)
    assert {k: cat.securable_by_id(str(v)) for k, v in ids.items()} == {
        "catalog": (SecurableKind.CATALOG, "main"),
        "schema": (SecurableKind.SCHEMA, "main.ml"),
        "volume": (SecurableKind.VOLUME, "main.ml.raw"),
        "table": (SecurableKind.TABLE, "main.ml.t"),
        "credential": (SecurableKind.STORAGE_CREDENTIAL, "lake"),
        "location": (SecurableKind.EXTERNAL_LOCATION, "tmp"),
    }


def test_a_quoted_name_comes_back_as_parse_name_reads_it(isolated_home: Path) -> None:
    cat = LocalCatalog(isolated_home)
    info = cat.create_catalog("`my-data`")
    kind, name = cat.securable_by_id(str(info.id))
    assert (kind, name) == (SecurableKind.CATALOG, "`my-data`")
    assert cat.get_catalog_info(name).id == info.id


@pytest.mark.parametrize("bad", ["", "x' OR '1'='1", "%", "main", "a" * 10_000])
def test_unknown_ids_are_one_line_not_found(isolated_home: Path, tmp_path: Path, bad: str) -> None:
    cat = _populated(isolated_home, tmp_path)
    with pytest.raises(NotFound, match="^no securable with id ") as caught:
        cat.securable_by_id(bad)
    assert len(str(caught.value)) < 120


def _make_old(home: Path) -> None:
    """Take a home back to the schema before ids were stored (what an older version left)."""
    conn = sqlite3.connect(home / "metastore.db")
    for table in ("securables", "storage_credentials", "external_locations"):
        conn.execute(f"DROP INDEX {table}_id")
        for column in ("id", "created_by", "updated_at", "updated_by"):
            conn.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    conn.execute("DROP TABLE staging_tables")
    conn.commit()
    conn.close()


def test_an_older_home_is_migrated_with_the_ids_its_clients_saw(isolated_home: Path, tmp_path: Path) -> None:
    cat = _populated(isolated_home, tmp_path)
    seen = {  # what the server sent before ids were stored: derived from kind, key and creation time
        "catalog": object_id("catalog", "main", cat.get_catalog_info("main").created_at),
        "schema": object_id("schema", "main.ml", cat.get_schema("main.ml").created_at),
        "volume": object_id("volume", "main.ml.raw", cat.get_volume("main.ml.raw").created_at),
        "table": object_id("table", "main.ml.t", cat.get_table("main.ml.t").created_at),
    }
    _make_old(isolated_home)
    migrated = LocalCatalog(isolated_home)
    ids = _ids(migrated)
    assert {k: ids[k] for k in seen} == seen
    assert ids["credential"] and ids["location"] and len(set(ids.values())) == len(ids)
    assert _ids(LocalCatalog(isolated_home)) == ids  # migrating again changes nothing
    assert migrated.get_schema("main.ml").created_by == "admin"
    assert migrated.securable_by_id(seen["table"]) == (SecurableKind.TABLE, "main.ml.t")
    # New objects after the migration get random ids.
    assert uuid.UUID(str(migrated.create_catalog("later").id)).version == 4


def test_ids_are_unique_in_the_database(isolated_home: Path, tmp_path: Path) -> None:
    cat = _populated(isolated_home, tmp_path)
    conn = sqlite3.connect(isolated_home / "metastore.db")
    with pytest.raises(sqlite3.IntegrityError, match="UNIQUE"):
        conn.execute("UPDATE securables SET id = ? WHERE key = 'main.ml'", (cat.get_catalog_info("main").id,))
    conn.close()


def _open_and_report(home: str, barrier: Any, results: Any) -> None:
    os.environ["UC_JUPYTER_PRINCIPAL"] = "admin"
    barrier.wait()
    cat = LocalCatalog(home)
    results.put((cat.get_catalog_info("main").id, cat.get_table("main.ml.t").id))


def test_processes_opening_an_older_home_at_once_migrate_it_once_and_agree(isolated_home: Path, tmp_path: Path) -> None:
    cat = _populated(isolated_home, tmp_path)
    derived = (
        object_id("catalog", "main", cat.get_catalog_info("main").created_at),
        object_id("table", "main.ml.t", cat.get_table("main.ml.t").created_at),
    )
    _make_old(isolated_home)
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(3), context.Queue()
    workers = [context.Process(target=_open_and_report, args=(str(isolated_home), barrier, results)) for _ in range(3)]
    for w in workers:
        w.start()
    seen = [results.get(timeout=120) for _ in workers]
    for w in workers:
        w.join(timeout=60)
    assert [w.exitcode for w in workers] == [0, 0, 0]
    assert seen == [derived] * 3
