"""Grants, storage credentials and external locations through a Unity Catalog server: the governance
half of :class:`~uc_jupyter.catalog.rest.client.RestCatalog`.

Grants go through ``/permissions/{securable_type}/{full_name}``: a three-part name may be a table or
a volume, so it is tried as a table first and as a volume when the server says no such table.
``show_grants`` reads our ``uc_jupyter_privileges`` extension when the server sends it (so ``WRITE
VOLUME`` and ``ALL PRIVILEGES`` survive), else UC's ``privileges``; privileges we do not model (a
Databricks ``EXECUTE``) are left out. A credential's options go to the server in the write-only
extension field ``uc_jupyter_storage_options`` and never come back.

Example:
    >>> cat.grant("main.ml.images", "READ VOLUME", "alice")    # doctest: +SKIP
    >>> cat.show_grants("main.ml.images")                       # doctest: +SKIP
    [GrantInfo(securable='main.ml.images', securable_kind=<SecurableKind.VOLUME: 'volume'>, ...)]
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from uc_jupyter.catalog.model import (
    CredentialInfo,
    ExternalLocationInfo,
    GrantInfo,
    NotFound,
    Privilege,
    SecurableKind,
)
from uc_jupyter.catalog.rest.names import compact, name_path, parts, quoted, wire_parts
from uc_jupyter.catalog.rules.names import parse_name
from uc_jupyter.catalog.wire.read import credential_info, location_info

if TYPE_CHECKING:
    from uc_jupyter.catalog.rest.http import Http

__all__ = ["RestGovernance"]

Json = dict[str, Any]


class RestGovernance:
    """Grants, credentials and locations over REST; :class:`~uc_jupyter.catalog.rest.client.RestCatalog`
    provides the calls."""

    _http: Http

    def _call(self, method: str, path: str, **kwargs: Any) -> Json:
        raise NotImplementedError  # RestCatalog's

    def _pages(self, path: str, key: str, query: dict[str, Any] | None = None) -> Iterator[Json]:
        raise NotImplementedError  # RestCatalog's

    def _securable(
        self, securable: str, kind: str | SecurableKind | None
    ) -> tuple[list[tuple[str, SecurableKind]], str]:
        """The permissions paths to try, each with its kind (a three-part name may be a table or a
        volume), and our name of the securable."""
        from uc_jupyter.catalog.rules.privileges import flat_name

        databricks = self._http.dialect == "databricks"
        if kind is not None:
            flat = SecurableKind.parse_flat(kind)
            name = flat_name(flat, securable)
            wire_type = (
                flat.value.upper()
                if databricks
                else {SecurableKind.STORAGE_CREDENTIAL: "credential"}.get(flat, flat.value)
            )
            return [(f"/permissions/{wire_type}/{quoted(name)}", flat)], name
        parsed = parse_name(securable)
        full = quoted(".".join(wire_parts(parsed, securable)))
        kinds = {
            1: [SecurableKind.CATALOG],
            2: [SecurableKind.SCHEMA],
            3: [SecurableKind.TABLE, SecurableKind.VOLUME],
        }[len(parsed.parts)]
        return [(f"/permissions/{k.value.upper() if databricks else k.value}/{full}", k) for k in kinds], str(parsed)

    def _permissions(
        self, method: str, securable: str, kind: str | SecurableKind | None, **kwargs: Any
    ) -> tuple[Json, str, SecurableKind]:
        tries, name = self._securable(securable, kind)
        for path, found in tries:
            try:
                return self._call(method, path, **kwargs), name, found
            except NotFound as exc:
                # "table x does not exist": it may be a volume; a missing catalog or schema is the answer.
                if found is SecurableKind.TABLE and len(tries) > 1 and str(exc).startswith("table "):
                    continue
                if found is SecurableKind.VOLUME and str(exc).startswith("volume "):
                    raise NotFound(f"table or volume {name} does not exist") from None
                raise
        raise AssertionError("unreachable")  # the last try returns or raises

    def _change(self, securable: str, privilege: str | Privilege, principal: str, kind: Any, *, add: bool) -> None:
        spelled = Privilege.parse(privilege).value
        if self._http.dialect == "databricks":
            spelled = spelled.replace(" ", "_")
        change = {"principal": principal, "add": [spelled] if add else [], "remove": [] if add else [spelled]}
        self._permissions("PATCH", securable, kind, body={"changes": [change]})

    def grant(
        self, securable: str, privilege: str | Privilege, principal: str, *, kind: str | SecurableKind | None = None
    ) -> None:
        self._change(securable, privilege, principal, kind, add=True)

    def revoke(
        self, securable: str, privilege: str | Privilege, principal: str, *, kind: str | SecurableKind | None = None
    ) -> None:
        self._change(securable, privilege, principal, kind, add=False)

    def show_grants(self, securable: str, *, kind: str | SecurableKind | None = None) -> list[GrantInfo]:
        """The grants on ``securable`` the server shows the caller; the full list from
        ``uc_jupyter_privileges`` when the server sends it, privileges we do not know left out."""
        body, name, found = self._permissions("GET", securable, kind)
        grants: set[GrantInfo] = set()
        for assignment in body.get("privilege_assignments") or ():
            privileges = assignment.get("uc_jupyter_privileges", assignment.get("privileges")) or ()
            for value in privileges:
                try:
                    grants.add(GrantInfo(name, found, str(assignment["principal"]), Privilege.parse(value)))
                except (ValueError, KeyError):  # e.g. EXECUTE on a Databricks function: not ours to show
                    continue
        return sorted(grants, key=lambda g: (g.principal, g.privilege.value))

    # ----------------------------------------------------------------- credentials and locations
    def create_storage_credential(
        self, name: str, storage_options: dict[str, Any] | None = None, *, comment: str | None = None
    ) -> CredentialInfo:
        """A storage credential; its options go to the server (``uc_jupyter_storage_options``) and stay there."""
        (part,) = parts(name, 1)
        body = compact(name=part, comment=comment, purpose="STORAGE")
        if storage_options:
            body["uc_jupyter_storage_options"] = storage_options
            if "role_arn" in storage_options:
                body["aws_iam_role"] = {"role_arn": storage_options["role_arn"]}
        return credential_info(self._call("POST", "/credentials", body=body))

    def get_storage_credential(self, name: str) -> CredentialInfo:
        return credential_info(self._call("GET", f"/credentials/{name_path(name, 1)}"))

    def list_storage_credentials(self) -> list[CredentialInfo]:
        return [credential_info(c) for c in self._pages("/credentials", "credentials")]

    def drop_storage_credential(self, name: str) -> None:
        self._call("DELETE", f"/credentials/{name_path(name, 1)}")

    def create_external_location(
        self, name: str, url: str, credential: str | None = None, *, comment: str | None = None
    ) -> ExternalLocationInfo:
        (part,) = parts(name, 1)
        body = compact(name=part, url=url, credential_name=credential, comment=comment)
        return location_info(self._call("POST", "/external-locations", body=body))

    def get_external_location(self, name: str) -> ExternalLocationInfo:
        return location_info(self._call("GET", f"/external-locations/{name_path(name, 1)}"))

    def list_external_locations(self) -> list[ExternalLocationInfo]:
        return [location_info(x) for x in self._pages("/external-locations", "external_locations")]

    def drop_external_location(self, name: str) -> None:
        self._call("DELETE", f"/external-locations/{name_path(name, 1)}")
