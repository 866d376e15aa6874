"""The embedded metastore's rows and the checks every catalog call makes on them.

:class:`Metastore` is the base of :class:`uc_jupyter.catalog.embedded.local.LocalCatalog`: the SQLite store and
its transactions, finding rows (``NotFound`` naming the first missing level, suggesting only names
the caller may see), inserting them, and the privilege checks of the catalog tree (ownership,
requirements, visibility) through the pure model of :mod:`uc_jupyter.catalog.rules.privileges`.

Example (what its checks give a caller of the catalog):
    >>> import tempfile
    >>> from uc_jupyter.catalog.embedded.local import LocalCatalog
    >>> cat = LocalCatalog(tempfile.mkdtemp())
    >>> _ = cat.create_catalog("main")
    >>> cat.get_schema("main.mll")
    Traceback (most recent call last):
    uc_jupyter.catalog.NotFound: schema main.mll does not exist
"""

from __future__ import annotations

import contextlib
import difflib
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, cast

from uc_jupyter.catalog.embedded.entry_locks import EntryLocks
from uc_jupyter.catalog.embedded.rows import (
    columns_json,
    key,
    name_of,
    new_id,
    now,
)
from uc_jupyter.catalog.embedded.secrets import SecretStore
from uc_jupyter.catalog.model import (
    AlreadyExists,
    ColumnInfo,
    NotFound,
    PermissionDenied,
    current_principal,
)
from uc_jupyter.catalog.rules.names import SecurableName
from uc_jupyter.catalog.rules.privileges import (
    APPLIES_TO,
    AccessFacts,
    Action,
    Grant,
    Privilege,
    SecurableKind,
    Subtree,
    first_missing,
    is_owner,
    requirements,
    visible,
    visible_one,
)
from uc_jupyter.sqlite_store import SqliteStore

if TYPE_CHECKING:
    pass

__all__ = ["KIND_BY_LEVEL", "LEVEL_OF", "Metastore"]

KIND_BY_LEVEL = {1: SecurableKind.CATALOG, 2: SecurableKind.SCHEMA}
LEVEL_OF = {SecurableKind.CATALOG: 1, SecurableKind.SCHEMA: 2, SecurableKind.TABLE: 3, SecurableKind.VOLUME: 3}
_DEEPEST = 3  # tables and volumes: nothing lies below them
# The privilege named when a principal may not even see an object of this kind.
_SEEN_WITH = {
    SecurableKind.CATALOG: Privilege.USE_CATALOG,
    SecurableKind.SCHEMA: Privilege.USE_SCHEMA,
    SecurableKind.TABLE: Privilege.SELECT,
    SecurableKind.VOLUME: Privilege.READ_VOLUME,
}


class Metastore:
    """Rows and checks shared by the parts of the embedded catalog (see the module docstring)."""

    root: Path
    _store: SqliteStore
    _secrets: SecretStore
    _locks: EntryLocks

    def _transaction(self, *, write: bool = False) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        return self._store.transaction(write=write)

    def _row(self, conn: sqlite3.Connection, name: SecurableName) -> sqlite3.Row | None:
        return cast(
            "sqlite3.Row | None",
            conn.execute("SELECT * FROM securables WHERE key = ?", (key(name),)).fetchone(),
        )

    def _existing_row(self, conn: sqlite3.Connection, name: SecurableName) -> sqlite3.Row:
        """The row of ``name``; NotFound names the first missing level and suggests close names."""
        for level in name.lineage():
            row = self._row(conn, level)
            if row is None:
                kind = KIND_BY_LEVEL.get(len(level.parts), "table or volume")
                raise NotFound(f"{kind} {level} does not exist{self._suggestion(conn, level)}")
        return cast(sqlite3.Row, row)

    def _row_of_kind(self, conn: sqlite3.Connection, name: SecurableName, kind: SecurableKind) -> sqlite3.Row:
        if name.parent is not None:
            self._existing_row(conn, name.parent)
        row = self._row(conn, name)
        if row is None or row["kind"] != kind.value:
            hint = f" ({name} is a {row['kind']})" if row is not None else self._suggestion(conn, name)
            raise NotFound(f"{kind} {name} does not exist{hint}")
        return row

    def _suggestion(self, conn: sqlite3.Connection, name: SecurableName) -> str:
        """``; did you mean x?`` for a close name the current principal may see (never another one:
        a suggestion would tell who lacks the privilege that a hidden object exists)."""
        parent = name.parent
        rows = conn.execute(
            "SELECT key, kind, owner FROM securables WHERE parent IS ?", (None if parent is None else key(parent),)
        ).fetchall()
        seen = self._visible_children(conn, parent, rows)
        siblings = [r["key"].rsplit(".", 1)[-1] for r in rows if r["key"] in seen]
        wanted = name.parts[-1]
        # A close spelling, else a sibling that begins the name or that the name begins
        # (main.ml_data for main.ml, which difflib finds too far apart).
        close = (
            difflib.get_close_matches(wanted, siblings, n=1)
            or [
                s
                for s in sorted(siblings)
                if min(len(s), len(wanted)) >= 2 and (wanted.startswith(s) or s.startswith(wanted))
            ][:1]
        )
        if not close:
            return ""
        return f"; did you mean {parent.child(close[0]) if parent else close[0]}?"

    def _ensure_absent(self, conn: sqlite3.Connection, name: SecurableName) -> None:
        row = self._row(conn, name)
        if row is not None:
            raise AlreadyExists(f"{row['kind']} {name} already exists")

    def _insert(
        self,
        conn: sqlite3.Connection,
        name: SecurableName,
        kind: SecurableKind,
        *,
        storage_location: str | None = None,
        managed: bool = False,
        columns: Sequence[ColumnInfo] | None = None,
        comment: str | None = None,
        given_id: str | None = None,
    ) -> str:
        """Insert the row of ``name`` owned by the current principal; returns its id (``given_id``,
        e.g. a staging table's, or a new uuid4)."""
        if name.parent is not None:
            self._existing_row(conn, name.parent)
        self._ensure_absent(conn, name)
        owner = current_principal()
        object_id = given_id or new_id()
        conn.execute("INSERT OR IGNORE INTO principals VALUES (?, 'user', ?, 0)", (owner, now()))
        conn.execute(
            "INSERT INTO securables (key, kind, parent, owner, storage_location, managed, storage_options, columns,"
            " comment, created_at, id, created_by) VALUES (?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, ?, ?)",
            (
                key(name),
                kind.value,
                None if name.parent is None else key(name.parent),
                owner,
                storage_location,
                int(managed),
                None if columns is None else columns_json(columns),
                comment,
                now(),
                object_id,
                owner,
            ),
        )
        if managed and storage_location:  # the row owns it now: no longer pending
            conn.execute("DELETE FROM pending_storage WHERE location = ?", (storage_location,))
        conn.execute("DELETE FROM pending_secrets WHERE id = ?", (object_id,))  # nor its secret, if any
        return object_id

    def _facts(self, conn: sqlite3.Connection, name: SecurableName, principal: str) -> AccessFacts:
        keys = [key(level) for level in name.lineage()]
        marks = ",".join("?" * len(keys))
        owners = {
            name_of(r["key"]): r["owner"]
            for r in conn.execute(f"SELECT key, owner FROM securables WHERE key IN ({marks})", keys)
        }
        grants = frozenset(
            Grant(name_of(r["securable"]), Privilege(r["privilege"]), principal)
            for r in conn.execute(
                f"SELECT securable, privilege FROM grants WHERE principal = ? AND securable IN ({marks})",
                [principal, *keys],
            )
        )
        return AccessFacts(owners=owners, grants=grants)

    def _require(self, conn: sqlite3.Connection, action: Action, name: SecurableName) -> None:
        """Raise NotFound when ``name`` is missing, PermissionDenied when a requirement is unmet."""
        self._existing_row(conn, name)
        principal = current_principal()
        missing = first_missing(principal, requirements(action, name), self._facts(conn, name, principal))
        if missing is not None:
            raise PermissionDenied(principal, missing[1].value, str(missing[0]))

    def _require_owner(self, conn: sqlite3.Connection, name: SecurableName) -> None:
        principal = current_principal()
        if not is_owner(principal, name, self._facts(conn, name, principal)):
            raise PermissionDenied(principal, "OWNERSHIP", str(name))

    def _require_visible(self, conn: sqlite3.Connection, name: SecurableName, kind: SecurableKind) -> None:
        if not self._is_visible(conn, name, kind):
            raise PermissionDenied(current_principal(), _SEEN_WITH[kind].value, str(name))

    def _is_visible(self, conn: sqlite3.Connection, name: SecurableName, kind: SecurableKind) -> bool:
        """Whether the current principal may see ``name`` (:func:`privileges.visible_one`): its lineage
        first, then, only when that does not decide, indexed range reads of what lies below it."""
        principal = current_principal()
        facts = self._facts(conn, name, principal)
        if visible_one(principal, name, kind, facts):
            return True
        return visible_one(principal, name, kind, facts, self._subtree(conn, name, principal, facts))

    def _visible_children(
        self, conn: sqlite3.Connection, parent: SecurableName | None, rows: Sequence[sqlite3.Row]
    ) -> set[str]:
        """The keys among ``rows`` (children of ``parent``, None for catalogs; with ``key``, ``kind`` and
        ``owner``) that the current principal may see. Reads the parent's lineage once and the
        principal's grants below the parent once; a child's subtree only when those do not decide."""
        principal = current_principal()
        base = AccessFacts(owners={}, grants=frozenset()) if parent is None else self._facts(conn, parent, principal)
        where, bounds = _below("securable", parent)
        own: dict[str, set[Grant]] = {}
        for r in conn.execute(
            f"SELECT securable, privilege FROM grants WHERE principal = ? AND {where}", (principal, *bounds)
        ):
            own.setdefault(r["securable"], set()).add(
                Grant(name_of(r["securable"]), Privilege(r["privilege"]), principal)
            )
        seen: set[str] = set()
        for row in rows:
            child, kind = name_of(row["key"]), SecurableKind(row["kind"])
            facts = AccessFacts(
                owners={**base.owners, child: row["owner"]}, grants=base.grants | own.get(row["key"], set())
            )
            if visible_one(principal, child, kind, facts) or (
                len(child.parts) < _DEEPEST
                and visible_one(principal, child, kind, facts, self._subtree(conn, child, principal, facts))
            ):
                seen.add(row["key"])
        return seen

    def _subtree(self, conn: sqlite3.Connection, name: SecurableName, principal: str, facts: AccessFacts) -> Subtree:
        """What lies below ``name`` that its visibility can depend on, through indexed range queries
        (never a scan of the metastore): whether the principal owns something there, its grants there,
        and which kinds exist under ``name`` and under each granted object, asked only for the kinds
        the privileges involved apply to."""
        if len(name.parts) >= _DEEPEST:
            return Subtree()  # tables and volumes hold nothing
        where, bounds = _below("key", name)
        if conn.execute(
            f"SELECT 1 FROM securables WHERE owner = ? AND {where} LIMIT 1", (principal, *bounds)
        ).fetchone():
            return Subtree(owned=True)
        wanted = frozenset().union(*(APPLIES_TO[g.privilege] for g in facts.grants if g.principal == principal))
        kinds: dict[SecurableName, frozenset[SecurableKind]] = {name: self._kinds_under(conn, name, wanted)}
        grants: set[Grant] = set()
        granted: dict[SecurableName, tuple[SecurableKind, set[Privilege]]] = {}
        where, bounds = _below("g.securable", name)
        for r in conn.execute(
            "SELECT g.securable, g.privilege, s.kind FROM grants g JOIN securables s ON s.key = g.securable "
            f"WHERE g.principal = ? AND {where}",
            (principal, *bounds),
        ):
            level, privilege = name_of(r["securable"]), Privilege(r["privilege"])
            grants.add(Grant(level, privilege, principal))
            granted.setdefault(level, (SecurableKind(r["kind"]), set()))[1].add(privilege)
        for level, (kind, privileges) in granted.items():
            applies = frozenset().union(*(APPLIES_TO[p] for p in privileges))
            kinds[level] = frozenset({kind}) | (
                frozenset() if kind in applies else self._kinds_under(conn, level, applies)
            )
        return Subtree(grants=frozenset(grants), kinds=kinds)

    def _kinds_under(
        self, conn: sqlite3.Connection, name: SecurableName, wanted: frozenset[SecurableKind]
    ) -> frozenset[SecurableKind]:
        """The kinds among ``wanted`` of which at least one object lies below ``name`` (one indexed
        probe per kind that can be deeper than ``name``)."""
        where, bounds = _below("key", name)
        return frozenset(
            kind
            for kind in wanted
            if LEVEL_OF.get(kind, 0) > len(name.parts)
            and conn.execute(
                f"SELECT 1 FROM securables WHERE kind = ? AND {where} LIMIT 1", (kind.value, *bounds)
            ).fetchone()
        )

    def _visible_keys(self, conn: sqlite3.Connection) -> set[str]:
        """Every key the current principal may see, by :func:`privileges.visible` over the whole
        metastore: the full scan the checks above replace, kept as their oracle and the benchmark's
        baseline (benchmarks/catalog_round_trips.py)."""
        principal = current_principal()
        objects = {
            name_of(r["key"]): (SecurableKind(r["kind"]), r["owner"])
            for r in conn.execute("SELECT key, kind, owner FROM securables")
        }
        grants = [
            Grant(name_of(r["securable"]), Privilege(r["privilege"]), principal)
            for r in conn.execute("SELECT securable, privilege FROM grants WHERE principal = ?", (principal,))
        ]
        return {key(name) for name in visible(principal, objects, grants)}

    def _require_admin(self, conn: sqlite3.Connection) -> None:
        principal = current_principal()
        if not self._is_admin(conn, principal):
            raise PermissionDenied(principal, "METASTORE ADMIN", "the metastore")

    def _is_admin(self, conn: sqlite3.Connection, principal: str) -> bool:
        row = conn.execute("SELECT admin FROM principals WHERE name = ?", (principal,)).fetchone()
        return bool(row and row[0])


def _below(column: str, name: SecurableName | None) -> tuple[str, tuple[str, ...]]:
    """An SQL condition (and its parameters) for keys in ``column`` strictly below ``name`` (every key
    for None). A range, not LIKE, so that SQLite walks an index: keys below ``a`` are those from
    ``a.`` up to ``a/`` ('/' follows '.'), since no part contains a '.'."""
    if name is None:
        return "1 = 1", ()
    stored = key(name)
    return f"{column} > ? AND {column} < ?", (stored + ".", stored + "/")
