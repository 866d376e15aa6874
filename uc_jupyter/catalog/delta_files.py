"""The Delta files of the embedded catalog's tables: writing, probing and reading their schema,
with deltalake's errors turned into the catalog's one-line errors naming the table.

Example:
    >>> to_arrow({"x": [1]})
    Traceback (most recent call last):
    TypeError: data must be a pyarrow Table or a pandas DataFrame, got dict
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from uc_jupyter.catalog.model import CatalogError, ColumnInfo, NotFound, WriteMode
from uc_jupyter.catalog.rules.names import SecurableName
from uc_jupyter.errors import first_line
from uc_jupyter.storage import urls as st

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable

__all__ = [
    "arrow_columns",
    "delta_columns",
    "delta_exists",
    "delta_snapshot",
    "remove_unreferenced",
    "to_arrow",
    "write_delta",
]

# A data file a Delta writer makes (deltalake's part-*.parquet), or the part of one object_store was
# still writing on a local disk when its writer died (``<name>.parquet#<n>``).
_DATA_FILE = re.compile(r"[^/]+\.parquet(#\d+)?")


def to_arrow(data: object) -> pa.Table:
    """``data`` (a pyarrow Table or RecordBatch, or a pandas DataFrame) as a pyarrow Table."""
    import pyarrow as pa

    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is a dependency
        pd = None  # type: ignore[assignment]
    if pd is not None and isinstance(data, pd.DataFrame):
        return pa.Table.from_pandas(data, preserve_index=False)
    raise TypeError(f"data must be a pyarrow Table or a pandas DataFrame, got {type(data).__name__}")


def write_delta(name: SecurableName, location: str, table: pa.Table, mode: WriteMode, options: dict[str, Any]) -> None:
    """Write ``table`` at ``location`` (``mode`` as deltalake takes it); ValueError for columns that
    do not match, CatalogError naming the table for anything else."""
    from deltalake import write_deltalake
    from deltalake.exceptions import SchemaMismatchError

    try:
        write_deltalake(
            st.delta_uri(location),
            table,
            mode=mode,
            schema_mode="overwrite" if mode == "overwrite" else None,
            storage_options=st.deltalake_options(options) or None,
        )
    except SchemaMismatchError as exc:
        raise ValueError(f"table {name}: the data's columns do not match the table's: {first_line(exc)}") from exc
    except Exception as exc:  # deltalake raises bare Exceptions with Rust backtraces for many causes
        raise CatalogError(f"table {name}: writing Delta files failed: {first_line(exc)}") from exc


def delta_exists(name: SecurableName | str, location: str, options: dict[str, Any] | None) -> bool:
    """Is there a Delta table at ``location``? CatalogError naming the table when storage fails."""
    from deltalake import DeltaTable

    try:
        return bool(
            DeltaTable.is_deltatable(st.delta_uri(location), storage_options=st.deltalake_options(options) or None)
        )
    except Exception as exc:
        raise CatalogError(f"table {name}: cannot look for Delta files at {location}: {first_line(exc)}") from exc


def delta_snapshot(
    name: SecurableName | str, location: str, options: dict[str, Any], *, version: int | None = None
) -> DeltaTable:
    """The snapshot of the Delta table at ``location`` (its latest, or ``version``), the snapshot
    opener's one line as the catalog's error: NotFound when no Delta table (or no such version) is
    there, CatalogError for anything else."""
    from uc_jupyter.storage.delta_snapshot import SnapshotError, SnapshotMissing, open_snapshot

    try:
        return open_snapshot(
            st.delta_uri(location),
            table=str(name),
            version=version,
            storage_options=st.deltalake_options(options),
        )
    except SnapshotMissing as exc:
        raise NotFound(str(exc)) from exc
    except SnapshotError as exc:
        raise CatalogError(str(exc)) from exc


def delta_columns(name: SecurableName, location: str, options: dict[str, Any]) -> tuple[ColumnInfo, ...]:
    """The columns of the Delta table at ``location``; NotFound when it is gone (the snapshot
    opener's one line, as the catalog's error)."""
    snapshot = delta_snapshot(name, location, options)
    try:
        schema = snapshot.schema()
    except Exception as exc:  # a schema deltalake cannot map
        raise CatalogError(f"table {name}: cannot read the Delta schema at {location}: {first_line(exc)}") from exc
    return _columns(schema)


def arrow_columns(schema: pa.Schema) -> tuple[ColumnInfo, ...]:
    """The columns a Delta table written from arrow ``schema`` has, typed as :func:`delta_columns`
    types them (Delta's names: ``long``, ``string``...), so the two compare; ValueError, one line, for
    a type Delta has no column type for.

    Example:
        >>> import pyarrow as pa
        >>> [(c.name, c.type_text) for c in arrow_columns(pa.schema([("x", pa.int64()), ("s", pa.large_string())]))]
        [('x', 'long'), ('s', 'string')]
    """
    from deltalake import Schema

    try:
        return _columns(Schema.from_arrow(schema))
    except Exception as exc:  # deltalake's message for an arrow type it cannot map
        raise ValueError(f"columns {', '.join(schema.names)}: not Delta column types: {first_line(exc)}") from exc


def _columns(schema: Any) -> tuple[ColumnInfo, ...]:
    return tuple(ColumnInfo(f.name, _type_text(f.type), bool(f.nullable)) for f in schema.fields)


def _type_text(delta_type: Any) -> str:
    simple = getattr(delta_type, "type", None)
    return str(simple) if isinstance(simple, str) else str(delta_type)


def remove_unreferenced(
    location: str, options: dict[str, Any], *, since: float, named_with: str | None = None
) -> list[tuple[str, int]]:
    """Remove the data files at ``location`` that no commit of its Delta log names (an added file, a
    removed one that time travel still reads, a change-data file) and that were last modified at or
    after ``since`` (epoch seconds): what a writer killed after ``since`` left. The caller knows that
    no writer that may still commit is running (:mod:`uc_jupyter.catalog.embedded.killed_writes`), or
    gives ``named_with``, a token only its own write put in its files' names (``uc_jupyter.ray``'s
    failed writes): then only those files go, and any other writer's are left alone.
    Hidden paths (``_delta_log``, any ``_`` or ``.`` folder or file) are never touched, nor is
    anything when the log cannot be read whole. Returns each removed key and its bytes.

    Example:
        >>> remove_unreferenced("file:///tmp/no-such-table", {}, since=0.0)
        []
    """
    from uc_jupyter.storage.writes import open_writes

    writes = open_writes(location, options)
    listed = writes.listing()
    named = _named_by_log(writes, [entry.key for entry in listed if entry.key.startswith("_delta_log/")])
    if named is None:
        return []
    gone = [
        (entry.key, entry.size)
        for entry in listed
        if entry.modified >= since
        and entry.key not in named
        and not any(part.startswith(("_", ".")) for part in entry.key.split("/"))
        and _DATA_FILE.fullmatch(entry.key.rpartition("/")[2])
        and (named_with is None or named_with in entry.key.rpartition("/")[2])
    ]
    writes.delete([key for key, _ in gone])
    return gone


def _named_by_log(writes: Any, log_keys: list[str]) -> set[str] | None:
    """Every path a commit or checkpoint in the log names (relative, decoded); None when one cannot be read."""
    import pyarrow.parquet as pq

    named: set[str] = set()
    try:
        for key in log_keys:
            name = key.rpartition("/")[2]
            if re.fullmatch(r"\d{20}\.json", name):
                for line in writes.read_bytes(key).splitlines():
                    action = json.loads(line) if line.strip() else {}
                    for kind in ("add", "remove", "cdc"):
                        if isinstance(action.get(kind), dict) and isinstance(action[kind].get("path"), str):
                            named.add(unquote(action[kind]["path"]))
            elif name.endswith(".parquet"):  # a checkpoint (or a part or sidecar of one)
                import io

                table = pq.read_table(io.BytesIO(writes.read_bytes(key)))
                for kind in ("add", "remove"):
                    if kind in table.column_names:
                        named.update(unquote(row["path"]) for row in table.column(kind).to_pylist() if row)
    except Exception:  # a log we cannot read whole: nothing can be shown to be a leftover
        return None
    return named
