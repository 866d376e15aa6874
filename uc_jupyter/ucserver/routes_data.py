"""The data routes of the Unity Catalog API (``/api/2.1/unity-catalog``): catalogs and schemas.

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
    Model,
    catalog_json,
    dotted_name,
    page,
    parse_bool,
    schema_json,
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
        shape = "catalog" if levels == 1 else "catalog.schema"
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


ROUTES: tuple[Route, ...] = (
    Route("GET", "/catalogs", list_catalogs),
    Route("POST", "/catalogs", create_catalog, CREATE_CATALOG),
    Route("GET", "/catalogs/{name}", get_catalog),
    Route("DELETE", "/catalogs/{name}", delete_catalog),
    Route("GET", "/schemas", list_schemas),
    Route("POST", "/schemas", create_schema, CREATE_SCHEMA),
    Route("GET", "/schemas/{full_name}", get_schema),
    Route("DELETE", "/schemas/{full_name}", delete_schema),
)
