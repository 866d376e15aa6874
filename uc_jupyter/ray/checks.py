"""What ``uc_jupyter.ray`` refuses before any Ray task starts, one line each: a path where a table name
belongs, a table Ray's reader would read wrongly (not Delta, or rows deleted by deletion vectors that
``ray.data.read_delta`` would return), and an append whose columns are not the table's.

Example:
    >>> table_name("main.ml.t", "ray.data.read_delta")
    'main.ml.t'
    >>> try:
    ...     table_name("s3://lake/tables/a", "ray.data.read_delta")
    ... except ValueError as exc:
    ...     print(str(exc)[:80])
    ray.data.read_delta(catalog=...) takes a table name like 'main.ml.t', not the pa
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from uc_jupyter.catalog.model import CatalogError, ColumnInfo
from uc_jupyter.catalog.rules.names import InvalidName, parse_name

__all__ = ["append_mismatch", "delta_format", "readable_by_ray", "table_name"]

DELETION_VECTORS = "deletionVectors"


def table_name(text: object, call: str) -> str:
    """``text`` as a three-part table name (``main.ml.t``); InvalidName for anything else, a path
    (what a user of ``read_delta`` without a catalog passes) named as such."""
    if isinstance(text, str) and ("/" in text or ":" in text):
        raise InvalidName(
            f"{call}(catalog=...) takes a table name like 'main.ml.t', not the path {text!r}: "
            "read a path without catalog=, or register it as a table first"
        )
    if not isinstance(text, str):
        raise InvalidName(f"{call}(catalog=...) takes one table name like 'main.ml.t', got {type(text).__name__}")
    return str(parse_name(text, levels=(3,)))


def delta_format(name: str, data_source_format: str, call: str) -> None:
    """Refuse a table that is not Delta: the catalog's tables are Delta, a server may list others.

    Example:
        >>> try:
        ...     delta_format("main.ml.t", "CSV", "ray.data.read_delta")
        ... except CatalogError as exc:
        ...     print(str(exc)[:50])
        table main.ml.t is a CSV table, not Delta: ray.dat
    """
    if data_source_format.upper() != "DELTA":
        raise CatalogError(
            f"table {name} is a {data_source_format.upper()} table, not Delta: "
            f"{call}(catalog=...) reads and writes Delta tables only"
        )


def readable_by_ray(name: str, snapshot: Any) -> None:
    """Refuse a snapshot whose rows ``ray.data.read_delta`` would get wrong. It reads the Parquet files
    the log names whole (deltalake's ``to_pyarrow_dataset``): rows a deletion vector deletes would come
    back, so deltalake refuses such tables, which Ray reports as a missing deltalake version."""
    protocol = snapshot.protocol()
    if DELETION_VECTORS in (protocol.reader_features or ()):
        raise CatalogError(
            f"table {name} uses deletion vectors, which ray.data.read_delta cannot apply (it reads the Parquet "
            f"files whole); read it with uc_jupyter.ray.read_table({name!r}), which honours them"
        )


def append_mismatch(table: Sequence[ColumnInfo], incoming: Sequence[ColumnInfo]) -> str | None:
    """Why ``incoming`` columns cannot be appended to a table of ``table`` columns, or None: the same
    names (case-insensitively, as Delta compares them; any order, since Delta reads by name) with the
    same Delta types. Nullability is the writer's business.

    Example:
        >>> append_mismatch([ColumnInfo("x", "long")], [ColumnInfo("X", "long")]) is None
        True
        >>> append_mismatch([ColumnInfo("x", "long")], [ColumnInfo("x", "string"), ColumnInfo("y", "long")])
        'the table has x long, the dataset x string, y long'
    """
    ours = {c.name.lower(): c.type_text for c in table}
    theirs = {c.name.lower(): c.type_text for c in incoming}
    if ours == theirs:
        return None
    shown = ", ".join(f"{c.name} {c.type_text}" for c in table) or "no columns"
    given = ", ".join(f"{c.name} {c.type_text}" for c in incoming) or "no columns"
    return f"the table has {shown}, the dataset {given}"
