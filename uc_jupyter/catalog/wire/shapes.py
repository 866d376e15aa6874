"""Catalog objects on the wire: our info dataclasses as Unity Catalog JSON, and strict request parsing.

Pure: no I/O. Shapes follow the official client's models (``unitycatalog-client`` 0.7.0, generated from
UC OSS's ``api/all.yaml``; see docs/design/unity-catalog-server.md section 1):

- times are JSON integers of epoch **milliseconds** (the client's ``StrictInt``);
- ids, ``created_by``, ``updated_at``/``updated_by`` are the stored ones
  (:mod:`uc_jupyter.catalog.embedded.migrations`); before the first update ``updated_*`` equal
  ``created_*``, as UC OSS fills them at creation;
- an info without a stored id (made by hand) gets the id derived before ids were stored: the UUID-5 of
  its kind, full name and creation time (to the microsecond), which the migration stored for every
  object that existed then, so no id a client saw has changed;
- fields that are None are left out (UC's own server omits them too), ``properties`` is ``{}``.

Requests are checked before anything is done: every field of the client's request model is known,
any other is refused, required ones must be present, every value must have its type, and each
refusal is a :class:`~uc_jupyter.catalog.wire.errors.WireError` (400 ``INVALID_ARGUMENT``) of one line.

Example:
    >>> from datetime import datetime, timezone
    >>> from uc_jupyter.catalog.model import CatalogInfo
    >>> info = CatalogInfo("main", "alice", datetime(2026, 1, 1, tzinfo=timezone.utc), "team data")
    >>> body = catalog_json(info)
    >>> body["created_at"], body["owner"], body["id"] == catalog_json(info)["id"]
    (1767225600000, 'alice', True)
    >>> parse_request(b'{"name": "main", "colour": 1}', CREATE_CATALOG)
    Traceback (most recent call last):
    uc_jupyter.catalog.wire.errors.WireError: unknown field 'colour' in CreateCatalog; known fields: name, ...
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from uc_jupyter.catalog.model import CatalogInfo, ColumnInfo, SchemaInfo, StagingTableInfo, TableInfo, VolumeInfo
from uc_jupyter.catalog.rules.names import quote_part
from uc_jupyter.catalog.wire.errors import WireError

__all__ = [
    "CREATE_CATALOG",
    "CREATE_SCHEMA",
    "CREATE_STAGING_TABLE",
    "CREATE_TABLE",
    "CREATE_VOLUME",
    "MAX_PAGE",
    "UPDATE_CATALOG",
    "UPDATE_SCHEMA",
    "UPDATE_VOLUME",
    "Model",
    "Page",
    "catalog_json",
    "dotted_name",
    "epoch_ms",
    "next_token",
    "object_id",
    "page",
    "page_bounds",
    "parse_bool",
    "parse_request",
    "schema_json",
    "staging_json",
    "table_json",
    "volume_json",
]

MAX_PAGE = 1000  # the server's page size and the most a page holds (the 0.7.0 client asks for <= 1000)
_NAMESPACE = uuid.UUID("6f1d3c0e-8a57-4d0b-9a39-0c1c4a7f2b5e")  # fixed: ids must agree across processes


@dataclass(frozen=True)
class Model:
    """A request body as the official client defines it: field name -> JSON type, and which are required."""

    name: str
    fields: dict[str, type]
    required: frozenset[str] = frozenset()


CREATE_CATALOG = Model(
    "CreateCatalog",
    {"name": str, "comment": str, "properties": dict, "storage_root": str},
    frozenset({"name"}),
)
CREATE_SCHEMA = Model(
    "CreateSchema",
    {"name": str, "catalog_name": str, "comment": str, "properties": dict, "storage_root": str},
    frozenset({"name", "catalog_name"}),
)
CREATE_VOLUME = Model(
    "CreateVolumeRequestContent",
    {
        "catalog_name": str,
        "schema_name": str,
        "name": str,
        "volume_type": str,
        "comment": str,
        "storage_location": str,
    },
    frozenset({"catalog_name", "schema_name", "name", "volume_type"}),
)
CREATE_TABLE = Model(
    "CreateTable",
    {
        "name": str,
        "catalog_name": str,
        "schema_name": str,
        "table_type": str,
        "data_source_format": str,
        "columns": list,
        "storage_location": str,
        "comment": str,
        "properties": dict,
        "view_definition": str,
        "view_dependencies": dict,
    },
    frozenset({"name", "catalog_name", "schema_name", "table_type", "columns"}),
)
# Updates: UC's bodies plus ``owner``, which UC OSS's servers take and 0.7.0's models lack (RestCatalog sends it).
UPDATE_CATALOG = Model("UpdateCatalog", {"comment": str, "properties": dict, "new_name": str, "owner": str})
UPDATE_SCHEMA = Model("UpdateSchema", {"comment": str, "properties": dict, "new_name": str, "owner": str})
UPDATE_VOLUME = Model("UpdateVolumeRequestContent", {"comment": str, "new_name": str, "owner": str})
CREATE_STAGING_TABLE = Model(
    "CreateStagingTable",
    {"name": str, "catalog_name": str, "schema_name": str},
    frozenset({"name", "catalog_name", "schema_name"}),
)
_JSON_TYPE = {str: "a string", dict: "an object", int: "an integer", bool: "a boolean", list: "an array"}


def epoch_ms(at: datetime) -> int:
    """``at`` as integer milliseconds since the epoch (UC's timestamps)."""
    return int(at.timestamp() * 1000)


def object_id(kind: str, full_name: str, created_at: datetime) -> str:
    """The id of an object (see the module docstring): UUID-5 of kind, full name and creation time.

    Example:
        >>> from datetime import datetime, timezone
        >>> t = datetime(2026, 1, 1, tzinfo=timezone.utc)
        >>> object_id("catalog", "main", t) == object_id("catalog", "main", t) != object_id("schema", "main", t)
        True
    """
    return str(uuid.uuid5(_NAMESPACE, f"{kind}\x00{full_name}\x00{created_at.isoformat()}"))


class _Audited(Protocol):
    @property
    def owner(self) -> str: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def id(self) -> str | None: ...
    @property
    def created_by(self) -> str | None: ...
    @property
    def updated_at(self) -> datetime | None: ...
    @property
    def updated_by(self) -> str | None: ...


def _audit(info: _Audited) -> dict[str, Any]:
    """Owner and the four audit fields; what an info does not hold (made by hand, or by a catalog that
    keeps none) is the creation's, as UC fills them at creation."""
    created_by = info.created_by or info.owner
    return {
        "owner": info.owner,
        "created_at": epoch_ms(info.created_at),
        "created_by": created_by,
        "updated_at": epoch_ms(info.updated_at or info.created_at),
        "updated_by": info.updated_by or created_by,
    }


def _id(info: _Audited, kind: str, full_name: str) -> str:
    """The stored id, else the one derived before ids were stored (which a migration stored for every
    object that existed then, so the two agree)."""
    return info.id or object_id(kind, full_name, info.created_at)


def _compact(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if v is not None}


def catalog_json(info: CatalogInfo) -> dict[str, Any]:
    """A UC ``CatalogInfo``."""
    return _compact(
        {
            "name": info.name,
            "comment": info.comment,
            "properties": {},
            **_audit(info),
            "id": _id(info, "catalog", info.name),
        }
    )


def schema_json(info: SchemaInfo) -> dict[str, Any]:
    """A UC ``SchemaInfo``; ``full_name`` is ``catalog.schema`` with the parts as they are (UC names
    hold no dots, so nothing is quoted)."""
    full_name = f"{info.catalog_name}.{info.name}"
    return _compact(
        {
            "name": info.name,
            "catalog_name": info.catalog_name,
            "comment": info.comment,
            "properties": {},
            "full_name": full_name,
            **_audit(info),
            "schema_id": _id(info, "schema", full_name),
        }
    )


def volume_json(info: VolumeInfo) -> dict[str, Any]:
    """A UC ``VolumeInfo``. An empty comment is left out (the client's ``VolumeInfo.comment`` has
    ``min_length=1``); a managed volume's ``storage_location`` is shown, as UC OSS does.

    Example:
        >>> from datetime import datetime, timezone
        >>> at = datetime(2026, 1, 1, tzinfo=timezone.utc)
        >>> body = volume_json(VolumeInfo("main", "ml", "raw", "alice", "MANAGED", "file:///d/v", at, ""))
        >>> body["full_name"], body["volume_type"], "comment" in body
        ('main.ml.raw', 'MANAGED', False)
    """
    full_name = f"{info.catalog_name}.{info.schema_name}.{info.name}"
    return _compact(
        {
            "catalog_name": info.catalog_name,
            "schema_name": info.schema_name,
            "name": info.name,
            "comment": info.comment or None,
            **_audit(info),
            "volume_id": _id(info, "volume", full_name),
            "volume_type": info.volume_type,
            "storage_location": info.storage_location,
            "full_name": full_name,
        }
    )


def table_json(info: TableInfo) -> dict[str, Any]:
    """A UC ``TableInfo`` (0.7.0 has no ``full_name`` field on it), its columns as :func:`column_json`.

    Example:
        >>> from datetime import datetime, timezone
        >>> at = datetime(2026, 1, 1, tzinfo=timezone.utc)
        >>> cols = (ColumnInfo("id", "long", False),)
        >>> body = table_json(TableInfo("main", "ml", "iris", "alice", "EXTERNAL", "file:///d/t", cols, at))
        >>> body["table_type"], body["data_source_format"], body["columns"][0]["type_name"]
        ('EXTERNAL', 'DELTA', 'LONG')
    """
    full_name = f"{info.catalog_name}.{info.schema_name}.{info.name}"
    return _compact(
        {
            "name": info.name,
            "catalog_name": info.catalog_name,
            "schema_name": info.schema_name,
            "table_type": info.table_type,
            "data_source_format": info.data_source_format.upper(),
            "columns": [column_json(c, i) for i, c in enumerate(info.columns)],
            "storage_location": info.storage_location,
            "comment": info.comment,
            "properties": {},
            **_audit(info),
            "table_id": _id(info, "table", full_name),
        }
    )


def staging_json(info: StagingTableInfo) -> dict[str, Any]:
    """A UC ``StagingTableInfo``: where the creator writes the new managed table's Delta files.

    Example:
        >>> from datetime import datetime, timezone
        >>> at = datetime(2026, 1, 1, tzinfo=timezone.utc)
        >>> staging_json(StagingTableInfo("main", "ml", "t", "4e1c", "file:///s/t", "alice", at, at))["id"]
        '4e1c'
    """
    return {
        "name": info.name,
        "catalog_name": info.catalog_name,
        "schema_name": info.schema_name,
        "id": info.id,
        "staging_location": info.staging_location,
    }


# Delta primitive type names -> UC's ColumnTypeName. A type outside this map gets no type_name at all:
# one value outside the client's enum would make the whole response unparseable there.
_TYPE_NAMES = {
    "boolean": "BOOLEAN",
    "byte": "BYTE",
    "short": "SHORT",
    "integer": "INT",
    "long": "LONG",
    "float": "FLOAT",
    "double": "DOUBLE",
    "date": "DATE",
    "timestamp": "TIMESTAMP",
    "timestamp_ntz": "TIMESTAMP_NTZ",
    "string": "STRING",
    "binary": "BINARY",
    "variant": "VARIANT",
}
# A nested type's text is its kind (``array``: delta_files.py), or a Spark catalog string (``array<string>``),
# or deltalake's repr (``ArrayType(PrimitiveType("long"), ...)``): the leading word decides.
_NESTED = {
    "array": "ARRAY",
    "arraytype": "ARRAY",
    "map": "MAP",
    "maptype": "MAP",
    "struct": "STRUCT",
    "structtype": "STRUCT",
}
_LEADING_WORD = re.compile(r"[A-Za-z]*")
_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)")


def column_json(column: ColumnInfo, position: int) -> dict[str, Any]:
    """A UC ``ColumnInfo`` at ``position`` (from 0): ``type_name`` from the Delta type, and for a
    primitive type ``type_json``, the Spark ``StructField`` JSON that Spark and UC OSS write.

    Example:
        >>> body = column_json(ColumnInfo("price", "decimal(10,2)"), 3)
        >>> body["type_name"], body["type_precision"], body["type_scale"], body["position"]
        ('DECIMAL', 10, 2, 3)
    """
    text = column.type_text
    body: dict[str, Any] = {"name": column.name, "type_text": text, "position": position, "nullable": column.nullable}
    decimal = _DECIMAL.fullmatch(text)
    leading = _LEADING_WORD.match(text)
    nested = _NESTED.get(leading[0].lower()) if leading else None
    if decimal:
        body.update(type_name="DECIMAL", type_precision=int(decimal[1]), type_scale=int(decimal[2]))
    elif text in _TYPE_NAMES:
        body["type_name"] = _TYPE_NAMES[text]
    elif nested:
        body["type_name"] = nested
    if nested is None and "type_name" in body:
        field = {"name": column.name, "type": text, "nullable": column.nullable, "metadata": {}}
        body["type_json"] = json.dumps(field, separators=(",", ":"))
    return body


def dotted_name(*parts: str) -> str:
    """Wire name parts (as UC spells them: plain text, any character but ``.``, space, ``/`` and
    controls) as one of our names, each part quoted where needed, for
    :func:`~uc_jupyter.catalog.rules.names.parse_name`.

    Example:
        >>> dotted_name("my-catalog", "ml")
        '`my-catalog`.ml'
    """
    return ".".join(quote_part(p) for p in parts)


def parse_request(raw: bytes, model: Model) -> dict[str, Any]:
    """The JSON object in ``raw`` checked against ``model`` (see the module docstring); ``null`` counts
    as absent, as in the client's models."""
    try:
        body = json.loads(raw, object_pairs_hook=_unique_keys) if raw.strip() else {}
    except _RepeatedKey as exc:
        # json keeps a repeated key's last value; a proxy or checker in front may keep its first, so the
        # two would read different bodies: refuse it rather than pick one.
        raise WireError(
            "INVALID_ARGUMENT", f"the key {exc.key[:64]!r} appears twice in the body of {model.name}; give it once"
        ) from None
    except RecursionError:  # json's decoder recurses per nesting level; 1 MiB holds far more levels
        raise WireError("INVALID_ARGUMENT", f"malformed JSON body for {model.name}: nested too deeply") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise WireError("INVALID_ARGUMENT", f"malformed JSON body for {model.name}: {exc}") from None
    if not isinstance(body, dict):
        raise WireError("INVALID_ARGUMENT", f"the body of {model.name} must be a JSON object, got {_kind(body)}")
    for name, value in body.items():
        expected = model.fields.get(name)
        if expected is None:
            known = ", ".join(model.fields)
            raise WireError("INVALID_ARGUMENT", f"unknown field {name[:64]!r} in {model.name}; known fields: {known}")
        if value is not None and (type(value) is not expected):  # bool is not an int here, nor int a str
            raise WireError(
                "INVALID_ARGUMENT",
                f"field {name!r} of {model.name} must be {_JSON_TYPE[expected]}, got {_kind(value)}",
            )
    present = {k: v for k, v in body.items() if v is not None}
    missing = sorted(model.required - present.keys())
    if missing:
        raise WireError("INVALID_ARGUMENT", f"{model.name} needs the field {missing[0]!r}")
    return present


class _RepeatedKey(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's members as a dict, refusing a key given twice (at any depth)."""
    members: dict[str, Any] = {}
    for name, value in pairs:
        if name in members:
            raise _RepeatedKey(name)
        members[name] = value
    return members


def parse_bool(text: str | None, name: str) -> bool:
    """A boolean query parameter (``true``/``false``, any case; absent: false)."""
    if text is None:
        return False
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    raise WireError("INVALID_ARGUMENT", f"query parameter {name} must be true or false, got {text[:32]!r}")


@dataclass(frozen=True)
class Page:
    """One page of a listing: the items and the token of the next page (None: this was the last)."""

    items: list[Any]
    next_page_token: str | None


def page(items: list[Any], names: list[str], listing: str, max_results: str | None, page_token: str | None) -> Page:
    """The page of ``items`` (in ascending order of ``names``, one per item) that ``max_results`` and
    ``page_token`` ask for. Tokens are opaque: urlsafe base64 of ``{"l": listing, "a": last name}``,
    refused (400) in another listing. Like UC OSS, a next token comes only with a full page.

    Example:
        >>> first = page([1, 2, 3], ["a", "b", "c"], "catalogs", "2", None)
        >>> first.items, page([1, 2, 3], ["a", "b", "c"], "catalogs", "2", first.next_page_token).items
        ([1, 2], [3])
    """
    size, after = page_bounds(listing, max_results, page_token)
    start = 0 if after is None else next((i for i, n in enumerate(names) if n > after), len(names))
    chosen = items[start : start + size]
    more = start + size < len(items)
    return Page(chosen, next_token(listing, names[start + size - 1]) if more else None)


def page_bounds(listing: str, max_results: str | None, page_token: str | None) -> tuple[int, str | None]:
    """The page size ``max_results`` asks for (0 or none: :data:`MAX_PAGE`, never more) and the name the
    page starts after (None: the first page), for a store that pages by key itself; answer with
    :func:`next_token` of the page's last name when more follow.

    Example:
        >>> page_bounds("catalogs", "2", next_token("catalogs", "b"))
        (2, 'b')
    """
    size = MAX_PAGE
    if max_results is not None:
        try:
            asked = int(max_results)
        except ValueError:
            raise WireError("INVALID_ARGUMENT", f"max_results must be an integer, got {max_results[:32]!r}") from None
        if asked < 0:
            raise WireError("INVALID_ARGUMENT", "max_results must be greater than or equal to 0")
        size = min(asked, MAX_PAGE) or MAX_PAGE
    return size, _token_after(page_token, listing) if page_token else None


def next_token(listing: str, after: str) -> str:
    """The opaque token of the page of ``listing`` that follows the name ``after``."""
    return _token(listing, after)


def _token(listing: str, after: str) -> str:
    raw = json.dumps({"l": listing, "a": after}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _token_after(token: str, listing: str) -> str:
    try:
        decoded = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (ValueError, binascii.Error, UnicodeDecodeError):
        decoded = None
    if not isinstance(decoded, dict) or decoded.get("l") != listing or not isinstance(decoded.get("a"), str):
        raise WireError("INVALID_ARGUMENT", "invalid page_token: give the next_page_token of this same listing")
    after: str = decoded["a"]
    return after


def _kind(value: object) -> str:
    for python, text in ((bool, "a boolean"), (str, "a string"), (dict, "an object"), (list, "an array")):
        if isinstance(value, python):
            return text
    if value is None:
        return "null"
    return "a number"
