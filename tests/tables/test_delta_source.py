"""The deltalake-backed Spark data source: exact rows in several partitions, and shipping by value."""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, WriterProperties, write_deltalake
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.tables import get_spark, table
from uc_jupyter.tables.delta_source import DeltaSource
from uc_jupyter.testing.catalogs import external_location
from uc_jupyter.testing.deletion_vectors import delete_with_deletion_vector

# Which file (in the order the log adds them) loses which row positions: across row-group borders,
# a long run, and the last row of a file.
DELETED = {0: [0, 39, 40, 41, 99], 3: list(range(0, 100, 3)), 7: [49], 12: [9]}


def _rows(start: int, count: int, *, note: bool = False) -> pa.Table:
    ids = list(range(start, start + count))
    columns: dict[str, Any] = {
        "id": ids,
        "part": [("a b", "x%y", None)[i % 3] for i in ids],  # characters the log URL-encodes, and null
        "day": [datetime.date(2024, 1, 1 + i % 2) for i in ids],
        "value": [i * 0.25 for i in ids],
    }
    if note:
        columns["note"] = [f"n{i}" for i in ids]
    return pa.table(columns)


def _build(root: Path) -> list[dict[str, Any]]:
    """A table partitioned by a string and a date, written in three commits (12 files of 100 rows in
    row groups of 40, then 6 of 10 rows with a column the table gains), with deletion vectors on
    four files. Returns the rows a reader must see, found without deltalake: every written row but
    those at the deleted positions of the files, read back with pyarrow."""
    small_groups = WriterProperties(max_row_group_size=40)
    write_deltalake(root, _rows(0, 600), partition_by=["part", "day"], writer_properties=small_groups)
    write_deltalake(root, _rows(600, 600), partition_by=["part", "day"], mode="append", writer_properties=small_groups)
    write_deltalake(root, _rows(1200, 60, note=True), partition_by=["part", "day"], mode="append", schema_mode="merge")
    commits = sorted((root / "_delta_log").glob("*.json"))
    adds = [json.loads(line)["add"] for c in commits for line in c.read_text().splitlines() if '"add"' in line]
    delete_with_deletion_vector(root, DELETED)
    gone = set()
    for index, positions in DELETED.items():
        ids = pq.read_table(root / unquote(adds[index]["path"]), columns=["id"]).column("id").to_pylist()
        gone |= {ids[p] for p in positions}
    written = [*_rows(0, 1200).to_pylist(), *_rows(1200, 60, note=True).to_pylist()]
    return [{**row, "note": row.get("note")} for row in written if row["id"] not in gone]


def _collected(frame: DataFrame) -> list[dict[str, Any]]:
    return sorted((row.asDict() for row in frame.collect()), key=lambda row: row["id"])


def _partitions(frame: DataFrame) -> int:
    return frame.select(F.spark_partition_id().alias("p")).distinct().count()


@pytest.fixture
def spark(spark_remote: str) -> SparkSession:
    session = get_spark(progress=lambda _line: None)
    session.dataSource.register(DeltaSource)
    return session


def test_a_partitioned_table_with_deletion_vectors_reads_exactly_in_many_partitions(
    tmp_path: Path, spark: SparkSession, catalog: LocalCatalog
) -> None:
    root = tmp_path / "events"
    expected = _build(root)
    assert len(expected) == 1260 - sum(len(p) for p in DELETED.values())
    sizes = pa.table(DeltaTable(str(root)).get_add_actions()).column("size_bytes").to_pylist()
    # Splits smaller than any file: every file is cut into row ranges, each with its part of the DVs.
    frame = spark.read.format("uc_delta").option("path", str(root)).option("max_split_bytes", min(sizes) // 3).load()
    assert _collected(frame) == expected
    assert _partitions(frame) > len(sizes)
    # table(): the same rows, in the splits the session's parallelism gives.
    external_location(catalog, str(tmp_path))
    catalog.create_table("main.ml.events", storage_location=str(root))
    through_catalog = table("main.ml.events")
    assert _collected(through_catalog) == expected
    assert _partitions(through_catalog) > 1
    assert through_catalog.where("part IS NULL AND day = DATE'2024-01-02'").count() == sum(
        1 for row in expected if row["part"] is None and row["day"] == datetime.date(2024, 1, 2)
    )
    # The version before the deletes still has every row.
    assert table("main.ml.events", version=2).count() == 1260


def test_an_empty_table_reads_as_no_rows(tmp_path: Path, spark: SparkSession) -> None:
    write_deltalake(tmp_path / "empty", pa.table({"id": pa.array([], pa.int64())}))
    frame = spark.read.format("uc_delta").option("path", str(tmp_path / "empty")).load()
    assert frame.columns == ["id"] and frame.count() == 0


def test_the_source_reads_where_uc_jupyter_cannot_be_imported(
    tmp_path: Path, spark: SparkSession, catalog: LocalCatalog
) -> None:
    """What a remote server gets from table(): the classes pickled by value (with pyspark's own
    cloudpickle, as Spark Connect does), where only pyspark, deltalake and pyarrow are installed."""
    from pyspark import cloudpickle

    root = tmp_path / "events"
    expected = _build(root)
    table_path = str(root)
    external_location(catalog, str(tmp_path))
    catalog.create_table("main.ml.events", storage_location=table_path)
    table("main.ml.events")  # registers the data source for the session
    payload = tmp_path / "source.pickle"
    payload.write_bytes(cloudpickle.dumps(DeltaSource))
    script = f"""
import sys

class NoUcJupyter:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "uc_jupyter":
            raise ImportError("uc_jupyter is not installed here")

sys.meta_path.insert(0, NoUcJupyter())
from pyspark import cloudpickle
source = cloudpickle.loads(open({str(payload)!r}, "rb").read())({{"path": {table_path!r}, "max_split_bytes": "900"}})
reader = source.reader(source.schema())
partitions = reader.partitions()
ids = sorted(i for p in partitions for batch in reader.read(p) for i in batch.column("id").to_pylist())
print(len(partitions), len(ids), sum(ids))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    splits, count, total = map(int, out.stdout.split())
    assert splits > 1 and (count, total) == (len(expected), sum(row["id"] for row in expected))
