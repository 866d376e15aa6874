"""What uc_jupyter.ray refuses before Ray runs anything, as pure rules: names, formats, deletion
vectors (on a real Delta table) and an append's columns."""

from __future__ import annotations

from pathlib import Path

import deltalake
import pyarrow as pa
import pytest

from uc_jupyter.catalog import CatalogError, ColumnInfo
from uc_jupyter.catalog.rules.names import InvalidName
from uc_jupyter.ray.checks import append_mismatch, delta_format, readable_by_ray, table_name
from uc_jupyter.testing.deletion_vectors import delete_with_deletion_vector


@pytest.mark.parametrize("path", ["s3://lake/tables/a", "/data/t", "file:///data/t", "lake/tables/a"])
def test_a_path_where_a_table_name_belongs_is_named_as_a_path(path: str) -> None:
    with pytest.raises(InvalidName) as raised:
        table_name(path, "ray.data.read_delta")
    line = str(raised.value)
    assert line.startswith(
        f"ray.data.read_delta(catalog=...) takes a table name like 'main.ml.t', not the path {path!r}"
    )
    assert "\n" not in line


def test_a_name_of_other_than_three_parts_is_refused_by_the_name_grammar() -> None:
    with pytest.raises(InvalidName, match="^invalid name 'main.t': expected"):
        table_name("main.t", "ray.data.read_delta")
    assert table_name("main.ml.t", "ray.data.read_delta") == "main.ml.t"


def test_only_delta_tables_pass() -> None:
    delta_format("main.ml.t", "delta", "ray.data.read_delta")
    with pytest.raises(CatalogError, match=r"^table main.ml.t is a PARQUET table, not Delta: Dataset.write_delta"):
        delta_format("main.ml.t", "parquet", "Dataset.write_delta")


def test_deletion_vectors_are_refused_and_a_plain_table_is_not(tmp_path: Path) -> None:
    deltalake.write_deltalake(str(tmp_path / "t"), pa.table({"x": [1, 2, 3]}))
    readable_by_ray("main.ml.t", deltalake.DeltaTable(str(tmp_path / "t")))  # no deletion vector: read as it is
    delete_with_deletion_vector(tmp_path / "t", {0: [1]})
    with pytest.raises(CatalogError, match="^table main.ml.t uses deletion vectors, which ray.data.read_delta cannot"):
        readable_by_ray("main.ml.t", deltalake.DeltaTable(str(tmp_path / "t")))


@pytest.mark.parametrize(
    ("incoming", "agrees"),
    [
        ([ColumnInfo("x", "long"), ColumnInfo("s", "string")], True),
        ([ColumnInfo("S", "string"), ColumnInfo("X", "long")], True),  # Delta reads by name, case-insensitively
        ([ColumnInfo("x", "long")], False),  # a column missing
        ([ColumnInfo("x", "long"), ColumnInfo("s", "string"), ColumnInfo("y", "long")], False),  # one more
        ([ColumnInfo("x", "string"), ColumnInfo("s", "string")], False),  # another type
    ],
)
def test_an_append_brings_the_tables_columns_with_their_types(incoming: list[ColumnInfo], agrees: bool) -> None:
    table = [ColumnInfo("x", "long"), ColumnInfo("s", "string")]
    mismatch = append_mismatch(table, incoming)
    assert (mismatch is None) == agrees
    if mismatch:
        assert mismatch.startswith("the table has x long, s string, the dataset ")
