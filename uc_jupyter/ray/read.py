"""``read_table("main.ml.t")``: a catalog table as a Ray Dataset, deletion vectors honoured.

``ray.data.read_delta`` reads the Parquet files a Delta log names whole (deltalake's
``to_pyarrow_dataset``), so a table with deletion vectors cannot be read with it (``UCCatalog`` refuses
such a table rather than return the rows they delete). This reads any catalog table the way the
project's Spark source does (:mod:`uc_jupyter.tables.delta_source`: the same splits of the pinned
snapshot, the same keep masks): the driver checks SELECT, opens the snapshot and plans the splits; each
read task gets its split and the table's storage options (over a server: the credentials vended for the
table), nothing more.

Example:
    >>> import uc_jupyter.ray                                                # doctest: +SKIP
    >>> uc_jupyter.ray.read_table("main.ml.t", columns=["x"]).count()         # doctest: +SKIP
    3
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ray.data.block import BlockMetadata
from ray.data.context import DataContext
from ray.data.datasource import Datasource, ReadTask

from uc_jupyter import options as opt
from uc_jupyter.catalog import Catalog, get_catalog
from uc_jupyter.catalog.delta_files import delta_snapshot
from uc_jupyter.ray.checks import delta_format, table_name
from uc_jupyter.ray.resolver import UCCatalog
from uc_jupyter.storage.urls import delta_uri
from uc_jupyter.tables.delta_source import Split, plain_schema, plan_splits, read_split

if TYPE_CHECKING:
    import pyarrow as pa
    import ray.data

__all__ = ["read_table"]


def read_table(
    name: str,
    *,
    columns: list[str] | None = None,
    version: int | None = None,
    catalog: UCCatalog | Catalog | None = None,
    override_num_blocks: int | None = None,
) -> ray.data.Dataset:
    """The rows of catalog table ``name`` (SELECT checked), at its latest ``version`` or the one given,
    only ``columns`` when given, as a Ray Dataset; rows deleted by deletion vectors never appear.

    Raises:
        NotFound, PermissionDenied, InvalidName: the catalog's, one line, before any task starts.
        ValueError: a column the table does not have.

    Example:
        >>> ds = uc_jupyter.ray.read_table("main.ml.t", version=2)   # doctest: +SKIP
        >>> ds.take(1)                                               # doctest: +SKIP
        [{'x': 1}]
    """
    import ray.data

    columns = opt.column_names("columns", columns)
    version = opt.maybe_whole_number("version", version)
    name = table_name(name, "read_table")
    cat = catalog.catalog if isinstance(catalog, UCCatalog) else catalog or get_catalog()
    resolved = cat.resolve_table(name)
    delta_format(name, resolved.table.data_source_format, "read_table")
    source = _DeltaScan(name, delta_uri(resolved.storage_location), dict(resolved.storage_options), version, columns)
    dataset: ray.data.Dataset = ray.data.read_datasource(source, override_num_blocks=override_num_blocks)
    return dataset


class _DeltaScan(Datasource):
    """One pinned snapshot of a table, read in Ray tasks split by split."""

    def __init__(
        self, name: str, uri: str, options: dict[str, str], version: int | None, columns: list[str] | None
    ) -> None:
        import pyarrow as pa

        snapshot = delta_snapshot(name, uri, options, version=version)
        schema = plain_schema(pa.schema(snapshot.schema().to_arrow()))
        if columns is not None:
            unknown = [c for c in columns if c not in schema.names]
            if unknown:
                raise ValueError(opt.unknown_column(f"table {name}", unknown[0], schema.names))
            schema = pa.schema([schema.field(c) for c in columns])
        self._name, self._uri, self._options = name, uri, options
        self._version: int = snapshot.version()  # what every later call reads, whatever commits meanwhile
        self._schema = schema
        self._sizes = sum(int(s or 0) for s in pa.table(snapshot.get_add_actions(flatten=False)).column("size_bytes"))

    def get_name(self) -> str:
        return f"UCDelta({self._name})"

    def estimate_inmemory_data_size(self) -> int | None:
        return self._sizes or None

    def get_read_tasks(
        self, parallelism: int, per_task_row_limit: int | None = None, data_context: DataContext | None = None
    ) -> list[ReadTask]:
        snapshot = _pinned(self._name, self._uri, self._options, self._version)
        splits = plan_splits(snapshot, parallelism=max(parallelism, 1))
        tasks = []
        for split in splits:
            size = sum(p.size for p in split.pieces) or None
            metadata = BlockMetadata(num_rows=None, size_bytes=size, input_files=None, exec_stats=None)
            read = _SplitRead(self._name, self._uri, self._options, self._version, split, self._schema)
            tasks.append(ReadTask(read, metadata, schema=self._schema, per_task_row_limit=per_task_row_limit))
        return tasks


class _SplitRead:
    """A read task's work: a plain object (pickled to the task) holding the split, the table's storage
    options and the pinned version, never the catalog."""

    def __init__(
        self, name: str, uri: str, options: dict[str, str], version: int, split: Split, target: pa.Schema
    ) -> None:
        self.name, self.uri, self.options, self.version = name, uri, options, version
        self.split, self.target = split, target

    def __call__(self) -> Iterator[pa.Table]:
        import pyarrow as pa

        def snapshot() -> Any:
            return _pinned(self.name, self.uri, self.options, self.version)

        for batch in read_split(self.split, self.target, self.options or None, snapshot):
            yield pa.Table.from_batches([batch])


def _pinned(name: str, uri: str, options: dict[str, str], version: int) -> Any:
    return delta_snapshot(name, uri, options, version=version)
