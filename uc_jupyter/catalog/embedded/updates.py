"""Changing catalogs, schemas and volumes in place (comment, owner), re-reading a table's columns, and
finding any securable by its id.

An update is one write transaction: it is checked whole (the object exists, the caller owns it or a
container of it or is a metastore admin, a new owner is a registered principal) and then written
whole with ``updated_at``/``updated_by``, or nothing changes. Renames are not offered: an object's key
is also the key of its grants and its descendants' rows, so a rename would rewrite many rows.

Example:
    >>> import tempfile
    >>> from uc_jupyter.catalog.embedded.local import LocalCatalog
    >>> cat = LocalCatalog(tempfile.mkdtemp())
    >>> info = cat.create_catalog("main")
    >>> cat.update_catalog("main", comment="team data").comment
    'team data'
    >>> cat.securable_by_id(info.id)
    (<SecurableKind.CATALOG: 'catalog'>, 'main')
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from uc_jupyter.catalog.delta_files import delta_columns
from uc_jupyter.catalog.embedded.external import ExternalStorage
from uc_jupyter.catalog.embedded.metastore import LEVEL_OF
from uc_jupyter.catalog.embedded.rows import (
    catalog_info,
    columns_json,
    key,
    name_of,
    now,
    schema_info,
    table_info,
    volume_info,
)
from uc_jupyter.catalog.model import CatalogInfo, NotFound, SchemaInfo, TableInfo, VolumeInfo, current_principal
from uc_jupyter.catalog.rules.names import parse_name
from uc_jupyter.catalog.rules.privileges import Action, SecurableKind, validate_principal

if TYPE_CHECKING:
    pass

__all__ = ["Updates"]

# Where flat securables keep their ids (the catalog tree's are in ``securables``).
_FLAT_TABLES = (
    (SecurableKind.STORAGE_CREDENTIAL, "storage_credentials"),
    (SecurableKind.EXTERNAL_LOCATION, "external_locations"),
)


class Updates(ExternalStorage):
    """The update and by-id half of :class:`uc_jupyter.catalog.embedded.local.LocalCatalog`."""

    def securable_by_id(self, object_id: str) -> tuple[SecurableKind, str]:
        """The kind and full name (dotted, as :func:`~uc_jupyter.catalog.rules.names.parse_name` reads it) of
        the catalog, schema, table, volume, storage credential or external location with ``object_id``.

        A lookup only: it checks no privilege, so a caller answering a client must treat an id it
        finds but the client may not see exactly as one it does not find (no existence oracle).

        Example:
            >>> cat.securable_by_id(cat.get_table("main.ml.iris").id)  # doctest: +SKIP
            (<SecurableKind.TABLE: 'table'>, 'main.ml.iris')
        """
        if not isinstance(object_id, str):
            raise TypeError(f"an id is a string, got {type(object_id).__name__}")
        with self._transaction() as conn:
            row = conn.execute("SELECT key, kind FROM securables WHERE id = ?", (object_id,)).fetchone()
            if row is not None:
                return SecurableKind(row["kind"]), str(name_of(row["key"]))
            for kind, table in _FLAT_TABLES:
                found = conn.execute(f"SELECT name FROM {table} WHERE id = ?", (object_id,)).fetchone()
                if found is not None:
                    return kind, found["name"]
        raise NotFound(f"no securable with id {object_id[:64]!r}")

    def update_catalog(self, name: str, *, comment: str | None = None, owner: str | None = None) -> CatalogInfo:
        """Change a catalog's comment (``""`` clears it) and/or owner; None leaves a field as it is.

        Needs ownership of the catalog or metastore admin; a new owner must be a registered principal.

        Example:
            >>> cat.update_catalog("main", owner="alice")  # doctest: +SKIP
        """
        return catalog_info(self._update(name, SecurableKind.CATALOG, comment, owner))

    def update_schema(self, name: str, *, comment: str | None = None, owner: str | None = None) -> SchemaInfo:
        """Change a schema's comment and/or owner (as :meth:`update_catalog`; its catalog's owner may too)."""
        return schema_info(self._update(name, SecurableKind.SCHEMA, comment, owner))

    def update_volume(self, name: str, *, comment: str | None = None, owner: str | None = None) -> VolumeInfo:
        """Change a volume's comment and/or owner (as :meth:`update_catalog`; owners of its schema or
        catalog may too)."""
        return volume_info(self._update(name, SecurableKind.VOLUME, comment, owner))

    def refresh_table(self, name: str) -> TableInfo:
        """Read a table's columns again from its Delta log, after a writer outside this catalog (a
        client with vended credentials) changed its schema; needs MODIFY. Holds the table's entry lock,
        so it reads between writes, never during one.

        Example:
            >>> cat.refresh_table("main.ml.iris").columns  # doctest: +SKIP
        """
        parsed = parse_name(name, levels=(3,))
        with self._locks.hold([key(parsed)], what=f"table {parsed}"):
            with self._transaction() as conn:
                row = self._row_of_kind(conn, parsed, SecurableKind.TABLE)
                self._require(conn, Action.WRITE_TABLE, parsed)
                options = self._storage_options_of(conn, row)
            columns = delta_columns(parsed, row["storage_location"], options)
            with self._transaction(write=True) as conn:
                self._require(conn, Action.WRITE_TABLE, parsed)
                conn.execute(
                    "UPDATE securables SET columns = ?, updated_at = ?, updated_by = ? WHERE key = ? AND id = ?",
                    (columns_json(columns), now(), current_principal(), key(parsed), row["id"]),
                )
                return table_info(self._row_of_kind(conn, parsed, SecurableKind.TABLE))

    def _update(self, name: str, kind: SecurableKind, comment: str | None, owner: str | None) -> sqlite3.Row:
        parsed = parse_name(name, levels=(LEVEL_OF[kind],))
        if comment is None and owner is None:
            raise ValueError(f"nothing to update on {kind} {parsed}: give a comment or an owner")
        if owner is not None:
            validate_principal(owner)
        with self._transaction(write=True) as conn:
            row = self._row_of_kind(conn, parsed, kind)
            if not self._is_admin(conn, current_principal()):
                self._require_owner(conn, parsed)
            if owner is not None and not conn.execute("SELECT 1 FROM principals WHERE name = ?", (owner,)).fetchone():
                raise ValueError(
                    f"cannot make {owner} the owner of {kind} {parsed}: no such principal; "
                    f"create it first (uc-jupyter catalog create principal {owner})"
                )
            conn.execute(
                "UPDATE securables SET comment = ?, owner = ?, updated_at = ?, updated_by = ? WHERE key = ?",
                (
                    row["comment"] if comment is None else (comment or None),
                    row["owner"] if owner is None else owner,
                    now(),
                    current_principal(),
                    key(parsed),
                ),
            )
            return self._row_of_kind(conn, parsed, kind)
