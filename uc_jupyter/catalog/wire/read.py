"""Unity Catalog JSON read back into our info dataclasses: the client's direction of
:mod:`~uc_jupyter.catalog.wire.shapes`.

Pure: no I/O. Tolerant where UC servers differ and strict where a wrong value would mislead: unknown
keys are ignored (a newer server may send more), absent optional fields become None, times are epoch
milliseconds (UC's ``StrictInt``), and a missing required field is a one-line
:class:`~uc_jupyter.catalog.CatalogError` naming the object and the field. Name parts are kept as the
server spells them, as the info dataclasses keep them.

Example:
    >>> info = catalog_info({"name": "main", "owner": "alice", "created_at": 1767225600000})
    >>> info.name, info.owner, info.created_at.isoformat()
    ('main', 'alice', '2026-01-01T00:00:00+00:00')
    >>> table_info({"name": "t", "catalog_name": "main", "schema_name": "ml"})
    Traceback (most recent call last):
    uc_jupyter.catalog.CatalogError: the server's TableInfo for main.ml.t has no table_type; is it a ...
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Literal, cast

from uc_jupyter.catalog.model import (
    CatalogError,
    CatalogInfo,
    ColumnInfo,
    CredentialInfo,
    ExternalLocationInfo,
    PrincipalInfo,
    SchemaInfo,
    StagingTableInfo,
    TableInfo,
    VolumeInfo,
)

__all__ = [
    "catalog_info",
    "column_info",
    "credential_info",
    "from_ms",
    "location_info",
    "principal_info",
    "schema_info",
    "staging_table_info",
    "table_info",
    "volume_info",
]

Json = dict[str, Any]
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def from_ms(value: object) -> datetime:
    """Epoch milliseconds as an aware UTC datetime; anything else (absent, not a number) is the epoch,
    since a listing must not fail on one server's missing audit field."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return datetime.fromtimestamp(value / 1000, tz=timezone.utc)
    return _EPOCH


def _need(body: Json, field: str, model: str, name: str) -> str:
    value = body.get(field)
    if not isinstance(value, str) or not value:
        raise CatalogError(f"the server's {model} for {name} has no {field}; is it a Unity Catalog server?")
    return value


def _comment(body: Json) -> str | None:
    comment = body.get("comment")
    return comment if isinstance(comment, str) else None


def _audit(body: Json, id_field: str) -> dict[str, Any]:
    """The id and audit fields, each None when the server leaves it out."""
    updated = body.get("updated_at")
    return {
        "id": _text(body.get(id_field)),
        "created_by": _text(body.get("created_by")),
        "updated_at": from_ms(updated) if updated is not None else None,
        "updated_by": _text(body.get("updated_by")),
    }


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _owner(body: Json) -> str:
    owner = body.get("owner")
    return owner if isinstance(owner, str) else ""


def catalog_info(body: Json) -> CatalogInfo:
    """A UC ``CatalogInfo``."""
    name = _need(body, "name", "CatalogInfo", str(body.get("name")))
    return CatalogInfo(name, _owner(body), from_ms(body.get("created_at")), _comment(body), **_audit(body, "id"))


def schema_info(body: Json) -> SchemaInfo:
    """A UC ``SchemaInfo``."""
    name = _need(body, "name", "SchemaInfo", str(body.get("full_name") or body.get("name")))
    catalog = _need(body, "catalog_name", "SchemaInfo", name)
    return SchemaInfo(
        catalog, name, _owner(body), from_ms(body.get("created_at")), _comment(body), **_audit(body, "schema_id")
    )


def _three(body: Json, model: str) -> tuple[str, str, str]:
    shown = ".".join(str(body.get(k)) for k in ("catalog_name", "schema_name", "name"))
    return (
        _need(body, "catalog_name", model, shown),
        _need(body, "schema_name", model, shown),
        _need(body, "name", model, shown),
    )


def _kind(body: Json, field: str, model: str, name: str) -> Literal["MANAGED", "EXTERNAL"]:
    value = _need(body, field, model, name).upper()
    if value not in ("MANAGED", "EXTERNAL"):  # views, streaming tables...: not something we can read
        raise CatalogError(f"{name} is a {value} {model[:-4].lower()}; uc_jupyter reads MANAGED and EXTERNAL ones only")
    return cast(Literal["MANAGED", "EXTERNAL"], value)


def column_info(body: Json) -> ColumnInfo:
    """A UC ``ColumnInfo``: name, ``type_text`` (else the type name in lower case), nullable (default true)."""
    text = body.get("type_text") or str(body.get("type_name") or "").lower()
    return ColumnInfo(str(body.get("name") or ""), str(text), body.get("nullable") is not False)


def table_info(body: Json) -> TableInfo:
    """A UC ``TableInfo``; columns in ``position`` order when the server gives positions."""
    catalog, schema, name = _three(body, "TableInfo")
    shown = f"{catalog}.{schema}.{name}"
    columns = [c for c in body.get("columns") or () if isinstance(c, dict)]
    if all(isinstance(c.get("position"), int) for c in columns):
        columns.sort(key=lambda c: c["position"])
    return TableInfo(
        catalog,
        schema,
        name,
        _owner(body),
        _kind(body, "table_type", "TableInfo", shown),
        str(body.get("storage_location") or ""),
        tuple(column_info(c) for c in columns),
        from_ms(body.get("created_at")),
        str(body.get("data_source_format") or "DELTA").upper(),
        _comment(body),
        **_audit(body, "table_id"),
    )


def staging_table_info(body: Json, requested: tuple[str, str, str], owner: str) -> StagingTableInfo:
    """A UC ``StagingTableInfo`` (``POST /staging-tables``) for the table ``requested`` (catalog, schema,
    name: what the answer names it when it names it at all; UC OSS answers with the id and location
    only); its creator, ``owner``, is the caller. Times the server leaves out read as the epoch.

    Example:
        >>> staging_table_info({"id": "4e1c", "staging_location": "file:///s/t"}, ("main", "ml", "t"), "alice").id
        '4e1c'
    """
    fields = ("catalog_name", "schema_name", "name")
    catalog, schema, name = (str(body.get(k) or r) for k, r in zip(fields, requested, strict=True))
    shown = f"{catalog}.{schema}.{name}"
    return StagingTableInfo(
        catalog,
        schema,
        name,
        id=_need(body, "id", "StagingTableInfo", shown),
        staging_location=_need(body, "staging_location", "StagingTableInfo", shown),
        owner=owner,
        created_at=from_ms(body.get("created_at")),
        expires_at=from_ms(body.get("expires_at")),
    )


def volume_info(body: Json) -> VolumeInfo:
    """A UC ``VolumeInfo``."""
    catalog, schema, name = _three(body, "VolumeInfo")
    shown = f"{catalog}.{schema}.{name}"
    return VolumeInfo(
        catalog,
        schema,
        name,
        _owner(body),
        _kind(body, "volume_type", "VolumeInfo", shown),
        str(body.get("storage_location") or ""),
        from_ms(body.get("created_at")),
        _comment(body),
        **_audit(body, "volume_id"),
    )


def credential_info(body: Json) -> CredentialInfo:
    """A UC ``CredentialInfo``; the option names from our extension field ``uc_jupyter_option_names``
    (a UC OSS credential holds an IAM role instead: shown as the option ``role_arn``)."""
    name = _need(body, "name", "CredentialInfo", str(body.get("name")))
    names = body.get("uc_jupyter_option_names")
    if not isinstance(names, list):
        names = ["role_arn"] if isinstance(body.get("aws_iam_role"), dict) else []
    return CredentialInfo(
        name,
        _owner(body),
        from_ms(body.get("created_at")),
        tuple(str(n) for n in names),
        _comment(body),
        **_audit(body, "id"),
    )


def location_info(body: Json) -> ExternalLocationInfo:
    """A UC ``ExternalLocationInfo`` (``credential_name`` may be absent on our server: the environment's)."""
    name = _need(body, "name", "ExternalLocationInfo", str(body.get("name")))
    url = _need(body, "url", "ExternalLocationInfo", name)
    credential = body.get("credential_name")
    return ExternalLocationInfo(
        name,
        url,
        credential if isinstance(credential, str) and credential else None,
        _owner(body),
        from_ms(body.get("created_at")),
        _comment(body),
        **_audit(body, "id"),
    )


def principal_info(body: Json) -> PrincipalInfo:
    """A principal of uc_jupyter's extension routes (:mod:`uc_jupyter.ucserver.routes_extensions`)."""
    name = _need(body, "name", "principal", str(body.get("name")))
    kind: Literal["user", "service_principal"] = (
        "service_principal" if body.get("kind") == "service_principal" else "user"
    )
    return PrincipalInfo(name, kind, from_ms(body.get("created_at")), bool(body.get("metastore_admin")))
