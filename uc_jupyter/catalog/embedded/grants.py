"""Granting, revoking and showing privileges, on the catalog tree and on the flat securables
(the metastore, storage credentials, external locations); several changes at once in one transaction
(:meth:`Grants.change_grants`, what ``PATCH /permissions`` uses).

Example:
    >>> cat.grant("main.ml", "USE SCHEMA", "alice")                            # doctest: +SKIP
    >>> cat.show_grants("raw", kind="location")                                 # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from uc_jupyter.catalog.embedded.external import ExternalStorage
from uc_jupyter.catalog.embedded.rows import (
    key,
)
from uc_jupyter.catalog.model import (
    GrantInfo,
    NotFound,
    current_principal,
)
from uc_jupyter.catalog.rules.names import parse_name
from uc_jupyter.catalog.rules.privileges import (
    Privilege,
    SecurableKind,
    check_grantable,
    flat_name,
    is_owner,
    validate_principal,
)

if TYPE_CHECKING:
    pass

__all__ = ["GrantChange", "Grants"]


@dataclass(frozen=True)
class GrantChange:
    """One principal's privileges to add and to remove, as names or :class:`Privilege` values."""

    principal: str
    add: Sequence[str | Privilege] = ()
    remove: Sequence[str | Privilege] = ()


class Grants(ExternalStorage):
    """The grant half of :class:`uc_jupyter.catalog.embedded.local.LocalCatalog`."""

    def grant(
        self, securable: str, privilege: str | Privilege, principal: str, *, kind: str | SecurableKind | None = None
    ) -> None:
        """Grant ``privilege`` on ``securable`` to ``principal``; only an owner may grant (on a storage
        credential or external location also an admin; on the metastore only admins).

        ``kind`` names securables outside the catalog tree: ``"location"`` (an external location),
        ``"credential"`` (a storage credential) or ``"metastore"`` (``securable`` is then ``"metastore"``).

        Example:
            >>> cat.grant("main.ml", "USE SCHEMA", "alice")                            # doctest: +SKIP
            >>> cat.grant("raw", "CREATE EXTERNAL VOLUME", "alice", kind="location")    # doctest: +SKIP
            >>> cat.grant("metastore", "CREATE CATALOG", "alice", kind="metastore")     # doctest: +SKIP
        """
        self.change_grants(securable, [GrantChange(principal, add=(privilege,))], kind=kind)

    def revoke(
        self, securable: str, privilege: str | Privilege, principal: str, *, kind: str | SecurableKind | None = None
    ) -> None:
        """Revoke a privilege granted directly on ``securable`` (revoking an absent one is a no-op)."""
        self.change_grants(securable, [GrantChange(principal, remove=(privilege,))], kind=kind)

    def change_grants(
        self, securable: str, changes: Sequence[GrantChange], *, kind: str | SecurableKind | None = None
    ) -> None:
        """Apply several grants and revokes on one securable in one transaction: every change is checked
        (each privilege applies to the securable, the caller may grant on it, each principal that gets a
        privilege exists) before any is written, and a concurrent reader sees all of them or none.
        Within one change the removals go first, so a privilege both removed and added ends granted.

        Example:
            >>> cat.change_grants("main", [GrantChange("alice", add=["USE CATALOG"]),         # doctest: +SKIP
            ...                            GrantChange("bob", remove=["USE CATALOG"])])
        """
        parsed_changes = [
            (
                validate_principal(change.principal),
                [Privilege.parse(p) for p in change.add],
                [Privilege.parse(p) for p in change.remove],
            )
            for change in changes
        ]
        flat = None if kind is None else SecurableKind.parse_flat(kind)
        where: tuple[str, ...]
        with self._transaction(write=True) as conn:
            if flat is None:
                parsed = parse_name(securable)
                row = self._existing_row(conn, parsed)
                for _, add, remove in parsed_changes:
                    for privilege in (*add, *remove):
                        check_grantable(SecurableKind(row["kind"]), parsed, privilege)
                self._require_owner(conn, parsed)
                table, where = "grants", (key(parsed),)
            else:
                name = flat_name(flat, securable)
                for _, add, remove in parsed_changes:
                    for privilege in (*add, *remove):
                        check_grantable(flat, name, privilege)
                if flat is SecurableKind.METASTORE:
                    self._require_admin(conn)
                else:
                    self._require_flat_owner(conn, flat, self._visible_flat_row(conn, flat, name))
                table, where = "flat_grants", (flat.value, name)
            for principal, add, _ in parsed_changes:
                if add and not conn.execute("SELECT 1 FROM principals WHERE name = ?", (principal,)).fetchone():
                    raise NotFound(
                        f"principal {principal} does not exist; create it first "
                        f"(uc-jupyter catalog create principal {principal})"
                    )
            columns = "securable = ?" if flat is None else "kind = ? AND name = ?"
            marks = ", ".join("?" * (len(where) + 2))
            for principal, add, remove in parsed_changes:
                for privilege in remove:
                    conn.execute(
                        f"DELETE FROM {table} WHERE {columns} AND privilege = ? AND principal = ?",
                        (*where, privilege.value, principal),
                    )
                for privilege in add:
                    conn.execute(
                        f"INSERT OR IGNORE INTO {table} VALUES ({marks})", (*where, privilege.value, principal)
                    )

    def show_grants(self, securable: str, *, kind: str | SecurableKind | None = None) -> list[GrantInfo]:
        """The privileges granted directly on ``securable``, sorted by principal then privilege.

        Owners (of it or a container) and, for securables outside the catalog tree, admins see every
        grant; others see only their own, and only on objects they may see.
        """
        principal = current_principal()
        if kind is not None:
            flat = SecurableKind.parse_flat(kind)
            name = flat_name(flat, securable)
            with self._transaction() as conn:
                if flat is SecurableKind.METASTORE:
                    everyone = self._is_admin(conn, principal)
                else:
                    row = self._visible_flat_row(conn, flat, name)
                    everyone = self._is_admin(conn, principal) or row["owner"] == principal
                rows = conn.execute(
                    "SELECT principal, privilege FROM flat_grants WHERE kind = ? AND name = ? "
                    "ORDER BY principal, privilege",
                    (flat.value, name),
                ).fetchall()
            return [
                GrantInfo(name, flat, r["principal"], Privilege(r["privilege"]))
                for r in rows
                if everyone or r["principal"] == principal
            ]
        parsed = parse_name(securable)
        with self._transaction() as conn:
            row = self._existing_row(conn, parsed)
            securable_kind = SecurableKind(row["kind"])
            owner = is_owner(principal, parsed, self._facts(conn, parsed, principal))
            if not owner:
                self._require_visible(conn, parsed, securable_kind)
            rows = conn.execute(
                "SELECT principal, privilege FROM grants WHERE securable = ? ORDER BY principal, privilege",
                (key(parsed),),
            ).fetchall()
        return [
            GrantInfo(str(parsed), securable_kind, r["principal"], Privilege(r["privilege"]))
            for r in rows
            if owner or r["principal"] == principal
        ]
