"""Where running rank pools say how they are: one small JSON file per kernel, for the JupyterLab
status item (the Jupyter server reads them; kernels are other processes).

A pool writes ``$UC_JUPYTER_HOME/pools/<kernel id or pid-N>.<pool number>.json`` when it starts, turns
busy or idle, and removes it when it shuts down. A file whose kernel process is gone is stale and skipped (and
removed) by :func:`read_boards`. Writes are atomic (temporary file, then rename).

Example:
    >>> from uc_jupyter.distributed.pool import PoolStatus
    >>> publish(1, PoolStatus(2, "idle", "cpu", "gloo", 29500, ()))     # doctest: +SKIP
    >>> [b["state"] for b in read_boards()]                              # doctest: +SKIP
    ['idle']
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from uc_jupyter.config import settings
from uc_jupyter.processes import alive

if TYPE_CHECKING:
    from uc_jupyter.distributed.pool import PoolStatus

__all__ = ["board_path", "kernel_id", "publish", "read_boards", "withdraw"]


def kernel_id() -> str | None:
    """The Jupyter kernel id of this process (from its connection file), or None outside a kernel."""
    app = sys.modules.get("ipykernel.kernelapp")
    if app is None:
        return None
    instance = app.IPKernelApp.initialized() and app.IPKernelApp.instance()
    connection = getattr(instance, "connection_file", "") if instance else ""
    name = Path(str(connection)).stem  # kernel-<id>.json
    return name.removeprefix("kernel-") if name.startswith("kernel-") else None


def board_path(pool: int, kernel: str | None = None) -> Path:
    """The status file of this process's pool number ``pool`` (``kernel``: this process's kernel id)."""
    ident = kernel or kernel_id() or f"pid-{os.getpid()}"
    return settings().home / "pools" / f"{ident}.{pool}.json"


def publish(pool: int, status: PoolStatus) -> None:
    """Write the status of this process's pool ``pool`` (never raises: the status item is a convenience)."""
    with contextlib.suppress(OSError):
        kernel = kernel_id()  # looked up once: a pool publishes twice per call
        path = board_path(pool, kernel)
        path.parent.mkdir(parents=True, exist_ok=True)
        record = {"kernel_id": kernel, "pid": os.getpid(), "pool": pool, "updated": time.time(), **asdict(status)}
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        temporary.write_text(json.dumps(record))
        os.replace(temporary, path)


def withdraw(pool: int) -> None:
    """Remove the status of this process's pool ``pool`` (it shut down)."""
    with contextlib.suppress(OSError):
        board_path(pool).unlink(missing_ok=True)


def read_boards(root: Path | None = None) -> list[dict[str, Any]]:
    """Every live kernel's pool status, oldest kernel first; stale files are removed."""
    folder = (root or settings().home) / "pools"
    boards = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # being replaced right now, or not ours
        if not isinstance(record, dict) or not alive(int(record.get("pid", -1))):
            with contextlib.suppress(OSError):
                path.unlink()
            continue
        boards.append(record)
    return boards
