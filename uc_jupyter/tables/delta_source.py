"""A Spark Python data source that reads a Delta table with ``deltalake`` (no Delta jars needed).

It honours the Delta log: the pinned version's active files, their partition values and deletion
vectors. ``deltalake`` replays the log (``get_add_actions``) and decodes the deletion vectors
(``deletion_vectors``); the data files are then read with pyarrow in several Spark partitions, like
Spark's own file sources: files packed into splits of balanced size, and big files cut into row
ranges. Tables whose files are not plain Parquet under the log's names (column mapping, reader
features this module does not know, absolute file paths) are read whole by ``DeltaTable.scan`` in one
partition, which handles them.

Options: ``path`` (the table's storage URI), ``version``, ``storage_options`` (JSON),
``parallelism`` (the task slots to spread a small table over; ``table()`` passes Spark's own number,
else the planning process's CPUs count) and ``max_split_bytes`` (the most bytes of Parquet per split;
by default as Spark sizes the splits of its file sources).

This module imports nothing else from uc_jupyter but :mod:`uc_jupyter.storage.delta_snapshot` (the
one Delta opener, itself free of uc_jupyter), so both can be shipped to a remote Spark Connect server
by value (cloudpickle), where only ``deltalake`` and ``pyarrow`` need to be installed. Option
``table`` names the table in the opener's errors.

Example:
    >>> spark.dataSource.register(DeltaSource)                                          # doctest: +SKIP
    >>> spark.read.format("uc_delta").option("path", "/data/t").option("version", "3").load()  # doctest: +SKIP
"""

from __future__ import annotations

import itertools
import json
import math
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from uc_jupyter.storage.delta_snapshot import local_folder, open_snapshot

__all__ = ["DeltaSource", "Split", "keep_masks", "plain_schema", "plan_splits", "read_split"]

FORMAT = "uc_delta"

# Spark's defaults for its file sources (spark.sql.files.maxPartitionBytes and .openCostInBytes):
# a split holds at most this much Parquet, and every file costs as much as this many bytes to open.
_MAX_SPLIT_BYTES = 128 * 1024 * 1024
_OPEN_COST_BYTES = 4 * 1024 * 1024
_BATCH_ROWS = 64 * 1024
# Reader features that change only how the log is read (deltalake does that) or what the rows are
# (deletion vectors, applied here); data files of such tables are plain Parquet under logical names.
_PLAIN_FEATURES = frozenset({"deletionVectors", "timestampNtz", "v2Checkpoint", "vacuumProtocolCheck"})


@dataclass(frozen=True)
class _Piece:
    """Rows ``[start, stop)`` of one data file (``stop`` None: to its end).

    ``path`` is relative to the table root and already decoded (the log keeps it URL-encoded).
    ``keep`` is the deletion vector of those rows as little-endian packed bits (1: keep), covering
    ``keep_rows`` rows; rows past them are kept. None: the file has no deleted rows there.
    """

    path: str
    start: int
    stop: int | None
    size: int
    partition: tuple[tuple[str, Any], ...] = ()
    keep: bytes | None = None
    keep_rows: int = 0


@dataclass(frozen=True)
class Split:
    """What one task (Spark's, or Ray's: ``uc_jupyter.ray``) reads: pieces of files under ``root`` (a
    URI), or the whole table by ``DeltaTable.scan`` when ``scan`` is set."""

    root: str
    pieces: tuple[_Piece, ...] = ()
    scan: bool = False


def _open(options: Mapping[str, str]) -> Any:
    version = options.get("version")
    return open_snapshot(
        options["path"],
        table=options.get("table") or options["path"],
        version=int(version) if version not in (None, "") else None,
        storage_options=_storage_options(options),
    )


def _storage_options(options: Mapping[str, str]) -> dict[str, str] | None:
    return json.loads(options.get("storage_options") or "{}") or None


def plain_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` without deltalake's view types: Spark's Arrow conversion (and Ray's blocks) know
    string and binary, not string_view and binary_view."""
    views = {pa.string_view(): pa.string(), pa.binary_view(): pa.binary()}
    return pa.schema([f.with_type(views.get(f.type, f.type)) for f in schema])


class DeltaSource(DataSource):
    """``spark.read.format("uc_delta")``: one Delta snapshot, read in several partitions.

    Example:
        >>> spark.dataSource.register(DeltaSource)                                    # doctest: +SKIP
        >>> spark.read.format("uc_delta").option("path", "/data/t").load().count()   # doctest: +SKIP
        1000
    """

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> Any:
        from pyspark.sql.pandas.types import from_arrow_schema

        arrow = pa.schema(_open(self.options).schema().to_arrow())
        return from_arrow_schema(plain_schema(arrow))

    def reader(self, schema: Any) -> DeltaReader:
        return DeltaReader(dict(self.options), schema)


class DeltaReader(DataSourceReader):
    """Plans the splits of one pinned snapshot (on the driver) and reads them (in the tasks)."""

    def __init__(self, options: dict[str, str], schema: Any) -> None:
        self.options = options
        self.schema = schema

    def partitions(self) -> list[InputPartition]:
        # Everything a task needs travels in its partition: this reader is pickled for the tasks
        # before partitions() runs, so nothing computed here on self would reach them.
        return [InputPartition(split) for split in _plan(_open(self.options), self.options)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from pyspark.sql.pandas.types import to_arrow_schema

        split = partition.value
        if split is None:  # an empty table: pyspark plans one partition of None
            return
        # Exactly the Arrow schema pyspark checks each batch against.
        target = to_arrow_schema(self.schema, timezone="UTC")
        yield from read_split(split, target, _storage_options(self.options), lambda: _open(self.options))


def read_split(
    split: Split, target: pa.Schema, storage_options: dict[str, str] | None, snapshot: Callable[[], Any]
) -> Iterator[pa.RecordBatch]:
    """The rows of ``split`` (deletion vectors applied) as batches of ``target``, its files read with
    ``storage_options``; a whole-table split scans ``snapshot()``, the pinned snapshot opened again.

    Example:
        >>> for batch in read_split(split, target, options, lambda: snapshot):  # doctest: +SKIP
        ...     total += batch.num_rows
    """
    if split.scan:
        reader = pa.RecordBatchReader.from_stream(snapshot().scan(columns=target.names))
        for batch in reader:
            yield batch if batch.schema.equals(target) else batch.cast(target)
        return
    filesystem, base = _filesystem(split.root, storage_options)
    for piece in split.pieces:
        yield from _read_piece(filesystem, base, piece, target)


def _plan(table: Any, options: Mapping[str, str]) -> list[Split]:
    parallelism, max_split = options.get("parallelism"), options.get("max_split_bytes")
    return plan_splits(
        table,
        parallelism=int(parallelism) if parallelism else None,
        max_split_bytes=int(max_split) if max_split else None,
    )


def plan_splits(table: Any, *, parallelism: int | None = None, max_split_bytes: int | None = None) -> list[Split]:
    """The splits of the snapshot ``table``: balanced groups of file pieces (at most ``max_split_bytes``
    of Parquet each; by default as Spark sizes them for ``parallelism`` task slots, else this machine's
    CPUs), or one whole-table scan when its files cannot be read as plain Parquet.

    Example:
        >>> [len(s.pieces) for s in plan_splits(DeltaTable("/data/t"), parallelism=2)]  # doctest: +SKIP
        [3, 3]
    """
    root = table.table_uri
    whole = [Split(root, scan=True)]
    if not _plain_files(table):
        return whole
    actions = pa.table(table.get_add_actions(flatten=False))
    if actions.num_rows == 0:
        return []
    if any("://" in path for path in actions.column("path").to_pylist()):
        return whole  # absolute file URIs (shallow clones): leave them to deltalake
    keeps = keep_masks(table)
    files = _files(actions, root, keeps)
    if keeps:  # a deletion vector whose file is not in the snapshot we read: never skip one silently
        return whole
    parallelism = parallelism or _cpus()
    total = sum(file.size + _OPEN_COST_BYTES for file, _ in files)
    max_split = max_split_bytes or min(_MAX_SPLIT_BYTES, max(_OPEN_COST_BYTES, total // max(parallelism, 1)))
    pieces = [piece for file, mask in files for piece in _cut(file, mask, max(max_split, 1))]
    return [Split(root, tuple(group)) for group in _pack(pieces, max_split)]


def _plain_files(table: Any) -> bool:
    protocol = table.protocol()
    features = set(protocol.reader_features or ())
    if protocol.min_reader_version > 3 or (protocol.min_reader_version == 3 and not features <= _PLAIN_FEATURES):
        return False
    mapping = table.metadata().configuration.get("delta.columnMapping.mode", "none")
    # Column mapping stores columns under physical names (and reader version 2 may need it).
    return mapping in (None, "", "none")


def keep_masks(table: Any) -> dict[str, Any]:
    """Keep masks (NumPy booleans) of the files with deletion vectors, by the file's full URI (the
    scan's pieces, and tables.delta.row_count, which counts the rows they delete)."""
    import numpy as np

    features = set(table.protocol().reader_features or ())
    if "deletionVectors" not in features:
        return {}
    masks: dict[str, Any] = {}
    for batch in pa.RecordBatchReader.from_stream(table.deletion_vectors()):
        vectors = batch.column("selection_vector")
        for index, uri in enumerate(batch.column("filepath").to_pylist()):
            masks[uri] = np.asarray(vectors[index].values.to_numpy(zero_copy_only=False), dtype=bool)
    return masks


def _files(actions: pa.Table, root: str, keeps: dict[str, Any]) -> list[tuple[_Piece, Any]]:
    """One piece per add action (a whole file) with its keep mask (None: no deletion vector),
    popped out of ``keeps``."""
    paths = actions.column("path").to_pylist()
    sizes = actions.column("size_bytes").to_pylist()
    rows = actions.column("num_records").to_pylist() if "num_records" in actions.column_names else [None] * len(paths)
    values = actions.column("partition").to_pylist() if "partition" in actions.column_names else [None] * len(paths)
    prefix = root.rstrip("/") + "/"
    files = []
    for path, size, count, partition in zip(paths, sizes, rows, values, strict=True):
        piece = _Piece(unquote(path), 0, count, int(size or 0), tuple((partition or {}).items()))
        # deltalake names a deletion vector's file by the table URI + the path as logged (encoded).
        files.append((piece, keeps.pop(prefix + path, None)))
    return files


def _cut(file: _Piece, mask: Any, max_split: int) -> list[_Piece]:
    """``file`` as pieces of at most about ``max_split`` bytes, cut by row counts (files without
    a row count in the log stay whole), each with its part of the keep ``mask``. A task reads only
    the row groups its rows touch; a row group cut in two is decoded by both tasks, which costs less
    than the Arrow-to-JVM transfer that the cut spreads over the task slots."""
    rows = file.stop
    count = 1 if rows is None else max(1, min(rows, math.ceil(file.size / max_split)))
    if rows is None or count == 1:
        keep, keep_rows = _packed(mask, 0, rows)
        return [replace(file, keep=keep, keep_rows=keep_rows)]
    pieces = []
    for start, stop in itertools.pairwise(rows * i // count for i in range(count + 1)):
        # The last piece reads to the file's end, so a row count in the log that is short loses no rows.
        end = None if stop == rows else stop
        keep, keep_rows = _packed(mask, start, end)
        size = file.size * (stop - start) // rows
        pieces.append(_Piece(file.path, start, end, size, file.partition, keep, keep_rows))
    return pieces


def _packed(mask: Any, start: int, stop: int | None) -> tuple[bytes | None, int]:
    """Rows ``[start, stop)`` of a keep mask as packed bits, or None when none of them is deleted."""
    import numpy as np

    if mask is None:
        return None, 0
    part = mask[start:stop]
    if part.all():
        return None, 0
    return np.packbits(part, bitorder="little").tobytes(), len(part)


def _pack(pieces: list[_Piece], max_split: int) -> list[list[_Piece]]:
    """Spark's file packing: biggest first, each split filled until the next piece would overflow."""
    groups: list[list[_Piece]] = []
    current: list[_Piece] = []
    used = 0
    for piece in sorted(pieces, key=lambda p: p.size, reverse=True):
        if current and used + piece.size > max_split:
            groups.append(current)
            current, used = [], 0
        current.append(piece)
        used += piece.size + _OPEN_COST_BYTES
    if current:
        groups.append(current)
    return groups


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _filesystem(root: str, storage_options: dict[str, str] | None) -> tuple[Any, str]:
    """A pyarrow filesystem for the table's files and the prefix their relative paths go under."""
    import pyarrow.fs as pafs

    folder = local_folder(root)
    if folder is not None:
        # pyarrow's own local reads: no detour through Python for every read call.
        return pafs.LocalFileSystem(), folder
    from deltalake.fs import DeltaStorageHandler

    # deltalake's object store, configured by the same storage options that opened the table.
    return pafs.PyFileSystem(DeltaStorageHandler(root, storage_options)), ""


def _read_piece(filesystem: Any, base: str, piece: _Piece, target: pa.Schema) -> Iterator[pa.RecordBatch]:
    """The rows of ``piece`` that its deletion vector keeps, as batches of the ``target`` schema."""
    import numpy as np
    import pyarrow.parquet as pq

    with filesystem.open_input_file(base + piece.path) as source:
        parquet = pq.ParquetFile(source, pre_buffer=True, coerce_int96_timestamp_unit="us")
        meta = parquet.metadata
        stop = meta.num_rows if piece.stop is None else min(piece.stop, meta.num_rows)
        groups: list[int] = []
        first = offset = 0
        for index in range(meta.num_row_groups):
            rows = meta.row_group(index).num_rows
            if offset < stop and offset + rows > piece.start:
                if not groups:
                    first = offset
                groups.append(index)
            offset += rows
        if not groups:
            return
        values = dict(piece.partition)
        present = set(parquet.schema_arrow.names)
        wanted = [name for name in target.names if name not in values and name in present]
        # A file holding only partition columns still tells its row count through one column.
        columns = wanted or parquet.schema_arrow.names[:1]
        keep = None
        if piece.keep is not None:
            keep = np.unpackbits(np.frombuffer(piece.keep, dtype=np.uint8), count=piece.keep_rows, bitorder="little")
        position = first
        # One thread: the parallelism is Spark's, one task per slot; more threads only contend.
        batches = parquet.iter_batches(batch_size=_BATCH_ROWS, row_groups=groups, columns=columns, use_threads=False)
        for batch in batches:
            begin = position
            position += batch.num_rows
            low, high = max(piece.start - begin, 0), min(stop - begin, batch.num_rows)
            if high <= low:
                continue
            batch = batch.slice(low, high - low)
            if keep is not None:
                batch = batch.filter(pa.array(_mask(keep, begin + low - piece.start, high - low)))
            yield _conform(batch, values, target)
            if position >= stop:
                break


def _mask(keep: Any, offset: int, length: int) -> Any:
    """``length`` keep flags from ``offset``; rows past the deletion vector's end are kept."""
    import numpy as np

    part = keep[offset : offset + length].astype(bool)
    if len(part) < length:
        part = np.concatenate([part, np.ones(length - len(part), dtype=bool)])
    return part


def _conform(batch: pa.RecordBatch, values: Mapping[str, Any], target: pa.Schema) -> pa.RecordBatch:
    """``batch`` with the ``target`` columns in order: partition columns from the log, columns
    the file lacks (added later to the table) as nulls, the rest cast to the table's types."""
    arrays = []
    for field in target:
        if field.name in values:
            arrays.append(pa.repeat(pa.scalar(values[field.name], type=field.type), batch.num_rows))
        elif field.name in batch.schema.names:
            column = batch.column(field.name)
            arrays.append(column if column.type == field.type else column.cast(field.type))
        else:
            arrays.append(pa.nulls(batch.num_rows, type=field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=target)
