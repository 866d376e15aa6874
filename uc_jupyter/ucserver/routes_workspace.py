"""The routes a Databricks workspace serves outside ``/api/2.1/unity-catalog``, for clients written for one.

Databricks answers temporary table credentials under ``/api/2.0/unity-catalog``, and clients that speak
to a workspace through ``databricks-sdk`` ask there: ``ray.data.read_unity_catalog`` (through Ray's
``DatabricksUnityCatalog``) is one. Unity Catalog OSS serves the same request under 2.1. This module
mounts :func:`~uc_jupyter.ucserver.routes_vending.table_credentials` there too: one handler, so both
paths check the same grants (SELECT, and MODIFY for ``READ_WRITE``) and vend credentials scoped to the
one table, with the same answers for a missing or forbidden table.

Example:
    >>> import tempfile
    >>> from uc_jupyter.ucserver.vendor import Vendor
    >>> [WORKSPACE_PREFIX + r.path for r in routes(Vendor(tempfile.mkdtemp(), reaper=False))]
    ['/api/2.0/unity-catalog/temporary-table-credentials']
"""

from __future__ import annotations

from uc_jupyter.catalog.wire.storage import TEMPORARY_TABLE
from uc_jupyter.ucserver.routes_data import Route
from uc_jupyter.ucserver.routes_vending import table_credentials
from uc_jupyter.ucserver.vendor import Vendor

__all__ = ["WORKSPACE_PREFIX", "routes"]

WORKSPACE_PREFIX = "/api/2.0/unity-catalog"


def routes(vendor: Vendor) -> tuple[Route, ...]:
    """The workspace routes (paths under :data:`WORKSPACE_PREFIX`), vending with ``vendor``."""
    return (
        Route(
            "POST",
            "/temporary-table-credentials",
            lambda cat, call: table_credentials(vendor, cat, call),
            TEMPORARY_TABLE,
        ),
    )
