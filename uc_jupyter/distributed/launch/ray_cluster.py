"""The Ray cluster as this kernel sees it: the address a pool means, the one connection its pools
share, and what the live nodes have free.

The connection is made by the first pool that needs it and ended when the last of them shuts down
(unless the user made it with ``ray.init``, which must then be to the cluster asked for); its exit
hook stops the pools before Ray's own exit hook disconnects. Free resources per node come from Ray's
state API, asked by a task on the cluster when this kernel is a Ray Client.

Example:
    >>> cluster_address("ray://10.0.0.5:10001")
    'ray://10.0.0.5:10001'
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import socket
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from uc_jupyter.distributed.errors import ClusterError
from uc_jupyter.errors import first_line
from uc_jupyter.processes import unreachable

__all__ = [
    "Node",
    "alive_nodes",
    "amounts",
    "cluster_address",
    "connection",
    "described",
    "fits",
    "free_line",
]

_CONNECT_WITHIN = 3.0  # seconds a cluster's address may take to accept a connection


def cluster_address(cluster: str) -> str:
    """The address ``cluster`` stands for: itself for ``ray://...``; for ``"ray"`` the address in
    ``UC_JUPYTER_RAY_ADDRESS``, else ``RAY_ADDRESS`` (a one-line ClusterError when neither is set).

    Example:
        >>> cluster_address("ray://10.0.0.5:10001")
        'ray://10.0.0.5:10001'
    """
    if cluster != "ray":
        return cluster
    address = os.environ.get("UC_JUPYTER_RAY_ADDRESS") or os.environ.get("RAY_ADDRESS")
    if not address:
        raise ClusterError(
            "cluster='ray' needs the cluster's address: set UC_JUPYTER_RAY_ADDRESS (or RAY_ADDRESS) to "
            "host:port or ray://host:port, or give cluster='ray://host:port'"
        )
    return address


@dataclass(frozen=True)
class Node:
    """A live node: its id, address, and resources free now and in all."""

    node_id: str
    ip: str
    free: dict[str, float]
    total: dict[str, float]


class _Connection:
    """This kernel's connection to Ray, shared by its pools: made by the first that needs it, ended
    when the last of them shuts down (unless the user made it), so a kernel holds no Ray threads,
    and no cluster holds this kernel's job, longer than a pool needs them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._ours = False
        self._address = ""
        self._exit_hook = False

    def take(self, address: str) -> None:
        import ray

        with self._lock:
            if self._ours and address != self._address:  # Ray connects a process to one cluster at a time
                raise ClusterError(
                    f"this kernel is connected to the Ray cluster at {self._address} for another pool; shut that "
                    f"pool down before starting one on {address}"
                )
            if ray.is_initialized() and not self._ours:
                _same_cluster(address)
            if not ray.is_initialized():
                _check_answers(address)
                _init(address)
                if not self._exit_hook:  # after Ray's own (atexit runs last-registered first): pools end first
                    atexit.register(_end_pools)
                    self._exit_hook = True
                self._ours = True
                self._address = address
            self._users += 1

    def give_back(self) -> None:
        import ray

        with self._lock:
            self._users -= 1
            if self._users == 0 and self._ours:
                self._ours = False
                with contextlib.suppress(Exception):
                    ray.shutdown()


connection = _Connection()


# What must run at exit while the connection still stands: the pool module registers its shutdown_all
# (the placements sit below the pool and do not import it).
_before_disconnect: list[Callable[[], None]] = []


def before_disconnect(hook: Callable[[], None]) -> None:
    """Run ``hook`` at exit before Ray disconnects (every pool stops, so its ranks get their Stop and
    its hosts go)."""
    if hook not in _before_disconnect:
        _before_disconnect.append(hook)


def _end_pools() -> None:
    for hook in list(_before_disconnect):
        hook()


def _same_cluster(address: str) -> None:
    """A connection the user made must be to the cluster asked for (a GCS address can be compared; Ray
    Client's cannot, and is trusted)."""
    import ray

    if address.startswith("ray://") or ray.util.client.ray.is_connected():  # type: ignore[no-untyped-call]
        return
    connected = ""
    with contextlib.suppress(Exception):  # an older Ray without it: trusted, as a client is
        connected = str(ray.get_runtime_context().gcs_address)
    if connected and _endpoint(address) != _endpoint(connected):
        raise ClusterError(
            f"this kernel is already connected to the Ray cluster at {connected} (ray.init), not {address}: "
            "call ray.shutdown() first, or give that cluster's address"
        )


def _endpoint(address: str) -> tuple[str, str]:
    """(IP, port) of ``host:port``, so that two spellings of one address compare equal."""
    host, _, port = address.rpartition(":")
    with contextlib.suppress(OSError):
        host = socket.gethostbyname(host.strip("[]"))
    return host, port


def _init(address: str) -> None:
    """``ray.init`` to ``address``; a Ray Client connection is tried twice: Ray's client proxy forks its
    per-client server from a threaded process, and that server sometimes dies at birth
    ("Starting Ray client server failed"), while the next attempt works."""
    import ray

    attempts = 2 if address.startswith("ray://") else 1
    for attempt in range(attempts):
        try:
            ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
            return
        except ConnectionError as exc:
            if attempt + 1 < attempts:
                continue
            raise ClusterError(f"cannot connect to the Ray cluster at {address}: {described(exc)}") from None
        except Exception as exc:
            raise ClusterError(f"cannot connect to the Ray cluster at {address}: {described(exc)}") from None


def alive_nodes() -> list[Node]:
    """The cluster's live nodes with what each has free now."""
    import ray

    free = _free_per_node()
    nodes = []
    for node in ray.nodes():  # type: ignore[no-untyped-call]
        if not node.get("Alive"):
            continue
        node_id = str(node["NodeID"])
        total = dict(node["Resources"])
        nodes.append(Node(node_id, str(node["NodeManagerAddress"]), free.get(node_id, total), total))
    return nodes


def _free_per_node() -> dict[str, dict[str, float]]:
    """Free resources per node id. Ray keeps this in its private state API, which only a driver on the
    cluster can ask: over Ray Client it is asked by a task on the cluster. An empty answer (Ray moved
    it) falls back to each node's totals, and the placement group's wait decides."""
    import ray

    with contextlib.suppress(Exception):
        if ray.util.client.ray.is_connected():  # type: ignore[no-untyped-call]
            return dict(ray.get(_free_on_the_cluster.remote(), timeout=_CONNECT_WITHIN * 5))
        return _free_here()
    return {}


def _free_here() -> dict[str, dict[str, float]]:
    from ray._private.state import state

    return {str(k): dict(v) for k, v in state.available_resources_per_node().items()}  # type: ignore[no-untyped-call]


class _OnTheCluster:
    """Made on first use: a task that asks the cluster's state where a client cannot."""

    def __init__(self) -> None:
        self._task: Any = None

    def remote(self) -> Any:
        import ray

        if self._task is None:
            self._task = ray.remote(num_cpus=0)(_free_here)
        return self._task.remote()


_free_on_the_cluster = _OnTheCluster()


def fits(free: Mapping[str, float], per_rank: Mapping[str, float], ranks: int) -> bool:
    return all(free.get(name, 0.0) >= amount * ranks for name, amount in per_rank.items())


def free_line(per_rank: Mapping[str, float]) -> str:
    """What is free, node by node, and what each rank needs: the end of a not-enough-resources error."""
    parts = [f"{node.ip} ({node.node_id[:8]}) {amounts(node.free, per_rank)}" for node in alive_nodes()]
    free = "; ".join(parts) if parts else "no live node"
    return f"each rank needs {amounts(per_rank)}; free now: {free}"


def amounts(resources: Mapping[str, float], only: Mapping[str, float] | None = None) -> str:
    names = list(only) if only is not None else list(resources)
    return " + ".join(f"{resources.get(name, 0.0):g} {name}" for name in names)


def _check_answers(address: str) -> None:
    """A one-line ClusterError unless something accepts connections at ``address`` (host:port)."""
    target = address.removeprefix("ray://")
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        return  # "auto" and other forms Ray resolves itself
    reason = unreachable(host, int(port), _CONNECT_WITHIN)
    if reason is not None:
        raise ClusterError(
            f"no Ray cluster answers at {address} ({reason}): start one (ray start --head) or fix the "
            "address (UC_JUPYTER_RAY_ADDRESS, RAY_ADDRESS or cluster='ray://host:port')"
        )


def described(exc: BaseException) -> str:
    """``Type: first line of the message`` (Ray's errors run to many lines), or the type alone."""
    return f"{type(exc).__name__}: {first_line(exc)}" if str(exc).strip() else type(exc).__name__
