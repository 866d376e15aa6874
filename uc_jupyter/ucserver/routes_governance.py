"""The governance routes of the Unity Catalog API: ``GET`` and ``PATCH /permissions/{securable_type}/{full_name}``.

Every check is the embedded catalog's (:meth:`LocalCatalog.grant`, ``revoke``, ``show_grants``): who
may see which assignments (owners and, outside the catalog tree, admins see all; others only their
own) and who may change them (owners; admins on the metastore, credentials and locations).

A PATCH applies all or nothing as far as a caller can tell. LocalCatalog has no transaction spanning
several grants, so the whole body is validated first (every privilege name, every principal, every
privilege against the securable's kind), then the changes are applied one by one; if one is still
refused (the caller may not grant, an unknown principal), those already applied are undone before the
error is answered. What remains non-atomic: a concurrent reader may see the partial state during those
few milliseconds, and an undo can itself fail if the caller lost ownership meanwhile.

Example:
    >>> import tempfile
    >>> from uc_jupyter.catalog.local import LocalCatalog
    >>> from uc_jupyter.ucserver.routes_data import create_catalog
    >>> cat = LocalCatalog(tempfile.mkdtemp())
    >>> _ = create_catalog(cat, Call(body={"name": "main"}))
    >>> get_permissions(cat, Call(path={"securable_type": "catalog", "full_name": "main"}))
    {'privilege_assignments': []}
"""

from __future__ import annotations

import logging
from typing import Any

from uc_jupyter.catalog import GrantInfo
from uc_jupyter.catalog.local import LocalCatalog
from uc_jupyter.catalog.privileges import Privilege, SecurableKind
from uc_jupyter.catalog.wire_grants import (
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

log = logging.getLogger(__name__)


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
    """Apply every change or none; answer the new assignments of the principals the changes name
    (what UC OSS answers)."""
    target = _target(cat, call)
    changes = parse_changes(call.body)
    check_changes(target, changes)
    before = {(g.principal, g.privilege) for g in _shown(cat, target)}  # also: the target exists, is visible
    done: list[tuple[bool, Privilege, str]] = []  # (added, privilege, principal) actually changed
    try:
        for change in changes:
            for privilege in change.remove:
                # Called even when absent (a no-op then): revoke is where a non-owner is refused.
                cat.revoke(target.name, privilege, change.principal, kind=target.flat_kind)
                if (change.principal, privilege) in before:
                    done.append((False, privilege, change.principal))
            for privilege in change.add:
                cat.grant(target.name, privilege, change.principal, kind=target.flat_kind)
                if (change.principal, privilege) not in before:
                    done.append((True, privilege, change.principal))
    except BaseException:
        _undo(cat, target, done)
        raise
    named = {change.principal for change in changes}
    shown = [g for g in _shown(cat, target) if g.principal in named]
    return permissions_json(shown)


def _undo(cat: LocalCatalog, target: Securable, done: list[tuple[bool, Privilege, str]]) -> None:
    # In reverse, so a privilege removed then added (or the reverse) in one body ends as it began. An
    # undo that fails is logged, not raised: the caller must still learn why the PATCH was refused.
    for added, privilege, principal in reversed(done):
        try:
            if added:
                cat.revoke(target.name, privilege, principal, kind=target.flat_kind)
            else:
                cat.grant(target.name, privilege, principal, kind=target.flat_kind)
        except Exception:
            verb = "revoke" if added else "grant"
            log.exception("could not undo a refused PATCH: %s %s on %s to %s", verb, privilege, target.name, principal)


ROUTES: tuple[Route, ...] = (
    Route("GET", "/permissions/{securable_type}/{full_name}", get_permissions),
    Route("PATCH", "/permissions/{securable_type}/{full_name}", update_permissions, UPDATE_PERMISSIONS),
)
