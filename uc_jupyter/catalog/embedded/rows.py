"""The embedded metastore's rows as the catalog's info dataclasses, and the keys rows are stored under.

Example:
    >>> key(name_of("main.ml.iris"))
    'main.ml.iris'
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from uc_jupyter.catalog.model import (
    CatalogInfo,
    ColumnInfo,
    CredentialInfo,
    ExternalLocationInfo,
    SchemaInfo,
    TableInfo,
    VolumeInfo,
)
from uc_jupyter.catalog.rules.names import SecurableName

__all__ = [
    "audit",
    "catalog_info",
    "columns_json",
    "credential_info",
    "key",
    "location_info",
    "name_of",
    "new_id",
    "now",
    "schema_info",
    "table_info",
    "volume_info",
]


def key(name: SecurableName) -> str:
    """The stored key: lower-case parts joined by '.', which no part may contain."""
    return ".".join(name.parts)


def name_of(stored: str) -> SecurableName:
    return SecurableName(tuple(stored.split(".")))


def now() -> str:
    return datetime.now(timezone.utc).isoformat()


def new_id() -> str:
    """A new object's id: a random UUID, as UC gives (names can be reused, ids never are)."""
    return str(uuid.uuid4())


def columns_json(columns: Sequence[ColumnInfo]) -> str:
    return json.dumps([[c.name, c.type_text, c.nullable] for c in columns])


def audit(row: sqlite3.Row) -> dict[str, Any]:
    """The stored id and audit fields of ``row`` (see :mod:`uc_jupyter.catalog.embedded.migrations`) as info
    dataclass keywords; ``updated_*`` are the creation's until the first update, as in UC."""
    updated = row["updated_at"] or row["created_at"]
    return {
        "id": row["id"],
        "created_by": row["created_by"],
        "updated_at": datetime.fromisoformat(updated),
        "updated_by": row["updated_by"] or row["created_by"],
    }


def catalog_info(row: sqlite3.Row) -> CatalogInfo:
    return CatalogInfo(
        row["key"], row["owner"], datetime.fromisoformat(row["created_at"]), row["comment"], **audit(row)
    )


def schema_info(row: sqlite3.Row) -> SchemaInfo:
    catalog, schema = row["key"].split(".")
    created = datetime.fromisoformat(row["created_at"])
    return SchemaInfo(catalog, schema, row["owner"], created, row["comment"], **audit(row))


def table_info(row: sqlite3.Row) -> TableInfo:
    catalog, schema, name = row["key"].split(".")
    columns = tuple(ColumnInfo(n, t, bool(nullable)) for n, t, nullable in json.loads(row["columns"] or "[]"))
    return TableInfo(
        catalog_name=catalog,
        schema_name=schema,
        name=name,
        owner=row["owner"],
        table_type="MANAGED" if row["managed"] else "EXTERNAL",
        storage_location=row["storage_location"],
        columns=columns,
        created_at=datetime.fromisoformat(row["created_at"]),
        comment=row["comment"],
        **audit(row),
    )


def volume_info(row: sqlite3.Row) -> VolumeInfo:
    catalog, schema, name = row["key"].split(".")
    return VolumeInfo(
        catalog_name=catalog,
        schema_name=schema,
        name=name,
        owner=row["owner"],
        volume_type="MANAGED" if row["managed"] else "EXTERNAL",
        storage_location=row["storage_location"],
        created_at=datetime.fromisoformat(row["created_at"]),
        comment=row["comment"],
        **audit(row),
    )


def credential_info(row: sqlite3.Row) -> CredentialInfo:
    return CredentialInfo(
        name=row["name"],
        owner=row["owner"],
        created_at=datetime.fromisoformat(row["created_at"]),
        option_names=tuple(json.loads(row["option_names"])),
        comment=row["comment"],
        **audit(row),
    )


def location_info(row: sqlite3.Row) -> ExternalLocationInfo:
    return ExternalLocationInfo(
        name=row["name"],
        url=row["url"],
        credential_name=row["credential"],
        owner=row["owner"],
        created_at=datetime.fromisoformat(row["created_at"]),
        comment=row["comment"],
        **audit(row),
    )
