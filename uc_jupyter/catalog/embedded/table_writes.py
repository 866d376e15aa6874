"""Writing tables: creating them (managed or inside an external location), appending and overwriting,
each under the table's entry lock so that changes of one table from several processes serialise; an
append or overwrite first removes what killed writes of the table left
(:mod:`uc_jupyter.catalog.embedded.killed_writes`).

Example:
    >>> cat.create_table("main.ml.iris", df, mode="overwrite")  # doctest: +SKIP
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any, cast

from uc_jupyter.catalog.delta_files import delta_columns, delta_exists, to_arrow, write_delta
from uc_jupyter.catalog.embedded.external import ExternalStorage
from uc_jupyter.catalog.embedded.killed_writes import KilledWrites
from uc_jupyter.catalog.embedded.pending import PendingStorage
from uc_jupyter.catalog.embedded.rows import columns_json, key, new_id, now, table_info
from uc_jupyter.catalog.embedded.secrets import check_options
from uc_jupyter.catalog.model import (
    AlreadyExists,
    NotFound,
    TableInfo,
    WriteMode,
    current_principal,
)
from uc_jupyter.catalog.rules.names import SecurableName, parse_name
from uc_jupyter.catalog.rules.privileges import (
    Action,
    Privilege,
    SecurableKind,
)
from uc_jupyter.storage import urls as st

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

__all__ = ["TableWrites"]


class TableWrites(PendingStorage, ExternalStorage, KilledWrites):
    """The table-writing half of :class:`uc_jupyter.catalog.embedded.local.LocalCatalog`."""

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
        """Write ``data`` as a Delta table and register it.

        ``mode="error"`` refuses an existing table; ``"overwrite"`` replaces its rows (and schema)
        and ``"append"`` adds rows, both needing MODIFY on an existing table and creating it when
        missing. With ``storage_location`` the table is external (inside an external location on which
        the caller holds CREATE EXTERNAL TABLE); ``data=None`` then registers the Delta table already
        there. Creating needs USE CATALOG, USE SCHEMA and CREATE TABLE. Changes of one table from
        several processes serialise: none is lost and none lands in a dropped table.

        Example:
            >>> cat.create_table("main.ml.iris", df, mode="overwrite")  # doctest: +SKIP
        """
        if mode not in ("error", "overwrite", "append"):
            raise ValueError(f"invalid mode {mode!r}: use 'error', 'overwrite' or 'append'")
        parsed = parse_name(name, levels=(3,))
        table = None if data is None else to_arrow(data)
        options = check_options(storage_options, f"table {parsed}")
        external = None if storage_location is None else st.resolve_location(storage_location)
        with self._locks.hold([key(parsed)], what=f"table {parsed}"):
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
                    existing_options = self._storage_options_of(conn, existing)
            if existing is not None:
                return self._write_existing_table(parsed, existing, existing_options, table, mode)
            return self._create_new_table(parsed, table, external, options, comment)

    def _write_existing_table(
        self,
        parsed: SecurableName,
        row: sqlite3.Row,
        options: dict[str, Any],
        table: pa.Table | None,
        mode: WriteMode,
    ) -> TableInfo:
        if table is None:
            raise ValueError(f"table {parsed} exists; pass data to {mode} it")
        # Under the entry lock: what killed writes of this table left goes first, and this one is recorded.
        with self._recorded_write(key(parsed), row["storage_location"], options):
            write_delta(parsed, row["storage_location"], table, mode, options)
        columns = delta_columns(parsed, row["storage_location"], options)
        with self._transaction(write=True) as conn:
            conn.execute(
                "UPDATE securables SET columns = ?, updated_at = ?, updated_by = ? WHERE key = ?",
                (columns_json(columns), now(), current_principal(), key(parsed)),
            )
        return self._written(parsed)

    def _create_new_table(
        self,
        parsed: SecurableName,
        table: pa.Table | None,
        external: str | None,
        options: dict[str, Any],
        comment: str | None,
    ) -> TableInfo:
        schema = cast(SecurableName, parsed.parent)
        if external is None and table is None:
            raise ValueError(f"table {parsed}: pass data (a pyarrow Table or pandas DataFrame) to create it")
        read_with = dict(options)
        if external is not None:
            with self._transaction() as conn:
                location_row = self._location_for(conn, external, Privilege.CREATE_EXTERNAL_TABLE)
                self._ensure_storage_free(conn, external)
            read_with = {**self._location_options(location_row), **options}
            if table is not None and not st.is_empty_location(external, read_with):
                raise AlreadyExists(
                    f"table {parsed}: storage location {external} is not empty; give an empty location "
                    "for a new table, or data=None to register the Delta table already there"
                )
        location = external if external is not None else self._new_managed_location("tables")
        # Storage first, under a location nothing refers to yet; the catalog entry last. Whatever
        # fails, the location is removed again when this call created it.
        created_here = table is not None
        object_id = new_id()  # its secret's key: a secret a dead drop left under this name is not this one's
        with self._cleanup_on_error(location if created_here else None, read_with, secret_id=object_id):
            if table is not None:
                write_delta(parsed, location, table, "error", read_with)
            elif not delta_exists(parsed, location, read_with):
                raise NotFound(f"table {parsed}: no Delta table at {location}; pass data to create one")
            columns = delta_columns(parsed, location, read_with)
            if options:
                self._put_secret(object_id, options)
            with self._transaction(write=True) as conn:
                self._require(conn, Action.CREATE_TABLE, schema)
                if external is not None:
                    self._location_for(conn, external, Privilege.CREATE_EXTERNAL_TABLE)
                    self._ensure_storage_free(conn, external)
                self._insert(
                    conn,
                    parsed,
                    SecurableKind.TABLE,
                    storage_location=location,
                    managed=external is None,
                    columns=columns,
                    comment=comment,
                    given_id=object_id,
                )
        return self._written(parsed)

    def _written(self, parsed: SecurableName) -> TableInfo:
        """The table just written, as the writer (who passed the checks) sees it."""
        with self._transaction() as conn:
            return table_info(self._row_of_kind(conn, parsed, SecurableKind.TABLE))
