"""The embedded Unity Catalog: a SQLite metastore plus managed storage under one root folder.

Layout under ``root`` (default ``$UC_JUPYTER_HOME``)::

    metastore.db                 securables, grants, principals (SQLite in WAL mode)
    storage/tables/<uuid>/       managed Delta tables
    storage/volumes/<uuid>/      managed volumes

Several processes may use one root at once: every write is a ``BEGIN IMMEDIATE`` transaction with a
busy timeout, and storage is written first under a fresh name that nothing refers to yet, so a
failure on either side leaves no half-created object.

Example:
    >>> import tempfile, pyarrow as pa
    >>> cat = LocalCatalog(tempfile.mkdtemp())
    >>> _ = cat.create_catalog("main"); _ = cat.create_schema("main.ml")
    >>> cat.create_table("main.ml.t", pa.table({"x": [1, 2]})).columns
    (ColumnInfo(name='x', type_text='long', nullable=True),)
"""

from __future__ import annotations

import contextlib
import difflib
import json
import logging
import os
import sqlite3
import uuid
from collections.abc import Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from uc_jupyter.catalog import (
    AlreadyExists,
    CatalogError,
    CatalogInfo,
    ColumnInfo,
    GrantInfo,
    NotFound,
    PermissionDenied,
    PrincipalInfo,
    ResolvedTable,
    ResolvedVolumePath,
    SchemaInfo,
    TableInfo,
    VolumeInfo,
    WriteMode,
    as_principal,
    current_principal,
)
from uc_jupyter.catalog import storage as st
from uc_jupyter.catalog.names import SecurableName, parse_name, parse_volume_path
from uc_jupyter.catalog.privileges import (
    AccessFacts,
    Action,
    Grant,
    Privilege,
    SecurableKind,
    check_grantable,
    first_missing,
    is_owner,
    requirements,
    validate_principal,
    visible,
)
from uc_jupyter.errors import first_line
from uc_jupyter.sqlite_store import SqliteStore

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

__all__ = ["EscapesVolume", "LocalCatalog", "NotEmpty"]

log = logging.getLogger(__name__)

_SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS securables (
    key TEXT PRIMARY KEY,              -- lower-case parts joined by '.', which no part may contain
    kind TEXT NOT NULL,
    parent TEXT REFERENCES securables(key) ON DELETE RESTRICT,
    owner TEXT NOT NULL,
    storage_location TEXT,
    managed INTEGER NOT NULL DEFAULT 0,
    storage_options TEXT,
    columns TEXT,
    comment TEXT,
    created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS securables_parent ON securables(parent);
CREATE TABLE IF NOT EXISTS grants (
    securable TEXT NOT NULL REFERENCES securables(key) ON DELETE CASCADE,
    privilege TEXT NOT NULL,
    principal TEXT NOT NULL,
    PRIMARY KEY (securable, privilege, principal)
);
CREATE INDEX IF NOT EXISTS grants_principal ON grants(principal);
CREATE TABLE IF NOT EXISTS principals (
    name TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    created_at TEXT NOT NULL,
    admin INTEGER NOT NULL DEFAULT 0   -- metastore admins manage principals
);
"""
_BUSY_TIMEOUT_S = 60.0
_KIND_BY_LEVEL = {1: SecurableKind.CATALOG, 2: SecurableKind.SCHEMA}
_LEVEL_OF = {SecurableKind.CATALOG: 1, SecurableKind.SCHEMA: 2, SecurableKind.TABLE: 3, SecurableKind.VOLUME: 3}
# The privilege named when a principal may not even see an object of this kind.
_SEEN_WITH = {
    SecurableKind.CATALOG: Privilege.USE_CATALOG,
    SecurableKind.SCHEMA: Privilege.USE_SCHEMA,
    SecurableKind.TABLE: Privilege.SELECT,
    SecurableKind.VOLUME: Privilege.READ_VOLUME,
}


class NotEmpty(CatalogError):
    """A catalog or schema still holds objects; drop them first or drop with ``cascade=True``."""


class EscapesVolume(CatalogError, PermissionError):
    """A volume path that leads outside its volume (e.g. through a symlink) was refused."""


def _key(name: SecurableName) -> str:
    return ".".join(name.parts)


def _name(key: str) -> SecurableName:
    return SecurableName(tuple(key.split(".")))


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


class LocalCatalog:
    """The embedded catalog under ``root``; implements :class:`uc_jupyter.catalog.Catalog`."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).expanduser().resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self._store = SqliteStore(
            self.root / "metastore.db",
            schema=[statement for statement in _SCHEMA_SQL.split(";") if statement.strip()],
            busy_timeout=_BUSY_TIMEOUT_S,
            foreign_keys=True,
        )
        with self._transaction(write=True) as conn:
            # Whoever creates the metastore administers it (like a Unity Catalog metastore admin).
            if not conn.execute("SELECT 1 FROM principals WHERE admin = 1").fetchone():
                conn.execute(
                    "INSERT INTO principals VALUES (?, 'user', ?, 1) ON CONFLICT(name) DO UPDATE SET admin = 1",
                    (current_principal(), _now()),
                )

    def __repr__(self) -> str:
        return f"LocalCatalog({str(self.root)!r})"

    # ----------------------------------------------------------------- principals
    def current_principal(self) -> str:
        return current_principal()

    def as_principal(self, principal: str) -> contextlib.AbstractContextManager[str]:
        """Act as ``principal`` inside a ``with`` block (see :func:`uc_jupyter.catalog.as_principal`)."""
        return as_principal(principal)

    def create_principal(self, name: str, kind: Literal["user", "service_principal"] = "user") -> PrincipalInfo:
        """Register a user or service principal so privileges can be granted to it; admins only."""
        validate_principal(name)
        if kind not in ("user", "service_principal"):
            raise ValueError(f"invalid principal kind {kind!r}: use 'user' or 'service_principal'")
        with self._transaction(write=True) as conn:
            self._require_admin(conn)
            if conn.execute("SELECT 1 FROM principals WHERE name = ?", (name,)).fetchone():
                raise AlreadyExists(f"principal {name} already exists")
            created = _now()
            conn.execute("INSERT INTO principals VALUES (?, ?, ?, 0)", (name, kind, created))
        return PrincipalInfo(name, kind, datetime.fromisoformat(created))

    def drop_principal(self, name: str) -> None:
        """Remove a principal and every privilege granted to it; objects it owns keep their owner.
        Admins only; the last admin cannot be dropped."""
        with self._transaction(write=True) as conn:
            self._require_admin(conn)
            admins = {r[0] for r in conn.execute("SELECT name FROM principals WHERE admin = 1")}
            if admins == {name}:
                raise ValueError(f"principal {name} is the last metastore admin and cannot be dropped")
            if not conn.execute("DELETE FROM principals WHERE name = ?", (name,)).rowcount:
                raise NotFound(f"principal {name} does not exist")
            conn.execute("DELETE FROM grants WHERE principal = ?", (name,))

    def list_principals(self) -> list[PrincipalInfo]:
        with self._transaction() as conn:
            rows = conn.execute("SELECT name, kind, created_at, admin FROM principals ORDER BY name").fetchall()
        return [PrincipalInfo(r[0], r[1], datetime.fromisoformat(r[2]), bool(r[3])) for r in rows]

    def _require_admin(self, conn: sqlite3.Connection) -> None:
        principal = current_principal()
        row = conn.execute("SELECT admin FROM principals WHERE name = ?", (principal,)).fetchone()
        if not (row and row[0]):
            raise PermissionDenied(principal, "METASTORE ADMIN", "the metastore")

    # ----------------------------------------------------------------- create
    def create_catalog(self, name: str, *, comment: str | None = None) -> CatalogInfo:
        """Create a catalog owned by the current principal.

        Example:
            >>> cat.create_catalog("main")  # doctest: +SKIP
        """
        parsed = parse_name(name, levels=(1,))
        with self._transaction(write=True) as conn:
            self._insert(conn, parsed, SecurableKind.CATALOG, comment=comment)
        return self.get_catalog_info(str(parsed))

    def create_schema(self, name: str, *, comment: str | None = None) -> SchemaInfo:
        """Create ``catalog.schema``; needs USE CATALOG and CREATE SCHEMA on the catalog."""
        parsed = parse_name(name, levels=(2,))
        with self._transaction(write=True) as conn:
            self._require(conn, Action.CREATE_SCHEMA, cast(SecurableName, parsed.parent))
            self._insert(conn, parsed, SecurableKind.SCHEMA, comment=comment)
        return self.get_schema(str(parsed))

    def create_volume(
        self,
        name: str,
        storage_location: str | None = None,
        *,
        storage_options: dict[str, Any] | None = None,
        comment: str | None = None,
    ) -> VolumeInfo:
        """Create a managed volume, or an external one at any fsspec URL (``s3://``, ``file://``, ...).

        Needs USE CATALOG, USE SCHEMA and CREATE VOLUME. An external location may not overlap
        another table's or volume's storage.

        Example:
            >>> cat.create_volume("main.ml.raw", "s3://bucket/raw")  # doctest: +SKIP
        """
        parsed = parse_name(name, levels=(3,))
        schema = cast(SecurableName, parsed.parent)
        with self._transaction() as conn:
            self._require(conn, Action.CREATE_VOLUME, schema)
            self._ensure_absent(conn, parsed)
        managed = storage_location is None
        location = (
            self._new_managed_location("volumes") if managed else st.normalise_location(cast(str, storage_location))
        )
        if not managed:
            with self._transaction() as conn:
                self._ensure_no_overlap(conn, location)
        with self._cleanup_on_error(location if managed else None, storage_options):
            fs, path = st.filesystem(location, storage_options)
            fs.makedirs(path, exist_ok=True)
            with self._transaction(write=True) as conn:
                self._require(conn, Action.CREATE_VOLUME, schema)
                if not managed:
                    self._ensure_no_overlap(conn, location)
                self._insert(
                    conn,
                    parsed,
                    SecurableKind.VOLUME,
                    storage_location=location,
                    managed=managed,
                    storage_options=storage_options,
                    comment=comment,
                )
        return self.get_volume(str(parsed))

    def create_table(
        self,
        name: str,
        data: pa.Table | pd.DataFrame | None = None,
        mode: WriteMode = "error",
        *,
        storage_location: str | None = None,
        storage_options: dict[str, str] | None = None,
        comment: str | None = None,
    ) -> TableInfo:
        """Write ``data`` as a Delta table and register it.

        ``mode="error"`` refuses an existing table; ``"overwrite"`` replaces its rows (and schema)
        and ``"append"`` adds rows, both needing MODIFY on an existing table and creating it when
        missing. With ``storage_location`` the table is external; ``data=None`` then registers the
        Delta table already there. Creating needs USE CATALOG, USE SCHEMA and CREATE TABLE.

        Example:
            >>> cat.create_table("main.ml.iris", df, mode="overwrite")  # doctest: +SKIP
        """
        if mode not in ("error", "overwrite", "append"):
            raise ValueError(f"invalid mode {mode!r}: use 'error', 'overwrite' or 'append'")
        parsed = parse_name(name, levels=(3,))
        table = None if data is None else _to_arrow(data)
        with self._transaction() as conn:
            existing = self._row(conn, parsed)
            if existing is not None and existing["kind"] != SecurableKind.TABLE:
                raise AlreadyExists(f"{parsed} already exists as a {existing['kind']}")
            if existing is not None and mode == "error":
                raise AlreadyExists(
                    f"table {parsed} already exists; write with mode 'overwrite' or 'append' to change it"
                )
            if existing is None:
                self._require(conn, Action.CREATE_TABLE, cast(SecurableName, parsed.parent))
            else:
                self._require(conn, Action.WRITE_TABLE, parsed)
        if existing is not None:
            return self._write_existing_table(parsed, existing, table, mode)
        return self._create_new_table(parsed, table, mode, storage_location, storage_options, comment)

    def _write_existing_table(
        self, parsed: SecurableName, row: sqlite3.Row, table: pa.Table | None, mode: WriteMode
    ) -> TableInfo:
        if table is None:
            raise ValueError(f"table {parsed} exists; pass data to {mode} it")
        options = json.loads(row["storage_options"] or "{}")
        _write_delta(parsed, row["storage_location"], table, mode, options)
        columns = _delta_columns(row["storage_location"], options)
        with self._transaction(write=True) as conn:
            conn.execute("UPDATE securables SET columns = ? WHERE key = ?", (_columns_json(columns), _key(parsed)))
        return self.get_table(str(parsed))

    def _create_new_table(
        self,
        parsed: SecurableName,
        table: pa.Table | None,
        mode: WriteMode,
        storage_location: str | None,
        storage_options: dict[str, str] | None,
        comment: str | None,
    ) -> TableInfo:
        managed = storage_location is None
        if managed and table is None:
            raise ValueError(f"table {parsed}: pass data (a pyarrow Table or pandas DataFrame) to create it")
        location = (
            self._new_managed_location("tables") if managed else st.normalise_location(cast(str, storage_location))
        )
        if not managed:
            with self._transaction() as conn:
                self._ensure_no_overlap(conn, location)
            if table is not None and not st.is_empty_location(location, storage_options):
                raise AlreadyExists(
                    f"table {parsed}: storage location {location} is not empty; give an empty location "
                    "for a new table, or data=None to register the Delta table already there"
                )
        # Storage first, under a location nothing refers to yet; the catalog entry last. Whatever
        # fails, the location is removed again when this call created it.
        created_here = table is not None
        with self._cleanup_on_error(location if created_here else None, storage_options):
            if table is not None:
                _write_delta(parsed, location, table, "error", storage_options or {})
            elif not _delta_exists(location, storage_options):
                raise NotFound(f"table {parsed}: no Delta table at {location}; pass data to create one")
            columns = _delta_columns(location, storage_options or {})
            with self._transaction(write=True) as conn:
                self._require(conn, Action.CREATE_TABLE, cast(SecurableName, parsed.parent))
                if not managed:
                    self._ensure_no_overlap(conn, location)
                self._insert(
                    conn,
                    parsed,
                    SecurableKind.TABLE,
                    storage_location=location,
                    managed=managed,
                    storage_options=storage_options,
                    columns=columns,
                    comment=comment,
                )
        return self.get_table(str(parsed))

    # ----------------------------------------------------------------- drop
    def drop_catalog(self, name: str, *, cascade: bool = False) -> None:
        """Drop a catalog; with ``cascade=True`` also everything in it (managed data is deleted)."""
        self._drop(parse_name(name, levels=(1,)), SecurableKind.CATALOG, cascade)

    def drop_schema(self, name: str, *, cascade: bool = False) -> None:
        """Drop a schema; with ``cascade=True`` also its tables and volumes."""
        self._drop(parse_name(name, levels=(2,)), SecurableKind.SCHEMA, cascade)

    def drop_table(self, name: str) -> None:
        """Drop a table; a managed table's files are deleted, an external table's are kept."""
        self._drop(parse_name(name, levels=(3,)), SecurableKind.TABLE, False)

    def drop_volume(self, name: str) -> None:
        """Drop a volume; a managed volume's files are deleted, an external volume's are kept."""
        self._drop(parse_name(name, levels=(3,)), SecurableKind.VOLUME, False)

    def _drop(self, parsed: SecurableName, kind: SecurableKind, cascade: bool) -> None:
        with self._transaction(write=True) as conn:
            self._row_of_kind(conn, parsed, kind)
            self._require_owner(conn, parsed)
            descendants = conn.execute(
                "SELECT key, kind, managed, storage_location, storage_options FROM securables "
                "WHERE key LIKE ? ESCAPE '\\' ORDER BY length(key) DESC",
                (_like_prefix(_key(parsed)),),
            ).fetchall()
            if descendants and not cascade:
                counts: dict[str, int] = {}
                for row in descendants:
                    counts[row["kind"]] = counts.get(row["kind"], 0) + 1
                held = ", ".join(f"{n} {k}{'s' if n > 1 else ''}" for k, n in sorted(counts.items()))
                raise NotEmpty(f"{kind} {parsed} is not empty ({held}); drop those first or drop with cascade")
            doomed = [*descendants, self._row(conn, parsed)]
            for row in doomed:
                conn.execute("DELETE FROM securables WHERE key = ?", (row["key"],))
        # The rows are gone (committed); now the managed files. A failure here leaves only
        # unreferenced files under storage/, never a catalog entry without its data.
        for row in doomed:
            if row is not None and row["managed"] and row["storage_location"]:
                try:
                    st.remove_location(row["storage_location"], json.loads(row["storage_options"] or "{}"))
                except OSError as exc:
                    log.warning("could not delete the storage of dropped %s: %s", row["key"], exc)

    # ----------------------------------------------------------------- read metadata
    def get_catalog_info(self, name: str) -> CatalogInfo:
        return _catalog_info(self._described(name, SecurableKind.CATALOG))

    def get_schema(self, name: str) -> SchemaInfo:
        return _schema_info(self._described(name, SecurableKind.SCHEMA))

    def get_table(self, name: str) -> TableInfo:
        return _table_info(self._described(name, SecurableKind.TABLE))

    def get_volume(self, name: str) -> VolumeInfo:
        return _volume_info(self._described(name, SecurableKind.VOLUME))

    def _described(self, name: str, kind: SecurableKind) -> sqlite3.Row:
        """The row of ``name`` when the current principal may use its containers and see it."""
        parsed = parse_name(name, levels=(_LEVEL_OF[kind],))
        with self._transaction() as conn:
            row = self._row_of_kind(conn, parsed, kind)
            if parsed.parent is not None:
                self._require(conn, Action.USE_SCHEMA if parsed.object else Action.USE_CATALOG, parsed)
            self._require_visible(conn, parsed, kind)
        return row

    def list_catalogs(self) -> list[CatalogInfo]:
        """Catalogs the current principal owns or holds a privilege in."""
        with self._transaction() as conn:
            rows = conn.execute("SELECT * FROM securables WHERE kind = 'catalog' ORDER BY key").fetchall()
            visible = self._visible_keys(conn)
        return [_catalog_info(r) for r in rows if r["key"] in visible]

    def list_schemas(self, catalog: str) -> list[SchemaInfo]:
        """Schemas of ``catalog`` the current principal may see; needs USE CATALOG."""
        return [_schema_info(r) for r in self._list_children(parse_name(catalog, levels=(1,)), "schema")]

    def list_tables(self, schema: str) -> list[TableInfo]:
        """Tables of ``catalog.schema`` the current principal may see; needs USE CATALOG and USE SCHEMA."""
        return [_table_info(r) for r in self._list_children(parse_name(schema, levels=(2,)), "table")]

    def list_volumes(self, schema: str) -> list[VolumeInfo]:
        """Volumes of ``catalog.schema`` the current principal may see."""
        return [_volume_info(r) for r in self._list_children(parse_name(schema, levels=(2,)), "volume")]

    def _list_children(self, parent: SecurableName, kind: str) -> list[sqlite3.Row]:
        with self._transaction() as conn:
            self._row_of_kind(conn, parent, _KIND_BY_LEVEL[len(parent.parts)])
            self._require(conn, Action.USE_SCHEMA if len(parent.parts) == 2 else Action.USE_CATALOG, parent)
            rows = conn.execute(
                "SELECT * FROM securables WHERE parent = ? AND kind = ? ORDER BY key", (_key(parent), kind)
            ).fetchall()
            visible = self._visible_keys(conn)
        return [r for r in rows if r["key"] in visible]

    # ----------------------------------------------------------------- grants
    def grant(self, securable: str, privilege: str | Privilege, principal: str) -> None:
        """Grant ``privilege`` on ``securable`` to ``principal``; only an owner may grant.

        Example:
            >>> cat.grant("main.ml", "USE SCHEMA", "alice")  # doctest: +SKIP
        """
        self._change_grant(securable, privilege, principal, add=True)

    def revoke(self, securable: str, privilege: str | Privilege, principal: str) -> None:
        """Revoke a privilege granted directly on ``securable`` (revoking an absent one is a no-op)."""
        self._change_grant(securable, privilege, principal, add=False)

    def _change_grant(self, securable: str, privilege: str | Privilege, principal: str, *, add: bool) -> None:
        parsed = parse_name(securable)
        wanted = Privilege.parse(privilege)
        validate_principal(principal)
        with self._transaction(write=True) as conn:
            row = self._existing_row(conn, parsed)
            check_grantable(SecurableKind(row["kind"]), parsed, wanted)
            self._require_owner(conn, parsed)
            if add:
                if not conn.execute("SELECT 1 FROM principals WHERE name = ?", (principal,)).fetchone():
                    raise NotFound(
                        f"principal {principal} does not exist; create it first "
                        f"(uc-jupyter catalog create principal {principal})"
                    )
                conn.execute("INSERT OR IGNORE INTO grants VALUES (?, ?, ?)", (_key(parsed), wanted.value, principal))
            else:
                conn.execute(
                    "DELETE FROM grants WHERE securable = ? AND privilege = ? AND principal = ?",
                    (_key(parsed), wanted.value, principal),
                )

    def show_grants(self, securable: str) -> list[GrantInfo]:
        """The privileges granted directly on ``securable``, sorted by principal then privilege.

        Owners (of it or a container) see every grant; others see only their own, and only on
        objects they may see.
        """
        parsed = parse_name(securable)
        with self._transaction() as conn:
            row = self._existing_row(conn, parsed)
            kind = SecurableKind(row["kind"])
            principal = current_principal()
            owner = is_owner(principal, parsed, self._facts(conn, parsed, principal))
            if not owner:
                self._require_visible(conn, parsed, kind)
            rows = conn.execute(
                "SELECT principal, privilege FROM grants WHERE securable = ? ORDER BY principal, privilege",
                (_key(parsed),),
            ).fetchall()
        return [
            GrantInfo(str(parsed), kind, r["principal"], Privilege(r["privilege"]))
            for r in rows
            if owner or r["principal"] == principal
        ]

    # ----------------------------------------------------------------- data access
    def resolve_volume_path(self, path: str, *, write: bool = False) -> ResolvedVolumePath:
        """Check READ VOLUME (or WRITE VOLUME) and map a ``/Volumes/...`` path to its storage.

        Example:
            >>> r = cat.resolve_volume_path("/Volumes/main/ml/images/cats")  # doctest: +SKIP
            >>> r.fs.ls(r.path)                                              # doctest: +SKIP
        """
        volume_path = parse_volume_path(path)
        with self._transaction() as conn:
            row = self._row_of_kind(conn, volume_path.volume, SecurableKind.VOLUME)
            self._require(conn, Action.WRITE_VOLUME if write else Action.READ_VOLUME, volume_path.volume)
        info = _volume_info(row)
        options = json.loads(row["storage_options"] or "{}")
        fs, root = st.filesystem(info.storage_location, options)
        target = f"{root.rstrip('/')}/{volume_path.relative}" if volume_path.relative else root
        if st.is_local(info.storage_location) and not st.realpath_within(root, target):
            raise EscapesVolume(f"{volume_path} leads outside volume {info.full_name} (through a symlink); refused")
        return ResolvedVolumePath(
            volume_path=str(volume_path),
            volume=info,
            fs=fs,
            path=target,
            url=st.join_location(info.storage_location, volume_path.relative),
            storage_options=options,
        )

    def resolve_table(self, name: str, *, write: bool = False) -> ResolvedTable:
        """Check SELECT (or MODIFY) on a table and return where its Delta files live."""
        parsed = parse_name(name, levels=(3,))
        with self._transaction() as conn:
            row = self._row_of_kind(conn, parsed, SecurableKind.TABLE)
            self._require(conn, Action.WRITE_TABLE if write else Action.READ_TABLE, parsed)
        return ResolvedTable(_table_info(row), row["storage_location"], json.loads(row["storage_options"] or "{}"))

    # ----------------------------------------------------------------- internals
    def _transaction(self, *, write: bool = False) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        return self._store.transaction(write=write)

    def _row(self, conn: sqlite3.Connection, name: SecurableName) -> sqlite3.Row | None:
        return cast(
            "sqlite3.Row | None",
            conn.execute("SELECT * FROM securables WHERE key = ?", (_key(name),)).fetchone(),
        )

    def _existing_row(self, conn: sqlite3.Connection, name: SecurableName) -> sqlite3.Row:
        """The row of ``name``; NotFound names the first missing level and suggests close names."""
        for level in name.lineage():
            row = self._row(conn, level)
            if row is None:
                kind = _KIND_BY_LEVEL.get(len(level.parts), "table or volume")
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
        parent = name.parent
        siblings = [
            r["key"].rsplit(".", 1)[-1]
            for r in conn.execute(
                "SELECT key FROM securables WHERE parent IS ?", (None if parent is None else _key(parent),)
            )
        ]
        close = difflib.get_close_matches(name.parts[-1], siblings, n=1)
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
        storage_options: dict[str, Any] | None = None,
        columns: Sequence[ColumnInfo] | None = None,
        comment: str | None = None,
    ) -> None:
        if name.parent is not None:
            self._existing_row(conn, name.parent)
        self._ensure_absent(conn, name)
        owner = current_principal()
        conn.execute("INSERT OR IGNORE INTO principals VALUES (?, 'user', ?, 0)", (owner, _now()))
        conn.execute(
            "INSERT INTO securables VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                _key(name),
                kind.value,
                None if name.parent is None else _key(name.parent),
                owner,
                storage_location,
                int(managed),
                json.dumps(storage_options) if storage_options else None,
                None if columns is None else _columns_json(columns),
                comment,
                _now(),
            ),
        )

    def _facts(self, conn: sqlite3.Connection, name: SecurableName, principal: str) -> AccessFacts:
        keys = [_key(level) for level in name.lineage()]
        marks = ",".join("?" * len(keys))
        owners = {
            _name(r["key"]): r["owner"]
            for r in conn.execute(f"SELECT key, owner FROM securables WHERE key IN ({marks})", keys)
        }
        grants = frozenset(
            Grant(_name(r["securable"]), Privilege(r["privilege"]), principal)
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
        if _key(name) not in self._visible_keys(conn):
            raise PermissionDenied(current_principal(), _SEEN_WITH[kind].value, str(name))

    def _visible_keys(self, conn: sqlite3.Connection) -> set[str]:
        """Keys the current principal may see in listings (see :func:`privileges.visible`)."""
        principal = current_principal()
        objects = {
            _name(r["key"]): (SecurableKind(r["kind"]), r["owner"])
            for r in conn.execute("SELECT key, kind, owner FROM securables")
        }
        grants = [
            Grant(_name(r["securable"]), Privilege(r["privilege"]), principal)
            for r in conn.execute("SELECT securable, privilege FROM grants WHERE principal = ?", (principal,))
        ]
        return {_key(name) for name in visible(principal, objects, grants)}

    def _ensure_no_overlap(self, conn: sqlite3.Connection, location: str) -> None:
        for row in conn.execute(
            "SELECT key, kind, storage_location FROM securables WHERE storage_location IS NOT NULL"
        ):
            if st.locations_overlap(location, row["storage_location"]):
                raise AlreadyExists(
                    f"storage location {location} overlaps {row['kind']} {_name(row['key'])} "
                    f"at {row['storage_location']}; choose a separate location"
                )
        managed_root = st.normalise_location(str(self.root / "storage"))
        if st.locations_overlap(location, managed_root):
            raise ValueError(f"storage location {location} overlaps the catalog's managed storage {managed_root}")

    def _new_managed_location(self, kind: str) -> str:
        return st.normalise_location(str(self.root / "storage" / kind / uuid.uuid4().hex))

    @contextlib.contextmanager
    def _cleanup_on_error(self, location: str | None, options: dict[str, Any] | None) -> Iterator[None]:
        """Remove freshly created managed storage when registering it fails."""
        try:
            yield
        except BaseException:
            if location is not None:
                st.remove_location(location, options)
            raise


def _like_prefix(key: str) -> str:
    escaped = key.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + ".%"


def _to_arrow(data: object) -> pa.Table:
    import pyarrow as pa

    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is a dependency
        pd = None  # type: ignore[assignment]
    if pd is not None and isinstance(data, pd.DataFrame):
        return pa.Table.from_pandas(data, preserve_index=False)
    raise TypeError(f"data must be a pyarrow Table or a pandas DataFrame, got {type(data).__name__}")


def _write_delta(name: SecurableName, location: str, table: pa.Table, mode: WriteMode, options: dict[str, str]) -> None:
    from deltalake import write_deltalake
    from deltalake.exceptions import SchemaMismatchError

    try:
        write_deltalake(
            st.delta_uri(location),
            table,
            mode=mode,
            schema_mode="overwrite" if mode == "overwrite" else None,
            storage_options=options or None,
        )
    except SchemaMismatchError as exc:
        raise ValueError(f"table {name}: the data's columns do not match the table's: {first_line(exc)}") from exc
    except Exception as exc:  # deltalake raises bare Exceptions with Rust backtraces for many causes
        raise CatalogError(f"table {name}: writing Delta files failed: {first_line(exc)}") from exc


def _delta_exists(location: str, options: dict[str, str] | None) -> bool:
    from deltalake import DeltaTable

    return bool(DeltaTable.is_deltatable(st.delta_uri(location), storage_options=options or None))


def _delta_columns(location: str, options: dict[str, str]) -> tuple[ColumnInfo, ...]:
    from deltalake import DeltaTable

    schema = DeltaTable(st.delta_uri(location), storage_options=options or None).schema()
    return tuple(ColumnInfo(f.name, _type_text(f.type), bool(f.nullable)) for f in schema.fields)


def _type_text(delta_type: Any) -> str:
    simple = getattr(delta_type, "type", None)
    return str(simple) if isinstance(simple, str) else str(delta_type)


def _columns_json(columns: Sequence[ColumnInfo]) -> str:
    return json.dumps([[c.name, c.type_text, c.nullable] for c in columns])


def _catalog_info(row: sqlite3.Row) -> CatalogInfo:
    return CatalogInfo(row["key"], row["owner"], datetime.fromisoformat(row["created_at"]), row["comment"])


def _schema_info(row: sqlite3.Row) -> SchemaInfo:
    catalog, schema = row["key"].split(".")
    return SchemaInfo(catalog, schema, row["owner"], datetime.fromisoformat(row["created_at"]), row["comment"])


def _table_info(row: sqlite3.Row) -> TableInfo:
    catalog, schema, name = row["key"].split(".")
    columns = tuple(ColumnInfo(n, t, bool(nullable)) for n, t, nullable in json.loads(row["columns"] or "[]"))
    return TableInfo(
        catalog_name=catalog,
        schema_name=schema,
        name=name,
        owner=row["owner"],
        table_type="MANAGED" if row["managed"] else "EXTERNAL",
        storage_location=row["storage_location"],
        columns=columns,
        created_at=datetime.fromisoformat(row["created_at"]),
        comment=row["comment"],
    )


def _volume_info(row: sqlite3.Row) -> VolumeInfo:
    catalog, schema, name = row["key"].split(".")
    return VolumeInfo(
        catalog_name=catalog,
        schema_name=schema,
        name=name,
        owner=row["owner"],
        volume_type="MANAGED" if row["managed"] else "EXTERNAL",
        storage_location=row["storage_location"],
        created_at=datetime.fromisoformat(row["created_at"]),
        comment=row["comment"],
    )
