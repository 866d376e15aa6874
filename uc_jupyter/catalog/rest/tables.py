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
from typing import TYPE_CHECKING, Any

from uc_jupyter.catalog.model import AlreadyExists, CatalogError, NotFound, PermissionDenied, TableInfo, WriteMode
from uc_jupyter.catalog.rest.names import quoted, wire_parts
from uc_jupyter.catalog.rules.names import SecurableName, parse_name
from uc_jupyter.catalog.wire.read import table_info
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

    def _call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        raise NotImplementedError  # RestCatalog's

    def vended(self, what: str, operation: str) -> Vended:
        raise NotImplementedError  # RestCatalog's

    def _described(self, path: str, name: str, privilege: str) -> dict[str, Any]:
        raise NotImplementedError  # RestCatalog's

    @property
    def url(self) -> str:
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
        from uc_jupyter.catalog.delta_files import delta_columns, write_delta

        catalog, schema, name = parsed.parts
        try:
            staging = self._call(
                "POST", "/staging-tables", body={"name": name, "catalog_name": catalog, "schema_name": schema}
            )
        except NotFound as exc:
            if str(exc).startswith(_NO_ROUTE):
                raise CatalogError(
                    f"the catalog server at {self.url} has no route POST /staging-tables, so it cannot make "
                    f"managed tables yet; give table {parsed} a storage_location inside an external location"
                ) from None
            raise
        staging_id, location = str(staging.get("id") or ""), str(staging.get("staging_location") or "")
        if not staging_id or not location:
            raise CatalogError(f"the server's staging table for {parsed} has no id or staging_location")
        try:
            options = self.vended(f"table:{staging_id}", "READ_WRITE").deltalake_options()
            write_delta(parsed, location, table, "error", options)
            columns = delta_columns(parsed, location, options)
            body = self._body(
                parsed, "MANAGED", location, columns, properties={TABLE_ID_PROPERTY: staging_id}, comment=comment
            )
            return table_info(self._call("POST", "/tables", body=body))
        except BaseException:
            self._abandon(staging_id)
            raise

    def _abandon(self, staging_id: str) -> None:
        """Give a staging table back at once (uc-jupyter serve's extension route removes its row and
        files); elsewhere, or when that fails too, the server's expiry of staging tables does it."""
        try:
            self._call("DELETE", f"/uc-jupyter/staging-tables/{quoted(staging_id)}")
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
