"""The data routes of the Unity Catalog API (``/api/2.1/unity-catalog``): catalogs, schemas, volumes, tables.

Each route is a plain function ``(catalog, call) -> JSON object`` run by :mod:`uc_jupyter.ucserver.app`
in a worker thread as the request's principal, with the body already parsed against its model
(:mod:`uc_jupyter.catalog.wire`). Every check is the embedded catalog's: these functions only translate
names, bodies and pages. Wire names are UC's (plain parts); they become our dotted names through
:func:`~uc_jupyter.catalog.wire.dotted_name`, so ``..``, ``/`` or an empty part in a path parameter is
an ``INVALID_ARGUMENT`` before any lookup.

Example:
    >>> import tempfile
    >>> from uc_jupyter.catalog.local import LocalCatalog
    >>> cat = LocalCatalog(tempfile.mkdtemp())
    >>> create_catalog(cat, Call(body={"name": "main", "comment": "team"}))["comment"]
    'team'
    >>> [c["name"] for c in list_catalogs(cat, Call(query={"max_results": "10"}))["catalogs"]]
    ['main']
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from uc_jupyter.catalog.local import LocalCatalog
from uc_jupyter.catalog.wire import (
    CREATE_CATALOG,
    CREATE_SCHEMA,
    CREATE_TABLE,
    CREATE_VOLUME,
    Model,
    catalog_json,
    dotted_name,
    page,
    parse_bool,
    schema_json,
    table_json,
    volume_json,
)
from uc_jupyter.catalog.wire_errors import WireError

T = TypeVar("T")

__all__ = ["ROUTES", "Call", "Route"]

Json = dict[str, Any]


@dataclass(frozen=True)
class Call:
    """What a route function is given: path parameters, query parameters (last value wins) and body."""

    path: dict[str, str] = field(default_factory=dict)
    query: dict[str, str] = field(default_factory=dict)
    body: Json = field(default_factory=dict)


@dataclass(frozen=True)
class Route:
    """One route: method, path under the API prefix, its function, and its body's model (None: no body)."""

    method: str
    path: str
    handler: Callable[[LocalCatalog, Call], Json]
    model: Model | None = None


def _unsupported(body: Json, model: Model) -> None:
    # The client's models have these fields; this server keeps neither properties nor storage roots
    # yet, and silently dropping what a caller asked for would be worse than saying so.
    if body.get("properties"):
        raise WireError("INVALID_ARGUMENT", f"properties are not supported by this server ({model.name})")
    if "storage_root" in body:
        raise WireError("INVALID_ARGUMENT", f"storage_root is not supported by this server ({model.name})")


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
    infos = cat.list_catalogs()
    return _listed("catalogs", infos, [c.name for c in infos], catalog_json, "catalogs", call)


def get_catalog(cat: LocalCatalog, call: Call) -> Json:
    return catalog_json(cat.get_catalog_info(_wire_name(call.path["name"], 1, "catalog")))


def delete_catalog(cat: LocalCatalog, call: Call) -> Json:
    force = parse_bool(call.query.get("force"), "force")
    cat.drop_catalog(_wire_name(call.path["name"], 1, "catalog"), cascade=force)
    return {}


# ----------------------------------------------------------------- schemas
def create_schema(cat: LocalCatalog, call: Call) -> Json:
    _unsupported(call.body, CREATE_SCHEMA)
    name = dotted_name(call.body["catalog_name"], call.body["name"])
    return schema_json(cat.create_schema(name, comment=call.body.get("comment")))


def list_schemas(cat: LocalCatalog, call: Call) -> Json:
    catalog = call.query.get("catalog_name")
    if not catalog:
        raise WireError("INVALID_ARGUMENT", "listing schemas needs the query parameter catalog_name")
    infos = cat.list_schemas(_wire_name(catalog, 1, "catalog"))
    return _listed("schemas", infos, [s.name for s in infos], schema_json, f"schemas:{catalog.lower()}", call)


def _listed(
    key: str, infos: Sequence[T], names: list[str], to_json: Callable[[T], Json], listing: str, call: Call
) -> Json:
    """One page of a listing (``infos`` in the order of ``names``) under ``key``, only that page made
    JSON, with ``next_page_token`` only when more follow (UC leaves it out on the last page)."""
    chosen = page(list(infos), names, listing, *_paging(call))
    body: Json = {key: [to_json(info) for info in chosen.items]}
    if chosen.next_page_token:
        body["next_page_token"] = chosen.next_page_token
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
    infos = cat.list_volumes(schema)
    return _listed("volumes", infos, [v.name for v in infos], volume_json, listing, call)


def get_volume(cat: LocalCatalog, call: Call) -> Json:
    return volume_json(cat.get_volume(_wire_name(call.path["name"], 3, "volume")))


def delete_volume(cat: LocalCatalog, call: Call) -> Json:
    cat.drop_volume(_wire_name(call.path["name"], 3, "volume"))
    return {}


def list_tables(cat: LocalCatalog, call: Call) -> Json:
    schema, listing = _parent_schema(call, "tables")
    infos = cat.list_tables(schema)
    return _listed("tables", infos, [t.name for t in infos], table_json, listing, call)


def create_table(cat: LocalCatalog, call: Call) -> Json:
    """Register the Delta table already at ``storage_location`` as an EXTERNAL table. Its columns are
    the Delta log's (what the answer shows), not the request's: a catalog whose columns disagree with
    its table's own schema would mislead every reader, so the request's are only checked for shape."""
    body = call.body
    if body["table_type"] != "EXTERNAL":
        raise WireError(
            "INVALID_ARGUMENT",
            f"table_type {body['table_type'][:32]!r} is not supported by this server: "
            "register an EXTERNAL Delta table at a storage_location (managed tables need staging tables)",
        )
    if body.get("data_source_format", "DELTA") != "DELTA":
        raise WireError("INVALID_ARGUMENT", "data_source_format must be DELTA: this server reads Delta tables only")
    if not body.get("storage_location"):
        raise WireError("INVALID_ARGUMENT", "an EXTERNAL table needs a storage_location")
    for unsupported in ("properties", "view_definition", "view_dependencies"):
        if body.get(unsupported):
            raise WireError("INVALID_ARGUMENT", f"{unsupported} is not supported by this server (CreateTable)")
    if not all(isinstance(c, dict) and isinstance(c.get("name"), str) for c in body["columns"]):
        raise WireError("INVALID_ARGUMENT", "every entry of columns in CreateTable must be an object with a name")
    name = dotted_name(body["catalog_name"], body["schema_name"], body["name"])
    info = cat.create_table(name, storage_location=body["storage_location"], comment=body.get("comment"))
    return table_json(info)


def get_table(cat: LocalCatalog, call: Call) -> Json:
    # read_streaming_table_as_managed / read_materialized_view_as_managed: there are no such tables here.
    return table_json(cat.get_table(_wire_name(call.path["full_name"], 3, "table")))


def delete_table(cat: LocalCatalog, call: Call) -> Json:
    cat.drop_table(_wire_name(call.path["full_name"], 3, "table"))
    return {}


ROUTES: tuple[Route, ...] = (
    Route("GET", "/catalogs", list_catalogs),
    Route("POST", "/catalogs", create_catalog, CREATE_CATALOG),
    Route("GET", "/catalogs/{name}", get_catalog),
    Route("DELETE", "/catalogs/{name}", delete_catalog),
    Route("GET", "/schemas", list_schemas),
    Route("POST", "/schemas", create_schema, CREATE_SCHEMA),
    Route("GET", "/schemas/{full_name}", get_schema),
    Route("DELETE", "/schemas/{full_name}", delete_schema),
    Route("GET", "/volumes", list_volumes),
    Route("POST", "/volumes", create_volume, CREATE_VOLUME),
    Route("GET", "/volumes/{name}", get_volume),
    Route("DELETE", "/volumes/{name}", delete_volume),
    Route("GET", "/tables", list_tables),
    Route("POST", "/tables", create_table, CREATE_TABLE),
    Route("GET", "/tables/{full_name}", get_table),
    Route("DELETE", "/tables/{full_name}", delete_table),
)
