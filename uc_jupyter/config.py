"""Settings read from the environment, each time they are asked for (tests and kernels may change them).

- ``UC_JUPYTER_HOME``: where the embedded catalog keeps its metastore, managed storage and cache
  (default ``~/.uc_jupyter``).
- ``UC_JUPYTER_PRINCIPAL``: who the caller is (default: the OS user).
- ``UC_JUPYTER_SPARK_REMOTE``: an ``sc://host:port`` Spark Connect URL (default: a local server).
- ``UC_JUPYTER_SPARK_IDLE_TIMEOUT``: how long the local Spark Connect server stays up with no client
  (default 30 minutes; read by :mod:`uc_jupyter.tables.spark_server`).
- ``UC_JUPYTER_VERBOSE``: ``1`` shows uc_jupyter's own frames in rank errors (read by
  :mod:`uc_jupyter.distributed.errors`).

Example:
    >>> import os
    >>> os.environ["UC_JUPYTER_PRINCIPAL"] = "alice"
    >>> settings().principal
    'alice'
"""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Settings", "settings"]


@dataclass(frozen=True)
class Settings:
    home: Path
    principal: str
    spark_remote: str | None


def settings() -> Settings:
    """The current settings from the environment."""
    home = os.environ.get("UC_JUPYTER_HOME") or "~/.uc_jupyter"
    principal = os.environ.get("UC_JUPYTER_PRINCIPAL") or _os_user()
    return Settings(
        home=Path(home).expanduser().resolve(),
        principal=principal,
        spark_remote=os.environ.get("UC_JUPYTER_SPARK_REMOTE") or None,
    )


def _os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (some containers): fall back to the uid
        return f"uid{os.getuid()}"
