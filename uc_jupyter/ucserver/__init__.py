"""``uc-jupyter serve``: a Unity-Catalog-compatible REST server over the embedded catalog.

Modules: :mod:`~uc_jupyter.ucserver.auth` (bearer tokens, in front of routing),
:mod:`~uc_jupyter.ucserver.app` (the ASGI application: bodies, errors, principals),
:mod:`~uc_jupyter.ucserver.routes_data` (catalogs, schemas, volumes, tables),
:mod:`~uc_jupyter.ucserver.routes_governance` (permissions),
:mod:`~uc_jupyter.ucserver.routes_storage` (storage credentials, external locations),
:mod:`~uc_jupyter.ucserver.routes_vending` (temporary table, volume and path credentials),
:mod:`~uc_jupyter.ucserver.routes_workspace` (table credentials where a Databricks workspace serves them,
under ``/api/2.0/unity-catalog``, for clients built on databricks-sdk),
:mod:`~uc_jupyter.ucserver.vendor` (makes those credentials: scoped IAM roles or STS sessions, and
their reaper), :mod:`~uc_jupyter.ucserver.routes_extensions` (``/uc-jupyter/...``: whoami and
principals, uc_jupyter's own routes beside the UC API) and
:mod:`~uc_jupyter.ucserver.serve` (the command: bind, print the URL, stop on SIGTERM/Ctrl-C).
Apart from :mod:`uc_jupyter.server`, which is the Jupyter server extension.

Example:
    >>> from uc_jupyter.ucserver import PREFIX
    >>> PREFIX
    '/api/2.1/unity-catalog'
"""

from __future__ import annotations

__all__ = ["PREFIX"]

PREFIX = "/api/2.1/unity-catalog"
