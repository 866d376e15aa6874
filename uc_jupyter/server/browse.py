"""What the JupyterLab sidebar shows, as plain functions over a catalog: listings, table previews,
volume folders (one page at a time, :mod:`uc_jupyter.server.listing`), the "Insert %uc_load" line
(:mod:`uc_jupyter.server.load_lines`) and rank-pool status. The tornado handlers
(:mod:`uc_jupyter.server.handlers`) only parse the query, call one of these and write the JSON.

Every function runs as the catalog's current principal and raises the catalog's own errors;
:func:`status_of` maps them to HTTP statuses (400 malformed, 403 missing privilege, 404 unknown).

Example:
    >>> from uc_jupyter.catalog import get_catalog
    >>> cat = get_catalog()                                                # doctest: +SKIP
    >>> list_catalogs(cat)                                                 # doctest: +SKIP
    {'items': [{'name': 'main', 'full_name': 'main', 'kind': 'catalog', 'comment': None}]}
    >>> list_objects(cat, "main.ml")["tables"][0]["readable"]              # doctest: +SKIP
    True
    >>> volume_entries(cat, "/Volumes/main/ml/images")["entries"][0]       # doctest: +SKIP
    {'name': 'circle', 'path': '/Volumes/main/ml/images/circle', 'kind': 'directory', 'size': None}
    >>> load_line(cat, "/Volumes/main/ml/images")["line"]                   # doctest: +SKIP
    'loader = %uc_load /Volumes/main/ml/images --recursive --decode image --labels folder'
"""

from __future__ import annotations

import base64
import datetime
import decimal
import math
import uuid
from collections.abc import Callable, Collection, Iterable
from pathlib import Path
from typing import Any

from uc_jupyter.catalog import Catalog, CatalogError, InvalidName, NotFound, PermissionDenied
from uc_jupyter.catalog.rules.names import parse_name
from uc_jupyter.server.listing import (
    MAX_PAGE,
    PAGE_SIZE,
    BadRequest,
    is_hidden,
    parse_limit,
    query_integer,
    volume_entries,
)
from uc_jupyter.server.load_lines import load_line
from uc_jupyter.storage.errors import StorageUnreachable

__all__ = [
    "DEFAULT_PREVIEW_ROWS",
    "MAX_PAGE",
    "MAX_PREVIEW_ROWS",
    "PAGE_SIZE",
    "BadRequest",
    "is_hidden",
    "json_safe",
    "list_catalogs",
    "list_objects",
    "list_schemas",
    "load_line",
    "parse_limit",
    "parse_rows",
    "pool_records",
    "status_of",
    "table_preview",
    "volume_entries",
    "who",
]

DEFAULT_PREVIEW_ROWS = 10
MAX_PREVIEW_ROWS = 100
MAX_TEXT = 1000  # longer strings in a preview are cut to this many characters (and end with "…")
_SAFE_INTEGER = 2**53  # larger integers lose digits in JavaScript: sent as strings

Json = dict[str, Any]


def status_of(exc: BaseException) -> int | None:
    """The HTTP status for an error whose one-line message the sidebar shows, or None for a bug.

    Example:
        >>> status_of(BadRequest("rows must be an integer"))
        400
        >>> status_of(PermissionDenied("alice", "SELECT", "main.ml.iris"))
        403
        >>> status_of(NotFound("table main.ml.irsi does not exist"))
        404
        >>> status_of(StorageUnreachable("cannot list /Volumes/main/ml/v: http://10.0.0.9:9000 refused the connection"))
        502
        >>> status_of(RuntimeError("boom")) is None
        True
    """
    from uc_jupyter.catalog.embedded.local import EscapesVolume

    if isinstance(exc, (EscapesVolume, InvalidName, BadRequest, NotADirectoryError)):
        return 400  # EscapesVolume is a PermissionError: checked before PermissionDenied-like errors
    if isinstance(exc, PermissionDenied):
        return 403
    if isinstance(exc, (NotFound, FileNotFoundError)):
        return 404
    if isinstance(exc, CatalogError):
        return 500  # e.g. a table whose Delta log cannot be read: a one-line message worth showing
    if isinstance(exc, StorageUnreachable):
        return 502  # the volume's store, behind us, cannot be reached: its one line, not "Unhandled error"
    return None


def parse_rows(text: str | None) -> int:
    """The ``rows`` parameter of a table preview: an integer from 0 to 100, 10 when absent.

    Example:
        >>> parse_rows(None), parse_rows("0"), parse_rows(" 25 ")
        (10, 0, 25)
        >>> parse_rows("1e3")
        Traceback (most recent call last):
        uc_jupyter.server.listing.BadRequest: rows must be an integer from 0 to 100, got '1e3'
    """
    return query_integer("rows", text, low=0, high=MAX_PREVIEW_ROWS, default=DEFAULT_PREVIEW_ROWS)


def list_catalogs(catalog: Catalog) -> Json:
    """The catalogs the principal may see: ``{"items": [{name, full_name, kind, comment}]}``."""
    return {"items": [_item(c.name, c.full_name, "catalog", c.comment) for c in catalog.list_catalogs()]}


def list_schemas(catalog: Catalog, name: str) -> Json:
    """The schemas of catalog ``name`` the principal may see (needs USE CATALOG)."""
    parsed = parse_name(name, levels=(1,))
    return {"items": [_item(s.name, s.full_name, "schema", s.comment) for s in catalog.list_schemas(str(parsed))]}


def list_objects(catalog: Catalog, schema: str) -> Json:
    """The tables and volumes of ``schema`` the principal may see, each marked ``readable`` when the
    principal may also read it (SELECT on a table, READ VOLUME on a volume, held directly or inherited).
    """
    parsed = str(parse_name(schema, levels=(2,)))
    tables = [
        {**_item(t.name, t.full_name, "table", t.comment), "readable": _may(catalog.resolve_table, t.full_name)}
        for t in catalog.list_tables(parsed)
    ]
    volumes = [
        {**_item(v.name, v.full_name, "volume", v.comment), "readable": _may(catalog.resolve_volume_path, v.path)}
        for v in catalog.list_volumes(parsed)
    ]
    return {"tables": tables, "volumes": volumes}


def table_preview(catalog: Catalog, name: str, rows: int = DEFAULT_PREVIEW_ROWS) -> Json:
    """Table ``name``'s columns and its first ``rows`` rows (SELECT checked) at its current Delta version.

    Only the first record batches are read, never the whole table. Values are made JSON-safe by
    :func:`json_safe`.
    """
    import pyarrow as pa

    from uc_jupyter.tables.delta import open_delta, row_count

    if not 0 <= rows <= MAX_PREVIEW_ROWS:
        raise BadRequest(f"rows must be an integer from 0 to {MAX_PREVIEW_ROWS}, got {rows!r}")
    full_name = str(parse_name(name, levels=(3,)))
    info = catalog.get_table(full_name)
    delta = open_delta(full_name, catalog=catalog)  # checks SELECT
    reader = pa.RecordBatchReader.from_stream(delta.scan())
    batches: list[pa.RecordBatch] = []
    taken = 0
    try:
        while taken < rows:
            try:
                batch = reader.read_next_batch()
            except StopIteration:
                break
            batches.append(batch.slice(0, rows - taken))
            taken += batches[-1].num_rows
    finally:
        reader.close()
    head = pa.Table.from_batches(batches, schema=reader.schema)
    records = head.to_pylist()
    names = head.column_names
    return {
        "full_name": info.full_name,
        "version": int(delta.version()),
        "rows": row_count(delta),
        "columns": [{"name": c.name, "type": c.type_text, "nullable": c.nullable} for c in info.columns],
        "preview": {"columns": names, "rows": [[json_safe(r[n]) for n in names] for r in records]},
    }


def who(catalog: Catalog) -> Json:
    """Who the browser shows the catalog to, and which catalog it is: the principal every listing
    is checked as, and where the catalog lives (the embedded one's home, or a server's URL).

    Example:
        >>> who(get_catalog())   # doctest: +SKIP
        {'principal': 'admin', 'catalog': 'embedded catalog in /root/.uc_jupyter'}
    """
    from uc_jupyter.catalog.embedded.local import LocalCatalog

    if isinstance(catalog, LocalCatalog):
        where = f"embedded catalog in {catalog.root}"
    else:
        where = f"Unity Catalog at {getattr(catalog, 'url', type(catalog).__name__)}"
    return {"principal": catalog.current_principal(), "catalog": where}


def pool_records(kernel_ids: Collection[str], root: Path | None = None) -> Json:
    """The rank-pool status records (see :mod:`uc_jupyter.distributed.board`) of the kernels ``kernel_ids``.

    Files in the pools folder that are not such a record (malformed, oversized, symlinks, FIFOs) are
    skipped, so one bad file never costs the others their status bar.

    Example:
        >>> pool_records([], root=Path("/nonexistent"))
        {'pools': []}
    """
    from uc_jupyter.distributed.board import read_boards

    wanted = set(kernel_ids)
    return {"pools": [r for r in read_boards(root) if r["kernel_id"] in wanted]}


def json_safe(value: Any) -> Any:
    """A table value as JSON the browser can read: NaN and infinities as strings, dates as ISO text,
    bytes as base64 (with a ``base64:`` prefix), big integers and decimals as strings, long text cut.

    Example:
        >>> json_safe([1.5, float("nan"), 2**60, datetime.date(2024, 1, 31), b"hi", {"k": (1, None)}])
        [1.5, 'NaN', '1152921504606846976', '2024-01-31', 'base64:aGk=', {'k': [1, None]}]
    """
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if abs(value) <= _SAFE_INTEGER else str(value)
    if isinstance(value, float):
        return (
            value
            if math.isfinite(value)
            else ("NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity"))
        )
    if isinstance(value, str):
        return value if len(value) <= MAX_TEXT else value[:MAX_TEXT] + "…"
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value[:MAX_TEXT])
        return "base64:" + base64.b64encode(data).decode("ascii") + ("…" if len(value) > MAX_TEXT else "")
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, (decimal.Decimal, uuid.UUID)):
        return str(value)
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, Iterable):
        return [json_safe(v) for v in value]
    return str(value)


def _item(name: str, full_name: str, kind: str, comment: str | None) -> Json:
    return {"name": name, "full_name": full_name, "kind": kind, "comment": comment}


def _may(resolve: Callable[[str], object], name: str) -> bool:
    """Does resolving ``name`` (the catalog's read check) pass? Only a missing privilege counts as no."""
    try:
        resolve(name)
    except PermissionDenied:
        return False
    return True
