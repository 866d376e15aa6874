"""uc_jupyter's own routes, beside the Unity Catalog API: who a token is, and the principals.

The Unity Catalog API has neither: a UC client learns nothing about its own identity, and users come
from an identity provider. :class:`~uc_jupyter.catalog.rest.client.RestCatalog` needs both to behave as the
embedded catalog does, so these live under ``/api/2.1/unity-catalog/uc-jupyter/``, a prefix no UC
route uses (a client that sees 404 there knows the server is not uc-jupyter's):

- ``GET /uc-jupyter/whoami`` -> ``{"principal": ..., "metastore_admin": bool}``: the token's principal;
- ``GET /uc-jupyter/principals`` -> ``{"principals": [PrincipalJson]}`` (as ``LocalCatalog.list_principals``);
- ``GET /uc-jupyter/principals/{name}`` -> ``PrincipalJson``;
- ``POST /uc-jupyter/principals`` ``{"name", "kind"?}`` -> ``PrincipalJson`` (metastore admins);
- ``DELETE /uc-jupyter/principals/{name}`` -> ``{}`` (metastore admins; its tokens die with it).

``PrincipalJson`` is ``{"name", "kind": "user" | "service_principal", "created_at": epoch ms,
"metastore_admin": bool}``. Every check is the embedded catalog's, as for the other routes.

Example:
    >>> import tempfile
    >>> from uc_jupyter.catalog import as_principal
    >>> from uc_jupyter.catalog.embedded.local import LocalCatalog
    >>> with as_principal("admin"):
    ...     cat = LocalCatalog(tempfile.mkdtemp())
    ...     whoami(cat, Call())
    {'principal': 'admin', 'metastore_admin': True}
"""

from __future__ import annotations

from typing import Any

from uc_jupyter.catalog import NotFound, PrincipalInfo, current_principal
from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.catalog.wire.errors import WireError
from uc_jupyter.catalog.wire.shapes import Model, epoch_ms
from uc_jupyter.ucserver.routes_data import Call, Route

__all__ = ["CREATE_PRINCIPAL", "EXTENSION_PREFIX", "ROUTES", "principal_json", "whoami"]

Json = dict[str, Any]

EXTENSION_PREFIX = "/uc-jupyter"
CREATE_PRINCIPAL = Model("CreatePrincipal", {"name": str, "kind": str}, frozenset({"name"}))


def principal_json(info: PrincipalInfo) -> Json:
    """A principal on the wire (see the module docstring)."""
    return {
        "name": info.name,
        "kind": info.kind,
        "created_at": epoch_ms(info.created_at),
        "metastore_admin": info.admin,
    }


def whoami(cat: LocalCatalog, call: Call) -> Json:
    """The request's principal (its token's), and whether it administers the metastore."""
    principal = current_principal()
    try:
        admin = cat.get_principal(principal).admin
    except NotFound:  # dropped after its token was checked: not an admin, whatever it was
        admin = False
    return {"principal": principal, "metastore_admin": admin}


def list_principals(cat: LocalCatalog, call: Call) -> Json:
    return {"principals": [principal_json(p) for p in cat.list_principals()]}


def get_principal(cat: LocalCatalog, call: Call) -> Json:
    return principal_json(cat.get_principal(call.path["name"]))


def create_principal(cat: LocalCatalog, call: Call) -> Json:
    kind = call.body.get("kind", "user")
    if kind not in ("user", "service_principal"):
        raise WireError("INVALID_ARGUMENT", f"kind must be user or service_principal, got {kind[:32]!r}")
    return principal_json(cat.create_principal(call.body["name"], kind))


def drop_principal(cat: LocalCatalog, call: Call) -> Json:
    cat.drop_principal(call.path["name"])
    return {}


ROUTES: tuple[Route, ...] = (
    Route("GET", f"{EXTENSION_PREFIX}/whoami", whoami),
    Route("GET", f"{EXTENSION_PREFIX}/principals", list_principals),
    Route("POST", f"{EXTENSION_PREFIX}/principals", create_principal, CREATE_PRINCIPAL),
    Route("GET", f"{EXTENSION_PREFIX}/principals/{{name}}", get_principal),
    Route("DELETE", f"{EXTENSION_PREFIX}/principals/{{name}}", drop_principal),
)
