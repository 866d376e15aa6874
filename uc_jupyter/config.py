"""Settings read from the environment, each time they are asked for (tests and kernels may change them).

- ``UC_JUPYTER_HOME``: where the embedded catalog keeps its metastore, managed storage and cache
  (default ``~/.uc_jupyter``).
- ``UC_JUPYTER_PRINCIPAL``: who the caller is (default: the OS user).
- ``UC_JUPYTER_SPARK_REMOTE``: an ``sc://host:port`` Spark Connect URL (default: a local server).
- ``UC_JUPYTER_SPARK_IDLE_TIMEOUT``: how long the local Spark Connect server stays up with no client
  (default 30 minutes; read by :mod:`uc_jupyter.tables.spark_server`).
- ``UC_JUPYTER_VERBOSE``: ``1`` shows uc_jupyter's own frames in rank errors and pyspark's
  client-side logs (read by :func:`uc_jupyter.errors.verbose`).
- ``UC_JUPYTER_CATALOG_URL`` and ``UC_JUPYTER_TOKEN``: a Unity Catalog server (``uc-jupyter serve``, UC
  OSS; with or without ``/api/2.1/unity-catalog``) and the bearer token to call it with; when set,
  ``get_catalog()`` is a REST client for it instead of the embedded catalog.
- ``DATABRICKS_HOST`` and ``DATABRICKS_TOKEN``: the same for a Databricks workspace (used when
  ``UC_JUPYTER_CATALOG_URL`` is not set).
- ``UC_JUPYTER_CACHE_DIR``: the file cache's folder when a dataset does not give ``cache_dir``
  (default ``$UC_JUPYTER_HOME/cache``). A machine's own setting: ranks on Ray nodes keep theirs (a pool
  does not send the kernel's), so each node has one cache that its ranks share.
- ``UC_JUPYTER_CACHE_MAX_BYTES`` and ``UC_JUPYTER_CACHE_MIN_FREE_BYTES``: the file cache's budget and
  free-disk floor when a dataset does not give ``cache_max_bytes`` / ``min_free_bytes`` (defaults: half
  the disk's free space, and 10% of the disk but at most 5 GiB); a machine's admin sets them once for
  every notebook on a shared disk.

Example:
    >>> import os
    >>> os.environ["UC_JUPYTER_PRINCIPAL"] = "alice"
    >>> settings().principal
    'alice'
"""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

__all__ = ["Settings", "settings"]


@dataclass(frozen=True)
class Settings:
    home: Path
    principal: str
    spark_remote: str | None
    catalog_url: str | None = None
    token: str | None = field(default=None, repr=False)
    databricks_host: str | None = None
    databricks_token: str | None = field(default=None, repr=False)
    cache_max_bytes: int | None = None
    cache_min_free_bytes: int | None = None
    cache_dir: Path | None = None
    spark_connect_timeout: float = 30.0  # seconds a remote Spark Connect server has to answer first

    def remote_catalog(self) -> tuple[str, str, Literal["uc", "databricks"]] | None:
        """The catalog server to use as (url, token, dialect), None for the embedded catalog; a server
        without its token is a one-line CatalogError (working on the embedded catalog instead would
        quietly give other data).

        Example:
            >>> Settings(Path("/h"), "me", None, "http://127.0.0.1:8080", "ucj_x").remote_catalog()
            ('http://127.0.0.1:8080', 'ucj_x', 'uc')
        """
        from uc_jupyter.errors import CatalogError

        if self.catalog_url:
            if not self.token:
                raise CatalogError(
                    f"UC_JUPYTER_CATALOG_URL is {self.catalog_url} but UC_JUPYTER_TOKEN is not set: set it to a "
                    "token of yours (uc-jupyter token create PRINCIPAL, run by an admin on the server)"
                )
            return self.catalog_url, self.token, "uc"
        if self.databricks_host:
            if not self.databricks_token:
                raise CatalogError(
                    f"DATABRICKS_HOST is {self.databricks_host} but DATABRICKS_TOKEN is not set: set it to a "
                    "personal access token of that workspace, or unset DATABRICKS_HOST for the embedded catalog"
                )
            return self.databricks_host, self.databricks_token, "databricks"
        return None


def settings() -> Settings:
    """The current settings from the environment."""
    home = os.environ.get("UC_JUPYTER_HOME") or "~/.uc_jupyter"
    principal = os.environ.get("UC_JUPYTER_PRINCIPAL") or _os_user()
    return Settings(
        home=Path(home).expanduser().resolve(),
        principal=principal,
        spark_remote=os.environ.get("UC_JUPYTER_SPARK_REMOTE") or None,
        catalog_url=os.environ.get("UC_JUPYTER_CATALOG_URL") or None,
        token=os.environ.get("UC_JUPYTER_TOKEN") or None,
        databricks_host=os.environ.get("DATABRICKS_HOST") or None,
        databricks_token=os.environ.get("DATABRICKS_TOKEN") or None,
        cache_max_bytes=_byte_count("UC_JUPYTER_CACHE_MAX_BYTES", least=1),
        cache_min_free_bytes=_byte_count("UC_JUPYTER_CACHE_MIN_FREE_BYTES", least=0),
        cache_dir=Path(cache).expanduser().resolve() if (cache := os.environ.get("UC_JUPYTER_CACHE_DIR")) else None,
        spark_connect_timeout=_seconds("UC_JUPYTER_SPARK_CONNECT_TIMEOUT", default=30.0),
    )


def _byte_count(variable: str, *, least: int) -> int | None:
    """A whole number of bytes from ``variable`` (None when unset or empty); anything else is a one-line
    ValueError naming the variable, never a silent default."""
    raw = os.environ.get(variable, "").strip()
    if not raw:
        return None
    try:
        value = int(raw.replace("_", ""))
    except ValueError:
        value = least - 1
    if value < least:
        raise ValueError(f"invalid {variable}={raw!r}: give a whole number of bytes ({least} or more), or unset it")
    return value


def _seconds(variable: str, *, default: float) -> float:
    """A number of seconds above 0 from ``variable`` (``default`` when unset or empty); anything else
    is a one-line ValueError naming the variable."""
    raw = os.environ.get(variable, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):
        raise ValueError(f"invalid {variable}={raw!r}: give a number of seconds above 0, or unset it")
    return value


def _os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (some containers): fall back to the uid
        return f"uid{os.getuid()}"
