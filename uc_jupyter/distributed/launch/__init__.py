"""How a pool's ranks are placed: the one small interface between :class:`~uc_jupyter.distributed.pool.RankPool`
(calls, results, errors, interrupts, timeouts) and where the rank processes run.

A :class:`Placement` starts a :class:`Generation`: one start of ``n`` ranks, each behind a
:class:`RankHandle`, all posting what they say to one inbox as ``(rank, message)`` (output lines,
replies, :class:`Exited` when a rank is gone) while their telemetry goes straight to the pool's
collector. The pool never knows how a rank was started:

- :mod:`uc_jupyter.distributed.launch.local`: spawned processes on this machine (under a supervisor
  each), talking over a socket pair;
- :mod:`uc_jupyter.distributed.launch.ray`: the same processes started on Ray nodes by one small actor
  per node, the channels relayed through that actor, a lost node noticed by the pool's own liveness
  signal (the cluster's address, connection and free resources: :mod:`~uc_jupyter.distributed.launch.ray_cluster`).

Example:
    >>> placement = placement_for(None)                                     # doctest: +SKIP
    >>> generation = placement.start(2, None, "cpu", "gloo", "alice", Collector(), 60.0)  # doctest: +SKIP
    >>> generation.stop(timeout=5.0)                                        # doctest: +SKIP
"""

from __future__ import annotations

import abc
import queue
from dataclasses import dataclass

from uc_jupyter.distributed.protocol import Telemetry
from uc_jupyter.telemetry.collector import Collector

__all__ = ["Exited", "Generation", "Inbox", "Placement", "RankHandle", "deliver", "placement_for"]

Inbox = queue.Queue[tuple[int, object]]


@dataclass
class Exited:
    """Posted when a rank is gone: its process ended (``returncode``; None when unknown), or, with
    ``how``, the rank was lost another way (its node stopped answering) and ``how`` says so."""

    returncode: int | None
    how: str | None = None


class RankHandle(abc.ABC):
    """One rank as the pool sees it, wherever it runs."""

    rank: int
    device: str = "?"
    pid: int | None = None  # the rank's own process id (on its node), from its Ready message
    node: str = "127.0.0.1"  # the address of the host it runs on
    node_rank: int = 0

    @abc.abstractmethod
    def send(self, message: object) -> None:
        """Send ``message`` to the rank; OSError when it is gone."""

    @abc.abstractmethod
    def interrupt(self) -> None:
        """SIGINT to the rank: interrupts the call it runs."""

    @abc.abstractmethod
    def terminate(self) -> None:
        """End the rank and everything it started, now."""

    @abc.abstractmethod
    def returncode(self) -> int | None:
        """How the rank's process ended, None while it runs (or while that is not known here)."""

    @abc.abstractmethod
    def running(self) -> bool:
        """Whether the rank is still there, as far as the kernel knows."""

    @abc.abstractmethod
    def log_tail(self, lines: int = 15) -> str:
        """The last lines the rank wrote before its channel was up (or after it broke)."""

    def where(self) -> str:
        """Where the rank ran, for error messages: empty on this machine."""
        return ""

    @abc.abstractmethod
    def dump_stacks(self) -> None:
        """Ask the rank to write every thread's stack to its log (:mod:`~uc_jupyter.distributed.stuck`):
        where a rank that does not stop is stuck."""


class Generation(abc.ABC):
    """One start of a pool: its ranks, their inbox, the port they rendezvoused on."""

    cluster: str | None = None  # the Ray cluster's address, None on this machine

    def __init__(self, port: int, devices: str, backend: str) -> None:
        self.port = port
        self.devices = devices
        self.backend = backend
        self.ranks: list[RankHandle] = []
        self.inbox: Inbox = queue.Queue()

    @abc.abstractmethod
    def stop(self, timeout: float) -> None:
        """Ask every rank to leave, wait up to ``timeout`` seconds, then end what is left."""

    @abc.abstractmethod
    def kill(self) -> None:
        """End every rank with everything it started, now, and release what the generation holds."""


class Placement(abc.ABC):
    """Where ranks run: plans devices for ``n`` ranks and starts generations of them."""

    cluster: str | None = None

    @abc.abstractmethod
    def plan(self, n: int, devices: str, backend: str) -> tuple[str, str]:
        """(device kind, backend) for ``n`` ranks: checked against the GPUs where they will run."""

    @abc.abstractmethod
    def start(
        self,
        n: int,
        port: int | None,
        devices: str,
        backend: str,
        principal: str,
        collector: Collector,
        timeout: float,
    ) -> Generation:
        """Start ``n`` ranks (not yet awaited: each says Ready or StartFailed on the inbox). ``port``:
        the rendezvous port, None for a free one where rank 0 runs; ``timeout`` bounds what the
        placement itself waits for (a cluster's resources). Nothing is left running when it raises."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release what the placement holds (a cluster connection it made)."""


def deliver(rank: int, message: object, inbox: Inbox, collector: Collector) -> None:
    """Route one message from a rank: telemetry straight to the collector, the rest to the pool in order."""
    if isinstance(message, Telemetry):
        for sample in message.samples:
            collector.offer(sample)
    else:
        inbox.put((rank, message))


def placement_for(cluster: str | None, nodes: int | None = None, gpu_type: str | None = None) -> Placement:
    """The placement for ``cluster``: this machine for None, Ray for ``"ray"`` or ``"ray://host:port"``
    (``nodes``: exactly that many nodes, None for as few as fit; ``gpu_type``: GPU ranks only on
    nodes with that accelerator)."""
    if cluster is None:
        from uc_jupyter.distributed.launch.local import LocalPlacement

        return LocalPlacement()
    from uc_jupyter.distributed.launch.ray import RayPlacement

    return RayPlacement(cluster, nodes, gpu_type)
