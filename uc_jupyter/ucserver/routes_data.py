"""The data routes of the Unity Catalog API (``/api/2.1/unity-catalog``): catalogs, schemas, volumes, tables,
staging tables.

Each route is a plain function ``(catalog, call) -> JSON object`` run by :mod:`uc_jupyter.ucserver.app`
in a worker thread as the request's principal, with the body already parsed against its model
(:mod:`uc_jupyter.catalog.wire.shapes`). Every check is the embedded catalog's: these functions only translate
names, bodies and pages. Wire names are UC's (plain parts); they become our dotted names through
:func:`~uc_jupyter.catalog.wire.shapes.dotted_name`, so ``..``, ``/`` or an empty part in a path parameter is
an ``INVALID_ARGUMENT`` before any lookup. Listings are read a page at a time from the metastore
(:meth:`LocalCatalog.list_page`). Two routes are ours, under ``/uc-jupyter/``: a table's columns read
again from its Delta log after a client changed its schema, and a staging table abandoned after a
failed write.

Example:
    >>> import tempfile
    >>> from uc_jupyter.catalog.embedded.local import LocalCatalog
    >>> cat = LocalCatalog(tempfile.mkdtemp())
    >>> create_catalog(cat, Call(body={"name": "main", "comment": "team"}))["comment"]
    'team'
    >>> [c["name"] for c in list_catalogs(cat, Call(query={"max_results": "10"}))["catalogs"]]
    ['main']
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.catalog.rules.privileges import SecurableKind
from uc_jupyter.catalog.wire.errors import WireError
from uc_jupyter.catalog.wire.shapes import (
    CREATE_CATALOG,
    CREATE_SCHEMA,
    CREATE_STAGING_TABLE,
    CREATE_TABLE,
    CREATE_VOLUME,
    UPDATE_CATALOG,
    UPDATE_SCHEMA,
    UPDATE_VOLUME,
    Model,
    catalog_json,
    dotted_name,
    next_token,
    page_bounds,
    parse_bool,
    schema_json,
    staging_json,
    table_json,
    volume_json,
)

__all__ = ["ROUTES", "Call", "Route"]

Json = dict[str, Any]


@dataclass(frozen=True)
class Call:
    """What a route function is given: path parameters, query parameters (last value wins) and body."""

    path: dict[str, str] = field(default_factory=dict)
    query: dict[str, str] = field(default_factory=dict)
    body: Json = field(default_factory=dict)
    secure: bool = False  # https or a loopback client (routes_storage.secure_transport): secrets may travel


@dataclass(frozen=True)
class Route:
    """One route: method, path under the API prefix, its function, and its body's model (None: no body)."""

    method: str
    path: str
    handler: Callable[[LocalCatalog, Call], Json]
    model: Model | None = None


_MAX_COMMENT = 65536  # the client's own bound on a volume's comment, kept for every kind


def _check_comment(body: Json) -> None:
    if len(body.get("comment") or "") > _MAX_COMMENT:
        raise WireError("INVALID_ARGUMENT", f"comment must be at most {_MAX_COMMENT} characters long")


def _unsupported(body: Json, model: Model) -> None:
    # The client's models have these fields; this server keeps neither properties nor storage roots
    # yet, and silently dropping what a caller asked for would be worse than saying so.
    if body.get("properties"):
        raise WireError("INVALID_ARGUMENT", f"properties are not supported by this server ({model.name})")
    if "storage_root" in body:
        raise WireError("INVALID_ARGUMENT", f"storage_root is not supported by this server ({model.name})")
    _check_comment(body)


def _wire_name(text: str, levels: int, what: str) -> str:
    """A ``{full_name}`` path parameter (``main.ml``) as our dotted name, checked for its part count."""
    parts = text.split(".")
    if len(parts) != levels:
        shape = ("catalog", "catalog.schema", "catalog.schema.name")[levels - 1]
        raise WireError("INVALID_ARGUMENT", f"invalid {what} name {text[:300]!r}: expected '{shape}'")
    return dotted_name(*parts)


def _paging(call: Call) -> tuple[str | None, str | None]:
    return call.query.get("max_results"), call.query.get("page_token")


# ----------------------------------------------------------------- catalogs
def create_catalog(cat: LocalCatalog, call: Call) -> Json:
    _unsupported(call.body, CREATE_CATALOG)
    return catalog_json(cat.create_catalog(dotted_name(call.body["name"]), comment=call.body.get("comment")))


def list_catalogs(cat: LocalCatalog, call: Call) -> Json:
    return _listed(cat, SecurableKind.CATALOG, None, "catalogs", catalog_json, "catalogs", call)


def get_catalog(cat: LocalCatalog, call: Call) -> Json:
    return catalog_json(cat.get_catalog_info(_wire_name(call.path["name"], 1, "catalog")))


def delete_catalog(cat: LocalCatalog, call: Call) -> Json:
    force = parse_bool(call.query.get("force"), "force")
    cat.drop_catalog(_wire_name(call.path["name"], 1, "catalog"), cascade=force)
    return {}


# ----------------------------------------------------------------- updates (PATCH)
def _changes(body: Json, model: Model, kind: str) -> dict[str, str]:
    """The comment and owner a PATCH body asks for; what this server cannot do is refused first, so a
    refused PATCH changes nothing."""
    if body.get("properties"):
        raise WireError("INVALID_ARGUMENT", f"properties are not supported by this server ({model.name})")
    if "new_name" in body:
        raise WireError(
            "INVALID_ARGUMENT",
            f"renaming a {kind} is not supported by this server; create a new {kind} and move what it holds",
        )
    _check_comment(body)
    changes: dict[str, str] = {k: body[k] for k in ("comment", "owner") if k in body}
    if not changes:
        raise WireError("INVALID_ARGUMENT", f"{model.name} changes nothing: give a comment or an owner")
    return changes


def update_catalog(cat: LocalCatalog, call: Call) -> Json:
    name = _wire_name(call.path["name"], 1, "catalog")
    return catalog_json(cat.update_catalog(name, **_changes(call.body, UPDATE_CATALOG, "catalog")))


def update_schema(cat: LocalCatalog, call: Call) -> Json:
    name = _wire_name(call.path["full_name"], 2, "schema")
    return schema_json(cat.update_schema(name, **_changes(call.body, UPDATE_SCHEMA, "schema")))


def update_volume(cat: LocalCatalog, call: Call) -> Json:
    name = _wire_name(call.path["name"], 3, "volume")
    return volume_json(cat.update_volume(name, **_changes(call.body, UPDATE_VOLUME, "volume")))


# ----------------------------------------------------------------- schemas
def create_schema(cat: LocalCatalog, call: Call) -> Json:
    _unsupported(call.body, CREATE_SCHEMA)
    name = dotted_name(call.body["catalog_name"], call.body["name"])
    return schema_json(cat.create_schema(name, comment=call.body.get("comment")))


def list_schemas(cat: LocalCatalog, call: Call) -> Json:
    catalog = call.query.get("catalog_name")
    if not catalog:
        raise WireError("INVALID_ARGUMENT", "listing schemas needs the query parameter catalog_name")
    name = _wire_name(catalog, 1, "catalog")
    return _listed(cat, SecurableKind.SCHEMA, name, "schemas", schema_json, f"schemas:{catalog.lower()}", call)


def _listed(
    cat: LocalCatalog,
    kind: SecurableKind,
    parent: str | None,
    key: str,
    to_json: Callable[[Any], Json],
    listing: str,
    call: Call,
) -> Json:
    """One page of the ``kind`` children of ``parent`` under ``key``, read a page at a time from the
    metastore (:meth:`LocalCatalog.list_page`), with ``next_page_token`` only when more follow (UC
    leaves it out on the last page)."""
    size, after = page_bounds(listing, *_paging(call))
    chosen = cat.list_page(kind, parent, after=after, limit=size)
    body: Json = {key: [to_json(info) for info in chosen.items]}
    if chosen.more:
        body["next_page_token"] = next_token(listing, chosen.items[-1].name)
    return body


def get_schema(cat: LocalCatalog, call: Call) -> Json:
    return schema_json(cat.get_schema(_wire_name(call.path["full_name"], 2, "schema")))


def delete_schema(cat: LocalCatalog, call: Call) -> Json:
    force = parse_bool(call.query.get("force"), "force")
    cat.drop_schema(_wire_name(call.path["full_name"], 2, "schema"), cascade=force)
    return {}


# ----------------------------------------------------------------- volumes and tables
def _parent_schema(call: Call, what: str) -> tuple[str, str]:
    """The schema a listing of ``what`` names in its required ``catalog_name`` and ``schema_name``
    query parameters: our dotted name and the page tokens' listing key."""
    catalog, schema = call.query.get("catalog_name"), call.query.get("schema_name")
    if not catalog or not schema:
        raise WireError("INVALID_ARGUMENT", f"listing {what} needs the query parameters catalog_name and schema_name")
    return dotted_name(catalog, schema), f"{what}:{catalog.lower()}.{schema.lower()}"


def create_volume(cat: LocalCatalog, call: Call) -> Json:
    body = call.body
    kind, location, comment = body["volume_type"], body.get("storage_location"), body.get("comment")
    if kind not in ("MANAGED", "EXTERNAL"):
        raise WireError("INVALID_ARGUMENT", f"volume_type must be MANAGED or EXTERNAL, got {kind[:32]!r}")
    if kind == "EXTERNAL" and not location:
        raise WireError("INVALID_ARGUMENT", "an EXTERNAL volume needs a storage_location")
    if kind == "MANAGED" and location is not None:  # a managed volume's storage is the server's choice
        raise WireError("INVALID_ARGUMENT", "a MANAGED volume takes no storage_location; use EXTERNAL for one")
    if comment is not None and not 1 <= len(comment) <= 65536:  # the client's own bounds
        raise WireError("INVALID_ARGUMENT", "comment must be 1 to 65536 characters long")
    name = dotted_name(body["catalog_name"], body["schema_name"], body["name"])
    return volume_json(cat.create_volume(name, location, comment=comment))


def list_volumes(cat: LocalCatalog, call: Call) -> Json:
    schema, listing = _parent_schema(call, "volumes")
    return _listed(cat, SecurableKind.VOLUME, schema, "volumes", volume_json, listing, call)


def get_volume(cat: LocalCatalog, call: Call) -> Json:
    return volume_json(cat.get_volume(_wire_name(call.path["name"], 3, "volume")))


def delete_volume(cat: LocalCatalog, call: Call) -> Json:
    cat.drop_volume(_wire_name(call.path["name"], 3, "volume"))
    return {}


def list_tables(cat: LocalCatalog, call: Call) -> Json:
    schema, listing = _parent_schema(call, "tables")
    return _listed(cat, SecurableKind.TABLE, schema, "tables", table_json, listing, call)


# UC clients name a managed table's staging id in this property (UC OSS's DeltaConsts.UC_TABLE_ID).
TABLE_ID_PROPERTY = "io.unitycatalog.tableId"


def create_table(cat: LocalCatalog, call: Call) -> Json:
    """Register a Delta table. EXTERNAL: the one already at ``storage_location``. MANAGED: the one its
    creator wrote at the ``staging_location`` of its staging table (``POST /staging-tables``), which no
    one else's call may name. Either way its columns are the Delta log's (what the answer shows): a
    catalog whose columns disagree with its table's own schema would mislead every reader. An EXTERNAL
    request's columns are only checked for shape; a MANAGED one's must agree with the log (names in
    order, type names where given), since that client has just written it."""
    body = call.body
    table_type = body["table_type"]
    if table_type not in ("EXTERNAL", "MANAGED"):
        raise WireError(
            "INVALID_ARGUMENT",
            f"table_type {table_type[:32]!r} is not supported by this server: register an EXTERNAL Delta "
            "table at a storage_location, or a MANAGED one at its staging location (POST /staging-tables)",
        )
    if body.get("data_source_format", "DELTA") != "DELTA":
        raise WireError("INVALID_ARGUMENT", "data_source_format must be DELTA: this server reads Delta tables only")
    if not body.get("storage_location"):
        needed = (
            "a MANAGED table needs the staging_location of its staging table (POST /staging-tables)"
            if table_type == "MANAGED"
            else "an EXTERNAL table needs a storage_location"
        )
        raise WireError("INVALID_ARGUMENT", needed)
    properties = dict(body.get("properties") or {})
    staging_id = properties.pop(TABLE_ID_PROPERTY, None) if table_type == "MANAGED" else None
    for unsupported, value in (("properties", properties), *((k, body.get(k)) for k in _VIEW_FIELDS)):
        if value:
            raise WireError("INVALID_ARGUMENT", f"{unsupported} is not supported by this server (CreateTable)")
    _check_comment(body)
    columns = _request_columns(body["columns"])
    name = dotted_name(body["catalog_name"], body["schema_name"], body["name"])
    if table_type == "EXTERNAL":
        return table_json(
            cat.create_table(name, storage_location=body["storage_location"], comment=body.get("comment"))
        )
    if staging_id is not None and not isinstance(staging_id, str):
        raise WireError("INVALID_ARGUMENT", f"the property {TABLE_ID_PROPERTY} must be a string")
    info = cat.register_staged_table(
        name, body["storage_location"], columns=columns, comment=body.get("comment"), staging_id=staging_id
    )
    return table_json(info)


_VIEW_FIELDS = ("view_definition", "view_dependencies")


def _request_columns(columns: list[Any]) -> list[tuple[str, str | None]]:
    """CreateTable's columns as (name, type_name or None), checked for shape."""
    if not all(isinstance(c, dict) and isinstance(c.get("name"), str) for c in columns):
        raise WireError("INVALID_ARGUMENT", "every entry of columns in CreateTable must be an object with a name")
    if not all(isinstance(c.get("type_name"), str | None) for c in columns):
        raise WireError("INVALID_ARGUMENT", "a column's type_name in CreateTable must be a string")
    return [(c["name"], c.get("type_name")) for c in columns]


def create_staging_table(cat: LocalCatalog, call: Call) -> Json:
    """Stage a managed table: its id and the location where its creator writes the Delta files."""
    body = call.body
    name = dotted_name(body["catalog_name"], body["schema_name"], body["name"])
    return staging_json(cat.create_staging_table(name))


def get_table(cat: LocalCatalog, call: Call) -> Json:
    # read_streaming_table_as_managed / read_materialized_view_as_managed: there are no such tables here.
    return table_json(cat.get_table(_wire_name(call.path["full_name"], 3, "table")))


def abandon_staging_table(cat: LocalCatalog, call: Call) -> Json:
    """Our extension: the caller's staging table and what was written there removed (a failed write)."""
    cat.abandon_staging_table(call.path["id"])
    return {}


def refresh_table(cat: LocalCatalog, call: Call) -> Json:
    """Our extension: the table with its columns read again from its Delta log (needs MODIFY). A client
    that changed a table's schema with vended credentials calls it, since UC's API has no table update."""
    return table_json(cat.refresh_table(_wire_name(call.path["full_name"], 3, "table")))


def delete_table(cat: LocalCatalog, call: Call) -> Json:
    cat.drop_table(_wire_name(call.path["full_name"], 3, "table"))
    return {}


ROUTES: tuple[Route, ...] = (
    Route("GET", "/catalogs", list_catalogs),
    Route("POST", "/catalogs", create_catalog, CREATE_CATALOG),
    Route("GET", "/catalogs/{name}", get_catalog),
    Route("PATCH", "/catalogs/{name}", update_catalog, UPDATE_CATALOG),
    Route("DELETE", "/catalogs/{name}", delete_catalog),
    Route("GET", "/schemas", list_schemas),
    Route("POST", "/schemas", create_schema, CREATE_SCHEMA),
    Route("GET", "/schemas/{full_name}", get_schema),
    Route("PATCH", "/schemas/{full_name}", update_schema, UPDATE_SCHEMA),
    Route("DELETE", "/schemas/{full_name}", delete_schema),
    Route("GET", "/volumes", list_volumes),
    Route("POST", "/volumes", create_volume, CREATE_VOLUME),
    Route("GET", "/volumes/{name}", get_volume),
    Route("PATCH", "/volumes/{name}", update_volume, UPDATE_VOLUME),
    Route("DELETE", "/volumes/{name}", delete_volume),
    Route("GET", "/tables", list_tables),
    Route("POST", "/tables", create_table, CREATE_TABLE),
    Route("GET", "/tables/{full_name}", get_table),
    Route("DELETE", "/tables/{full_name}", delete_table),
    Route("POST", "/staging-tables", create_staging_table, CREATE_STAGING_TABLE),
    Route("POST", "/uc-jupyter/tables/{full_name}/refresh", refresh_table),
    Route("DELETE", "/uc-jupyter/staging-tables/{id}", abandon_staging_table),
)
