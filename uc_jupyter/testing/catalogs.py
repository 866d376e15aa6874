"""Catalog set-ups that tests, benchmarks and tutorials share.

Example:
    >>> import tempfile
    >>> from uc_jupyter.catalog.embedded.local import LocalCatalog
    >>> cat = LocalCatalog(tempfile.mkdtemp())
    >>> external_location(cat, tempfile.mkdtemp()).credential_name is None
    True
"""

from __future__ import annotations

import hashlib
from typing import Any

from uc_jupyter.catalog import Catalog, ExternalLocationInfo
from uc_jupyter.storage.urls import resolve_location

__all__ = ["external_location"]


def external_location(
    catalog: Catalog, url: str, storage_options: dict[str, Any] | None = None, *, name: str | None = None
) -> ExternalLocationInfo:
    """Make ``url`` a place external tables and volumes may be created in: as the current principal
    (an admin), create a storage credential holding ``storage_options`` (when given) and an external
    location over ``url`` bound to it. Names default to a digest of the URL."""
    name = name or "loc_" + hashlib.sha256(resolve_location(url).encode()).hexdigest()[:10]
    credential = None
    if storage_options:
        credential = catalog.create_storage_credential(f"{name}_credential", storage_options).name
    return catalog.create_external_location(name, url, credential)
