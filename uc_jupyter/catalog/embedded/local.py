"""The embedded Unity Catalog: a SQLite metastore plus managed storage under one root folder.

Layout under ``root`` (default ``$UC_JUPYTER_HOME``; the folder is 0700, every file 0600)::

    metastore.db                 securables, grants, principals, credentials, locations (SQLite, WAL)
    secrets.db                   storage credentials' and objects' storage options (never listed)
    storage/tables/<uuid>/       managed Delta tables
    storage/volumes/<uuid>/      managed volumes
    locks/                       one lock file per catalog entry being changed
    reserved, .uc_jupyter        folders that may never become storage (uc_jupyter.catalog.rules.reserved)

Several processes may use one root at once: every metastore write is a ``BEGIN IMMEDIATE`` transaction
with a busy timeout; a change that writes storage holds its entry's lock from its first check to its last
write (:mod:`uc_jupyter.catalog.embedded.entry_locks`), so create, append, overwrite and drop of one table
serialise; and managed storage is recorded as *pending* before it is made and until the row that owns it
is committed (or, for a drop, until its files are gone), so storage left by a process that died half-way
is found and removed (:meth:`LocalCatalog.sweep`). Nothing is left half-created.

The class is put together from parts, one concept each: :mod:`~uc_jupyter.catalog.embedded.metastore` (rows and
checks), :mod:`~uc_jupyter.catalog.embedded.external` (credentials, locations, what may be storage),
:mod:`~uc_jupyter.catalog.embedded.pending` (pending managed storage, the sweep),
:mod:`~uc_jupyter.catalog.embedded.table_writes` (create, append, overwrite),
:mod:`~uc_jupyter.catalog.embedded.staging` (managed tables created through the API),
:mod:`~uc_jupyter.catalog.embedded.updates` (comment and owner changes, lookups by id),
:mod:`~uc_jupyter.catalog.embedded.listing` (listings a page at a time),
:mod:`~uc_jupyter.catalog.embedded.migrations` (ids and audit columns for older homes) and
:mod:`~uc_jupyter.catalog.embedded.grants`;
this module has the rest: opening, principals, catalogs, schemas, volumes, drops, reads and resolving.

Example:
    >>> import tempfile, pyarrow as pa
    >>> cat = LocalCatalog(tempfile.mkdtemp())
    >>> _ = cat.create_catalog("main"); _ = cat.create_schema("main.ml")
    >>> cat.create_table("main.ml.t", pa.table({"x": [1, 2]})).columns
    (ColumnInfo(name='x', type_text='long', nullable=True),)
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from uc_jupyter.catalog.embedded.entry_locks import EntryLocks
from uc_jupyter.catalog.embedded.external import STORAGE_SCHEMA_SQL, check_store_options_of
from uc_jupyter.catalog.embedded.grants import Grants
from uc_jupyter.catalog.embedded.killed_writes import TABLE_WRITES_SQL
from uc_jupyter.catalog.embedded.listing import Listing
from uc_jupyter.catalog.embedded.metastore import LEVEL_OF
from uc_jupyter.catalog.embedded.migrations import migrate
from uc_jupyter.catalog.embedded.pending import PENDING_SECRETS_SQL
from uc_jupyter.catalog.embedded.rows import (
    catalog_info,
    key,
    new_id,
    now,
    schema_info,
    table_info,
    volume_info,
)
from uc_jupyter.catalog.embedded.secrets import SecretStore, check_options
from uc_jupyter.catalog.embedded.staging import Staging
from uc_jupyter.catalog.embedded.updates import Updates
from uc_jupyter.catalog.model import (
    AlreadyExists,
    CatalogInfo,
    NotEmpty,
    NotFound,
    PrincipalInfo,
    ResolvedTable,
    ResolvedVolumePath,
    SchemaInfo,
    TableInfo,
    VolumeInfo,
    as_principal,
    current_principal,
)
from uc_jupyter.catalog.rules.names import SecurableName, parse_name, parse_volume_path
from uc_jupyter.catalog.rules.privileges import (
    METASTORE,
    Action,
    Privilege,
    SecurableKind,
    validate_principal,
)
from uc_jupyter.catalog.rules.reserved import reserve
from uc_jupyter.catalog.volume_paths import open_volume_path
from uc_jupyter.errors import EscapesVolume
from uc_jupyter.sqlite_store import SqliteStore
from uc_jupyter.storage import urls as st

if TYPE_CHECKING:
    pass

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
    storage_options TEXT,              -- always NULL now: options live in secrets.db (older files are moved)
    columns TEXT,
    comment TEXT,
    created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS securables_parent ON securables(parent);
-- Visibility checks probe one subtree by key range: of one kind, or owned by one principal.
CREATE INDEX IF NOT EXISTS securables_kind_key ON securables(kind, key);
CREATE INDEX IF NOT EXISTS securables_owner_key ON securables(owner, key);
CREATE TABLE IF NOT EXISTS grants (
    securable TEXT NOT NULL REFERENCES securables(key) ON DELETE CASCADE,
    privilege TEXT NOT NULL,
    principal TEXT NOT NULL,
    PRIMARY KEY (securable, privilege, principal)
);
CREATE INDEX IF NOT EXISTS grants_principal ON grants(principal);
CREATE INDEX IF NOT EXISTS grants_principal_securable ON grants(principal, securable);
CREATE TABLE IF NOT EXISTS principals (
    name TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    created_at TEXT NOT NULL,
    admin INTEGER NOT NULL DEFAULT 0   -- metastore admins manage principals
);
-- Managed storage made but not (or no longer) owned by a committed row: a create before its row is
-- in, a drop before its files are gone. A dead process's entries are swept.
CREATE TABLE IF NOT EXISTS pending_storage (
    location TEXT PRIMARY KEY,
    pid INTEGER NOT NULL,
    created_at TEXT NOT NULL
);
"""
_BUSY_TIMEOUT_S = 60.0
_METASTORE_REMEDY = (
    "restore it from a backup, or move it away (with secrets.db) to start an empty catalog in this folder"
)


class LocalCatalog(Staging, Updates, Listing, Grants):
    """The embedded catalog under ``root``; implements :class:`uc_jupyter.catalog.Catalog`.

    ``lock_timeout``: how long a change waits for another process's change of the same entry.
    ``staging_ttl``: how long a staging table (:mod:`~uc_jupyter.catalog.embedded.staging`) waits for its
    registration before the sweep removes it; ``clock``: epoch seconds (tests pass their own).
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        lock_timeout: float = 600.0,
        staging_ttl: float = 86400.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._clock, self._staging_ttl = clock, staging_ttl
        self.root = Path(root).expanduser().resolve()
        _private_folder(self.root)
        self._store = SqliteStore(
            self.root / "metastore.db",
            schema=[
                s
                for s in (_SCHEMA_SQL + STORAGE_SCHEMA_SQL + PENDING_SECRETS_SQL + TABLE_WRITES_SQL).split(";")
                if s.strip()
            ],
            busy_timeout=_BUSY_TIMEOUT_S,
            foreign_keys=True,
            remedy=_METASTORE_REMEDY,
        )
        os.chmod(self.root / "metastore.db", 0o600)  # a file made by an older version may be 0644
        self._secrets = SecretStore(self.root, busy_timeout=_BUSY_TIMEOUT_S)
        self._locks = EntryLocks(self.root, timeout=lock_timeout)
        reserve(self.root, self.root, "home")
        _private_folder(self.root / "storage")
        with self._transaction(write=True) as conn:
            migrate(conn)
            # Whoever creates the metastore administers it (like a Unity Catalog metastore admin).
            if not conn.execute("SELECT 1 FROM principals WHERE admin = 1").fetchone():
                conn.execute(
                    "INSERT INTO principals VALUES (?, 'user', ?, 1) ON CONFLICT(name) DO UPDATE SET admin = 1",
                    (current_principal(), now()),
                )
            # Older metastores kept objects' storage options in their rows, then in secrets keyed by
            # name: move them to secrets keyed by the objects' ids (migrate gave every row one).
            for row in conn.execute("SELECT id, storage_options FROM securables WHERE storage_options IS NOT NULL"):
                self._secrets.put("object", row["id"], json.loads(row["storage_options"]))
            conn.execute("UPDATE securables SET storage_options = NULL WHERE storage_options IS NOT NULL")
            legacy = self._secrets.legacy_keys()
            if legacy:
                marks = ", ".join("?" * len(legacy))
                ids = conn.execute(f"SELECT key, id FROM securables WHERE key IN ({marks})", legacy).fetchall()
                self._secrets.adopt_legacy({r["key"]: r["id"] for r in ids})
        self.sweep()

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
            created = now()
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
            conn.execute("DELETE FROM flat_grants WHERE principal = ?", (name,))

    def get_principal(self, name: str) -> PrincipalInfo:
        """The registered principal ``name`` (one row read: the token check calls it on every request)."""
        with self._transaction() as conn:
            row = conn.execute(
                "SELECT name, kind, created_at, admin FROM principals WHERE name = ?", (name,)
            ).fetchone()
        if row is None:
            raise NotFound(f"principal {name} does not exist")
        return PrincipalInfo(row[0], row[1], datetime.fromisoformat(row[2]), bool(row[3]))

    def list_principals(self) -> list[PrincipalInfo]:
        with self._transaction() as conn:
            rows = conn.execute("SELECT name, kind, created_at, admin FROM principals ORDER BY name").fetchall()
        return [PrincipalInfo(r[0], r[1], datetime.fromisoformat(r[2]), bool(r[3])) for r in rows]

    # ----------------------------------------------------------------- create
    def create_catalog(self, name: str, *, comment: str | None = None) -> CatalogInfo:
        """Create a catalog owned by the current principal; needs CREATE CATALOG on the metastore
        (admins hold it).

        Example:
            >>> cat.create_catalog("main")  # doctest: +SKIP
        """
        parsed = parse_name(name, levels=(1,))
        with self._transaction(write=True) as conn:
            self._require_flat(conn, SecurableKind.METASTORE, METASTORE, Privilege.CREATE_CATALOG)
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
        """Create a managed volume, or an external one at a storage URL (``s3://``, ``gs://``,
        ``abfss://``, ``file://`` or an absolute path).

        Needs USE CATALOG, USE SCHEMA and CREATE VOLUME; an external volume also needs CREATE
        EXTERNAL VOLUME on the external location that contains it, may not overlap another table's or
        volume's storage, and reads with the location's credential (``storage_options`` are added to
        it and kept secret like a credential's).

        Example:
            >>> cat.create_volume("main.ml.raw", "s3://bucket/raw")  # doctest: +SKIP
        """
        parsed = parse_name(name, levels=(3,))
        schema = cast(SecurableName, parsed.parent)
        options = check_options(storage_options, f"volume {parsed}")
        external = None if storage_location is None else st.resolve_location(storage_location)
        if options and external is not None:  # refused now, as a credential's, not when first read
            check_store_options_of(options, f"volume {parsed}", external)
        with self._locks.hold([key(parsed)], what=f"volume {parsed}"):

            def checks(conn: sqlite3.Connection) -> None:
                self._require(conn, Action.CREATE_VOLUME, schema)
                self._ensure_absent(conn, parsed)
                if external is not None:
                    self._location_for(conn, external, Privilege.CREATE_EXTERNAL_VOLUME)
                    self._ensure_storage_free(conn, external)

            with self._transaction() as conn:
                checks(conn)
            location = external if external is not None else self._new_managed_location("volumes")
            object_id = new_id()  # its secret's key: a secret a dead drop left under this name is not this one's
            with self._cleanup_on_error(None if external else location, secret_id=object_id):
                if st.is_local(location):  # object stores need no folder (and may not be reachable yet)
                    os.makedirs(st.local_path(location), exist_ok=True)
                if options:
                    self._put_secret(object_id, options)
                with self._transaction(write=True) as conn:
                    checks(conn)
                    self._insert(
                        conn,
                        parsed,
                        SecurableKind.VOLUME,
                        storage_location=location,
                        managed=external is None,
                        comment=comment,
                        given_id=object_id,
                    )
        return self.get_volume(str(parsed))

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
        doomed: list[sqlite3.Row] = []
        while not doomed:
            with self._transaction() as conn:
                self._row_of_kind(conn, parsed, kind)
                self._require_owner(conn, parsed)
                seen = self._descendants(conn, parsed)
                self._refuse_non_empty(parsed, kind, seen, cascade)
            # Every entry dropped is locked first: a write under way into one of them ends before it goes.
            with (
                self._locks.hold([key(parsed), *(r["key"] for r in seen)], what=f"{kind} {parsed}"),
                self._transaction(write=True) as conn,
            ):
                row = self._row_of_kind(conn, parsed, kind)
                self._require_owner(conn, parsed)
                now_inside = self._descendants(conn, parsed)
                if {r["key"] for r in now_inside} != {r["key"] for r in seen}:
                    continue  # something was created or dropped meanwhile: lock what is there now
                self._refuse_non_empty(parsed, kind, now_inside, cascade)
                doomed = [*now_inside, row]
                for gone in doomed:
                    conn.execute("DELETE FROM securables WHERE key = ?", (gone["key"],))
                    self._record_secret(conn, gone["id"])
                    if gone["managed"] and gone["storage_location"]:
                        self._record_pending(conn, gone["storage_location"])
        # The rows are gone (committed); now their secrets and managed files, still recorded as
        # pending, so that a process dying here leaves them to the next sweep instead of orphaned. A
        # secret left meanwhile is keyed by an id no object will have again: never inherited.
        self._forget_secrets([gone["id"] for gone in doomed])
        for gone in doomed:
            if gone["managed"] and gone["storage_location"]:
                self._remove_pending(gone["storage_location"])

    def _descendants(self, conn: sqlite3.Connection, parsed: SecurableName) -> list[sqlite3.Row]:
        return cast(
            "list[sqlite3.Row]",
            conn.execute(
                "SELECT * FROM securables WHERE key LIKE ? ESCAPE '\\' ORDER BY length(key) DESC",
                (_like_prefix(key(parsed)),),
            ).fetchall(),
        )

    @staticmethod
    def _refuse_non_empty(
        parsed: SecurableName, kind: SecurableKind, descendants: Sequence[sqlite3.Row], cascade: bool
    ) -> None:
        if descendants and not cascade:
            counts: dict[str, int] = {}
            for row in descendants:
                counts[row["kind"]] = counts.get(row["kind"], 0) + 1
            held = ", ".join(f"{n} {k}{'s' if n > 1 else ''}" for k, n in sorted(counts.items()))
            raise NotEmpty(f"{kind} {parsed} is not empty ({held}); drop those first or drop with cascade")

    # ----------------------------------------------------------------- read metadata
    def get_catalog_info(self, name: str) -> CatalogInfo:
        return catalog_info(self._described(name, SecurableKind.CATALOG))

    def get_schema(self, name: str) -> SchemaInfo:
        return schema_info(self._described(name, SecurableKind.SCHEMA))

    def get_table(self, name: str) -> TableInfo:
        return table_info(self._described(name, SecurableKind.TABLE))

    def get_volume(self, name: str) -> VolumeInfo:
        return volume_info(self._described(name, SecurableKind.VOLUME))

    def _described(self, name: str, kind: SecurableKind) -> sqlite3.Row:
        """The row of ``name`` when the current principal may use its containers and see it."""
        parsed = parse_name(name, levels=(LEVEL_OF[kind],))
        with self._transaction() as conn:
            row = self._row_of_kind(conn, parsed, kind)
            if parsed.parent is not None:
                self._require(conn, Action.USE_SCHEMA if parsed.object else Action.USE_CATALOG, parsed)
            self._require_visible(conn, parsed, kind)
        return row

    def list_catalogs(self) -> list[CatalogInfo]:
        """Catalogs the current principal owns or holds a privilege in."""
        return cast("list[CatalogInfo]", self._listed(SecurableKind.CATALOG, None)[0])

    def list_schemas(self, catalog: str) -> list[SchemaInfo]:
        """Schemas of ``catalog`` the current principal may see; needs USE CATALOG."""
        return cast("list[SchemaInfo]", self._listed(SecurableKind.SCHEMA, catalog)[0])

    def list_tables(self, schema: str) -> list[TableInfo]:
        """Tables of ``catalog.schema`` the current principal may see; needs USE CATALOG and USE SCHEMA."""
        return cast("list[TableInfo]", self._listed(SecurableKind.TABLE, schema)[0])

    def list_volumes(self, schema: str) -> list[VolumeInfo]:
        """Volumes of ``catalog.schema`` the current principal may see."""
        return cast("list[VolumeInfo]", self._listed(SecurableKind.VOLUME, schema)[0])

    # ----------------------------------------------------------------- data access
    def resolve_volume_path(self, path: str, *, write: bool = False) -> ResolvedVolumePath:
        """Check READ VOLUME (or WRITE VOLUME) and map a ``/Volumes/...`` path to its storage.

        Example:
            >>> r = cat.resolve_volume_path("/Volumes/main/ml/images/cats/1.png")  # doctest: +SKIP
            >>> with r.open() as f:                                                # doctest: +SKIP
            ...     f.read(8)
        """
        volume_path = parse_volume_path(path)
        with self._transaction() as conn:
            row = self._row_of_kind(conn, volume_path.volume, SecurableKind.VOLUME)
            self._require(conn, Action.WRITE_VOLUME if write else Action.READ_VOLUME, volume_path.volume)
            options = self._storage_options_of(conn, row)
        return open_volume_path(volume_path, volume_info(row), options)

    def resolve_table(self, name: str, *, write: bool = False) -> ResolvedTable:
        """Check SELECT (or MODIFY) on a table and return where its Delta files live, with the
        storage options that open them in deltalake's form (``AWS_ACCESS_KEY_ID``, ...), as
        :class:`~uc_jupyter.catalog.rest.client.RestCatalog` gives them.

        Example:
            >>> r = cat.resolve_table("main.ml.iris")                              # doctest: +SKIP
            >>> DeltaTable(r.storage_location, storage_options=r.storage_options)  # doctest: +SKIP
        """
        parsed = parse_name(name, levels=(3,))
        with self._transaction() as conn:
            row = self._row_of_kind(conn, parsed, SecurableKind.TABLE)
            self._require(conn, Action.WRITE_TABLE if write else Action.READ_TABLE, parsed)
            options = self._storage_options_of(conn, row)
        return ResolvedTable(table_info(row), row["storage_location"], st.deltalake_options(options))


def _private_folder(path: Path) -> None:
    """Make ``path`` (0700) or tighten it to 0700 when it is ours: other OS users have no business there."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = path.stat()
    if info.st_uid == os.getuid() and info.st_mode & 0o077:
        os.chmod(path, 0o700)


def _like_prefix(stored: str) -> str:
    escaped = stored.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + ".%"
