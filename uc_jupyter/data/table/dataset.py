"""``UCTableDataset``: stream a catalog table's rows into PyTorch straight from its Delta files.

No Spark: the Delta snapshot is pinned when the dataset is made (SELECT checked through the
catalog), read with ``deltalake``'s scan (which applies deletion vectors), and its rows are split
across ranks and DataLoader workers exactly like a volume's files (see
:mod:`uc_jupyter.data.stream.partition`). Each item is one batch: a dict with numeric and boolean columns
as tensors (when they have no nulls) and other columns as lists.

Example:
    >>> from uc_jupyter.data import UCTableDataset
    >>> rows = UCTableDataset("main.ml.iris", columns=["sepal_length", "label"], batch_size=256)  # doctest: +SKIP
    >>> batch = next(iter(rows)); batch["label"].shape                                           # doctest: +SKIP
    torch.Size([256])
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import torch

from uc_jupyter import options as opt
from uc_jupyter.catalog import Catalog, get_catalog
from uc_jupyter.data.stream import loop_progress as consumer
from uc_jupyter.data.stream.partition import OnUneven, StreamPositions
from uc_jupyter.data.stream.partitioned import PartitionedDataset
from uc_jupyter.data.stream.renewal import Renewal, renew
from uc_jupyter.data.stream.stages import StageTimes
from uc_jupyter.data.stream.stats import DatasetStats, StreamCounters
from uc_jupyter.data.table.predicate import whole
from uc_jupyter.errors import first_line
from uc_jupyter.storage.urls import delta_uri

if TYPE_CHECKING:
    from deltalake import DeltaTable

__all__ = ["UCTableDataset"]


class UCTableDataset(PartitionedDataset):
    """A torch ``IterableDataset`` of dict batches from a Delta table in the catalog.

    Args:
        name: ``catalog.schema.table`` (SELECT is checked).
        columns: the columns to read (default all): a list of names, or one name as a str.
        filter: a predicate deltalake understands, e.g. ``"label = 1"``, applied before splitting.
        batch_size: rows per yielded dict (the last one of a stream may be shorter).
        version: a Delta version to read (default: the latest when the dataset is made).
        shuffle, seed, on_uneven: as for :class:`~uc_jupyter.data.UCVolumeDataset`; rows are the items.
        catalog: the catalog to resolve ``name`` with.
        clock: epoch seconds, for when vended credentials are due (tests pass their own).

    ``len(dataset)`` is the number of rows this rank yields per epoch. The selected columns of the
    snapshot are held in memory by each process that reads (forked workers share the parent's):
    narrow them with ``columns=`` and ``filter=``. A spawned worker reads the snapshot again: with
    vended credentials (a :class:`~uc_jupyter.catalog.rest.client.RestCatalog`) that are due by then, it
    first resolves ``name`` again, as the principal that made the dataset (see
    :mod:`uc_jupyter.data.stream.renewal`).
    """

    def __init__(
        self,
        name: str,
        *,
        columns: str | Sequence[str] | None = None,
        filter: str | None = None,
        batch_size: int = 1024,
        version: int | None = None,
        shuffle: bool = False,
        seed: int = 0,
        on_uneven: OnUneven = "pad",
        catalog: Catalog | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(shuffle=shuffle, seed=seed, on_uneven=on_uneven)
        # Checked before the catalog is asked; columns="ab" is the one column "ab", never "a" and "b".
        wanted = opt.column_names("columns", columns)
        filter = opt.text("filter", filter)
        predicate = whole(filter) if filter else None  # the engine must parse all of it
        batch_size = opt.whole_number("batch_size", batch_size, minimum=1)
        version = opt.maybe_whole_number("version", version)
        clock = opt.function("clock", clock) or time.time
        resolving = catalog or get_catalog()
        resolved = resolving.resolve_table(name)
        self._renewal = Renewal(resolved.expires_at, clock=clock)
        self._principal = resolving.current_principal() if self._renewal.due is not None else None
        self._catalog: Catalog | None = catalog
        self.name = resolved.table.full_name
        self._location = delta_uri(resolved.storage_location)
        self._options = resolved.storage_options or None
        snapshot = self._open(version)
        self.version = snapshot.version()
        known = [f.name for f in snapshot.schema().fields]
        missing = [c for c in (wanted or ()) if c not in known]
        if missing:
            raise ValueError(opt.unknown_column(f"table {self.name}", missing[0], known))
        self.columns = wanted if wanted is not None else known
        self.filter = filter
        self._predicate = predicate
        self.batch_size = batch_size
        # Read once, here: forked DataLoader workers share it copy-on-write, and never touch
        # deltalake, whose runtime does not survive a fork. Spawned workers read their own.
        self._table: pa.Table | None = self._read(snapshot, self.columns)
        self._rows = self._table.num_rows
        if self._rows == 0:
            raise ValueError(f"table {self.name} has no rows{' matching ' + repr(filter) if filter else ''} to read")

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["_table"] = None  # each worker reads its own copy of the snapshot
        state["_catalog"] = None  # a catalog holds connections and locks: a spawned worker uses get_catalog()
        return state

    # ---------------------------------------------------------------- PartitionedDataset
    def __repr__(self) -> str:
        """Example: ``UCTableDataset('main.ml.iris' version 3, 150 rows, 5 columns, batch_size=32)``."""
        filtered = f", filter {self.filter!r}" if self.filter else ""
        return (
            f"UCTableDataset({self.name!r} version {self.version}, {int(self._rows):,} rows, "
            f"{len(self.columns)} columns{filtered}, batch_size={self.batch_size})"
        )

    def _item_count(self) -> int:
        return int(self._rows)

    def _identity(self) -> tuple[str, str]:
        shape = f"{self.columns}|{self.filter}"
        return self.name, f"v{self.version}:{hashlib.sha256(shape.encode()).hexdigest()[:12]}"

    def _stream(
        self, positions: npt.NDArray[np.int64] | StreamPositions, counters: StreamCounters, stream: str
    ) -> Iterator[Any]:
        assert isinstance(positions, np.ndarray), "a table's rows are all known when the pass starts"
        # Looked up as the pass starts (the loader binds its consumer only then).
        return self._batches(positions, counters, stream, consumer.of(self).stages)

    def _batches(
        self, positions: npt.NDArray[np.int64], counters: StreamCounters, stream: str, stages: StageTimes
    ) -> Iterator[Any]:
        """The stages: fetch (the snapshot's rows read, once per process; each batch's taken) and
        decode (rows to tensors); their seconds reach the loader with each batch."""
        clock = time.perf_counter
        began = clock()
        table = self._snapshot_rows()
        for start in range(0, len(positions), self.batch_size):
            chunk = _rows_at(table, positions[start : start + self.batch_size])
            fetched = clock()
            batch = _to_batch(chunk)
            decoded = clock()
            stages.fetch += fetched - began
            stages.decode += decoded - fetched
            self._count(counters, stream, delivered=chunk.num_rows, files=chunk.num_rows, bytes=chunk.nbytes)
            yield batch
            began = clock()

    def sample_structure(self) -> str:
        """Example: ``"rows with columns ['id', 'label']"`` (in a Mix each sample is one row's dict)."""
        return f"rows with columns {self.columns}"

    def items_in(self, element: Any) -> int:
        """Rows in a yielded batch."""
        return len(next(iter(element.values()))) if element else 0

    def stats(self) -> DatasetStats:
        return DatasetStats(streams=self.stream_stats(), listed_files=self._rows)

    # ---------------------------------------------------------------- internals
    def _open(self, version: int | None) -> DeltaTable:
        from uc_jupyter.storage.delta_snapshot import open_snapshot  # the one opener, its one-line errors

        return open_snapshot(self._location, table=self.name, version=version, storage_options=self._options)

    def _read(self, snapshot: DeltaTable, columns: list[str]) -> pa.Table:
        try:
            reader = snapshot.scan(columns=columns, predicate=self._predicate)
        except Exception as exc:
            raise ValueError(f"table {self.name}: cannot apply filter {self.filter!r}: {first_line(exc)}") from exc
        return _plain_types(pa.RecordBatchReader.from_stream(reader).read_all())

    def _snapshot_rows(self) -> pa.Table:
        """The pinned snapshot's rows: inherited from the parent, or read again after a spawn."""
        if self._table is None:
            self._renew()
            table = self._read(self._open(self.version), self.columns)
            if table.num_rows != self._rows:
                raise RuntimeError(
                    f"table {self.name} version {self.version} now has {table.num_rows} rows, "
                    f"{self._rows} when the dataset was made; was it vacuumed or rewritten?"
                )
            self._table = table
        return self._table

    def _renew(self) -> None:
        """Resolve the table again when its options are due (:mod:`uc_jupyter.data.stream.renewal`)."""
        renewed = renew(
            self._renewal,
            self._catalog or get_catalog(),
            self._principal,
            lambda catalog: catalog.resolve_table(self.name),
            lambda resolved: delta_uri(resolved.storage_location),
            what=f"table {self.name}",
            was=self._location,
            error=ValueError,
        )
        if renewed is not None:
            resolved, self._renewal = renewed
            self._options = resolved.storage_options or None


def _rows_at(table: pa.Table, positions: npt.NDArray[np.int64]) -> pa.Table:
    """The rows at ``positions``: a zero-copy slice when they are consecutive, else a gather."""
    first, count = int(positions[0]), len(positions)
    if int(positions[-1]) - first == count - 1 and (count < 3 or bool(np.all(np.diff(positions) == 1))):
        return table.slice(first, count)
    return table.take(pa.array(positions))


def _plain_types(table: pa.Table) -> pa.Table:
    """deltalake scans give string_view / binary_view columns, which pyarrow's take cannot index."""
    views = {pa.string_view(): pa.large_string(), pa.binary_view(): pa.large_binary()}
    if not any(field.type in views for field in table.schema):
        return table
    schema = pa.schema([field.with_type(views.get(field.type, field.type)) for field in table.schema])
    return table.cast(schema)


def _to_batch(chunk: pa.Table) -> dict[str, Any]:
    """Numeric and boolean columns without nulls as tensors, the others as lists."""
    batch: dict[str, Any] = {}
    for name, column in zip(chunk.column_names, chunk.columns, strict=True):
        kind = column.type
        numeric = pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind)
        if numeric and column.null_count == 0:
            batch[name] = torch.from_numpy(np.array(column.to_numpy(), copy=True))  # writable, owned
        else:
            batch[name] = column.to_pylist()
    return batch
