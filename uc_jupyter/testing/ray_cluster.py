"""A real Ray cluster of several nodes on this machine, for tests and benchmarks.

Each node is a real Ray node (its own raylet, object store and workers; the head also runs the GCS and,
on request, a Ray Client server), started the way Ray tests itself (``ray.cluster_utils.Cluster``) in a
*cluster host*: a process of its own, in a session of its own. The host keeps Ray's internals and its
process reaper out of the test's process, and ends every node when the test process goes away, however
it ends. Nodes listen on loopback addresses of their own (node ``i`` on ``127.0.0.{i + 2}``), so a
node's address tells the nodes apart the way a host name would; a custom resource per node
(``test_node_<i>``) pins work to one.

A cluster depends on no Ray state of the machine's, and leaves none: another Ray on the machine (the
user's, or a second run of the suite) must neither break it nor be broken by it. Ray keeps such state in
two places. Its shared temporary folder (/tmp/ray, found through ``RAY_TMPDIR``, else ``TMPDIR``, else
/tmp) holds the "current cluster" file, ``ray_current_cluster``, which ``ray.cluster_utils.Cluster``
writes (failing where /tmp/ray does not exist yet, as on a fresh machine) and ``ray.init()`` / ``"auto"``
read: each cluster points ``RAY_TMPDIR`` at a folder of its own, so that file and its session are its own.
The user's ~/.ray/auth_token turns token auth on for a ``ray start`` or a ``ray.init()`` that finds
it, and ``RAY_AUTH_MODE`` / ``RAY_AUTH_TOKEN`` / ``RAY_AUTH_TOKEN_PATH`` in the environment do so for
every Ray process: the nodes start with ``RAY_AUTH_MODE=disabled`` and without the token variables, so
the test process, a driver at the cluster's explicit address, needs no token.

What a real host goes through is done to a node's processes from outside, as a lost host would be:
:meth:`RayTestCluster.kill_node` SIGKILLs all of them at once (the machine is gone);
:meth:`~RayTestCluster.freeze_node` / :meth:`~RayTestCluster.thaw_node` SIGSTOP / SIGCONT them (a
network partition, a hung host). A node's processes are the ones it was started with and everything
descending from them (the workers, and whatever those start), found through ``/proc``.

Example:
    >>> with RayTestCluster(nodes=2, cpus_per_node=2, node_env=[{}, {"MY_VAR": "b"}]) as cluster:  # doctest: +SKIP
    ...     ray.init(address=cluster.address)
    ...     cluster.nodes[1].ip
    '127.0.0.3'
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from uc_jupyter.distributed import proctree
from uc_jupyter.processes import alive, free_port

__all__ = ["RayTestCluster", "RayTestNode", "leftover_rank_hosts"]

_READY = "ray-test-cluster "  # the host's one line on stdout, before a JSON object
_RANK_HOST_TITLE = b"ray::RankHost"  # the pool's rank actor, as Ray titles its process
# The kernel's pointers at a cluster, and the user's Ray credentials, stay with them.
_FORWARD_NOT = ("RAY_ADDRESS", "UC_JUPYTER_RAY_ADDRESS", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")


@dataclass(frozen=True)
class RayTestNode:
    """One node of a :class:`RayTestCluster`.

    Attributes:
        index: its place in the cluster (0 is the head: the GCS runs there).
        node_id: Ray's node id (hex), as ``ray.get_runtime_context().get_node_id()`` says it.
        ip: the node's address (``127.0.0.{index + 2}``).
        resource: a custom resource the node alone has, 1 unit (``test_node_<index>``).
        raylet_pid: its raylet.
        roots: the processes the node was started with (the raylet; on the head also the GCS, the
            dashboard and the Ray Client server), children of the cluster host.
        host_pid: the cluster host. A root counts only while it is the host's child, so a pid that
            ended and was reused by another process is never taken for the node's.
    """

    index: int
    node_id: str
    ip: str
    resource: str
    raylet_pid: int
    roots: tuple[int, ...]
    host_pid: int

    def pids(self) -> set[int]:
        """The node's live processes now: its roots and everything descending from them."""
        return {pid for pid in _tree(self.roots, proctree.parents(), self.host_pid) if alive(pid)}


class RayTestCluster:
    """A Ray cluster of ``nodes`` nodes with ``cpus_per_node`` CPUs each, running until :meth:`shutdown`
    (or the end of its ``with`` block).

    Args:
        nodes: how many nodes (node 0 is the head).
        cpus_per_node: the CPUs each node offers Ray (what Ray schedules by, not what it may use).
        node_env: one mapping per node, set in that node's environment on top of ``base_env``: its
            raylet starts with it and so does every worker it starts (a node's own
            ``UC_JUPYTER_CACHE_DIR``, say).
        base_env: the environment every node starts with; by default this process's. Whatever it says,
            ``RAY_ADDRESS``, ``UC_JUPYTER_RAY_ADDRESS`` and the token variables are left out, and
            ``RAY_TMPDIR`` (the cluster's folder) and ``RAY_AUTH_MODE=disabled`` set.
        ray_client: also run a Ray Client server on the head (:attr:`client_address`).
        object_store_bytes: each node's object store (Ray's minimum is 75 MiB).
        start_timeout_s: how long the nodes may take to come up.

    Attributes:
        address: the GCS address, ``host:port`` (what ``ray.init(address=...)`` and ``RAY_ADDRESS`` take).
        client_address: ``ray://host:port`` of the Ray Client server, or None without ``ray_client``.
        nodes: one :class:`RayTestNode` per node, in order.
        started_s: seconds from the start of the host process to all nodes up.
        temp_dir: the cluster's folder, what the cluster's Ray processes take for the machine's temporary
            folder: Ray's own folder ``ray/`` (its "current cluster" file and the session: every node's
            logs, under ``ray/session_*/logs``) and the host's output in ``host.log``; removed at shutdown.

    Raises:
        RuntimeError: the cluster did not come up (the end of the host's output says why).

    Example:
        >>> with RayTestCluster(nodes=2, cpus_per_node=2, ray_client=True) as cluster:  # doctest: +SKIP
        ...     ray.init(cluster.client_address)
    """

    def __init__(
        self,
        nodes: int = 2,
        cpus_per_node: int = 2,
        *,
        node_env: Sequence[Mapping[str, str]] | None = None,
        base_env: Mapping[str, str] | None = None,
        ray_client: bool = False,
        object_store_bytes: int = 80 * 1024 * 1024,
        start_timeout_s: float = 180.0,
    ) -> None:
        if nodes < 1 or nodes > 200:
            raise ValueError(f"nodes={nodes}: a test cluster has between 1 and 200 nodes")
        if node_env is not None and len(node_env) != nodes:
            raise ValueError(f"node_env has {len(node_env)} entries for {nodes} nodes: give one mapping per node")
        self.temp_dir = tempfile.mkdtemp(prefix="ray-test-", dir="/tmp")  # short: Ray's socket paths must fit
        env = dict(os.environ if base_env is None else base_env)
        for name in _FORWARD_NOT:
            env.pop(name, None)
        env["RAY_USAGE_STATS_ENABLED"] = "0"
        # Ray's machine-wide folder (/tmp/ray: the "current cluster" file, sessions) is this cluster's own,
        # and no token of the user's (~/.ray/auth_token) or the environment's turns auth on.
        env["RAY_TMPDIR"] = self.temp_dir
        env["RAY_AUTH_MODE"] = "disabled"
        spec = {
            "nodes": nodes,
            "cpus": cpus_per_node,
            "object_store_bytes": object_store_bytes,
            "node_env": [dict(e) for e in node_env] if node_env is not None else [{} for _ in range(nodes)],
            "client_port": free_port() if ray_client else None,
            "folder": self.temp_dir,
        }
        self._log = open(Path(self.temp_dir) / "host.log", "w+b")  # noqa: SIM115 (closed in shutdown)
        started = time.perf_counter()
        self._host: subprocess.Popen[bytes] | None = subprocess.Popen(
            [sys.executable, "-m", "uc_jupyter.testing.ray_cluster", json.dumps(spec)],
            stdin=subprocess.PIPE,  # the host ends the cluster when this closes (we are gone)
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=env,
            start_new_session=True,
        )
        try:
            info = self._await_ready(start_timeout_s)
        except BaseException:
            self.shutdown()
            raise
        self.started_s = time.perf_counter() - started
        self.address: str = info["address"]
        self.client_address: str | None = info["client_address"]
        self.nodes: list[RayTestNode] = [
            RayTestNode(
                index=i,
                node_id=node["node_id"],
                ip=node["ip"],
                resource=node["resource"],
                raylet_pid=node["raylet_pid"],
                roots=tuple(node["roots"]),
                host_pid=self._host.pid,
            )
            for i, node in enumerate(info["nodes"])
        ]

    def __enter__(self) -> RayTestCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        state = "stopped" if self._host is None else self.address
        return f"RayTestCluster({len(getattr(self, 'nodes', []))} nodes, {state})"

    def kill_node(self, index: int) -> set[int]:
        """The node's machine is lost: every process of the node SIGKILLed at once (frozen first, so none
        can fork or leave the tree meanwhile). Killing the head (index 0) ends the whole cluster, as
        losing the GCS does. Returns the pids that were killed."""
        node = self._node(index)
        frozen = _signal_tree(node.roots, node.host_pid, signal.SIGSTOP, until_stable=True)
        _send(frozen, signal.SIGKILL)
        return frozen

    def freeze_node(self, index: int) -> set[int]:
        """The node stops answering (a network partition, a hung host): SIGSTOP every process of it.
        Ray's own health check declares it dead after about 30 s; thawed before that, it carries on.
        Returns the pids stopped."""
        node = self._node(index)
        return _signal_tree(node.roots, node.host_pid, signal.SIGSTOP, until_stable=True)

    def thaw_node(self, index: int) -> set[int]:
        """Undo :meth:`freeze_node`: SIGCONT every process of the node. Returns the pids continued."""
        node = self._node(index)
        return _signal_tree(node.roots, node.host_pid, signal.SIGCONT, until_stable=False)

    def rank_hosts(self) -> list[int]:
        """Live ``ray::RankHost`` processes (the pool's rank actors) on this cluster's nodes."""
        mine = {pid for node in self.nodes for pid in node.pids()}
        return [pid for pid in leftover_rank_hosts() if pid in mine]

    def shutdown(self, timeout_s: float = 30.0) -> None:
        """End every process of the cluster (SIGKILL, all at once: a test cluster keeps nothing worth a
        graceful stop) and remove its session folder; calling it again does nothing.

        Raises:
            RuntimeError: a process of the cluster is still alive after ``timeout_s``.
        """
        host = self._host
        if host is None:
            return
        self._host = None
        # The host is this process's child, so its pid stays its own until it is reaped below.
        frozen = _signal_tree([host.pid], None, signal.SIGSTOP, until_stable=True) | _group(host.pid)
        _send(frozen, signal.SIGSTOP)
        _send(frozen, signal.SIGKILL)
        for stream in (host.stdin, host.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            host.wait(timeout=timeout_s)
        deadline = time.monotonic() + timeout_s
        left = sorted(pid for pid in frozen | _group(host.pid) if alive(pid))
        while left and time.monotonic() < deadline:
            time.sleep(0.05)
            left = [pid for pid in left if alive(pid)]
        self._log.close()
        shutil.rmtree(self.temp_dir, ignore_errors=True)
        if left:
            raise RuntimeError(f"the Ray test cluster left processes {left} alive: end them with kill -9")

    def _node(self, index: int) -> RayTestNode:
        if not 0 <= index < len(self.nodes):
            raise IndexError(f"node {index}: this cluster has nodes 0 to {len(self.nodes) - 1}")
        return self.nodes[index]

    def _await_ready(self, timeout_s: float) -> dict[str, Any]:
        assert self._host is not None
        assert self._host.stdout is not None
        lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=_pump, args=(self._host.stdout, lines), daemon=True).start()
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise RuntimeError(
                    f"the Ray test cluster was not up after {timeout_s:.0f} s: {self._log_tail()}"
                ) from None
            if not line:
                raise RuntimeError(f"the Ray test cluster's host exited while starting: {self._log_tail()}")
            text = line.decode(errors="replace")
            if text.startswith(_READY):
                info: dict[str, Any] = json.loads(text[len(_READY) :])
                if "error" in info:
                    raise RuntimeError(f"the Ray test cluster did not start: {info['error']}")
                return info

    def _log_tail(self) -> str:
        self._log.flush()
        self._log.seek(0)
        lines = self._log.read().decode(errors="replace").strip().splitlines()
        return " | ".join(lines[-5:]) or "(no output)"


def leftover_rank_hosts() -> list[int]:
    """Pids of the live processes on this machine titled ``ray::RankHost`` (the pool's rank actors,
    idle or in a call), whatever cluster they belong to: after a pool's shutdown there must be none.

    Example:
        >>> isinstance(leftover_rank_hosts(), list)
        True
    """
    found = []
    for name in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if name.isdigit() and _titled_rank_host(int(name)) and alive(int(name)):
            found.append(int(name))
    return sorted(found)


def _titled_rank_host(pid: int) -> bool:
    """Is ``pid`` titled ``ray::RankHost`` (idle) or ``ray::RankHost.<method>`` (in a call)? Ray sets both the
    command line and the kernel's 15-character name (``comm``); the name is swapped whole, while a command
    line being rewritten can be read half done, so either one matching is enough."""
    for source, size in (("comm", 16), ("cmdline", len(_RANK_HOST_TITLE) + 1)):
        try:
            with open(f"/proc/{pid}/{source}", "rb") as title_file:
                title = title_file.read(size).rstrip(b"\n")
        except OSError:
            return False
        # Never "ray::RankHostile": the title ends there, or a method name follows.
        after = title[len(_RANK_HOST_TITLE) : len(_RANK_HOST_TITLE) + 1]
        if title.startswith(_RANK_HOST_TITLE) and after in (b"", b".", b"\0", b" "):
            return True
    return False


def _tree(roots: Iterable[int], links: Mapping[int, int], parent: int | None) -> set[int]:
    """``roots`` that exist in ``links`` (as children of ``parent``, when given) and all their descendants."""
    found: set[int] = set()
    for root in roots:
        if root in links and (parent is None or links[root] == parent):
            found.add(root)
            found.update(proctree.descendants_in(dict(links), root))
    return found


def _signal_tree(roots: Iterable[int], parent: int | None, signum: int, *, until_stable: bool) -> set[int]:
    """Send ``signum`` to ``roots`` and their descendants; with ``until_stable``, scan again until no new
    process shows up (what a SIGSTOP needs: a process stopped can no longer fork). The pids signalled."""
    roots = list(roots)
    sent: set[int] = set()
    for _ in range(100):
        fresh = _tree(roots, proctree.parents(), parent) - sent
        if not fresh:
            break
        _send(fresh, signum)
        sent |= fresh
        if not until_stable:
            break
    return sent


def _send(pids: Iterable[int], signum: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)


def _group(pgid: int) -> set[int]:
    """The processes of process group ``pgid`` (the host's: its reaper and anything that left its tree)."""
    members = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                fields = stat.read().rpartition(b")")[2].split()
        except OSError:
            continue
        if len(fields) > 2 and fields[2] == str(pgid).encode():
            members.add(int(name))
    return members


def _pump(stream: IO[bytes], lines: queue.Queue[bytes]) -> None:
    """Lines of ``stream`` into ``lines``, then ``b""`` at its end."""
    with contextlib.suppress(OSError, ValueError):
        for line in stream:
            lines.put(line)
    lines.put(b"")


def _host(spec: dict[str, Any]) -> None:
    """The cluster host: start the nodes, print one line saying where they are, then keep them until
    stdin closes (the test process ended or shut the cluster down) and end them all."""
    from ray._common.utils import get_default_ray_temp_dir
    from ray.cluster_utils import Cluster

    # Ray's "machine" folder, where Cluster writes the "current cluster" file: the cluster's own (RAY_TMPDIR).
    ray_dir: str = get_default_ray_temp_dir()  # type: ignore[no-untyped-call]
    if not ray_dir.startswith(spec["folder"] + os.sep):
        raise RuntimeError(f"Ray's temporary folder is {ray_dir}, not in the cluster's own {spec['folder']}")

    cluster = Cluster(shutdown_at_exit=True)  # Ray's reaper ends this process group if the host dies
    added = []
    for i in range(spec["nodes"]):
        args: dict[str, Any] = {
            "node_ip_address": f"127.0.0.{i + 2}",
            "num_cpus": spec["cpus"],
            "num_gpus": 0,
            "object_store_memory": spec["object_store_bytes"],
            "resources": {f"test_node_{i}": 1},
            "env_vars": spec["node_env"][i] or None,
        }
        if i == 0:
            # No autoscaler monitor and no log monitor: a fixed cluster needs neither (the pool relays its
            # ranks' output itself), and each is one more Python process to start on a busy machine.
            args.update(include_dashboard=False, no_monitor=True, include_log_monitor=False, temp_dir=ray_dir)
            if spec["client_port"] is not None:
                args["ray_client_server_port"] = spec["client_port"]
        # The head must be up before a node can join it; the other nodes start side by side.
        added.append(cluster.add_node(wait=i == 0, **args))
    cluster.wait_for_nodes(timeout=120)
    nodes = []
    for i, node in enumerate(added):
        roots = [info.process.pid for infos in node.all_processes.values() for info in infos]
        raylet = node.all_processes["raylet"][0].process.pid
        nodes.append(
            {
                "node_id": node.node_id,
                "ip": node.node_ip_address,
                "resource": f"test_node_{i}",
                "raylet_pid": raylet,
                "roots": roots,
            }
        )
    client = f"ray://127.0.0.2:{spec['client_port']}" if spec["client_port"] is not None else None
    info = {"address": cluster.address, "client_address": client, "nodes": nodes}
    sys.stdout.write(_READY + json.dumps(info) + "\n")
    sys.stdout.flush()
    sys.stdin.buffer.read()  # until the test process closes it, or is gone
    proctree.kill_tree(os.getpid())
    shutil.rmtree(spec["folder"], ignore_errors=True)
    os._exit(0)


if __name__ == "__main__":
    try:
        _host(json.loads(sys.argv[1]))
    except Exception as error:  # said on the line the test process waits for, then the traceback
        sys.stdout.write(_READY + json.dumps({"error": f"{type(error).__name__}: {error}"}) + "\n")
        sys.stdout.flush()
        raise
