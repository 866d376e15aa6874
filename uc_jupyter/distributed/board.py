"""Where running rank pools say how they are: one small JSON file per kernel, for the JupyterLab
status item (the Jupyter server reads them; kernels are other processes).

A pool writes ``$UC_JUPYTER_HOME/pools/<kernel id or pid-N>.<pool number>.json`` when it starts, turns
busy or idle, and removes it when it shuts down. A file whose kernel process is gone is stale and skipped (and
removed) by :func:`read_boards`. Writes are atomic (temporary file, then rename), files are 0600.

The Jupyter server reads these files for everyone's status bar, so a file it cannot trust must never
make it fail: :func:`read_boards` skips (and leaves alone) anything that is not a regular file of at
most :data:`MAX_BOARD_BYTES` holding a record of the right shape (:func:`parse_board`): symlinks,
FIFOs, folders, unreadable or oversized files, JSON that is not an object, fields of the wrong type,
pids that are not one process's.

Example:
    >>> from uc_jupyter.distributed.status import PoolStatus
    >>> publish(1, PoolStatus(2, "idle", "cpu", "gloo", 29500, ()))     # doctest: +SKIP
    >>> [b["state"] for b in read_boards()]                              # doctest: +SKIP
    ['idle']
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import stat
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from uc_jupyter.config import settings
from uc_jupyter.distributed.status import PoolStatus
from uc_jupyter.processes import alive

__all__ = [
    "MAX_BOARDS",
    "MAX_BOARD_BYTES",
    "board_path",
    "kernel_id",
    "parse_board",
    "publish",
    "read_boards",
    "withdraw",
]

MAX_BOARD_BYTES = 256 * 1024  # a 2,000-rank pool's record is about 150 kB
MAX_BOARDS = 1000  # files looked at per listing: a folder flooded with files cannot stall the server
_PID_MAX = 2**22  # the largest pid Linux hands out (/proc/sys/kernel/pid_max can be at most this)


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
        # A fresh, exclusively created temporary file (0600): a name planted in the folder is never followed.
        fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w") as file:
                file.write(json.dumps(record))
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise


def withdraw(pool: int) -> None:
    """Remove the status of this process's pool ``pool`` (it shut down)."""
    with contextlib.suppress(OSError):
        board_path(pool).unlink(missing_ok=True)


def read_boards(root: Path | None = None) -> list[dict[str, Any]]:
    """Every live kernel's pool status, in file name order; stale files are removed, malformed ones skipped.

    Never raises for what is in the folder (see the module docs); a missing or unreadable folder reads
    as no pools.
    """
    folder = (root or settings().home) / "pools"
    try:
        directory = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return []
    try:
        names = sorted(n for n in os.listdir(directory) if n.endswith(".json") and not n.startswith("."))
        boards = []
        for name in names[:MAX_BOARDS]:
            record = parse_board(_read_small(directory, name))
            if record is None:
                continue  # not a status file we wrote: left alone, never listed
            if not alive(record["pid"]):
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=directory)
                continue
            boards.append(record)
        return boards
    except OSError:
        return []
    finally:
        os.close(directory)


def parse_board(data: bytes | None) -> dict[str, Any] | None:
    """The status record in ``data`` (a file's bytes), with exactly the fields a pool writes, or None
    when it is not one: not UTF-8 JSON, not an object, a field missing or of the wrong type.

    Example:
        >>> parse_board(b'{"pid": "1"}') is None
        True
        >>> record = {"kernel_id": None, "pid": 42, "pool": 1, "updated": 1.5, "size": 1, "state": "idle",
        ...           "devices": "cpu", "backend": "gloo", "master_port": 29500,
        ...           "ranks": [{"rank": 0, "pid": 43, "device": "cpu", "alive": True, "node": "10.0.0.5",
        ...                      "node_rank": 0}], "cluster": None, "extra": "dropped"}
        >>> sorted(parse_board(json.dumps(record).encode()))[:3]
        ['backend', 'cluster', 'devices']
    """
    if data is None:
        return None
    try:
        record = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not _conforms(record, _FIELDS):
        return None
    board = {name: record[name] for name in _FIELDS}
    board["ranks"] = [{name: rank[name] for name in _RANK_FIELDS} for rank in record["ranks"]]
    return board


def _read_small(directory: int, name: str) -> bytes | None:
    """The bytes of regular file ``name`` in ``directory`` if it has at most MAX_BOARD_BYTES, else None.
    Symlinks are not followed, and opening a FIFO or a device neither blocks nor reads it."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=directory)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_BOARD_BYTES:
            return None
        chunks, size = [], 0
        while size <= MAX_BOARD_BYTES and (chunk := os.read(fd, MAX_BOARD_BYTES + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks) if size <= MAX_BOARD_BYTES else None  # it grew since fstat: not trusted
    except OSError:
        return None
    finally:
        os.close(fd)


def _conforms(value: object, fields: dict[str, Callable[[object], bool]]) -> bool:
    return isinstance(value, dict) and all(name in value and check(value[name]) for name, check in fields.items())


def _int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _str(value: object) -> bool:
    return isinstance(value, str)


def _pid(value: object) -> bool:
    """One process's pid: os.kill takes 0 and negative numbers as process groups, or as every process."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value <= _PID_MAX


def _time(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _size(value: object) -> bool:
    return _int(value) and isinstance(value, int) and value >= 1


def _optional(check: Callable[[object], bool]) -> Callable[[object], bool]:
    return lambda value: value is None or check(value)


_RANK_FIELDS: dict[str, Callable[[object], bool]] = {
    "rank": _int,
    "pid": _pid,
    "device": _str,
    "alive": lambda value: isinstance(value, bool),
    "node": _str,
    "node_rank": _int,
}
_FIELDS: dict[str, Callable[[object], bool]] = {
    "kernel_id": _optional(_str),
    "pid": _pid,
    "pool": _int,
    "updated": _time,
    "size": _size,
    "state": _str,
    "devices": _str,
    "backend": _str,
    "master_port": _optional(_int),
    "ranks": lambda value: isinstance(value, list) and all(_conforms(rank, _RANK_FIELDS) for rank in value),
    "cluster": _optional(_str),
}
