"""Managed tables created through the API, the Unity Catalog OSS way: a staging table first, then the data,
then the registration.

1. :meth:`Staging.create_staging_table` (``POST /staging-tables``) checks CREATE TABLE on the schema and
   that the name is free, and records a *staging table*: a fresh id, a fresh managed location under
   ``storage/tables/``, its creator and an expiry (``staging_ttl``, a day by default).
2. The creator writes the Delta table there, with credentials vended for the staging id
   (:meth:`Staging.resolve_table_id`, ``POST /temporary-table-credentials``). Nobody else may.
3. :meth:`Staging.register_staged_table` (``POST /tables`` with ``table_type`` MANAGED) makes it a
   managed table named as staged, with the staging id as its id, in one transaction that also deletes
   the staging row. It needs the Delta log to be there: its columns are the log's, and columns the
   caller sends must agree with them (names in order, and type names where given).

A staging table never registered is removed with its storage once it expires: by the sweep
(:meth:`uc_jupyter.catalog.embedded.pending.PendingStorage.sweep`, run when a catalog is opened), before each
new staging table, or at once by its creator (:meth:`Staging.abandon_staging_table`, after a failed
write). It is pending storage whose writer is a remote client, not a process of this machine, so a
deadline says when it is given up, where a process id cannot.

Example:
    >>> import tempfile, deltalake, pyarrow as pa
    >>> from uc_jupyter.storage import urls as st
    >>> from uc_jupyter.catalog.embedded.local import LocalCatalog
    >>> cat = LocalCatalog(tempfile.mkdtemp())
    >>> _ = cat.create_catalog("main"); _ = cat.create_schema("main.ml")
    >>> staged = cat.create_staging_table("main.ml.t")
    >>> deltalake.write_deltalake(st.delta_uri(staged.staging_location), pa.table({"x": [1]}))
    >>> table = cat.register_staged_table("main.ml.t", staged.staging_location)
    >>> table.table_type, table.id == staged.id
    ('MANAGED', True)
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, cast

from uc_jupyter.catalog.delta_files import delta_columns, delta_exists
from uc_jupyter.catalog.embedded.rows import key, name_of, new_id, now
from uc_jupyter.catalog.embedded.table_writes import TableWrites
from uc_jupyter.catalog.model import (
    AlreadyExists,
    NotFound,
    ResolvedTable,
    StagingTableInfo,
    TableInfo,
    current_principal,
)
from uc_jupyter.catalog.rules.names import SecurableName, parse_name
from uc_jupyter.catalog.rules.privileges import Action, SecurableKind
from uc_jupyter.storage import urls as st

__all__ = ["Staging", "column_mismatch"]


def column_mismatch(stored: Sequence[tuple[str, str | None]], given: Sequence[tuple[str, str | None]]) -> str | None:
    """Why the ``given`` (name, type name or None) columns disagree with the ``stored`` ones, or None
    when they agree: the same names (case-insensitively, as Delta compares them) in the same order, and
    the same type name wherever both have one.

    Example:
        >>> column_mismatch([("id", "LONG"), ("x", "DOUBLE")], [("ID", "LONG"), ("x", None)]) is None
        True
        >>> column_mismatch([("id", "LONG")], [("id", "STRING")])
        "column 'id' is LONG in the Delta log, not STRING"
    """
    if [n.lower() for n, _ in stored] != [n.lower() for n, _ in given]:
        names = ", ".join(n for n, _ in stored) or "none"
        got = ", ".join(n for n, _ in given) or "none"
        return f"the columns must be the Delta log's, in order ({names}), got {got}"
    for (name, ours), (_, theirs) in zip(stored, given, strict=True):
        if ours is not None and theirs is not None and ours != theirs:
            return f"column {name!r} is {ours} in the Delta log, not {theirs}"
    return None


class Staging(TableWrites):
    """The staging half of :class:`uc_jupyter.catalog.embedded.local.LocalCatalog` (see the module docstring)."""

    if TYPE_CHECKING:  # defined by LocalCatalog, beside the other reads

        def resolve_table(self, name: str, *, write: bool = False) -> ResolvedTable: ...

    def create_staging_table(self, name: str) -> StagingTableInfo:
        """Record a staging table for the managed table ``name``; needs what creating it needs (USE
        CATALOG, USE SCHEMA, CREATE TABLE) and a free name. Nothing is made on storage: the writer makes it.

        Example:
            >>> cat.create_staging_table("main.ml.new").staging_location  # doctest: +SKIP
            'file:///home/me/.uc_jupyter/storage/tables/3f2a...'
        """
        parsed = parse_name(name, levels=(3,))
        self._sweep_expired_staging()  # expired staging tables go before new ones come
        staging_id = new_id()
        location = st.normalise_location(str(self.root / "storage" / "tables" / staging_id.replace("-", "")))
        created, expires = now(), self._clock() + self._staging_ttl
        with self._transaction(write=True) as conn:
            self._require(conn, Action.CREATE_TABLE, cast(SecurableName, parsed.parent))
            existing = self._row(conn, parsed)
            if existing is not None and existing["kind"] != SecurableKind.TABLE:  # as create_table says it
                raise AlreadyExists(f"{parsed} already exists as a {existing['kind']}")
            self._ensure_absent(conn, parsed)
            conn.execute(
                "INSERT INTO staging_tables VALUES (?, ?, ?, ?, ?, ?)",
                (staging_id, key(parsed), location, current_principal(), created, expires),
            )
        catalog, schema, table = parsed.parts
        return StagingTableInfo(
            catalog,
            schema,
            table,
            id=staging_id,
            staging_location=location,
            owner=current_principal(),
            created_at=datetime.fromisoformat(created),
            expires_at=datetime.fromtimestamp(expires, timezone.utc),
        )

    def register_staged_table(
        self,
        name: str,
        staging_location: str,
        *,
        columns: Sequence[tuple[str, str | None]] | None = None,
        comment: str | None = None,
        staging_id: str | None = None,
    ) -> TableInfo:
        """Register the Delta table written at ``staging_location`` (one of the caller's unexpired staging
        tables, staged as ``name``) as the managed table ``name``. ``columns`` (name, type name or None),
        when given, must agree with the Delta log's (:func:`column_mismatch`); ``staging_id``, when given
        (UC clients send it as the property ``io.unitycatalog.tableId``), must be that staging table's.

        Example:
            >>> cat.register_staged_table("main.ml.new", staged.staging_location)  # doctest: +SKIP
        """
        parsed = parse_name(name, levels=(3,))
        location = st.normalise_location(staging_location)
        with self._locks.hold([key(parsed)], what=f"table {parsed}"):
            with self._transaction() as conn:
                staged = self._own_staging(conn, parsed, location)
                if staging_id is not None and staging_id != staged["id"]:
                    raise ValueError(f"table {parsed}: the table id {staging_id[:64]!r} is not its staging table's")
                self._require(conn, Action.CREATE_TABLE, cast(SecurableName, parsed.parent))
                self._ensure_absent(conn, parsed)
            if not delta_exists(parsed, location, {}):
                raise ValueError(
                    f"table {parsed}: no Delta table at its staging location yet; write the table's first "
                    "commit there (with credentials for the staging id) before registering it"
                )
            found = delta_columns(parsed, location, {})
            if columns is not None:
                from uc_jupyter.catalog.wire.shapes import column_json  # pure, and the wire's own type names

                mismatch = column_mismatch(
                    [(c.name, column_json(c, i).get("type_name")) for i, c in enumerate(found)], columns
                )
                if mismatch:
                    raise ValueError(f"table {parsed}: {mismatch}")
            with self._transaction(write=True) as conn:
                self._own_staging(conn, parsed, location)  # not swept or registered meanwhile
                self._require(conn, Action.CREATE_TABLE, cast(SecurableName, parsed.parent))
                self._insert(
                    conn,
                    parsed,
                    SecurableKind.TABLE,
                    storage_location=location,
                    managed=True,
                    columns=found,
                    comment=comment,
                    given_id=staged["id"],
                )
                conn.execute("DELETE FROM staging_tables WHERE id = ?", (staged["id"],))
        return self._written(parsed)

    def abandon_staging_table(self, staging_id: str) -> None:
        """Remove the caller's staging table ``staging_id`` and whatever was written there: what a
        client does when its write failed, rather than leave it to the sweep. Its creator only (anyone
        else, and an id that names no staging table: NotFound ``no staging table with id ...``).

        Example:
            >>> cat.abandon_staging_table(staged.id)  # doctest: +SKIP
        """
        with self._transaction(write=True) as conn:
            staged = conn.execute("SELECT * FROM staging_tables WHERE id = ?", (staging_id,)).fetchone()
            if staged is None or staged["owner"] != current_principal():
                raise NotFound(f"no staging table with id {str(staging_id)[:64]!r}")
            conn.execute("DELETE FROM staging_tables WHERE id = ?", (staging_id,))
            # Pending until its files are gone: a process dying now leaves them to the sweep.
            self._record_pending(conn, staged["location"])
        self._remove_pending(staged["location"])

    def resolve_staging_table(self, staged: StagingTableInfo) -> ResolvedTable:
        """Where the caller writes its staging table ``staged`` (:meth:`resolve_table_id` of its id).

        Example:
            >>> cat.resolve_staging_table(cat.create_staging_table("main.ml.new")).storage_location  # doctest: +SKIP
        """
        return self.resolve_table_id(staged.id, write=True)

    def resolve_table_id(self, table_id: str, *, write: bool = False) -> ResolvedTable:
        """Where the table (or staging table) with ``table_id`` keeps its Delta files, after the check:
        a table's id is :meth:`resolve_table` of its name; a staging table's only for its creator,
        before it expires or is registered, and while the creator may still create the table.
        Anything else: NotFound ``no table with id ...``.

        Example:
            >>> cat.resolve_table_id(staged.id, write=True).storage_location  # doctest: +SKIP
        """
        with self._transaction() as conn:
            row = conn.execute("SELECT key, kind FROM securables WHERE id = ?", (table_id,)).fetchone()
            staged = conn.execute("SELECT * FROM staging_tables WHERE id = ?", (table_id,)).fetchone()
            mine = staged is not None and staged["owner"] == current_principal() and self._is_live(staged)
            if row is None and mine:
                # The creator may learn it lost CREATE TABLE meanwhile; anyone else learns nothing.
                self._require(conn, Action.CREATE_TABLE, cast(SecurableName, name_of(staged["key"]).parent))
                return _staged_resolution(staged)
        if row is not None and row["kind"] == SecurableKind.TABLE.value:
            return self.resolve_table(str(name_of(row["key"])), write=write)
        raise NotFound(f"no table with id {str(table_id)[:64]!r}")

    def _own_staging(self, conn: sqlite3.Connection, parsed: SecurableName, location: str) -> sqlite3.Row:
        """The caller's live staging row at ``location`` for ``parsed``; the same one-line refusal for a
        location that is no staging table's, another principal's, or expired (no oracle)."""
        staged = conn.execute("SELECT * FROM staging_tables WHERE location = ?", (location,)).fetchone()
        if staged is None or staged["owner"] != current_principal() or not self._is_live(staged):
            raise ValueError(
                f"table {parsed}: storage_location {location[:300]} is not a staging location of yours; "
                "a MANAGED table is created at the staging_location of POST /staging-tables (made by you, "
                "unexpired)"
            )
        if staged["key"] != key(parsed):
            raise ValueError(f"table {parsed}: that staging location was staged for {name_of(staged['key'])}")
        return cast(sqlite3.Row, staged)

    def _is_live(self, staged: sqlite3.Row) -> bool:
        return bool(staged["expires_at"] > self._clock())


def _staged_resolution(staged: sqlite3.Row) -> ResolvedTable:
    catalog, schema, name = staged["key"].split(".")
    info = StagingTableInfo(
        catalog,
        schema,
        name,
        id=staged["id"],
        staging_location=staged["location"],
        owner=staged["owner"],
        created_at=datetime.fromisoformat(staged["created_at"]),
        expires_at=datetime.fromtimestamp(staged["expires_at"], timezone.utc),
    )
    return ResolvedTable(info.table, staged["location"], {})
