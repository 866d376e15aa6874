"""The catalog's model, below both catalogs: the :class:`Catalog` protocol, the info dataclasses it
answers with, its errors and the principal calls are made as. Everything here is shown and imported
as :mod:`uc_jupyter.catalog`'s (the package's face); modules inside the catalog import it from here,
so the face's :func:`~uc_jupyter.catalog.get_catalog`, which chooses between the embedded catalog and
the REST client, sits above both.

Example:
    >>> from uc_jupyter.catalog.model import as_principal, current_principal
    >>> with as_principal("alice"):
    ...     current_principal()
    'alice'
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, BinaryIO, Literal, Protocol, runtime_checkable

from uc_jupyter.catalog.rules.names import InvalidName, SecurableName, VolumePath, parse_volume_path
from uc_jupyter.catalog.rules.privileges import Privilege, SecurableKind
from uc_jupyter.errors import CatalogError, EscapesVolume, NotFound

if TYPE_CHECKING:
    import fsspec
    import pandas as pd
    import pyarrow as pa

__all__ = [
    "AlreadyExists",
    "Catalog",
    "CatalogError",
    "CatalogInfo",
    "ColumnInfo",
    "CredentialInfo",
    "EscapesVolume",
    "ExternalLocationInfo",
    "GrantInfo",
    "InvalidName",
    "NoExternalLocation",
    "NotEmpty",
    "NotFound",
    "PermissionDenied",
    "PrincipalInfo",
    "Privilege",
    "ResolvedStoragePath",
    "ResolvedTable",
    "ResolvedVolumePath",
    "SchemaInfo",
    "SecurableKind",
    "StagingTableInfo",
    "TableInfo",
    "Unauthenticated",
    "VolumeInfo",
    "as_principal",
    "current_principal",
]

WriteMode = Literal["error", "overwrite", "append"]


class AlreadyExists(CatalogError):
    """An object of that name exists already."""

    __module__ = "uc_jupyter.catalog"


class PermissionDenied(CatalogError, PermissionError):
    """The principal lacks a privilege. Message: ``alice lacks USE SCHEMA on main.ml``."""

    __module__ = "uc_jupyter.catalog"

    def __init__(self, principal: str, privilege: str, securable: str) -> None:
        super().__init__(f"{principal} lacks {privilege} on {securable}")
        self.principal = principal
        self.privilege = privilege
        self.securable = securable

    def __reduce__(self) -> tuple[Any, ...]:  # keep the fields when crossing a process boundary
        return (type(self), (self.principal, self.privilege, self.securable))

    @classmethod
    def from_message(cls, message: str) -> PermissionDenied:
        """The error whose message is ``message`` (what a DataLoader worker's error comes back as).

        Example:
            >>> PermissionDenied.from_message("alice lacks READ VOLUME on main.ml.v").privilege
            'READ VOLUME'
        """
        said = re.fullmatch(r"(\S+) lacks (.+) on (\S+)", message)
        if cls is not PermissionDenied or said is None:  # a subclass says something else
            raise ValueError(f"not a {cls.__name__} message: {message!r}")
        return cls(*said.groups())


class NotEmpty(CatalogError):
    """A catalog, schema, credential or location still holds (or is used by) objects; drop them first
    or drop with ``cascade=True`` where that is offered."""

    __module__ = "uc_jupyter.catalog"


class NoExternalLocation(PermissionDenied):
    """No external location contains a storage URL: nothing may be registered or read there."""

    __module__ = "uc_jupyter.catalog"

    def __init__(self, principal: str, privilege: str, securable: str) -> None:
        super().__init__(principal, privilege, securable)
        self.args = (
            f"{principal} may not use {securable}: no external location contains it (needed: {privilege} on one); "
            "an admin creates one with `uc-jupyter catalog create location NAME --url URL`",
        )

    def __str__(self) -> str:
        return str(self.args[0])


class Unauthenticated(CatalogError):
    """A token was refused: unknown, malformed, expired, revoked or its principal dropped (HTTP 401,
    ``UNAUTHENTICATED``). The message is the same for each, so a caller cannot tell which."""

    __module__ = "uc_jupyter.catalog"

    MESSAGE = (
        "token refused (unknown, malformed, expired or revoked); "
        "ask a metastore admin for a new one: uc-jupyter token create PRINCIPAL"
    )

    def __init__(self, message: str = MESSAGE) -> None:
        super().__init__(message)


@dataclass(frozen=True)
class CatalogInfo:
    name: str
    owner: str
    created_at: datetime
    comment: str | None = None
    # Stored by the catalog that made the object; None where a catalog does not keep them. Never compared:
    # two descriptions of one object are equal whichever catalog gave them.
    id: str | None = field(default=None, compare=False)
    created_by: str | None = field(default=None, compare=False)
    updated_at: datetime | None = field(default=None, compare=False)
    updated_by: str | None = field(default=None, compare=False)

    @property
    def full_name(self) -> str:
        return self.name


@dataclass(frozen=True)
class SchemaInfo:
    catalog_name: str
    name: str
    owner: str
    created_at: datetime
    comment: str | None = None
    # Stored by the catalog that made the object; None where a catalog does not keep them. Never compared:
    # two descriptions of one object are equal whichever catalog gave them.
    id: str | None = field(default=None, compare=False)
    created_by: str | None = field(default=None, compare=False)
    updated_at: datetime | None = field(default=None, compare=False)
    updated_by: str | None = field(default=None, compare=False)

    @property
    def full_name(self) -> str:
        return str(SecurableName((self.catalog_name, self.name)))


@dataclass(frozen=True)
class ColumnInfo:
    name: str
    type_text: str
    nullable: bool = True


@dataclass(frozen=True)
class TableInfo:
    catalog_name: str
    schema_name: str
    name: str
    owner: str
    table_type: Literal["MANAGED", "EXTERNAL"]
    storage_location: str
    columns: tuple[ColumnInfo, ...]
    created_at: datetime
    data_source_format: str = "DELTA"
    comment: str | None = None
    # Stored by the catalog that made the object; None where a catalog does not keep them. Never compared:
    # two descriptions of one object are equal whichever catalog gave them.
    id: str | None = field(default=None, compare=False)
    created_by: str | None = field(default=None, compare=False)
    updated_at: datetime | None = field(default=None, compare=False)
    updated_by: str | None = field(default=None, compare=False)

    @property
    def full_name(self) -> str:
        return str(SecurableName((self.catalog_name, self.schema_name, self.name)))


@dataclass(frozen=True)
class StagingTableInfo:
    """A staging table: where its creator writes a new managed table's Delta files before registering
    it (:mod:`uc_jupyter.catalog.embedded.staging`); ``id`` becomes the table's id."""

    catalog_name: str
    schema_name: str
    name: str
    id: str
    staging_location: str
    owner: str
    created_at: datetime
    expires_at: datetime

    @property
    def full_name(self) -> str:
        return str(SecurableName((self.catalog_name, self.schema_name, self.name)))

    @property
    def table(self) -> TableInfo:
        """The managed table it becomes once registered, as far as it is known now (no columns yet)."""
        return TableInfo(
            catalog_name=self.catalog_name,
            schema_name=self.schema_name,
            name=self.name,
            owner=self.owner,
            table_type="MANAGED",
            storage_location=self.staging_location,
            columns=(),
            created_at=self.created_at,
            id=self.id,
        )


@dataclass(frozen=True)
class VolumeInfo:
    catalog_name: str
    schema_name: str
    name: str
    owner: str
    volume_type: Literal["MANAGED", "EXTERNAL"]
    storage_location: str
    created_at: datetime
    comment: str | None = None
    # Stored by the catalog that made the object; None where a catalog does not keep them. Never compared:
    # two descriptions of one object are equal whichever catalog gave them.
    id: str | None = field(default=None, compare=False)
    created_by: str | None = field(default=None, compare=False)
    updated_at: datetime | None = field(default=None, compare=False)
    updated_by: str | None = field(default=None, compare=False)

    @property
    def full_name(self) -> str:
        return str(SecurableName((self.catalog_name, self.schema_name, self.name)))

    @property
    def path(self) -> str:
        """The volume's ``/Volumes/<catalog>/<schema>/<volume>`` path."""
        return str(VolumePath(SecurableName((self.catalog_name, self.schema_name, self.name))))


@dataclass(frozen=True)
class CredentialInfo:
    """A storage credential: a named set of storage options (keys, tokens, endpoints) that only the
    catalog reads. ``option_names`` says which options it holds; their values are never returned."""

    name: str
    owner: str
    created_at: datetime
    option_names: tuple[str, ...] = ()
    comment: str | None = None
    # Stored by the catalog that made the object; None where a catalog does not keep them. Never compared:
    # two descriptions of one object are equal whichever catalog gave them.
    id: str | None = field(default=None, compare=False)
    created_by: str | None = field(default=None, compare=False)
    updated_at: datetime | None = field(default=None, compare=False)
    updated_by: str | None = field(default=None, compare=False)

    @property
    def full_name(self) -> str:
        return self.name


@dataclass(frozen=True)
class ExternalLocationInfo:
    """An external location: a storage URL prefix bound to a storage credential (None: the process's
    own environment, e.g. AWS_* variables or local file permissions), inside which external tables and
    volumes may be created by principals holding CREATE EXTERNAL TABLE / CREATE EXTERNAL VOLUME on it."""

    name: str
    url: str
    credential_name: str | None
    owner: str
    created_at: datetime
    comment: str | None = None
    # Stored by the catalog that made the object; None where a catalog does not keep them. Never compared:
    # two descriptions of one object are equal whichever catalog gave them.
    id: str | None = field(default=None, compare=False)
    created_by: str | None = field(default=None, compare=False)
    updated_at: datetime | None = field(default=None, compare=False)
    updated_by: str | None = field(default=None, compare=False)

    @property
    def full_name(self) -> str:
        return self.name


@dataclass(frozen=True)
class GrantInfo:
    securable: str
    securable_kind: SecurableKind
    principal: str
    privilege: Privilege


@dataclass(frozen=True)
class PrincipalInfo:
    name: str
    kind: Literal["user", "service_principal"]
    created_at: datetime
    admin: bool = False


@dataclass(frozen=True)
class ResolvedVolumePath:
    """Where a ``/Volumes/...`` path lives: its storage ``url`` and options, and the path on its fsspec
    filesystem ``fs`` (made on first use: gs:// and Azure volumes are read through object_store, and
    need no gcsfs or adlfs unless ``fs`` is asked for).

    Read the file with :meth:`open`, never ``fs.open(path)``: on a local volume the path was checked
    when it was resolved, and a symlink swapped in since would lead ``fs.open`` out of the volume,
    where :meth:`open` refuses it.

    Example:
        >>> r = get_catalog().resolve_volume_path("/Volumes/main/ml/images/labels.csv")  # doctest: +SKIP
        >>> with r.open() as f:                                                         # doctest: +SKIP
        ...     f.read(10)
    """

    volume_path: str
    volume: VolumeInfo
    path: str
    url: str
    storage_options: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    # When the storage_options stop working (vended credentials: RestCatalog); None: they do not expire.
    expires_at: datetime | None = field(default=None, compare=False)

    @functools.cached_property
    def fs(self) -> fsspec.AbstractFileSystem:
        """The fsspec filesystem of the volume's storage (ImportError naming the package it needs)."""
        from uc_jupyter.storage.urls import filesystem

        return filesystem(self.url, self.storage_options)[0]

    @property
    def relative(self) -> str:
        """The path below the volume's root (``""`` for the root itself)."""
        return parse_volume_path(self.volume_path).relative

    def open(self) -> BinaryIO:
        """The file resolved, open for reading (binary; close it, or use ``with``).

        On a local (``file://``) volume the file is reached from the volume's root one folder at a
        time, following no symbolic link (:mod:`uc_jupyter.storage.nofollow`), and must be a regular
        file: a symlink swapped in for it, or for a folder above it, after the resolve is refused in
        one line instead of followed out of the volume, and the bytes read are those of the file
        opened, whatever is put at its path afterwards. Other volumes are opened through :attr:`fs`.

        Raises:
            VolumeReadError: (local) the file is gone, or a symlink or not a regular file now.
            IsADirectoryError: the path is the volume itself.
        """
        relative = self.relative
        if not relative:
            raise IsADirectoryError(f"{self.volume_path} is a volume, not a file: resolve a file inside it")
        if not _is_local(self.url):
            return self.fs.open(self.path, "rb")  # type: ignore[no-any-return]
        volume = self.volume_path[: len(self.volume_path) - len(relative)].rstrip("/")
        return _open_from_root(self.volume.storage_location, relative, volume)


@dataclass(frozen=True)
class ResolvedStoragePath:
    """A storage URL inside an external location, after the READ FILES (or WRITE FILES) check.

    Read the file with :meth:`open` (on a local location it follows no symlink swapped in since the
    check, as :meth:`ResolvedVolumePath.open`).

    Example:
        >>> r = get_catalog().resolve_storage_path("s3://bucket/raw/2024/a.csv")  # doctest: +SKIP
        >>> with r.open() as f:                                                   # doctest: +SKIP
        ...     f.read(10)
    """

    url: str
    location: ExternalLocationInfo
    path: str
    storage_options: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    # When the storage_options stop working (vended credentials: RestCatalog); None: they do not expire.
    expires_at: datetime | None = field(default=None, compare=False)

    @functools.cached_property
    def fs(self) -> fsspec.AbstractFileSystem:
        """The fsspec filesystem of the URL, made on first use (ImportError naming the package it needs)."""
        from uc_jupyter.storage.urls import filesystem

        return filesystem(self.url, self.storage_options)[0]

    def open(self) -> BinaryIO:
        """The file checked, open for reading (binary); on a local location reached from the
        location's root without following any symbolic link (:meth:`ResolvedVolumePath.open`).

        Raises:
            VolumeReadError: (local) the file is gone, or a symlink or not a regular file now.
            IsADirectoryError: the URL is the location itself.
        """
        if not _is_local(self.url):
            return self.fs.open(self.path, "rb")  # type: ignore[no-any-return]
        from uc_jupyter.storage.locations import local_path_below
        from uc_jupyter.storage.urls import local_path

        relative = local_path_below(local_path(self.location.url), local_path(self.url))
        if not relative:  # the location itself ("": it is no file; None cannot be: the check contains it)
            raise IsADirectoryError(f"{self.url} is the external location {self.location.name}, not a file in it")
        return _open_from_root(self.location.url, relative, self.location.url.rstrip("/"))


def _is_local(url: str) -> bool:
    from uc_jupyter.storage.urls import is_local

    return is_local(url)


def _open_from_root(root: str, relative: str, where: str) -> BinaryIO:
    """``relative`` below the local location ``root`` (``where`` names the root in errors), walked to
    without following a symlink and checked to be a regular file, open for reading."""
    from uc_jupyter.storage.local_volume import LocalVolume
    from uc_jupyter.storage.urls import local_path

    files = LocalVolume(local_path(root), "", where, again="resolve the path again to read what it holds now")
    return os.fdopen(files.open(relative, None), "rb")


@dataclass(frozen=True)
class ResolvedTable:
    """Where a table's Delta files live, after the privilege check; open it with deltalake."""

    table: TableInfo
    storage_location: str
    storage_options: dict[str, str] = field(default_factory=dict, repr=False, compare=False)
    # When the storage_options stop working (vended credentials: RestCatalog); None: they do not expire.
    expires_at: datetime | None = field(default=None, compare=False)


@runtime_checkable
class Catalog(Protocol):
    """What every catalog backend offers. Names are strings like ``"main.ml.iris"``."""

    def current_principal(self) -> str: ...
    def as_principal(self, principal: str) -> contextlib.AbstractContextManager[str]: ...

    def create_catalog(self, name: str, *, comment: str | None = None) -> CatalogInfo: ...
    def create_schema(self, name: str, *, comment: str | None = None) -> SchemaInfo: ...
    def create_volume(
        self,
        name: str,
        storage_location: str | None = None,
        *,
        storage_options: dict[str, Any] | None = None,
        comment: str | None = None,
    ) -> VolumeInfo: ...
    def create_table(
        self,
        name: str,
        data: pa.Table | pd.DataFrame | None = None,
        mode: WriteMode = "error",
        *,
        storage_location: str | None = None,
        storage_options: dict[str, Any] | None = None,
        comment: str | None = None,
    ) -> TableInfo: ...
    def create_principal(self, name: str, kind: Literal["user", "service_principal"] = "user") -> PrincipalInfo: ...

    def drop_catalog(self, name: str, *, cascade: bool = False) -> None: ...
    def drop_schema(self, name: str, *, cascade: bool = False) -> None: ...
    def drop_table(self, name: str) -> None: ...
    def drop_volume(self, name: str) -> None: ...
    def drop_principal(self, name: str) -> None: ...

    def list_catalogs(self) -> list[CatalogInfo]: ...
    def list_schemas(self, catalog: str) -> list[SchemaInfo]: ...
    def list_tables(self, schema: str) -> list[TableInfo]: ...
    def list_volumes(self, schema: str) -> list[VolumeInfo]: ...
    def list_principals(self) -> list[PrincipalInfo]: ...
    def get_catalog_info(self, name: str) -> CatalogInfo: ...
    def get_schema(self, name: str) -> SchemaInfo: ...
    def get_table(self, name: str) -> TableInfo: ...
    def get_volume(self, name: str) -> VolumeInfo: ...

    # None leaves a field as it is; comment "" clears it. Renames are not offered (see catalog/updates.py).
    def update_catalog(self, name: str, *, comment: str | None = None, owner: str | None = None) -> CatalogInfo: ...
    def update_schema(self, name: str, *, comment: str | None = None, owner: str | None = None) -> SchemaInfo: ...
    def update_volume(self, name: str, *, comment: str | None = None, owner: str | None = None) -> VolumeInfo: ...

    def grant(
        self, securable: str, privilege: str | Privilege, principal: str, *, kind: str | SecurableKind | None = None
    ) -> None: ...
    def revoke(
        self, securable: str, privilege: str | Privilege, principal: str, *, kind: str | SecurableKind | None = None
    ) -> None: ...
    def show_grants(self, securable: str, *, kind: str | SecurableKind | None = None) -> list[GrantInfo]: ...

    def create_storage_credential(
        self, name: str, storage_options: dict[str, Any] | None = None, *, comment: str | None = None
    ) -> CredentialInfo: ...
    def get_storage_credential(self, name: str) -> CredentialInfo: ...
    def list_storage_credentials(self) -> list[CredentialInfo]: ...
    def drop_storage_credential(self, name: str) -> None: ...
    def create_external_location(
        self, name: str, url: str, credential: str | None = None, *, comment: str | None = None
    ) -> ExternalLocationInfo: ...
    def get_external_location(self, name: str) -> ExternalLocationInfo: ...
    def list_external_locations(self) -> list[ExternalLocationInfo]: ...
    def drop_external_location(self, name: str) -> None: ...

    def resolve_volume_path(self, path: str, *, write: bool = False) -> ResolvedVolumePath: ...
    def resolve_table(self, name: str, *, write: bool = False) -> ResolvedTable: ...
    def resolve_storage_path(self, url: str, *, write: bool = False) -> ResolvedStoragePath: ...

    # A managed table made by a writer outside the catalog (a Ray job): staged (CREATE TABLE checked), its
    # Delta files written at the staging location with the credentials resolve_staging_table gives, then
    # registered, or abandoned with its files. refresh_table: the columns read again after such a write.
    def create_staging_table(self, name: str) -> StagingTableInfo: ...
    def resolve_staging_table(self, staged: StagingTableInfo) -> ResolvedTable: ...
    def register_staged_table(
        self,
        name: str,
        staging_location: str,
        *,
        columns: Sequence[tuple[str, str | None]] | None = None,
        comment: str | None = None,
        staging_id: str | None = None,
    ) -> TableInfo: ...
    def abandon_staging_table(self, staging_id: str) -> None: ...
    def refresh_table(self, name: str) -> TableInfo: ...


# The principal override of `as_principal`, shared by every catalog object in this process.
_principal_override: contextvars.ContextVar[str | None] = contextvars.ContextVar("uc_jupyter_principal", default=None)


def current_principal() -> str:
    """The principal calls are made as: an ``as_principal`` override, else the configured one."""
    from uc_jupyter.config import settings

    return _principal_override.get() or settings().principal


@contextlib.contextmanager
def as_principal(principal: str) -> Iterator[str]:
    """Make catalog calls in this block (this thread or task) as ``principal``.

    Example:
        >>> with as_principal("alice"):
        ...     current_principal()
        'alice'
    """
    from uc_jupyter.catalog.rules.privileges import validate_principal

    token = _principal_override.set(validate_principal(principal))
    try:
        yield principal
    finally:
        _principal_override.reset(token)
