"""Pool status records as a live pool of this process publishes them (see
:mod:`uc_jupyter.distributed.board`), for the tests of the board, the status bar's server route and the
attacks on malformed status files: one shape, kept in step with the board's validation.

Example:
    >>> from uc_jupyter.distributed.board import parse_board
    >>> import json
    >>> parse_board(json.dumps(pool_record("k-1")).encode())["kernel_id"]
    'k-1'
"""

from __future__ import annotations

import os
import time

__all__ = ["pool_record"]


def pool_record(kernel: str | None, *, pid: int | None = None, size: int = 1, state: str = "idle") -> dict[str, object]:
    """A valid status record of a one-rank CPU pool of process ``pid`` (default: this one) in ``kernel``."""
    owner = os.getpid() if pid is None else pid
    return {
        "kernel_id": kernel,
        "pid": owner,
        "pool": 1,
        "updated": time.time(),
        "size": size,
        "state": state,
        "devices": "cpu",
        "backend": "gloo",
        "master_port": 29500,
        "ranks": [{"rank": 0, "pid": owner, "device": "cpu", "alive": True, "node": "127.0.0.1", "node_rank": 0}],
        "cluster": None,
    }
