"""The catalog interface: every table and volume file is reached through one of these.

``get_catalog()`` returns the configured catalog: the embedded :class:`LocalCatalog` under
``$UC_JUPYTER_HOME``, or :class:`~uc_jupyter.catalog.rest.client.RestCatalog` for a Unity Catalog server
(``UC_JUPYTER_CATALOG_URL`` + ``UC_JUPYTER_TOKEN``, or ``DATABRICKS_HOST`` + ``DATABRICKS_TOKEN``); both
implement the :class:`Catalog` protocol. Every call is checked against the current principal's grants.

Example:
    >>> from uc_jupyter.catalog import get_catalog
    >>> cat = get_catalog()                                   # doctest: +SKIP
    >>> cat.create_catalog("main"); cat.create_schema("main.ml")  # doctest: +SKIP
    >>> with cat.as_principal("alice"):                        # doctest: +SKIP
    ...     cat.get_table("main.ml.iris")
    PermissionDenied: alice lacks USE CATALOG on main
"""

from __future__ import annotations

import dataclasses
import threading

from uc_jupyter.catalog.model import (
    AlreadyExists,
    Catalog,
    CatalogError,
    CatalogInfo,
    ColumnInfo,
    CredentialInfo,
    EscapesVolume,
    ExternalLocationInfo,
    GrantInfo,
    InvalidName,
    NoExternalLocation,
    NotEmpty,
    NotFound,
    PermissionDenied,
    PrincipalInfo,
    Privilege,
    ResolvedStoragePath,
    ResolvedTable,
    ResolvedVolumePath,
    SchemaInfo,
    SecurableKind,
    StagingTableInfo,
    TableInfo,
    Unauthenticated,
    VolumeInfo,
    as_principal,
    current_principal,
)

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
    "get_catalog",
]

_catalogs: dict[object, Catalog] = {}
_catalogs_lock = threading.Lock()


def get_catalog(*, url: str | None = None, token: str | None = None) -> Catalog:
    """The configured catalog, one object per configuration (``url``/``token`` replace
    ``UC_JUPYTER_CATALOG_URL``/``UC_JUPYTER_TOKEN``, as the CLI's ``--url``/``--token`` do):

    - ``UC_JUPYTER_CATALOG_URL`` (with ``UC_JUPYTER_TOKEN``): a :class:`~uc_jupyter.catalog.rest.client.RestCatalog`
      for that Unity Catalog server (``uc-jupyter serve``, UC OSS);
    - else ``DATABRICKS_HOST`` (with ``DATABRICKS_TOKEN``): one for that Databricks workspace;
    - else the embedded catalog under ``$UC_JUPYTER_HOME``.

    A server named without its token is a one-line :class:`CatalogError`: falling back to the embedded
    catalog would quietly work on other data.

    Example:
        >>> get_catalog().list_catalogs()  # doctest: +SKIP
        [CatalogInfo(name='main', owner='me', ...)]
    """
    from uc_jupyter.config import settings

    configured = settings()
    if url is not None or token is not None:
        configured = dataclasses.replace(
            configured, catalog_url=url or configured.catalog_url, token=token or configured.token
        )
        if not configured.catalog_url:
            raise CatalogError("a token was given without a catalog URL: give --url (or UC_JUPYTER_CATALOG_URL) too")
    remote = configured.remote_catalog()
    if remote is not None:
        url, token, dialect = remote
        with _catalogs_lock:
            key = ("rest", url, token, dialect)
            if key not in _catalogs:
                from uc_jupyter.catalog.rest.client import RestCatalog

                _catalogs[key] = RestCatalog(url, token, dialect=dialect)
            return _catalogs[key]
    from uc_jupyter.catalog.embedded.local import LocalCatalog

    with _catalogs_lock:
        if configured.home not in _catalogs:
            _catalogs[configured.home] = LocalCatalog(configured.home)
        return _catalogs[configured.home]
