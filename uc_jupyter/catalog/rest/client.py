"""RestCatalog: the :class:`~uc_jupyter.catalog.Catalog` protocol over the Unity Catalog REST API.

Each method is one or a few calls under ``/api/2.1/unity-catalog`` (docs/design/unity-catalog-server.md
section 5.1): listings loop on ``next_page_token`` until the server gives none, grants go through
``/permissions`` (reading our ``uc_jupyter_privileges`` extension when present, so ``WRITE VOLUME``
and ``ALL PRIVILEGES`` survive), and data is reached with credentials the server vends for that one
table, volume or path (:mod:`~uc_jupyter.catalog.rest.vended`), never with the storage's own keys.

Principals: the server decides who a call comes from by its token alone. ``current_principal()`` is
the ``as_principal`` override when one is set, else the token's own principal (asked once from
``GET /uc-jupyter/whoami``; a server without that route, such as UC OSS, gets ``UC_JUPYTER_PRINCIPAL``
as a label). A call inside ``as_principal("alice")`` is sent with the token ``token_for("alice")``
gives; with no token for alice it fails with a one-line error instead of silently acting as someone
else. Principals themselves (create, list, drop) exist only on ``uc-jupyter serve``'s extension routes.

Example:
    >>> cat = RestCatalog("http://127.0.0.1:8080", "ucj_...")        # doctest: +SKIP
    >>> cat.create_catalog("main"); cat.create_schema("main.ml")       # doctest: +SKIP
    >>> cat.resolve_volume_path("/Volumes/main/ml/raw/a.csv").fs      # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Literal

from uc_jupyter.catalog.model import (
    CatalogError,
    CatalogInfo,
    NotFound,
    PermissionDenied,
    PrincipalInfo,
    ResolvedStoragePath,
    ResolvedTable,
    ResolvedVolumePath,
    SchemaInfo,
    TableInfo,
    VolumeInfo,
    WriteMode,
    _principal_override,
    as_principal,
)
from uc_jupyter.catalog.rest.governance import RestGovernance
from uc_jupyter.catalog.rest.http import Dialect, Http
from uc_jupyter.catalog.rest.names import compact, name_path, parts, quoted, wire_parts
from uc_jupyter.catalog.rest.tables import RestTables
from uc_jupyter.catalog.rest.vended import Vended, VendedCache, parse_vended
from uc_jupyter.catalog.rules.names import parse_name, parse_volume_path
from uc_jupyter.catalog.wire.read import (
    catalog_info,
    principal_info,
    schema_info,
    table_info,
    volume_info,
)
from uc_jupyter.storage import urls as st

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

__all__ = ["RestCatalog"]

Json = dict[str, Any]
_NO_ROUTE = "no route "  # how uc-jupyter serve's 404 for an unknown path begins (ucserver/app.py)
_VEND_ROUTES = {
    "volume": ("/temporary-volume-credentials", "volume_id"),
    "table": ("/temporary-table-credentials", "table_id"),
    "path": ("/temporary-path-credentials", "url"),
}


class RestCatalog(RestTables, RestGovernance):
    """A Unity Catalog server at ``url`` (with or without ``/api/2.1/unity-catalog``), called with
    ``token``; ``token_for(principal)`` gives the token of another principal for ``as_principal``
    blocks (None: none; the attribute ``token_for`` may be set later). ``timeout``: seconds to wait
    for an answer. See the module docstring.
    """

    def __init__(
        self,
        url: str,
        token: str,
        *,
        token_for: Callable[[str], str | None] | None = None,
        timeout: float = 60.0,
        dialect: Dialect = "uc",
        http: Http | None = None,
    ) -> None:
        self._http = http or Http(url, token, dialect=dialect, read_timeout=timeout)
        self.token_for = token_for  # public and settable: a test fixture may hand over its own
        self._own: str | None = None
        self._extensions: bool | None = None  # whether the server has uc_jupyter's routes (None: not asked yet)
        self._own_lock = threading.Lock()
        self._vended = VendedCache(self._vend)
        self._staging_options = {}

    def __repr__(self) -> str:
        return f"RestCatalog({self._http.base!r})"

    @property
    def url(self) -> str:
        """The API's base URL."""
        return self._http.base

    def close(self) -> None:
        """Close the pooled connections."""
        self._http.close()

    # ----------------------------------------------------------------- principals
    def _whoami(self) -> str:
        with self._own_lock:
            if self._own is None:
                from uc_jupyter.config import settings

                try:
                    self._own = str(self._http.call("GET", "/uc-jupyter/whoami")["principal"])
                    self._extensions = True
                except NotFound:  # not uc-jupyter serve: the configured principal, as a label only
                    self._own, self._extensions = settings().principal, False
                except KeyError:
                    raise CatalogError(f"{self.url}/uc-jupyter/whoami answered without a principal") from None
            return self._own

    def current_principal(self) -> str:
        """The ``as_principal`` override, else the token's own principal."""
        return _principal_override.get() or self._whoami()

    def as_principal(self, principal: str) -> contextlib.AbstractContextManager[str]:
        """Make calls in this block with ``principal``'s token (from ``token_for``)."""
        return as_principal(principal)

    def _token(self) -> str:
        """The token for the current principal (see the module docstring)."""
        wanted = _principal_override.get()
        if wanted is None or wanted == self._whoami():
            return self._http.token
        token = self.token_for(wanted) if self.token_for is not None else None
        if not token:
            raise CatalogError(
                f"no token for principal {wanted} at {self.url}: set UC_JUPYTER_TOKEN to a token of {wanted} "
                f"(uc-jupyter token create {wanted}) to act as {wanted}"
            )
        return token

    def _call(self, method: str, path: str, **kwargs: Any) -> Json:
        return self._http.call(method, path, token=self._token(), **kwargs)

    def _extension(self, method: str, path: str, **kwargs: Any) -> Json:
        """A call to uc_jupyter's extension routes; a one-line error on servers without them."""
        self._whoami()
        if not self._extensions:
            raise CatalogError(
                f"the catalog server at {self.url} has no principals API (uc-jupyter serve's extension); "
                "manage principals with that server's own tools"
            )
        return self._call(method, path, **kwargs)

    def create_principal(self, name: str, kind: Literal["user", "service_principal"] = "user") -> PrincipalInfo:
        """Register a principal (metastore admins) on uc-jupyter serve."""
        return principal_info(self._extension("POST", "/uc-jupyter/principals", body={"name": name, "kind": kind}))

    def get_principal(self, name: str) -> PrincipalInfo:
        return principal_info(self._extension("GET", f"/uc-jupyter/principals/{quoted(name)}"))

    def drop_principal(self, name: str) -> None:
        self._extension("DELETE", f"/uc-jupyter/principals/{quoted(name)}")

    def list_principals(self) -> list[PrincipalInfo]:
        body = self._extension("GET", "/uc-jupyter/principals")
        return [principal_info(p) for p in body.get("principals") or ()]

    # ----------------------------------------------------------------- catalogs, schemas, volumes
    def create_catalog(self, name: str, *, comment: str | None = None) -> CatalogInfo:
        (part,) = parts(name, 1)
        return catalog_info(self._call("POST", "/catalogs", body=compact(name=part, comment=comment)))

    def create_schema(self, name: str, *, comment: str | None = None) -> SchemaInfo:
        catalog, schema = parts(name, 2)
        body = compact(name=schema, catalog_name=catalog, comment=comment)
        return schema_info(self._call("POST", "/schemas", body=body))

    def create_volume(
        self,
        name: str,
        storage_location: str | None = None,
        *,
        storage_options: dict[str, Any] | None = None,
        comment: str | None = None,
    ) -> VolumeInfo:
        """A managed volume, or an external one at ``storage_location`` (inside an external location)."""
        _no_options(storage_options, f"volume {name}")
        catalog, schema, volume = parts(name, 3)
        body = compact(
            catalog_name=catalog,
            schema_name=schema,
            name=volume,
            volume_type="MANAGED" if storage_location is None else "EXTERNAL",
            storage_location=storage_location,
            comment=comment or None,  # UC's VolumeInfo refuses an empty comment
        )
        return volume_info(self._call("POST", "/volumes", body=body))

    def drop_catalog(self, name: str, *, cascade: bool = False) -> None:
        self._call("DELETE", f"/catalogs/{name_path(name, 1)}", query={"force": cascade})

    def drop_schema(self, name: str, *, cascade: bool = False) -> None:
        self._call("DELETE", f"/schemas/{name_path(name, 2)}", query={"force": cascade})

    def drop_table(self, name: str) -> None:
        self._call("DELETE", f"/tables/{name_path(name, 3)}")

    def drop_volume(self, name: str) -> None:
        self._call("DELETE", f"/volumes/{name_path(name, 3)}")

    def update_catalog(self, name: str, *, comment: str | None = None, owner: str | None = None) -> CatalogInfo:
        """PATCH a catalog's comment (``""`` clears it) and/or owner."""
        return catalog_info(
            self._call("PATCH", f"/catalogs/{name_path(name, 1)}", body=_update("catalog", name, comment, owner))
        )

    def update_schema(self, name: str, *, comment: str | None = None, owner: str | None = None) -> SchemaInfo:
        """PATCH a schema's comment and/or owner."""
        return schema_info(
            self._call("PATCH", f"/schemas/{name_path(name, 2)}", body=_update("schema", name, comment, owner))
        )

    def update_volume(self, name: str, *, comment: str | None = None, owner: str | None = None) -> VolumeInfo:
        """PATCH a volume's comment and/or owner."""
        return volume_info(
            self._call("PATCH", f"/volumes/{name_path(name, 3)}", body=_update("volume", name, comment, owner))
        )

    def _pages(self, path: str, key: str, query: dict[str, Any] | None = None) -> Iterator[Json]:
        """Every item of a listing, page after page, until the server gives no next_page_token."""
        token: str | None = None
        seen: set[str] = set()
        while True:
            body = self._call("GET", path, query={**(query or {}), "page_token": token})
            yield from (item for item in body.get(key) or () if isinstance(item, dict))
            token = body.get("next_page_token") or None
            if token is None:
                return
            if token in seen:  # a server handing out the same page again would loop forever
                raise CatalogError(f"{self.url}{path} repeated a page token; the listing is incomplete")
            seen.add(token)

    def list_catalogs(self) -> list[CatalogInfo]:
        return [catalog_info(c) for c in self._pages("/catalogs", "catalogs")]

    def list_schemas(self, catalog: str) -> list[SchemaInfo]:
        (part,) = parts(catalog, 1)
        return [schema_info(s) for s in self._pages("/schemas", "schemas", {"catalog_name": part})]

    def list_tables(self, schema: str) -> list[TableInfo]:
        catalog, part = parts(schema, 2)
        query = {"catalog_name": catalog, "schema_name": part}
        return [table_info(t) for t in self._pages("/tables", "tables", query)]

    def list_volumes(self, schema: str) -> list[VolumeInfo]:
        catalog, part = parts(schema, 2)
        query = {"catalog_name": catalog, "schema_name": part}
        return [volume_info(v) for v in self._pages("/volumes", "volumes", query)]

    def get_catalog_info(self, name: str) -> CatalogInfo:
        return catalog_info(self._call("GET", f"/catalogs/{name_path(name, 1)}"))

    def get_schema(self, name: str) -> SchemaInfo:
        return schema_info(self._call("GET", f"/schemas/{name_path(name, 2)}"))

    def get_table(self, name: str) -> TableInfo:
        return table_info(self._call("GET", f"/tables/{name_path(name, 3)}"))

    def get_volume(self, name: str) -> VolumeInfo:
        return volume_info(self._call("GET", f"/volumes/{name_path(name, 3)}"))

    # ----------------------------------------------------------------- data access
    def _described(self, path: str, name: str, privilege: str) -> Json:
        """GET ``path`` (the object ``name``) before an access needing ``privilege``. Where the object
        itself is hidden from the caller, the refusal names that privilege, as the embedded catalog's
        does: a writer lacking WRITE VOLUME is told so, not that it cannot see the volume."""
        try:
            return self._call("GET", path)
        except PermissionDenied as exc:
            if exc.securable == name and exc.privilege != privilege and type(exc) is PermissionDenied:
                raise PermissionDenied(exc.principal, privilege, name) from None
            raise

    def _vend(self, token: str, what: str, operation: str) -> Vended:
        kind, _, ident = what.partition(":")
        path, field = _VEND_ROUTES[kind]
        body = {field: ident, "operation": operation}
        try:
            answer = self._http.call("POST", path, body=body, token=token, idempotent=True)
        except NotFound as exc:
            raise _missing_route(exc, "POST", path, self.url) from None
        return parse_vended(answer)

    def vended(self, what: str, operation: str) -> Vended:
        """Credentials for ``what`` (``volume:<id>``, ``table:<id>``, ``path:<url>``), cached per token."""
        return self._vended.get(self._token(), what, operation)

    def resolve_volume_path(self, path: str, *, write: bool = False) -> ResolvedVolumePath:
        """Ask for READ VOLUME (or WRITE VOLUME) credentials and open the volume's storage with them."""
        from uc_jupyter.catalog.volume_paths import open_volume_path

        volume_path = parse_volume_path(path)
        privilege = "WRITE VOLUME" if write else "READ VOLUME"
        wire = quoted(".".join(wire_parts(volume_path.volume, path)))
        body = self._described(f"/volumes/{wire}", str(volume_path.volume), privilege)
        info = volume_info(body)
        volume_id = str(body.get("volume_id") or "")
        vended = self.vended(f"volume:{volume_id}", "WRITE_VOLUME" if write else "READ_VOLUME")
        resolved = open_volume_path(volume_path, info, vended.fsspec_options())
        return dataclasses.replace(resolved, expires_at=vended.expiry())

    def resolve_table(self, name: str, *, write: bool = False) -> ResolvedTable:
        """Ask for READ (or READ_WRITE) credentials of a table; deltalake options to open it with."""
        body = self._described(f"/tables/{name_path(name, 3)}", str(parse_name(name)), "MODIFY" if write else "SELECT")
        info = table_info(body)
        vended = self.vended(f"table:{body.get('table_id') or ''}", "READ_WRITE" if write else "READ")
        return ResolvedTable(info, info.storage_location, vended.deltalake_options(), expires_at=vended.expiry())

    def resolve_storage_path(self, url: str, *, write: bool = False) -> ResolvedStoragePath:
        """Ask for PATH_READ (or PATH_READ_WRITE) credentials of a URL inside an external location."""
        vended = self.vended(f"path:{url}", "PATH_READ_WRITE" if write else "PATH_READ")
        holding = [x for x in self.list_external_locations() if _contains(x.url, vended.url)]
        if not holding:
            raise NotFound(f"no external location you can see holds {vended.url}")
        location = max(holding, key=lambda x: len(x.url))
        options = vended.fsspec_options()
        path = st.storage_path(vended.url)
        return ResolvedStoragePath(vended.url, location, path, options, expires_at=vended.expiry())

    def create_table(
        self,
        name: str,
        data: pa.Table | pd.DataFrame | None = None,
        mode: WriteMode = "error",
        *,
        storage_location: str | None = None,
        storage_options: dict[str, Any] | None = None,
        comment: str | None = None,
    ) -> TableInfo:
        """As :meth:`LocalCatalog.create_table <uc_jupyter.catalog.embedded.local.LocalCatalog.create_table>`,
        writing with vended credentials (:mod:`uc_jupyter.catalog.rest.tables`)."""
        _no_options(storage_options, f"table {name}")
        return self._create_table(name, data, mode, storage_location, comment)


def _update(kind: str, name: str, comment: str | None, owner: str | None) -> Json:
    if comment is None and owner is None:
        raise ValueError(f"nothing to update on {kind} {parse_name(name)}: give a comment or an owner")
    return compact(comment=comment, owner=owner)


def _no_options(options: dict[str, Any] | None, what: str) -> None:
    if options:
        raise ValueError(
            f"{what}: storage options cannot be sent to a catalog server; put the keys in a storage "
            "credential there (create_storage_credential) and create the object inside its external location"
        )


def _contains(outer: str, inner: str) -> bool:
    outer = outer.rstrip("/")
    return inner == outer or inner.startswith(outer + "/")


def _missing_route(exc: NotFound, method: str, path: str, base: str) -> Exception:
    """A route the server does not have, said plainly; any other NotFound stays what it was."""
    if str(exc).startswith(_NO_ROUTE):
        return CatalogError(f"the catalog server at {base} has no route {method} {path}; it cannot do this yet")
    return exc
