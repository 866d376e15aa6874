"""What a rank pool reports about itself: ``RankPool.status()``, the JupyterLab status item's files.

Plain frozen records, apart from the pool (the status files of :mod:`uc_jupyter.distributed.board`
are written from them without importing the pool).

Example:
    >>> PoolStatus(2, "idle", "cpu", "gloo", 29500, (RankInfo(0, 41, "cpu", True),)).ranks[0].node
    '127.0.0.1'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["PoolStatus", "RankInfo"]


@dataclass(frozen=True)
class RankInfo:
    """One rank: its process (on its node), device, whether it runs, and where (host address, node rank)."""

    rank: int
    pid: int
    device: str
    alive: bool
    node: str = "127.0.0.1"
    node_rank: int = 0


@dataclass(frozen=True)
class PoolStatus:
    """What ``RankPool.status()`` reports (and the JupyterLab status item shows); ``cluster`` is the
    Ray cluster's address the ranks run on, None for ranks on this machine."""

    size: int
    state: Literal["stopped", "idle", "busy"]
    devices: str
    backend: str
    master_port: int | None
    ranks: tuple[RankInfo, ...]
    cluster: str | None = None
