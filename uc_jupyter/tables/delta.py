"""Open and scan catalog tables straight from their Delta files (no Spark), privileges checked.

Scans go through ``DeltaTable.scan``, which honours deletion vectors (``to_pyarrow_table`` refuses
such tables and reading ``file_uris()`` yourself silently ignores them).

Example:
    >>> from uc_jupyter.tables.delta import read_arrow
    >>> df = read_arrow("main.ml.iris", columns=["sepal_length", "label"]).to_pandas()  # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from uc_jupyter.catalog import Catalog, CatalogError, get_catalog
from uc_jupyter.catalog.storage import delta_uri

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable

__all__ = ["open_delta", "read_arrow"]


def open_delta(name: str, *, version: int | None = None, catalog: Catalog | None = None) -> DeltaTable:
    """The Delta snapshot of table ``name`` (its latest version, or ``version``); needs SELECT."""
    from deltalake import DeltaTable
    from deltalake.exceptions import DeltaError

    resolved = (catalog or get_catalog()).resolve_table(name)
    try:
        return DeltaTable(
            delta_uri(resolved.storage_location),
            version=version,
            storage_options=resolved.storage_options or None,
        )
    except DeltaError as exc:
        raise CatalogError(f"table {resolved.table.full_name}: cannot open version {version}: {exc}") from exc


def read_arrow(
    name: str,
    *,
    columns: list[str] | None = None,
    version: int | None = None,
    catalog: Catalog | None = None,
) -> pa.Table:
    """Read table ``name`` (optionally some ``columns`` at a pinned ``version``) into pyarrow."""
    import pyarrow as pa

    table = open_delta(name, version=version, catalog=catalog)
    if columns is not None:
        known = [f.name for f in table.schema().fields]
        unknown = [c for c in columns if c not in known]
        if unknown:
            raise ValueError(f"table {name} has no column {unknown[0]!r}; its columns are {', '.join(known)}")
    return pa.RecordBatchReader.from_stream(table.scan(columns=columns)).read_all()
