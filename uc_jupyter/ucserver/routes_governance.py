"""The governance routes of the Unity Catalog API: ``GET`` and ``PATCH /permissions/{securable_type}/{full_name}``.

Every check is the embedded catalog's (:meth:`LocalCatalog.change_grants`, ``show_grants``): who
may see which assignments (owners and, outside the catalog tree, admins see all; others only their
own) and who may change them (owners; admins on the metastore, credentials and locations).

A PATCH applies all or nothing: the body is validated first (every privilege name, every principal,
every privilege against the securable's kind), then every change is checked again and written in one
metastore transaction, so a refusal (the caller may not grant, an unknown principal) changes nothing
and no reader ever sees part of a PATCH.

Example:
    >>> import tempfile
    >>> from uc_jupyter.catalog.embedded.local import LocalCatalog
    >>> from uc_jupyter.ucserver.routes_data import create_catalog
    >>> cat = LocalCatalog(tempfile.mkdtemp())
    >>> _ = create_catalog(cat, Call(body={"name": "main"}))
    >>> get_permissions(cat, Call(path={"securable_type": "catalog", "full_name": "main"}))
    {'privilege_assignments': []}
"""

from __future__ import annotations

from typing import Any

from uc_jupyter.catalog import GrantInfo
from uc_jupyter.catalog.embedded.grants import GrantChange
from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.catalog.rules.privileges import SecurableKind
from uc_jupyter.catalog.wire.grants import (
    UPDATE_PERMISSIONS,
    Securable,
    check_changes,
    parse_changes,
    permissions_json,
    securable,
)
from uc_jupyter.ucserver.routes_data import Call, Route

__all__ = ["ROUTES", "get_permissions", "update_permissions"]

Json = dict[str, Any]


def _target(cat: LocalCatalog, call: Call) -> Securable:
    """The path's securable; a table or volume is looked up, so that ``table/c.s.v`` naming a volume is
    NOT_FOUND (saying what it is) rather than a grant checked against the wrong kind."""
    target = securable(call.path["securable_type"], call.path["full_name"])
    if target.kind is SecurableKind.TABLE:
        cat.get_table(target.name)
    elif target.kind is SecurableKind.VOLUME:
        cat.get_volume(target.name)
    return target


def _shown(cat: LocalCatalog, target: Securable) -> list[GrantInfo]:
    return cat.show_grants(target.name, kind=target.flat_kind)


def get_permissions(cat: LocalCatalog, call: Call) -> Json:
    """The assignments on the target the caller may see, optionally only ``?principal=``'s."""
    target = _target(cat, call)
    return permissions_json(_shown(cat, target), call.query.get("principal") or None)


def update_permissions(cat: LocalCatalog, call: Call) -> Json:
    """Apply every change or none, in one metastore transaction (:meth:`LocalCatalog.change_grants`);
    answer the new assignments of the principals the changes name (what UC OSS answers)."""
    target = _target(cat, call)
    changes = parse_changes(call.body)
    check_changes(target, changes)
    cat.change_grants(
        target.name,
        [GrantChange(c.principal, add=c.add, remove=c.remove) for c in changes],
        kind=target.flat_kind,
    )
    named = {change.principal for change in changes}
    shown = [g for g in _shown(cat, target) if g.principal in named]
    return permissions_json(shown)


ROUTES: tuple[Route, ...] = (
    Route("GET", "/permissions/{securable_type}/{full_name}", get_permissions),
    Route("PATCH", "/permissions/{securable_type}/{full_name}", update_permissions, UPDATE_PERMISSIONS),
)
