"""Writing tables through a Unity Catalog server: the table half of
:class:`~uc_jupyter.catalog.rest.client.RestCatalog`.

The client writes the Delta files itself, with credentials the server vends for exactly that storage,
and registers the table only once they are written (nothing half-registered):

- managed: ``POST /staging-tables`` (the server picks the storage and an id) -> READ_WRITE credentials
  for the staging id -> write -> ``POST /tables`` MANAGED at the staging location with the property
  ``io.unitycatalog.tableId`` = the id (as UC OSS wants). A write or registration that fails gives the
  staging table back (``DELETE /uc-jupyter/staging-tables/{id}``; elsewhere the server's expiry does);
- external: PATH_CREATE_TABLE credentials for the URL -> write -> ``POST /tables`` EXTERNAL; a failed
  registration removes the files this call wrote. ``data=None`` registers the Delta table already there;
- an existing table (``mode`` ``"append"``/``"overwrite"``): READ_WRITE credentials -> write -> ``POST
  /uc-jupyter/tables/{full_name}/refresh`` (uc-jupyter serve's extension: the columns from the Delta log).

Example:
    >>> cat.create_table("main.ml.iris", df)                     # doctest: +SKIP
    >>> cat.create_table("main.ml.iris", more, mode="append")    # doctest: +SKIP
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from uc_jupyter.catalog.model import (
    AlreadyExists,
    CatalogError,
    ColumnInfo,
    NotFound,
    PermissionDenied,
    ResolvedTable,
    StagingTableInfo,
    TableInfo,
    WriteMode,
)
from uc_jupyter.catalog.rest.names import quoted, wire_parts
from uc_jupyter.catalog.rules.names import SecurableName, parse_name
from uc_jupyter.catalog.wire.read import staging_table_info, table_info
from uc_jupyter.catalog.wire.shapes import column_json
from uc_jupyter.storage import urls as st

if TYPE_CHECKING:
    import pyarrow as pa

    from uc_jupyter.catalog.rest.vended import Vended

__all__ = ["TABLE_ID_PROPERTY", "RestTables"]

log = logging.getLogger(__name__)

TABLE_ID_PROPERTY = "io.unitycatalog.tableId"  # UC OSS's DeltaConsts.UC_TABLE_ID
_NO_ROUTE = "no route "


class RestTables:
    """Table writes over REST; :class:`~uc_jupyter.catalog.rest.client.RestCatalog` provides the calls."""

    # The deltalake options vended for each staging table this client staged, until it is registered or
    # abandoned (a dict: one writer thread per staging table).
    _staging_options: dict[str, dict[str, str]]

    def _call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        raise NotImplementedError  # RestCatalog's

    def vended(self, what: str, operation: str) -> Vended:
        raise NotImplementedError  # RestCatalog's

    def _described(self, path: str, name: str, privilege: str) -> dict[str, Any]:
        raise NotImplementedError  # RestCatalog's

    @property
    def url(self) -> str:
        raise NotImplementedError  # RestCatalog's

    def current_principal(self) -> str:
        raise NotImplementedError  # RestCatalog's

    def _create_table(
        self,
        name: str,
        data: object | None,
        mode: WriteMode,
        storage_location: str | None,
        comment: str | None,
    ) -> TableInfo:
        from uc_jupyter.catalog.delta_files import to_arrow, write_delta

        if mode not in ("error", "overwrite", "append"):
            raise ValueError(f"invalid mode {mode!r}: use 'error', 'overwrite' or 'append'")
        parsed = parse_name(name, levels=(3,))
        wire = quoted(".".join(wire_parts(parsed, name)))
        table = None if data is None else to_arrow(data)
        try:
            existing: dict[str, Any] | None = self._described(f"/tables/{wire}", str(parsed), "MODIFY")
        except NotFound as exc:
            if not str(exc).startswith("table "):  # a missing catalog or schema is the caller's answer
                raise
            existing = None
        except PermissionDenied as exc:
            if mode != "error" or exc.securable != str(parsed):
                raise
            existing = None  # there but hidden from the caller: the server refuses the create, as it sees fit
        if existing is not None:
            if mode == "error":
                raise AlreadyExists(
                    f"table {parsed} already exists; write with mode 'overwrite' or 'append' to change it"
                )
            if table is None:
                raise ValueError(f"table {parsed} exists; pass data to {mode} it")
            info = table_info(existing)
            vended = self.vended(f"table:{existing.get('table_id') or ''}", "READ_WRITE")
            write_delta(parsed, info.storage_location, table, mode, vended.deltalake_options())
            return self._refreshed(wire)
        if storage_location is None:
            if table is None:
                raise ValueError(f"table {parsed}: pass data (a pyarrow Table or pandas DataFrame) to create it")
            return self._create_managed(parsed, table, comment)
        return self._create_external(parsed, table, storage_location, comment)

    def _refreshed(self, wire: str) -> TableInfo:
        """The table after a write: uc-jupyter serve re-reads its columns from the Delta log (an
        overwrite may change them); a server without that extension route is only asked again."""
        try:
            return table_info(self._call("POST", f"/uc-jupyter/tables/{wire}/refresh"))
        except NotFound as exc:
            if not str(exc).startswith(_NO_ROUTE):
                raise
        return table_info(self._call("GET", f"/tables/{wire}"))

    def _body(
        self, parsed: SecurableName, kind: str, location: str, columns: tuple[Any, ...], **extra: Any
    ) -> dict[str, Any]:
        catalog, schema, table = parsed.parts
        body = {
            "name": table,
            "catalog_name": catalog,
            "schema_name": schema,
            "table_type": kind,
            "data_source_format": "DELTA",
            "storage_location": location,
            "columns": [column_json(c, i) for i, c in enumerate(columns)],
        }
        return {**body, **{k: v for k, v in extra.items() if v is not None}}

    def _create_managed(self, parsed: SecurableName, table: pa.Table, comment: str | None) -> TableInfo:
        from uc_jupyter.catalog.delta_files import write_delta

        staged = self.create_staging_table(str(parsed))
        try:
            resolved = self.resolve_staging_table(staged)
            write_delta(parsed, resolved.storage_location, table, "error", resolved.storage_options)
            return self.register_staged_table(
                str(parsed), staged.staging_location, comment=comment, staging_id=staged.id
            )
        except BaseException:
            self._abandon(staged.id)
            raise

    def create_staging_table(self, name: str) -> StagingTableInfo:
        """``POST /staging-tables``: the server checks CREATE TABLE and that the name is free, and picks
        the managed storage and an id (see
        :meth:`LocalCatalog.create_staging_table <uc_jupyter.catalog.embedded.staging.Staging.create_staging_table>`).

        Example:
            >>> cat.create_staging_table("main.ml.new").staging_location  # doctest: +SKIP
        """
        parsed = parse_name(name, levels=(3,))
        catalog, schema, table = parsed.parts
        try:
            body = self._call(
                "POST", "/staging-tables", body={"name": table, "catalog_name": catalog, "schema_name": schema}
            )
        except NotFound as exc:
            if str(exc).startswith(_NO_ROUTE):
                raise CatalogError(
                    f"the catalog server at {self.url} has no route POST /staging-tables, so it cannot make "
                    f"managed tables yet; give table {parsed} a storage_location inside an external location"
                ) from None
            raise
        return staging_table_info(body, (catalog, schema, table), self.current_principal())

    def resolve_staging_table(self, staged: StagingTableInfo) -> ResolvedTable:
        """READ_WRITE credentials for the staging table ``staged``: where its creator writes it.

        Example:
            >>> cat.resolve_staging_table(cat.create_staging_table("main.ml.new")).storage_options  # doctest: +SKIP
        """
        vended = self.vended(f"table:{staged.id}", "READ_WRITE")
        # Kept for its registration, which reads the log written there: vended answers without keys
        # (file://) are not cached, and asking again would be a second call for what this one gave.
        self._staging_options[staged.id] = vended.deltalake_options()
        return ResolvedTable(
            staged.table, vended.url or staged.staging_location, vended.deltalake_options(), expires_at=vended.expiry()
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
        """``POST /tables`` MANAGED at the staging location, the columns read from the Delta log written
        there (``columns``, when given, are checked by the server against them).

        Example:
            >>> cat.register_staged_table("main.ml.new", staged.staging_location)  # doctest: +SKIP
        """
        from uc_jupyter.catalog.delta_files import delta_columns

        parsed = parse_name(name, levels=(3,))
        options = self._staging_options.pop(staging_id, None) if staging_id is not None else {}
        if options is None:  # staged by another client object: ask for the staging table's credentials
            options = self.vended(f"table:{staging_id}", "READ_WRITE").deltalake_options()
        # The log's columns, or those the caller expects (the server checks them against the log).
        sent = (
            delta_columns(parsed, staging_location, options)
            if columns is None
            else tuple(ColumnInfo(n, t or "") for n, t in columns)
        )
        properties = None if staging_id is None else {TABLE_ID_PROPERTY: staging_id}
        body = self._body(parsed, "MANAGED", staging_location, sent, properties=properties, comment=comment)
        return table_info(self._call("POST", "/tables", body=body))

    def abandon_staging_table(self, staging_id: str) -> None:
        """Give the caller's staging table back at once, with what was written there (uc-jupyter serve's
        ``DELETE /uc-jupyter/staging-tables/{id}``); NotFound when it names none of the caller's.

        Example:
            >>> cat.abandon_staging_table(staged.id)  # doctest: +SKIP
        """
        self._staging_options.pop(staging_id, None)
        self._call("DELETE", f"/uc-jupyter/staging-tables/{quoted(staging_id)}")

    def refresh_table(self, name: str) -> TableInfo:
        """The table's columns read again from its Delta log after a write outside the catalog; needs MODIFY.

        Example:
            >>> cat.refresh_table("main.ml.iris").columns  # doctest: +SKIP
        """
        parsed = parse_name(name, levels=(3,))
        return self._refreshed(quoted(".".join(wire_parts(parsed, name))))

    def _abandon(self, staging_id: str) -> None:
        """Give a staging table back at once (uc-jupyter serve's extension route removes its row and
        files); elsewhere, or when that fails too, the server's expiry of staging tables does it."""
        try:
            self.abandon_staging_table(staging_id)
        except Exception as exc:  # the caller must learn why the create failed, not why the cleanup did
            log.warning("could not give back staging table %s: %s", staging_id, exc)

    def _create_external(
        self, parsed: SecurableName, table: pa.Table | None, storage_location: str, comment: str | None
    ) -> TableInfo:
        from uc_jupyter.catalog.delta_files import delta_columns, write_delta

        if table is None:  # registering the Delta table already there: the server reads its columns
            body = self._body(parsed, "EXTERNAL", storage_location, (), comment=comment)
            return table_info(self._call("POST", "/tables", body=body))
        vended = self.vended(f"path:{storage_location}", "PATH_CREATE_TABLE")
        location, options = vended.url, vended.deltalake_options()
        if not st.is_empty_location(location, vended.fsspec_options()):
            raise AlreadyExists(
                f"table {parsed}: storage location {location} is not empty; give an empty location "
                "for a new table, or data=None to register the Delta table already there"
            )
        try:
            write_delta(parsed, location, table, "error", options)
            columns = delta_columns(parsed, location, options)
            body = self._body(parsed, "EXTERNAL", location, columns, comment=comment)
            return table_info(self._call("POST", "/tables", body=body))
        except BaseException:
            # Nothing refers to these files (the location was empty and the table is not registered).
            st.remove_location(location, vended.fsspec_options())
            raise
