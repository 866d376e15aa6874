"""A Spark Python data source that reads a Delta table with ``deltalake`` (no Delta jars needed).

It honours the Delta log: the snapshot's active files, partition values, a pinned version and
deletion vectors (all through ``DeltaTable.scan``). Options: ``path`` (the table's storage URI),
``version``, ``storage_options`` (JSON). This module imports nothing else from uc_jupyter, so its
classes can be shipped to a remote Spark Connect server by value (cloudpickle), where only
``deltalake`` and ``pyarrow`` need to be installed.

Example:
    >>> spark.dataSource.register(DeltaSource)                                          # doctest: +SKIP
    >>> spark.read.format("uc_delta").option("path", "/data/t").option("version", "3").load()  # doctest: +SKIP
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

__all__ = ["DeltaSource"]

FORMAT = "uc_delta"


def _open(options: Mapping[str, str]) -> Any:
    from deltalake import DeltaTable

    version = options.get("version")
    return DeltaTable(
        options["path"],
        version=int(version) if version not in (None, "") else None,
        storage_options=json.loads(options.get("storage_options") or "{}") or None,
    )


def _plain(schema: pa.Schema) -> pa.Schema:
    """Spark's Arrow conversion knows string and binary, not deltalake's view types."""
    views = {pa.string_view(): pa.string(), pa.binary_view(): pa.binary()}
    return pa.schema([f.with_type(views.get(f.type, f.type)) for f in schema])


class DeltaSource(DataSource):
    """``spark.read.format("uc_delta")``: one Delta snapshot."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> Any:
        from pyspark.sql.pandas.types import from_arrow_schema

        arrow = pa.schema(_open(self.options).schema().to_arrow())
        return from_arrow_schema(_plain(arrow))

    def reader(self, schema: Any) -> DeltaReader:
        return DeltaReader(dict(self.options), schema)


class DeltaReader(DataSourceReader):
    def __init__(self, options: dict[str, str], schema: Any) -> None:
        self.options = options
        self.columns = [field.name for field in schema.fields]

    def partitions(self) -> list[InputPartition]:
        # One partition: deltalake's scan applies deletion vectors and partition values per file.
        return [InputPartition(0)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        table = _open(self.options)
        reader = pa.RecordBatchReader.from_stream(table.scan(columns=self.columns))
        target = _plain(reader.schema)
        for batch in reader:
            yield batch.cast(target) if batch.schema != target else batch
