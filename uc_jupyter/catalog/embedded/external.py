"""Unity Catalog's storage model for the embedded catalog: storage credentials, external locations,
and the rules that keep registered storage apart.

- A **storage credential** is a named set of storage options (keys, tokens, endpoints), created by
  holders of ``CREATE STORAGE CREDENTIAL`` on the metastore (admins). Its options live in the
  secret store (:mod:`uc_jupyter.catalog.embedded.secrets`); nothing returns them.
- An **external location** binds a URL prefix to a credential (or to none: the process's own
  environment). Creating one needs ``CREATE EXTERNAL LOCATION`` on the metastore and on the
  credential. Locations never overlap each other.
- An external table or volume may only be created inside an external location on which the caller
  holds ``CREATE EXTERNAL TABLE`` / ``CREATE EXTERNAL VOLUME``; it reads and writes with the
  location's credential. ``READ FILES`` / ``WRITE FILES`` on a location allow path access
  (:meth:`ExternalStorage.resolve_storage_path`) to what lies inside it and belongs to no table or volume.
- No registered storage (location, table, volume) may overlap the catalog's home (metastore, secrets,
  managed storage, default cache), a cache or home registered elsewhere (:mod:`uc_jupyter.catalog.rules.reserved`),
  or uc_jupyter's own code; no table or volume may overlap another. Every comparison is between resolved
  canonical locations (:func:`uc_jupyter.storage.urls.resolve_location`), so spellings, aliases and
  symlinks of one place are one place.

Example:
    >>> cat.create_storage_credential("lake", {"key": "AKIA...", "secret": "..."})     # doctest: +SKIP
    >>> cat.create_external_location("raw", "s3://lake/raw", "lake")                  # doctest: +SKIP
    >>> cat.grant("raw", "CREATE EXTERNAL VOLUME", "alice", kind="location")           # doctest: +SKIP
    >>> with cat.as_principal("alice"):                                                # doctest: +SKIP
    ...     cat.create_volume("main.ml.images", "s3://lake/raw/images")
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from uc_jupyter.catalog.embedded.metastore import Metastore
from uc_jupyter.catalog.embedded.rows import credential_info, location_info, new_id, now
from uc_jupyter.catalog.embedded.secrets import check_options
from uc_jupyter.catalog.model import (
    AlreadyExists,
    CatalogError,
    ExternalLocationInfo,
    NoExternalLocation,
    NotEmpty,
    NotFound,
    PermissionDenied,
    ResolvedStoragePath,
    current_principal,
)
from uc_jupyter.catalog.rules.privileges import METASTORE, FlatFacts, Privilege, SecurableKind, flat_name, holds_flat
from uc_jupyter.catalog.rules.reserved import inside_marked_folder, reserved_folders
from uc_jupyter.storage import urls as st
from uc_jupyter.storage.locations import local_path_of, location_contains, locations_overlap

if TYPE_CHECKING:
    from uc_jupyter.catalog.model import CredentialInfo

__all__ = [
    "ExternalStorage",
    "ExternalTableStorage",
    "ReservedStorage",
    "check_store_options_of",
]

_PACKAGE_DIR = str(Path(__file__).resolve().parent.parent)  # uc_jupyter/
_TABLES = {
    SecurableKind.STORAGE_CREDENTIAL: "storage_credentials",
    SecurableKind.EXTERNAL_LOCATION: "external_locations",
}

STORAGE_SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS storage_credentials (
    name TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    option_names TEXT NOT NULL,        -- JSON list of the option names (the values are in secrets.db)
    comment TEXT,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS external_locations (
    name TEXT PRIMARY KEY,
    url TEXT NOT NULL UNIQUE,          -- resolved canonical form (uc_jupyter.storage.urls.resolve_location)
    credential TEXT REFERENCES storage_credentials(name) ON DELETE RESTRICT,
    owner TEXT NOT NULL,
    comment TEXT,
    created_at TEXT NOT NULL
);
-- Grants on securables outside the catalog/schema/object tree: the metastore, credentials, locations.
CREATE TABLE IF NOT EXISTS flat_grants (
    kind TEXT NOT NULL,
    name TEXT NOT NULL,
    privilege TEXT NOT NULL,
    principal TEXT NOT NULL,
    PRIMARY KEY (kind, name, privilege, principal)
);
"""


@dataclass(frozen=True)
class ExternalTableStorage:
    """Where a new external table may go (:meth:`ExternalStorage.external_table_storage`): the resolved
    ``url``, the external location holding it, and the fsspec options of that location's credential (no
    :data:`~uc_jupyter.storage.config.VENDOR_OPTIONS`: see :meth:`~ExternalStorage.storage_credential_options`)."""

    url: str
    location: ExternalLocationInfo
    storage_options: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


class ReservedStorage(CatalogError, ValueError):
    """A storage location that overlaps the catalog's own files (home, cache) or uc_jupyter's code."""


class ExternalStorage(Metastore):
    """The storage-model half of :class:`uc_jupyter.catalog.embedded.local.LocalCatalog`."""

    # ----------------------------------------------------------------- storage credentials
    def create_storage_credential(
        self, name: str, storage_options: dict[str, Any] | None = None, *, comment: str | None = None
    ) -> CredentialInfo:
        """Create a storage credential holding ``storage_options`` (fsspec options: ``key``,
        ``secret``, ``token``, ``endpoint_url``, ``client_kwargs``, ...); needs CREATE STORAGE
        CREDENTIAL on the metastore (admins hold it). The options are never returned again.

        Example:
            >>> cat.create_storage_credential("lake", {"key": "AKIA", "secret": "s"})  # doctest: +SKIP
            CredentialInfo(name='lake', owner='admin', ..., option_names=('key', 'secret'))
        """
        stored = flat_name(SecurableKind.STORAGE_CREDENTIAL, name)
        options = check_options(storage_options, f"credential {stored}")
        check_store_options_of(options, f"storage credential {stored}")
        with self._transaction(write=True) as conn:
            self._require_flat(conn, SecurableKind.METASTORE, METASTORE, Privilege.CREATE_STORAGE_CREDENTIAL)
            if self._flat_row(conn, SecurableKind.STORAGE_CREDENTIAL, stored) is not None:
                raise AlreadyExists(f"storage credential {stored} already exists")
            # The secret first: a failure after it leaves an unused secret, never a credential without one.
            self._secrets.put("credential", stored, options)
            conn.execute(
                "INSERT INTO storage_credentials (name, owner, option_names, comment, created_at, id, created_by)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    stored,
                    current_principal(),
                    json.dumps(sorted(options)),
                    comment,
                    now(),
                    new_id(),
                    current_principal(),
                ),
            )
        return self.get_storage_credential(stored)

    def get_storage_credential(self, name: str) -> CredentialInfo:
        """A credential's description (never its options); visible to admins, its owner and grantees."""
        stored = flat_name(SecurableKind.STORAGE_CREDENTIAL, name)
        with self._transaction() as conn:
            row = self._visible_flat_row(conn, SecurableKind.STORAGE_CREDENTIAL, stored)
        return credential_info(row)

    def storage_credential_options(self, name: str) -> dict[str, Any]:
        """The options stored with credential ``name``, raw: keys, endpoint and the vendor's own
        (:data:`uc_jupyter.storage.config.VENDOR_OPTIONS`), for ``uc-jupyter serve``'s vendor: the one
        call that returns a credential's options, to metastore admins only (not even its owner: owners
        change, keys stay). The vendor asks as an admin after checking the caller's privilege on the
        object it vends for; what it returns must never reach a client. NotFound for a credential the
        caller cannot see, PermissionDenied (METASTORE ADMIN) for one it sees.

        Example:
            >>> with cat.as_principal("admin"):                        # doctest: +SKIP
            ...     cat.storage_credential_options("lake")["vending"]
            'static'
        """
        stored = flat_name(SecurableKind.STORAGE_CREDENTIAL, name)
        with self._transaction() as conn:
            self._visible_flat_row(conn, SecurableKind.STORAGE_CREDENTIAL, stored)
            self._require_admin(conn)
            # Read inside the transaction: a drop commits its row before its secret goes.
            return self._secrets.get("credential", stored)

    def list_storage_credentials(self) -> list[CredentialInfo]:
        """The credentials the current principal may see (admins: all)."""
        with self._transaction() as conn:
            rows = conn.execute("SELECT * FROM storage_credentials ORDER BY name").fetchall()
            return [credential_info(r) for r in rows if self._sees_flat(conn, SecurableKind.STORAGE_CREDENTIAL, r)]

    def drop_storage_credential(self, name: str) -> None:
        """Drop a credential no external location uses; its owner or an admin."""
        stored = flat_name(SecurableKind.STORAGE_CREDENTIAL, name)
        with self._transaction(write=True) as conn:
            row = self._visible_flat_row(conn, SecurableKind.STORAGE_CREDENTIAL, stored)
            self._require_flat_owner(conn, SecurableKind.STORAGE_CREDENTIAL, row)
            users = [r[0] for r in conn.execute("SELECT name FROM external_locations WHERE credential = ?", (stored,))]
            if users:
                raise NotEmpty(
                    f"storage credential {stored} is used by external location {', '.join(users)}; drop those first"
                )
            conn.execute("DELETE FROM storage_credentials WHERE name = ?", (stored,))
            conn.execute(
                "DELETE FROM flat_grants WHERE kind = ? AND name = ?", (SecurableKind.STORAGE_CREDENTIAL, stored)
            )
        # After the commit (a failed drop keeps its secret), and under the metastore's write lock, which
        # a create holds while it writes its secret: one made since this commit keeps the one it wrote.
        with self._transaction(write=True) as conn:
            if self._flat_row(conn, SecurableKind.STORAGE_CREDENTIAL, stored) is None:
                self._secrets.delete("credential", stored)

    # ----------------------------------------------------------------- external locations
    def create_external_location(
        self, name: str, url: str, credential: str | None = None, *, comment: str | None = None
    ) -> ExternalLocationInfo:
        """Bind the URL prefix ``url`` to ``credential`` (None: the process's own environment) under
        ``name``. Needs CREATE EXTERNAL LOCATION on the metastore, and on the credential when one is
        named. The URL may not overlap another location or the catalog's own files.

        Example:
            >>> cat.create_external_location("raw", "s3://lake/raw", "lake")  # doctest: +SKIP
        """
        stored = flat_name(SecurableKind.EXTERNAL_LOCATION, name)
        resolved = st.resolve_location(url)
        credential_name = None if credential is None else flat_name(SecurableKind.STORAGE_CREDENTIAL, credential)
        with self._transaction(write=True) as conn:
            self._require_flat(conn, SecurableKind.METASTORE, METASTORE, Privilege.CREATE_EXTERNAL_LOCATION)
            if credential_name is not None:
                self._visible_flat_row(conn, SecurableKind.STORAGE_CREDENTIAL, credential_name)
                self._require_flat(
                    conn, SecurableKind.STORAGE_CREDENTIAL, credential_name, Privilege.CREATE_EXTERNAL_LOCATION
                )
            if self._flat_row(conn, SecurableKind.EXTERNAL_LOCATION, stored) is not None:
                raise AlreadyExists(f"external location {stored} already exists")
            for row in conn.execute("SELECT name, url FROM external_locations"):
                if locations_overlap(resolved, row["url"]):
                    raise AlreadyExists(
                        f"external location {stored} at {resolved} overlaps external location {row['name']} "
                        f"at {row['url']}; locations may not overlap"
                    )
            self._ensure_not_reserved(resolved)
            if credential_name is not None:  # the credential's options, now for this URL's store
                options = self._secrets.get("credential", credential_name)
                what = f"external location {stored} with credential {credential_name}"
                check_store_options_of(options, what, resolved)
            conn.execute(
                "INSERT INTO external_locations (name, url, credential, owner, comment, created_at, id, created_by)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (stored, resolved, credential_name, current_principal(), comment, now(), new_id(), current_principal()),
            )
        return self.get_external_location(stored)

    def get_external_location(self, name: str) -> ExternalLocationInfo:
        stored = flat_name(SecurableKind.EXTERNAL_LOCATION, name)
        with self._transaction() as conn:
            return location_info(self._visible_flat_row(conn, SecurableKind.EXTERNAL_LOCATION, stored))

    def list_external_locations(self) -> list[ExternalLocationInfo]:
        """The locations the current principal may see (admins: all)."""
        with self._transaction() as conn:
            rows = conn.execute("SELECT * FROM external_locations ORDER BY name").fetchall()
            return [location_info(r) for r in rows if self._sees_flat(conn, SecurableKind.EXTERNAL_LOCATION, r)]

    def drop_external_location(self, name: str) -> None:
        """Drop a location that holds no table or volume; its owner or an admin."""
        stored = flat_name(SecurableKind.EXTERNAL_LOCATION, name)
        with self._transaction(write=True) as conn:
            row = self._visible_flat_row(conn, SecurableKind.EXTERNAL_LOCATION, stored)
            self._require_flat_owner(conn, SecurableKind.EXTERNAL_LOCATION, row)
            inside = [
                f"{r['kind']} {r['key']}"
                for r in conn.execute(
                    "SELECT key, kind, storage_location FROM securables "
                    "WHERE managed = 0 AND storage_location IS NOT NULL"
                )
                if _contains(row["url"], r["storage_location"])
            ]
            if inside:
                raise NotEmpty(f"external location {stored} holds {', '.join(sorted(inside))}; drop those first")
            conn.execute("DELETE FROM external_locations WHERE name = ?", (stored,))
            conn.execute(
                "DELETE FROM flat_grants WHERE kind = ? AND name = ?", (SecurableKind.EXTERNAL_LOCATION, stored)
            )

    def resolve_storage_path(self, url: str, *, write: bool = False) -> ResolvedStoragePath:
        """Check READ FILES (or WRITE FILES) on the external location holding ``url`` and open it.
        Paths of registered tables and volumes are refused: reach those through their own privileges.

        Example:
            >>> r = cat.resolve_storage_path("s3://lake/raw/2024/a.csv")  # doctest: +SKIP
            >>> with r.open() as f:                                       # doctest: +SKIP
            ...     f.read()
        """
        resolved = st.resolve_location(url)
        privilege = Privilege.WRITE_FILES if write else Privilege.READ_FILES
        with self._transaction() as conn:
            location = self._location_for(conn, resolved, privilege)
            for row in conn.execute(
                "SELECT key, kind, storage_location FROM securables WHERE storage_location IS NOT NULL"
            ):
                if _overlaps(resolved, row["storage_location"]):
                    raise PermissionDenied(
                        current_principal(),
                        f"{privilege} (path access; it is {row['kind']} {row['key']}, use its own privileges)",
                        resolved,
                    )
        options = st.fsspec_options(self._location_options(location))
        return ResolvedStoragePath(resolved, location_info(location), st.storage_path(resolved), options)

    def external_table_storage(self, url: str) -> ExternalTableStorage:
        """May the current principal create an external table at ``url``, and with which options?
        The checks ``create_table`` makes at registration, made before any file is written: CREATE
        EXTERNAL TABLE on the external location holding ``url`` (:class:`NoExternalLocation` when
        none does), storage that overlaps no table or volume (AlreadyExists) and none of the
        catalog's own files (:class:`ReservedStorage`). Returns where, the location, and its
        credential's options, for a server vending credentials to a client about to write there.

        Example:
            >>> s = cat.external_table_storage("s3://lake/raw/new_table")  # doctest: +SKIP
            >>> s.url, s.location.name, sorted(s.storage_options)           # doctest: +SKIP
            ('s3://lake/raw/new_table', 'raw', ['key', 'secret'])
        """
        resolved = st.resolve_location(url)
        with self._transaction() as conn:
            location = self._location_for(conn, resolved, Privilege.CREATE_EXTERNAL_TABLE)
            self._ensure_storage_free(conn, resolved)
            options = self._location_options(location)
        return ExternalTableStorage(resolved, location_info(location), st.fsspec_options(options))

    # ----------------------------------------------------------------- used by the catalog
    def _location_for(self, conn: sqlite3.Connection, resolved: str, privilege: Privilege) -> sqlite3.Row:
        """The external location holding ``resolved`` when the caller holds ``privilege`` on it."""
        for row in conn.execute("SELECT * FROM external_locations"):
            if _contains(row["url"], resolved):
                self._require_flat(conn, SecurableKind.EXTERNAL_LOCATION, row["name"], privilege)
                return cast(sqlite3.Row, row)
        raise NoExternalLocation(current_principal(), privilege.value, resolved)

    def _location_options(self, location: sqlite3.Row | None) -> dict[str, Any]:
        if location is None or location["credential"] is None:
            return {}
        return self._secrets.get("credential", location["credential"])

    def credential_of_storage(self, storage_location: str) -> str | None:
        """The storage credential of the external location holding a table's or volume's stored
        ``storage_location`` (None: in no location, or one bound to no credential), for the server's
        vendor once the caller's privilege on that object has been checked. A lookup: it checks no
        privilege and gives a name, never options.

        Example:
            >>> cat.credential_of_storage("s3://lake/raw/images")  # doctest: +SKIP
            'lake'
        """
        with self._transaction() as conn:
            location = self._location_holding(conn, storage_location)
        return None if location is None else cast("str | None", location["credential"])

    def _location_holding(self, conn: sqlite3.Connection, stored: str) -> sqlite3.Row | None:
        """The external location holding the stored location ``stored``. Both were resolved when they
        were stored: a lexical comparison, with no realpath per location on every read (the checks at
        creation used the disk). Locations never overlap, so at most one holds it."""
        for location in conn.execute("SELECT * FROM external_locations"):
            if _stored_contains(location["url"], stored):
                return cast(sqlite3.Row, location)
        return None

    def _storage_options_of(self, conn: sqlite3.Connection, row: sqlite3.Row) -> dict[str, Any]:
        """What opens a table's or volume's storage: its location's credential, then its own options."""
        options: dict[str, Any] = {}
        if not row["managed"] and row["storage_location"]:
            options.update(self._location_options(self._location_holding(conn, row["storage_location"])))
        options.update(self._secrets.get("object", row["id"]))
        return options

    def _ensure_storage_free(self, conn: sqlite3.Connection, resolved: str) -> None:
        """Refuse ``resolved`` when it overlaps a table's or volume's storage, or is reserved."""
        for row in conn.execute(
            "SELECT key, kind, storage_location FROM securables WHERE storage_location IS NOT NULL"
        ):
            if _overlaps(resolved, row["storage_location"]):
                raise AlreadyExists(
                    f"storage location {resolved} overlaps {row['kind']} {row['key']} "
                    f"at {row['storage_location']}; choose a separate location"
                )
        self._ensure_not_reserved(resolved)

    def _ensure_not_reserved(self, resolved: str) -> None:
        path = local_path_of(resolved)
        if path is None:
            return
        reserved = [
            ("the catalog home", str(self.root), "its metastore, secrets, managed storage and cache"),
            ("uc_jupyter's own code", _PACKAGE_DIR, "code every principal runs"),
            *(
                (f"the {kind} folder", folder, "registered by this catalog")
                for kind, folder in reserved_folders(self.root)
            ),
        ]
        for what, folder, holds in reserved:
            if locations_overlap(resolved, folder):  # a plain path is a local location
                raise ReservedStorage(
                    f"storage location {resolved} overlaps {what} {folder} ({holds}); it cannot be storage"
                )
        marked = inside_marked_folder(path)
        if marked is not None:
            kind, folder = marked
            raise ReservedStorage(
                f"storage location {resolved} lies inside uc_jupyter's {kind} folder {folder}; it cannot be storage"
            )

    # ----------------------------------------------------------------- flat privileges
    def _flat_row(self, conn: sqlite3.Connection, kind: SecurableKind, name: str) -> sqlite3.Row | None:
        return cast(
            "sqlite3.Row | None", conn.execute(f"SELECT * FROM {_TABLES[kind]} WHERE name = ?", (name,)).fetchone()
        )

    def _flat_facts(self, conn: sqlite3.Connection, kind: SecurableKind, name: str, owner: str | None) -> FlatFacts:
        principal = current_principal()
        granted = frozenset(
            Privilege(r[0])
            for r in conn.execute(
                "SELECT privilege FROM flat_grants WHERE kind = ? AND name = ? AND principal = ?",
                (kind.value, name, principal),
            )
        )
        return FlatFacts(owner=owner, granted=granted, admin=self._is_admin(conn, principal))

    def _require_flat(self, conn: sqlite3.Connection, kind: SecurableKind, name: str, privilege: Privilege) -> None:
        owner = None
        if kind is not SecurableKind.METASTORE:
            row = self._flat_row(conn, kind, name)
            owner = row["owner"] if row is not None else None
        principal = current_principal()
        if not holds_flat(principal, privilege, kind, self._flat_facts(conn, kind, name, owner)):
            where = "the metastore" if kind is SecurableKind.METASTORE else f"{kind.label} {name}"
            raise PermissionDenied(principal, privilege.value, where)

    def _sees_flat(self, conn: sqlite3.Connection, kind: SecurableKind, row: sqlite3.Row) -> bool:
        facts = self._flat_facts(conn, kind, row["name"], row["owner"])
        return facts.admin or facts.owner == current_principal() or bool(facts.granted)

    def _visible_flat_row(self, conn: sqlite3.Connection, kind: SecurableKind, name: str) -> sqlite3.Row:
        """The row of a credential or location the caller may see; NotFound otherwise (as if it were
        not there: names of others' credentials are not for everyone)."""
        row = self._flat_row(conn, kind, name)
        if row is None or not self._sees_flat(conn, kind, row):
            raise NotFound(f"{kind.label} {name} does not exist")
        return row

    def _require_flat_owner(self, conn: sqlite3.Connection, kind: SecurableKind, row: sqlite3.Row) -> None:
        principal = current_principal()
        if row["owner"] != principal and not self._is_admin(conn, principal):
            raise PermissionDenied(principal, "OWNERSHIP", f"{kind.label} {row['name']}")


def _contains(outer: str, inner: str) -> bool:
    """Containment of a stored location in another, both resolved the way they are stored now (a
    location stored by an older version may be spelled differently: compare resolved forms)."""
    return location_contains(_resolved(outer), _resolved(inner))


def _stored_contains(outer: str, inner: str) -> bool:
    """Containment of two stored locations, compared as they are stored (a spelling too old to
    parse contains nothing)."""
    try:
        return location_contains(outer, inner)
    except ValueError:
        return False


def _overlaps(a: str, b: str) -> bool:
    return locations_overlap(_resolved(a), _resolved(b))


def _resolved(location: str) -> str:
    try:
        return st.resolve_location(location)
    except ValueError:
        return location


def check_store_options_of(options: dict[str, Any], what: str, url: str | None = None) -> None:
    """Options the store (of ``url``, or any store) would refuse when first read, refused now, in one
    line naming ``what`` (a credential, a location, a volume; never the values: they may be secrets).

    Example:
        >>> check_store_options_of({"kee": "AKIA"}, "volume main.ml.raw", "s3://b/raw")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: volume main.ml.raw: ...kee...
    """
    from uc_jupyter.storage.stores import check_store_options  # obstore's option rules, not imported before

    try:
        check_store_options(options, url)
    except ValueError as refused:
        said = str(refused)
        for value in _strings(options):  # a message that quotes a value (a connection string) keeps it out
            said = said.replace(value, "***")
        raise ValueError(f"{what}: {said}") from None


def _strings(value: object) -> list[str]:
    """Every string of three or more characters inside ``value`` (options nest dicts and lists)."""
    if isinstance(value, str):
        return [value] if len(value) >= 3 else []
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []
