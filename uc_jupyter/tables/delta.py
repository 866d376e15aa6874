"""Open and scan catalog tables straight from their Delta files (no Spark), privileges checked.

Scans go through ``DeltaTable.scan``, which honours deletion vectors (``to_pyarrow_table`` refuses
such tables and reading ``file_uris()`` yourself silently ignores them).

Example:
    >>> from uc_jupyter.tables.delta import read_arrow
    >>> df = read_arrow("main.ml.iris", columns=["sepal_length", "label"]).to_pandas()  # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from uc_jupyter import options as opt
from uc_jupyter.catalog import Catalog, CatalogError, NotFound, ResolvedTable, get_catalog
from uc_jupyter.catalog.delta_files import delta_exists
from uc_jupyter.errors import first_line
from uc_jupyter.storage.delta_snapshot import SnapshotError, SnapshotMissing, open_snapshot
from uc_jupyter.storage.urls import delta_uri

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable

__all__ = ["open_delta", "read_arrow", "row_count"]


def open_delta(name: str, *, version: int | None = None, catalog: Catalog | None = None) -> DeltaTable:
    """The Delta snapshot of table ``name`` (its latest version, or ``version``); needs SELECT.

    Errors are the catalog's, one line each: NotFound when the table (or that version) is not
    there, or was dropped or replaced meanwhile; CatalogError naming the table otherwise.
    """
    version = opt.maybe_whole_number("version", version)
    cat = catalog or get_catalog()
    return _open_resolved(cat, cat.resolve_table(name), version)


def _open_resolved(cat: Catalog, resolved: ResolvedTable, version: int | None) -> DeltaTable:
    try:
        return open_snapshot(
            delta_uri(resolved.storage_location),
            table=resolved.table.full_name,
            version=version,
            storage_options=resolved.storage_options,
        )
    except SnapshotError as exc:
        raise _delta_failure(cat, resolved, exc) from exc


def row_count(table: DeltaTable) -> int | None:
    """The rows of the snapshot ``table`` from its log, no data file read: each file's logged
    record count, less the rows its deletion vector deletes; None when a file's count is not logged.

    Example:
        >>> row_count(open_delta("main.ml.iris"))   # doctest: +SKIP
        3000
    """
    import pyarrow as pa

    from uc_jupyter.tables.delta_source import keep_masks

    actions = pa.table(table.get_add_actions(flatten=True))
    if not actions.num_rows:
        return 0
    if "num_records" not in actions.column_names or actions.column("num_records").null_count:
        return None
    rows = int(pa.compute.sum(actions.column("num_records")).as_py())
    return rows - sum(int(mask.size - mask.sum()) for mask in keep_masks(table).values())


def read_arrow(
    name: str,
    *,
    columns: str | list[str] | None = None,
    version: int | None = None,
    catalog: Catalog | None = None,
) -> pa.Table:
    """Read table ``name`` (optionally some ``columns``, or one as a str, at a pinned ``version``) into pyarrow."""
    import pyarrow as pa
    from deltalake.exceptions import DeltaError

    columns = opt.column_names("columns", columns)
    version = opt.maybe_whole_number("version", version)
    cat = catalog or get_catalog()
    resolved = cat.resolve_table(name)  # what a failure is judged against: the table whose files were read
    table = _open_resolved(cat, resolved, version)
    if columns is not None:
        known = [f.name for f in table.schema().fields]
        unknown = [c for c in columns if c not in known]
        if unknown:
            raise ValueError(opt.unknown_column(f"table {name}", unknown[0], known))
    try:
        return pa.RecordBatchReader.from_stream(table.scan(columns=columns)).read_all()
    except (OSError, pa.ArrowException, DeltaError) as exc:  # e.g. its files went away while they were read
        # Not resolved again here: a table dropped and made again meanwhile would look unchanged.
        failed = SnapshotError(f"table {resolved.table.full_name}: reading its files failed: {first_line(exc)}")
        raise _delta_failure(cat, resolved, failed) from exc


def _delta_failure(catalog: Catalog, resolved: ResolvedTable, exc: SnapshotError) -> CatalogError:
    """The catalog's one-line error for a Delta read that failed. Readers take no lock, so a table may
    be dropped or replaced while it is read: the catalog is asked again, and then the answer is its
    NotFound (the table is gone), a NotFound saying it moved, or the snapshot's own one line (a
    NotFound when the table has no such version)."""
    name = resolved.table.full_name
    try:
        now = catalog.resolve_table(name)  # raises NotFound when it was dropped meanwhile
    except NotFound as gone:
        return gone
    if now.storage_location != resolved.storage_location or not delta_exists(
        name, now.storage_location, now.storage_options
    ):
        return NotFound(f"table {name} was dropped or replaced while it was read; read it again")
    return NotFound(str(exc)) if isinstance(exc, SnapshotMissing) else CatalogError(str(exc))
