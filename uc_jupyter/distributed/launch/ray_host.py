"""The host of a Ray node's ranks: the small actor that starts them there and relays their channels.

The kernel creates one ``RankHost`` actor per node, in that node's bundle of the pool's placement
group, holding the resources of all the node's ranks (so Ray gives it the node's GPUs of the pool, and
its ranks see them). For each rank the actor starts the very process a local pool starts
(:func:`uc_jupyter.distributed.launch.local.start_rank_process`: the supervisor, then the rank), so
output capture, interrupts and the end of each rank's whole tree work the same on every node. The
channels stay socket pairs on the node; the actor relays them as pickled bytes through actor calls
(``take`` long-polls what the node's ranks said, ``send`` passes a message on to one), so a pool needs
no port of its own between the kernel and the nodes and works through Ray Client. One actor per node,
not per rank: a Ray worker process costs about a second of CPU to start, and one long-poll per node
is also the node's liveness signal.

Should the actor die (killed by the kernel, its node lost), each rank's supervisor sees itself
re-parented and ends the rank's tree.

Example (on a connected Ray cluster):
    >>> host = RayRankHost.remote()                                    # doctest: +SKIP
    >>> ray.get(host.describe.remote(want_port=True)).ip               # doctest: +SKIP
    '10.0.0.5'
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import platform
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import ray

from uc_jupyter.distributed.launch.local import RankProcess, start_rank_process
from uc_jupyter.distributed.protocol import Stop, encode
from uc_jupyter.distributed.stuck import DUMP_SIGNAL
from uc_jupyter.processes import alive, free_port

__all__ = ["NodeFacts", "RankHost", "RayRankHost", "Relayed", "versions"]

_MOST_PER_TAKE = 1000  # messages one take returns at most: a flood of output still comes in pieces
_MOST_BYTES_PER_TAKE = 4 << 20  # and bytes (past the first message): a take travels well within the liveness bound
_LOGS_PREFIX = "uc-jupyter-node-ranks-"  # + the host's pid: a killed host's logs are found and removed


@dataclass(frozen=True)
class NodeFacts:
    """What a node's rank host says about the node before its ranks start."""

    node_id: str
    ip: str
    gpu_ids: tuple[str, ...]  # the node's GPUs Ray gave this pool (its ranks', in local-rank order)
    versions: dict[str, str]
    port: int | None  # a free port there, when asked (rank 0's node: the rendezvous)
    gcs_address: str


@dataclass(frozen=True)
class Relayed:
    """The end of the relay: the rank's process ended this way (None: not known)."""

    returncode: int | None


def versions() -> dict[str, str]:
    """The versions a rank's Python must share with the kernel's: Python (major.minor), torch, uc_jupyter."""
    found = {"Python": ".".join(platform.python_version_tuple()[:2])}
    for package in ("torch", "uc_jupyter"):
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            found[package] = "not installed"
    return found


class RankHost:
    """The host of one node's ranks (the actor's class; Ray runs it as ``RayRankHost``, one per node)."""

    def __init__(self) -> None:
        self._ranks: dict[int, RankProcess] = {}
        self._outbox: queue.Queue[tuple[int, bytes | Relayed]] = queue.Queue()
        _remove_dead_hosts_logs()
        self._logs = Path(tempfile.mkdtemp(prefix=f"{_LOGS_PREFIX}{os.getpid()}-"))

    @ray.method(concurrency_group="control")
    def describe(self, want_port: bool) -> NodeFacts:
        context = ray.get_runtime_context()
        return NodeFacts(
            node_id=context.get_node_id(),
            ip=ray.util.get_node_ip_address(),  # type: ignore[no-untyped-call]
            gpu_ids=tuple(str(g) for g in ray.get_gpu_ids()),
            versions=versions(),
            port=free_port() if want_port else None,
            gcs_address=context.gcs_address,
        )

    def start(self, environments: dict[int, dict[str, str]]) -> dict[int, int]:
        """Start each rank (rank -> its environment on top of the node's); rank -> its supervisor's pid.
        The node's GPUs of this pool (Ray's ``CUDA_VISIBLE_DEVICES`` for this actor) pass on to them."""
        for rank, environment in environments.items():
            process = start_rank_process(rank, environment, self._logs)
            self._ranks[rank] = process
            threading.Thread(target=self._relay, args=(process,), name=f"uc-jupyter-relay-{rank}", daemon=True).start()
        return {rank: process.process.pid for rank, process in self._ranks.items()}

    @ray.method(concurrency_group="relay")
    def take(self, wait: float) -> list[tuple[int, bytes | Relayed]]:
        """What the node's ranks said since the last take, as (rank, pickled message), then (rank,
        :class:`Relayed`) once a rank ended; waits up to ``wait`` seconds for the first (an empty list:
        all still running, none said anything)."""
        try:
            items = [self._outbox.get(timeout=wait)]
        except queue.Empty:
            return []
        size = _size(items[0][1])
        while len(items) < _MOST_PER_TAKE and size < _MOST_BYTES_PER_TAKE:
            try:
                items.append(self._outbox.get_nowait())
            except queue.Empty:
                break
            size += _size(items[-1][1])
        return items

    def send(self, rank: int, data: bytes) -> bool:
        """Pass a pickled message on to ``rank``; False when its channel is closed."""
        try:
            self._rank(rank).channel.send_bytes(data)
        except OSError:
            return False
        return True

    @ray.method(concurrency_group="control")
    def signal(self, rank: int, signum: int) -> None:
        """SIGINT interrupts the rank's call; SIGTERM ends the rank and its tree; the stack dump signal
        has it write its stacks to its log."""
        process = self._rank(rank)
        if signum == signal.SIGTERM:
            process.terminate()
        elif signum == DUMP_SIGNAL:
            process.dump_stacks()
        else:
            process.interrupt()

    @ray.method(concurrency_group="control")
    def log_tail(self, rank: int, lines: int = 15) -> str:
        process = self._ranks.get(rank)
        return process.log_tail(lines) if process is not None else ""

    @ray.method(concurrency_group="control")
    def stop(self, timeout: float) -> None:
        """Ask every rank to leave, wait up to ``timeout`` seconds, then end their trees; the logs go too."""
        for process in self._ranks.values():
            with contextlib.suppress(OSError):
                process.channel.send_bytes(encode(Stop()))
        deadline = time.monotonic() + timeout
        for process in self._ranks.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.process.wait(max(0.0, deadline - time.monotonic()))
        for process in self._ranks.values():
            process.terminate()
        for process in self._ranks.values():
            process.end(5.0)
            process.channel.close()
        shutil.rmtree(self._logs, ignore_errors=True)

    def _rank(self, rank: int) -> RankProcess:
        if rank not in self._ranks:
            raise RuntimeError(f"this node's host has not started rank {rank}")
        return self._ranks[rank]

    def _relay(self, process: RankProcess) -> None:
        while True:
            try:
                data = process.channel.recv_bytes()
            except (EOFError, OSError):
                break
            self._outbox.put((process.rank, data))
        try:
            returncode: int | None = process.process.wait(10.0)
        except subprocess.TimeoutExpired:
            returncode = None
        self._outbox.put((process.rank, Relayed(returncode)))


def _size(item: bytes | Relayed) -> int:
    return len(item) if isinstance(item, bytes) else 0


def _remove_dead_hosts_logs() -> None:
    """Remove the rank logs of hosts on this node that are gone (a host the kernel killed, after a
    rank died or a call ran out of time, never ran its own stop)."""
    for folder in Path(tempfile.gettempdir()).glob(f"{_LOGS_PREFIX}*"):
        pid = folder.name.removeprefix(_LOGS_PREFIX).split("-", 1)[0]
        if pid.isdigit() and not alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


# Three lanes, so a long-poll never holds up an interrupt: take (one at a time, in order), the
# control calls, and start/send in the default lane (one at a time; the kernel also waits for each
# send before the next, since Ray does not promise order across a threaded actor's lanes).
RayRankHost = ray.remote(concurrency_groups={"relay": 1, "control": 2})(RankHost)  # type: ignore[call-overload]
