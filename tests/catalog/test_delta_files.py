"""uc_jupyter.catalog.delta_files: writing, probing and reading the schema of the catalog's Delta files."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from deltalake import DeltaTable

from uc_jupyter.catalog.delta_files import delta_columns, delta_exists, to_arrow, write_delta
from uc_jupyter.catalog.model import CatalogError, ColumnInfo, NotFound
from uc_jupyter.catalog.rules.names import parse_name

NAME = parse_name("main.ml.t")


def rows(*xs: int) -> pa.Table:
    return pa.table({"x": pa.array(xs, pa.int64())})


def read(location: str) -> list[int]:
    return sorted(DeltaTable(location.removeprefix("file://")).to_pyarrow_table()["x"].to_pylist())


@pytest.fixture
def location(tmp_path: Path) -> str:
    return f"file://{tmp_path.resolve()}/t"


# ----------------------------------------------------------------- to_arrow


def test_a_pyarrow_table_is_taken_as_it_is() -> None:
    table = rows(1, 2)
    assert to_arrow(table) is table


def test_a_record_batch_becomes_a_table_of_its_rows() -> None:
    batch = pa.record_batch({"x": [1, 2], "s": ["a", "b"]})
    assert to_arrow(batch).equals(pa.table({"x": [1, 2], "s": ["a", "b"]}))


def test_a_data_frame_becomes_a_table_without_its_index() -> None:
    frame = pd.DataFrame({"x": [1, 2]}, index=pd.Index([10, 20], name="row"))
    table = to_arrow(frame)
    assert table.column_names == ["x"] and table["x"].to_pylist() == [1, 2]


@pytest.mark.parametrize(
    ("data", "kind"), [({"x": [1]}, "dict"), ([[1]], "list"), (None, "NoneType"), (pa.array([1]), "Int64Array")]
)
def test_anything_else_is_a_type_error_naming_its_type(data: object, kind: str) -> None:
    with pytest.raises(TypeError, match=f"pyarrow Table or a pandas DataFrame, got {kind}$"):
        to_arrow(data)


# ----------------------------------------------------------------- write_delta


def test_write_then_append_then_overwrite(location: str) -> None:
    write_delta(NAME, location, rows(1, 2), "error", {})
    write_delta(NAME, location, rows(3), "append", {})
    assert read(location) == [1, 2, 3]
    write_delta(NAME, location, pa.table({"y": ["new"]}), "overwrite", {})  # rows and schema replaced
    table = DeltaTable(location.removeprefix("file://")).to_pyarrow_table()
    assert table.column_names == ["y"] and table["y"].to_pylist() == ["new"]


def test_writing_with_mode_error_over_a_table_is_a_catalog_error_naming_it(location: str) -> None:
    write_delta(NAME, location, rows(1), "error", {})
    with pytest.raises(CatalogError, match=r"^table main\.ml\.t: writing Delta files failed: ") as refused:
        write_delta(NAME, location, rows(2), "error", {})
    assert "\n" not in str(refused.value)
    assert read(location) == [1]


def test_appending_other_columns_is_a_value_error_and_changes_nothing(location: str) -> None:
    write_delta(NAME, location, rows(1), "error", {})
    with pytest.raises(ValueError, match=r"^table main\.ml\.t: the data's columns do not match the table's: ") as bad:
        write_delta(NAME, location, pa.table({"y": ["a"]}), "append", {})
    assert "\n" not in str(bad.value)
    assert not isinstance(bad.value, CatalogError)  # the caller's data, not the catalog, is at fault
    assert read(location) == [1]


def test_a_table_deltalake_cannot_write_is_a_one_line_catalog_error(location: str) -> None:
    unwritable = pa.table({"span": pa.array([pa.scalar((1, 2, 3), pa.month_day_nano_interval())])})
    with pytest.raises(CatalogError, match=r"^table main\.ml\.t: writing Delta files failed") as refused:
        write_delta(NAME, location, unwritable, "error", {})
    assert "\n" not in str(refused.value)


# ----------------------------------------------------------------- delta_exists


def test_delta_exists_only_where_a_delta_log_is(location: str, tmp_path: Path) -> None:
    assert delta_exists(NAME, location, None) is False  # nothing there yet
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "a.parquet").write_bytes(b"PAR1")
    assert delta_exists(NAME, f"file://{tmp_path.resolve()}/plain", {}) is False  # files, but no log
    write_delta(NAME, location, rows(1), "error", {})
    assert delta_exists(NAME, location, None) is True


def test_a_location_storage_cannot_look_into_is_a_catalog_error_naming_table_and_place(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a folder")
    where = f"file://{tmp_path.resolve()}/file"
    with pytest.raises(CatalogError, match=rf"^table main\.ml\.t: cannot look for Delta files at {where}: "):
        delta_exists(NAME, where, None)


# ----------------------------------------------------------------- delta_columns


def test_columns_are_read_from_the_delta_log_with_their_nullability(location: str) -> None:
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("name", pa.string()),
            pa.field("price", pa.decimal128(10, 2)),
            pa.field("tags", pa.list_(pa.string())),
        ]
    )
    table = pa.table({"id": [1], "name": ["a"], "price": [Decimal("1.50")], "tags": [["x"]]}, schema=schema)
    write_delta(NAME, location, table, "error", {})
    columns = delta_columns(NAME, location, {})
    assert columns[:3] == (
        ColumnInfo("id", "long", False),
        ColumnInfo("name", "string", True),
        ColumnInfo("price", "decimal(10,2)", True),
    )
    assert columns[3].name == "tags" and columns[3].type_text.startswith("array")


def test_the_columns_follow_an_overwrite(location: str) -> None:
    write_delta(NAME, location, rows(1), "error", {})
    write_delta(NAME, location, pa.table({"z": [1.5]}), "overwrite", {})
    assert delta_columns(NAME, location, {}) == (ColumnInfo("z", "double", True),)


def test_columns_of_a_missing_table_are_not_found(location: str) -> None:
    with pytest.raises(NotFound, match=r"^table main\.ml\.t: no Delta table at "):
        delta_columns(NAME, location, {})


def test_a_broken_delta_log_is_a_catalog_error_not_not_found(tmp_path: Path) -> None:
    log = tmp_path / "broken" / "_delta_log"
    log.mkdir(parents=True)
    (log / "00000000000000000000.json").write_text("not json\n   0: <rust backtrace>")
    with pytest.raises(CatalogError, match=r"^table main\.ml\.t: cannot open its Delta log") as refused:
        delta_columns(NAME, f"file://{tmp_path.resolve()}/broken", {})
    assert not isinstance(refused.value, NotFound)
    assert "\n" not in str(refused.value)


# ----------------------------------------------------------------- delta_snapshot, arrow_columns


def test_a_snapshot_is_the_latest_and_a_missing_table_is_not_found(location: str, tmp_path: Path) -> None:
    write_delta(NAME, location, rows(1), "error", {})
    write_delta(NAME, location, rows(2), "append", {})
    from uc_jupyter.catalog.delta_files import delta_snapshot

    assert delta_snapshot(NAME, location, {}).version() == 1
    with pytest.raises(NotFound, match=r"^table main\.ml\.t: no Delta table at "):
        delta_snapshot(NAME, f"file://{tmp_path}/nothing", {})


def test_arrow_columns_are_typed_as_the_delta_log_types_them(location: str) -> None:
    from uc_jupyter.catalog.delta_files import arrow_columns

    data = pa.table({"x": pa.array([1], pa.int64()), "s": pa.array(["a"], pa.large_string()), "f": [1.5]})
    write_delta(NAME, location, data, "error", {})
    assert [(c.name, c.type_text) for c in arrow_columns(data.schema)] == [
        (c.name, c.type_text) for c in delta_columns(NAME, location, {})
    ]
    with pytest.raises(ValueError, match=r"^columns d: not Delta column types: "):
        arrow_columns(pa.schema([("d", pa.duration("s"))]))


# ----------------------------------------------------------------- remove_unreferenced(named_with=)


def test_named_with_removes_only_one_writers_uncommitted_files(location: str) -> None:
    from uc_jupyter.catalog.delta_files import remove_unreferenced

    write_delta(NAME, location, rows(1), "error", {})
    folder = Path(location.removeprefix("file://"))
    committed = sorted(p.name for p in folder.glob("*.parquet"))
    (folder / "part-00000-00000-mine1234-0.parquet").write_bytes(b"mine")
    (folder / "part-00000-00000-theirs99-0.parquet").write_bytes(b"theirs")
    gone = remove_unreferenced(location, {}, since=0.0, named_with="mine1234")
    assert [key for key, _ in gone] == ["part-00000-00000-mine1234-0.parquet"]
    assert sorted(p.name for p in folder.glob("*.parquet")) == sorted(
        [*committed, "part-00000-00000-theirs99-0.parquet"]
    )
    assert read(location) == [1]
