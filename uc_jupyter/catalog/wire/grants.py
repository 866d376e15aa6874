"""Permissions on the wire: UC's ``PermissionsList`` / ``UpdatePermissions`` <-> our grants.

The official client's ``Privilege`` enum lacks ``WRITE VOLUME`` and ``ALL PRIVILEGES``, and one unknown
enum value makes it refuse a whole response. So ``privileges`` carries only what that enum knows (UC OSS
drops its own unmappable OWNER the same way) and ``uc_jupyter_privileges`` carries the complete list,
which the official client ignores and our own client reads. Requests accept UC's spellings
(``USE CATALOG``), Databricks' (``USE_CATALOG``) and ours alike (:meth:`Privilege.parse`).

Example:
    >>> from uc_jupyter.catalog.model import GrantInfo
    >>> grants = [GrantInfo("main.s.v", SecurableKind.VOLUME, "bob", p)
    ...           for p in (Privilege.READ_VOLUME, Privilege.WRITE_VOLUME)]
    >>> permissions_json(grants)["privilege_assignments"][0]["privileges"]
    ['READ VOLUME']
    >>> permissions_json(grants)["privilege_assignments"][0]["uc_jupyter_privileges"]
    ['READ VOLUME', 'WRITE VOLUME']
    >>> securable("volume", "main.s.v")
    Securable(name='main.s.v', kind=<SecurableKind.VOLUME: 'volume'>)
    >>> [c.principal for c in parse_changes({"changes": [{"principal": "bob", "add": ["use_catalog"], "remove": []}]})]
    ['bob']
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from uc_jupyter.catalog.model import GrantInfo
from uc_jupyter.catalog.rules.privileges import Privilege, SecurableKind, check_grantable, validate_principal
from uc_jupyter.catalog.wire.errors import WireError
from uc_jupyter.catalog.wire.shapes import Model, dotted_name

__all__ = [
    "EXTENSION_KEY",
    "UPDATE_PERMISSIONS",
    "Change",
    "Securable",
    "check_changes",
    "parse_changes",
    "permissions_json",
    "securable",
]

EXTENSION_KEY = "uc_jupyter_privileges"

UPDATE_PERMISSIONS = Model("UpdatePermissions", {"changes": list}, frozenset({"changes"}))

# The values of unitycatalog-client 0.7.0's Privilege enum (ucc/models/privilege.py), exactly.
CLIENT_PRIVILEGES = frozenset(
    {
        "CREATE CATALOG", "USE CATALOG", "CREATE SCHEMA", "USE SCHEMA", "CREATE TABLE", "SELECT", "MODIFY",
        "CREATE FUNCTION", "EXECUTE", "CREATE VOLUME", "READ VOLUME", "CREATE MODEL", "CREATE EXTERNAL LOCATION",
        "READ FILES", "WRITE FILES", "CREATE EXTERNAL TABLE", "CREATE EXTERNAL VOLUME", "CREATE MANAGED STORAGE",
        "CREATE STORAGE CREDENTIAL",
    }
)  # fmt: skip

_TREE_LEVELS = {
    SecurableKind.CATALOG: 1,
    SecurableKind.SCHEMA: 2,
    SecurableKind.TABLE: 3,
    SecurableKind.VOLUME: 3,
}
_TYPES = {
    "catalog": SecurableKind.CATALOG,
    "schema": SecurableKind.SCHEMA,
    "table": SecurableKind.TABLE,
    "volume": SecurableKind.VOLUME,
    "metastore": SecurableKind.METASTORE,
    "external_location": SecurableKind.EXTERNAL_LOCATION,
    "credential": SecurableKind.STORAGE_CREDENTIAL,  # UC's name
    "storage_credential": SecurableKind.STORAGE_CREDENTIAL,  # ours and Databricks'
}
_UNSUPPORTED = ("function", "registered_model")


@dataclass(frozen=True)
class Securable:
    """A ``/permissions/{securable_type}/{full_name}`` target: our name for it and its kind.

    For the catalog tree ``name`` is dotted (``main.ml``); for the metastore it is ``"metastore"``
    whatever the path said (UC OSS ignores it too)."""

    name: str
    kind: SecurableKind

    @property
    def flat_kind(self) -> SecurableKind | None:
        """The ``kind=`` that LocalCatalog's grant calls take: None inside the catalog tree."""
        return self.kind if self.kind.flat else None


@dataclass(frozen=True)
class Change:
    """One ``PermissionsChange``, its privileges parsed."""

    principal: str
    add: tuple[Privilege, ...]
    remove: tuple[Privilege, ...]


def securable(securable_type: str, full_name: str) -> Securable:
    """The target of a permissions route; unknown or unsupported types are INVALID_ARGUMENT."""
    wanted = securable_type.strip().lower()
    if wanted in _UNSUPPORTED:
        raise WireError("INVALID_ARGUMENT", f"securable type {wanted} is not supported by this server")
    kind = _TYPES.get(wanted)
    if kind is None:
        known = ", ".join(_TYPES)
        raise WireError("INVALID_ARGUMENT", f"unknown securable type {securable_type[:64]!r}; use one of: {known}")
    if kind is SecurableKind.METASTORE:
        return Securable("metastore", kind)
    if kind.flat:
        if not full_name or "/" in full_name:
            raise WireError("INVALID_ARGUMENT", f"invalid {kind.label} name {full_name[:300]!r}")
        return Securable(full_name, kind)
    parts = full_name.split(".")
    if len(parts) != _TREE_LEVELS[kind]:
        shape = ("catalog", "catalog.schema", "catalog.schema.name")[_TREE_LEVELS[kind] - 1]
        raise WireError("INVALID_ARGUMENT", f"invalid {kind.label} name {full_name[:300]!r}: expected '{shape}'")
    return Securable(dotted_name(*parts), kind)


def parse_changes(body: dict[str, Any]) -> list[Change]:
    """The changes of an ``UpdatePermissions`` body; every unknown privilege named in one error."""
    changes: list[Change] = []
    unknown: list[str] = []
    for entry in body["changes"]:
        if not isinstance(entry, dict) or not {"principal", "add", "remove"} <= set(entry):
            raise WireError(
                "INVALID_ARGUMENT", "every entry of changes must be an object with principal, add and remove"
            )
        extra = set(entry) - {"principal", "add", "remove"}
        if extra:
            raise WireError("INVALID_ARGUMENT", f"unknown field {sorted(extra)[0][:64]!r} in PermissionsChange")
        principal, add, remove = entry["principal"], entry["add"], entry["remove"]
        if not isinstance(principal, str):
            raise WireError("INVALID_ARGUMENT", "principal in PermissionsChange must be a string")
        validate_principal(principal)
        parsed: list[tuple[Privilege, ...]] = []
        for field, values in (("add", add), ("remove", remove)):
            if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                raise WireError("INVALID_ARGUMENT", f"{field} in PermissionsChange must be an array of strings")
            known: list[Privilege] = []
            for value in values:
                try:
                    known.append(Privilege.parse(value))
                except ValueError:
                    unknown.append(value[:64])
            parsed.append(tuple(known))
        changes.append(Change(principal, parsed[0], parsed[1]))
    if unknown:
        names = ", ".join(repr(u) for u in dict.fromkeys(unknown))
        raise WireError(
            "INVALID_ARGUMENT", f"unknown privilege {names}; use one of: {', '.join(p.value for p in Privilege)}"
        )
    return changes


def check_changes(target: Securable, changes: Iterable[Change]) -> None:
    """Refuse (ValueError, one line) any added privilege that cannot be granted on ``target``'s kind,
    before anything is applied. Removing one never granted is a no-op, as in LocalCatalog.revoke."""
    for change in changes:
        for privilege in change.add:
            check_grantable(target.kind, target.name, privilege)


def permissions_json(grants: Iterable[GrantInfo], principal: str | None = None) -> dict[str, Any]:
    """A ``PermissionsList``: one assignment per principal (sorted), optionally only ``principal``'s."""
    by_principal: dict[str, list[str]] = {}
    for grant in grants:
        if principal is None or grant.principal == principal:
            by_principal.setdefault(grant.principal, []).append(grant.privilege.value)
    return {
        "privilege_assignments": [
            {
                "principal": name,
                "privileges": [p for p in privileges if p in CLIENT_PRIVILEGES],
                EXTENSION_KEY: privileges,
            }
            for name, privileges in sorted(by_principal.items())
        ]
    }
