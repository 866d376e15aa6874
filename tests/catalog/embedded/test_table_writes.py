"""uc_jupyter.catalog.embedded.table_writes: creating, appending to and overwriting tables in the embedded catalog."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from tests.catalog.conftest import with_principals
from uc_jupyter.catalog import (
    AlreadyExists,
    NoExternalLocation,
    PermissionDenied,
    as_principal,
)
from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.catalog.model import ColumnInfo

OWN_OPTIONS = {"client_kwargs": {"region_name": "eu-west-1"}}


@pytest.fixture
def cat(main_ml: LocalCatalog, lake: Path) -> LocalCatalog:
    """main.ml, principals alice and bob with USE CATALOG and USE SCHEMA, and location "lake"."""
    catalog = with_principals(main_ml, "alice", "bob", use_schema=True)
    catalog.create_external_location("lake", str(lake))
    return catalog


def xs(*values: int) -> pa.Table:
    return pa.table({"x": pa.array(values, pa.int64())})


def read(cat: LocalCatalog, name: str) -> list[int]:
    location = cat.resolve_table(name).storage_location.removeprefix("file://")
    return sorted(DeltaTable(location).to_pyarrow_table()["x"].to_pylist())


def managed(cat: LocalCatalog) -> list[str]:
    folder = cat.root / "storage" / "tables"
    return sorted(os.listdir(folder)) if folder.exists() else []


def test_an_unknown_mode_is_refused_before_anything_is_written(cat: LocalCatalog) -> None:
    with pytest.raises(ValueError, match="invalid mode 'replace': use 'error', 'overwrite' or 'append'"):
        cat.create_table("main.ml.t", xs(1), mode="replace")  # type: ignore[arg-type]
    assert managed(cat) == [] and cat.list_tables("main.ml") == []


def test_mode_error_refuses_an_existing_table_and_leaves_its_rows(cat: LocalCatalog) -> None:
    cat.create_table("main.ml.t", xs(1, 2))
    with pytest.raises(AlreadyExists, match="table main.ml.t already exists; write with mode 'overwrite' or 'append'"):
        cat.create_table("main.ml.t", xs(3))
    assert read(cat, "main.ml.t") == [1, 2]
    assert len(managed(cat)) == 1


def test_overwrite_creates_a_missing_table_as_append_does(cat: LocalCatalog) -> None:
    info = cat.create_table("main.ml.t", xs(5), mode="overwrite", comment="made by overwrite")
    assert (info.table_type, info.comment, info.columns) == ("MANAGED", "made by overwrite", (ColumnInfo("x", "long"),))
    assert read(cat, "main.ml.t") == [5]


def test_a_table_needs_data_to_be_created_or_changed(cat: LocalCatalog) -> None:
    with pytest.raises(ValueError, match=r"table main.ml.t: pass data \(a pyarrow Table or pandas DataFrame\)"):
        cat.create_table("main.ml.t")
    assert managed(cat) == []
    cat.create_table("main.ml.t", xs(1))
    for mode in ("append", "overwrite"):
        with pytest.raises(ValueError, match=f"table main.ml.t exists; pass data to {mode} it"):
            cat.create_table("main.ml.t", None, mode=mode)
    assert read(cat, "main.ml.t") == [1]


def test_creating_needs_create_table_on_the_schema_and_leaves_nothing_when_refused(cat: LocalCatalog) -> None:
    with as_principal("alice"), pytest.raises(PermissionDenied, match="^alice lacks CREATE TABLE on main.ml$"):
        cat.create_table("main.ml.t", xs(1), mode="append")
    assert managed(cat) == []
    cat.grant("main.ml", "CREATE TABLE", "alice")
    with as_principal("alice"):
        info = cat.create_table("main.ml.t", xs(1))
    assert (info.owner, info.created_by) == ("alice", "alice")


def test_changing_a_table_needs_modify_and_keeps_its_owner(cat: LocalCatalog) -> None:
    cat.create_table("main.ml.t", xs(1))
    cat.grant("main.ml.t", "SELECT", "alice")
    for mode in ("append", "overwrite"):
        with as_principal("alice"), pytest.raises(PermissionDenied, match="^alice lacks MODIFY on main.ml.t$"):
            cat.create_table("main.ml.t", xs(9), mode=mode)
    assert read(cat, "main.ml.t") == [1]
    cat.grant("main.ml.t", "MODIFY", "alice")
    with as_principal("alice"):
        info = cat.create_table("main.ml.t", xs(2), mode="append")
    assert (info.owner, info.updated_by) == ("admin", "alice")
    assert read(cat, "main.ml.t") == [1, 2]


def test_a_refused_append_leaves_the_recorded_columns_as_they_were(cat: LocalCatalog) -> None:
    before = cat.create_table("main.ml.t", xs(1))
    with pytest.raises(ValueError, match="columns do not match"):
        cat.create_table("main.ml.t", pa.table({"y": ["a"]}), mode="append")
    after = cat.get_table("main.ml.t")
    assert after.columns == before.columns and after.updated_at == before.updated_at


def test_an_overwrite_records_the_new_columns(cat: LocalCatalog) -> None:
    cat.create_table("main.ml.t", xs(1))
    info = cat.create_table("main.ml.t", pa.table({"y": ["a"], "z": [1.5]}), mode="overwrite")
    assert info.columns == (ColumnInfo("y", "string"), ColumnInfo("z", "double"))
    assert cat.get_table("main.ml.t").columns == info.columns


def test_an_external_table_needs_create_external_table_on_its_location(cat: LocalCatalog, lake: Path) -> None:
    cat.grant("main.ml", "CREATE TABLE", "alice")
    refused = "^alice lacks CREATE EXTERNAL TABLE on external location lake$"
    with as_principal("alice"), pytest.raises(PermissionDenied, match=refused):
        cat.create_table("main.ml.t", xs(1), storage_location=str(lake / "t"))
    assert not (lake / "t").exists()
    cat.grant("lake", "CREATE EXTERNAL TABLE", "alice", kind="location")
    with as_principal("alice"):
        info = cat.create_table("main.ml.t", xs(1), storage_location=f"file://{lake}/t")
    assert (info.table_type, info.storage_location, info.owner) == ("EXTERNAL", f"file://{lake}/t", "alice")
    assert (lake / "t" / "_delta_log").is_dir() and managed(cat) == []


def test_an_external_table_outside_every_location_writes_nothing(cat: LocalCatalog, tmp_path: Path) -> None:
    outside = tmp_path / "outside" / "t"
    with pytest.raises(NoExternalLocation, match="no external location contains it"):
        cat.create_table("main.ml.t", xs(1), storage_location=str(outside))
    assert not outside.exists() and not (tmp_path / "outside").exists()


def test_an_external_tables_own_options_are_kept_secret_and_used_to_read_it(cat: LocalCatalog, lake: Path) -> None:
    info = cat.create_table("main.ml.t", xs(1), storage_location=str(lake / "t"), storage_options=OWN_OPTIONS)
    assert "eu-west-1" not in repr(info) and "eu-west-1" not in repr(cat.get_table("main.ml.t"))
    assert info.id is not None and cat._secrets.get("object", info.id) == OWN_OPTIONS
    assert cat.resolve_table("main.ml.t").storage_options == {"AWS_REGION": "eu-west-1"}


def test_options_that_are_not_plain_values_are_refused_before_any_write(cat: LocalCatalog, lake: Path) -> None:
    with pytest.raises(TypeError, match="storage_options of table main.ml.t must be a dict"):
        cat.create_table("main.ml.t", xs(1), storage_location=str(lake / "t"), storage_options=["k"])  # type: ignore[arg-type]
    assert not (lake / "t").exists()


def test_a_delta_table_already_there_is_registered_with_its_columns(cat: LocalCatalog, lake: Path) -> None:
    written = cat.create_table("main.ml.first", pa.table({"a": ["x"]}), storage_location=str(lake / "t"))
    cat.drop_table("main.ml.first")  # an external table's files stay
    registered = cat.create_table("main.ml.again", storage_location=str(lake / "t"))
    assert registered.columns == written.columns == (ColumnInfo("a", "string"),)
    assert registered.id != written.id


def test_no_spelling_of_another_tables_storage_registers_it_again(cat: LocalCatalog, lake: Path) -> None:
    cat.create_table("main.ml.t", xs(1), storage_location=str(lake / "t"))
    (lake / "alias").symlink_to(lake / "t")
    cat.grant("main.ml", "CREATE TABLE", "alice")
    cat.grant("lake", "CREATE EXTERNAL TABLE", "alice", kind="location")
    with as_principal("alice"):
        for spelling in (str(lake / "t"), f"file://{lake}//t/", str(lake / "alias"), f"{lake}/x/../t"):
            with pytest.raises(AlreadyExists, match="overlaps table main.ml.t"):
                cat.create_table("main.ml.mine", storage_location=spelling)
            with pytest.raises(AlreadyExists, match="overlaps table main.ml.t"):
                cat.create_table("main.ml.mine", xs(2), storage_location=f"{spelling}/inner")
    assert read(cat, "main.ml.t") == [1]
    assert [t.name for t in cat.list_tables("main.ml")] == ["t"]
