"""What a rank pool reports about itself: ``RankPool.status()``, the JupyterLab status item's files.

Plain frozen records, apart from the pool (the status files of :mod:`uc_jupyter.distributed.board`
are written from them without importing the pool).

Example:
    >>> ranks = (RankInfo(0, 41, "cpu", True), RankInfo(1, 42, "cpu", True))
    >>> status = PoolStatus(2, "idle", "cpu", "gloo", 29500, ranks)
    >>> status.ranks[0].node
    '127.0.0.1'
    >>> print(status.text())
    2 ranks, idle, cpu with gloo, port 29500
      rank 0: pid 41 on 127.0.0.1, cpu
      rank 1: pid 42 on 127.0.0.1, cpu
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

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

    def text(self) -> str:
        """The status as a person reads it: the pool, then a line per rank (what ``%uc_distributed
        --status`` shows in a notebook)."""
        if self.state == "stopped":
            return f"{self.size} ranks, stopped (the next call starts them)"
        where = f" on Ray at {self.cluster}" if self.cluster else ""
        port = f", port {self.master_port}" if self.master_port is not None else ""
        lines = [f"{self.size} ranks, {self.state}, {self.devices} with {self.backend}{where}{port}"]
        for rank in self.ranks:
            gone = "" if rank.alive else ", exited"
            lines.append(f"  rank {rank.rank}: pid {rank.pid} on {rank.node}, {rank.device}{gone}")
        return "\n".join(lines)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.text())
