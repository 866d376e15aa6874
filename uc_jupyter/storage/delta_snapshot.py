"""The one place a Delta snapshot is opened, with one set of one-line errors naming the table.

Every reader of a table's Delta files opens its snapshot here: ``read_arrow``/``open_delta``, the
``UCTableDataset``, the Spark data source and the catalog's schema probe. deltalake's own errors are
multi-line (Rust backtraces, coloured arrows) and differ by cause; here they become:

- :class:`SnapshotMissing` (a ``LookupError``): no Delta table at the location, or not that version;
- :class:`SnapshotError`: anything else (storage unreachable, credentials refused, a broken log).

This module imports nothing else from uc_jupyter, so :mod:`uc_jupyter.tables.delta_source` can ship
it by value to a remote Spark Connect server where only deltalake and pyarrow are installed.

Example:
    >>> open_snapshot("/no/such/table", table="main.ml.t")
    Traceback (most recent call last):
    uc_jupyter.storage.delta_snapshot.SnapshotMissing: table main.ml.t: no Delta table at /no/such/table
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from deltalake import DeltaTable

__all__ = ["SnapshotError", "SnapshotMissing", "local_folder", "open_snapshot"]


class SnapshotError(Exception):
    """A table's Delta snapshot could not be opened (one line: the table, where, and why)."""


class SnapshotMissing(SnapshotError, LookupError):
    """There is no Delta table at the location, or it has no such version."""


def open_snapshot(
    uri: str,
    *,
    table: str,
    version: int | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> DeltaTable:
    """The snapshot of the Delta table at ``uri`` (deltalake's URI form) as of ``version`` (default
    the latest), read with deltalake's ``storage_options``; ``table`` names it in errors."""
    from deltalake import DeltaTable
    from deltalake.exceptions import DeltaError, TableNotFoundError

    at = "" if version is None else f" version {version}"
    try:
        return DeltaTable(uri, version=version, storage_options=dict(storage_options) if storage_options else None)
    except TableNotFoundError as exc:
        raise SnapshotMissing(f"table {table}: no Delta table at {uri}") from exc
    except DeltaError as exc:
        if version is not None:  # deltalake says no more than "LogSegment end version ... not the same"
            raise SnapshotMissing(f"table {table}: cannot open{at}: {_first_line(exc)}") from exc
        raise SnapshotError(f"table {table}: cannot open its Delta log at {uri}: {_first_line(exc)}") from exc
    except Exception as exc:  # storage errors come as OSError, others as bare exceptions
        raise SnapshotError(f"table {table}: cannot open{at or ' its Delta log'} at {uri}: {_first_line(exc)}") from exc


def _first_line(exc: BaseException) -> str:
    # uc_jupyter.errors.first_line, written out: this module ships without the package (see above).
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def local_folder(root: str) -> str | None:
    """The folder of a table whose root is on the local file system (a path or a ``file:`` URL), as a
    path ending in ``/``; None for object storage (read through deltalake's object store).

    Example:
        >>> local_folder("file:///data/t%201"), local_folder("/data/t"), local_folder("s3://lake/t")
        ('/data/t 1/', '/data/t/', None)
    """
    from urllib.parse import unquote, urlsplit

    parts = urlsplit(root)
    return unquote(parts.path).rstrip("/") + "/" if parts.scheme in ("", "file") else None
