"""Ranks on a Ray cluster: placed by Ray, run and watched as on this machine.

``RankPool(n, cluster="ray")`` (the address in ``UC_JUPYTER_RAY_ADDRESS``, else ``RAY_ADDRESS``) or
``cluster="ray://host:port"`` (Ray Client) connects this kernel to the cluster (and disconnects when
the pool shuts down, if it connected), then:

1. checks, before anything starts, that the cluster answers at the address, and picks the nodes: as
   few as hold the ranks (or exactly ``nodes``), every node the same number of ranks (torchrun's
   ``LOCAL_WORLD_SIZE``); too few free resources is one line saying what is free;
2. reserves one placement-group bundle per node holding that node's ranks (a GPU and a CPU per GPU
   rank, a CPU per CPU rank), ``STRICT_SPREAD`` so each bundle is another node; Ray has no "these
   bundles on one node" constraint, so a bundle per node is how a node's ranks stay together;
3. starts one :class:`~uc_jupyter.distributed.launch.ray_host.RankHost` actor per node in that node's
   bundle (holding all of it: a Ray worker costs about a second of CPU to start, one per node rather
   than per rank), checks that every node runs the kernel's Python, torch and uc_jupyter (one line
   naming the node and the difference, before any rank starts);
4. has each host start its rank with ``RANK = NODE_RANK * LOCAL_WORLD_SIZE + LOCAL_RANK``,
   ``MASTER_ADDR`` rank 0's node address, ``MASTER_PORT`` a free port there (or the kernel's
   ``MASTER_PORT``), ``UC_JUPYTER_RAY_ADDRESS`` the cluster, the kernel's catalog settings
   (``UC_JUPYTER_HOME``, ``UC_JUPYTER_CATALOG_URL``/``UC_JUPYTER_TOKEN``, ``DATABRICKS_*``,
   ``UC_JUPYTER_SPARK_REMOTE``, ``UC_JUPYTER_VERBOSE``) and ``AWS_*`` credentials; the cache
   (``UC_JUPYTER_CACHE_DIR`` and its budget) is the node's own, so a node's ranks share one download.
   GPU ranks of a node see that node's GPUs of the pool (``CUDA_VISIBLE_DEVICES``, which Ray sets
   for the node's host, as Ray Train shares them, so NCCL can use the links between them) and each
   is told its own.

The kernel long-polls each node's host (``take``, answering within half a second even when its ranks
are silent). A host that does not answer for :data:`LOST_AFTER` seconds is a lost node: every rank
there is reported dead with the node's address at once, where Ray's own node-death detection takes
15-30 s.

Example (with a cluster at UC_JUPYTER_RAY_ADDRESS):
    >>> pool = RankPool(4, devices="cpu", cluster="ray")                    # doctest: +SKIP
    >>> pool.status().ranks[3].node_rank                                   # doctest: +SKIP
    1
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Mapping
from typing import Any

from uc_jupyter.distributed.errors import ClusterError
from uc_jupyter.distributed.launch import Exited, Generation, Inbox, Placement, RankHandle, deliver
from uc_jupyter.distributed.launch.local import plan_devices, rank_environment
from uc_jupyter.distributed.launch.ray_cluster import (
    Node,
    alive_nodes,
    amounts,
    cluster_address,
    connection,
    described,
    fits,
    free_line,
)
from uc_jupyter.distributed.protocol import decode, encode
from uc_jupyter.distributed.stuck import DUMP_SIGNAL
from uc_jupyter.notices import notice
from uc_jupyter.telemetry.collector import Collector

__all__ = ["FORWARDED", "LOST_AFTER", "RayGeneration", "RayPlacement", "RayRank", "cluster_address"]

LOST_AFTER = 3.0  # seconds without an answer from a rank's host before its node counts as lost
_POLL = 0.5  # how long one take waits for the rank to say something
_CPU_NOTICE = "uc_jupyter.distributed: CPU ranks on a Ray cluster"  # said once per process
# The kernel's settings the ranks need to see the same catalog as the kernel (not its cache: a node's own).
FORWARDED = (
    "UC_JUPYTER_HOME",
    "UC_JUPYTER_CATALOG_URL",
    "UC_JUPYTER_TOKEN",
    "DATABRICKS_HOST",
    "DATABRICKS_TOKEN",
    "UC_JUPYTER_SPARK_REMOTE",
    "UC_JUPYTER_VERBOSE",
)
# AWS keys as values, never pointers to files or endpoints of this machine (a credentials file, a web
# identity token file, the container credential endpoint): on a node those name the node's own.
_FORWARDED_AWS = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_ALLOW_HTTP",
)


class RayRank(RankHandle):
    """One rank behind its node's host actor."""

    def __init__(self, rank: int, host: Any, node_rank: int, facts: Any) -> None:
        self.rank = rank
        self.host = host
        self.node_rank = node_rank
        self.node = str(facts.ip)
        self.node_id = str(facts.node_id)
        self.gone = threading.Event()  # the relay ended (the rank exited, or its host is lost)
        self.lost = False  # its host stopped answering: nothing more can be asked of it
        self._last_send: Any = None

    def send(self, message: object) -> None:
        import ray

        if self.gone.is_set():
            raise OSError(f"rank {self.rank} is gone")
        if self._last_send is not None:  # Ray does not order calls across a threaded actor's lanes
            ray.wait([self._last_send], timeout=LOST_AFTER)
        self._last_send = self.host.send.remote(self.rank, encode(message))

    def interrupt(self) -> None:
        self._signal(signal.SIGINT)

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def returncode(self) -> int | None:
        return None  # how the process ended comes through the relay, as Exited

    def running(self) -> bool:
        return not self.gone.is_set()

    def log_tail(self, lines: int = 15) -> str:
        import ray

        if self.lost:
            return ""
        with contextlib.suppress(Exception):  # a lost host has no log to give: the message says why
            return str(ray.get(self.host.log_tail.remote(self.rank, lines), timeout=2.0))
        return ""

    def dump_stacks(self) -> None:
        self._signal(DUMP_SIGNAL)

    def where(self) -> str:
        return f" (on node {self.node_rank}, {self.node}, Ray node {self.node_id[:8]})"

    def _signal(self, signum: int) -> None:
        import ray

        if not self.gone.is_set():
            with contextlib.suppress(Exception):
                if self._last_send is not None:  # the call must reach the rank before its interrupt does
                    ray.wait([self._last_send], timeout=LOST_AFTER)
                self.host.signal.remote(self.rank, signum)


class RayGeneration(Generation):
    """Ranks on a Ray cluster: their nodes' host actors, the placement group that holds their resources."""

    def __init__(self, port: int, devices: str, backend: str, cluster: str, group: Any) -> None:
        super().__init__(port, devices, backend)
        self.cluster = cluster
        self.group = group
        self.hosts: list[Any] = []  # one per node, in node-rank order
        self.readers: list[threading.Thread] = []

    def watch(self, host: Any, ranks: list[RayRank], collector: Collector) -> None:
        """Relay what a node's ranks say to the pool, on a thread of its own."""
        reader = threading.Thread(
            target=_relay,
            args=(host, {handle.rank: handle for handle in ranks}, self.inbox, collector),
            name=f"uc-jupyter-node-{ranks[0].node_rank}",
            daemon=True,
        )
        reader.start()
        self.readers.append(reader)

    def stop(self, timeout: float) -> None:
        import ray

        with contextlib.suppress(Exception):  # a lost host never answers, Ray may be gone: kill() ends them
            pending = [host.stop.remote(timeout) for host in self.hosts]
            ray.wait(pending, num_returns=len(pending), timeout=timeout + 6.0)
        self.kill()

    def kill(self) -> None:
        import ray
        from ray.util.placement_group import remove_placement_group

        for handle in self.ranks:
            assert isinstance(handle, RayRank)
            handle.gone.set()
        for host in self.hosts:  # each rank's supervisor sees its host gone and ends the rank's tree
            with contextlib.suppress(Exception):
                ray.kill(host, no_restart=True)
        with contextlib.suppress(Exception):
            remove_placement_group(self.group)
        deadline = time.monotonic() + _POLL + 1.0
        for reader in self.readers:
            reader.join(max(0.0, deadline - time.monotonic()))


class RayPlacement(Placement):
    """Ranks on the Ray cluster ``cluster`` (``"ray"`` or ``"ray://host:port"``), on ``nodes`` nodes
    (None: as few as hold them)."""

    def __init__(self, cluster: str, nodes: int | None = None, gpu_type: str | None = None) -> None:
        try:
            import ray  # noqa: F401
        except ImportError:
            raise ClusterError(
                f"cluster={cluster!r} needs Ray in this kernel: pip install 'uc_jupyter[ray]' "
                "(the cluster's nodes need it too)"
            ) from None
        self.address = cluster_address(cluster)
        self.cluster = self.address
        self.nodes = nodes
        self.gpu_type = gpu_type
        self._connected = False

    # ---------------------------------------------------------------- the cluster
    def connect(self) -> None:
        """Connect this kernel to the cluster (once per placement); a one-line ClusterError when
        nothing answers. A connection the user made (``ray.init`` before the pool) is used as it is."""
        if not self._connected:
            connection.take(self.address)
            self._connected = True

    def close(self) -> None:
        if self._connected:
            self._connected = False
            connection.give_back()

    def plan(self, n: int, devices: str, backend: str) -> tuple[str, str]:
        """As on this machine, except that ``"auto"`` on a cluster with some GPUs but fewer free than
        ranks is an error, not CPU ranks: CPU ranks only where the cluster has no GPU at all."""
        self.connect()
        nodes = alive_nodes()
        free = 0 if devices == "cpu" else int(sum(node.free.get("GPU", 0.0) for node in nodes if self._of_type(node)))
        if devices == "auto" and free < n and any(node.total.get("GPU", 0.0) > 0 for node in nodes):
            devices = "cuda"  # the cluster has GPUs: say how many are free rather than run on CPUs
        kind = f"free {self.gpu_type} GPU(s)" if self.gpu_type else "free GPU(s)"
        planned = plan_devices(n, devices, backend, free, f"{kind} on the Ray cluster")
        if devices == "auto" and planned[0] == "cpu":
            notice(f"the Ray cluster has no GPU: running {n} CPU ranks with gloo there", key=_CPU_NOTICE)
        return planned

    def _of_type(self, node: Node) -> bool:
        """Whether the node's GPUs are of the type asked (Ray's ``accelerator_type:<T>``, one per node)."""
        return self.gpu_type is None or f"accelerator_type:{self.gpu_type}" in node.total

    # ---------------------------------------------------------------- start
    def start(
        self,
        n: int,
        port: int | None,
        devices: str,
        backend: str,
        principal: str,
        collector: Collector,
        timeout: float,
    ) -> RayGeneration:
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        from uc_jupyter.distributed.launch.ray_host import RayRankHost

        self.connect()
        per_rank = {"CPU": 1.0, "GPU": 1.0} if devices == "cuda" else {"CPU": 1.0}
        if devices == "cuda" and self.gpu_type:  # as Ray's own accelerator_type option asks
            per_rank[f"accelerator_type:{self.gpu_type}"] = 0.001
        count = self._node_count(n, per_rank)
        local = n // count
        bundle = {name: amount * local for name, amount in per_rank.items()}
        group = placement_group([dict(bundle) for _ in range(count)], strategy="STRICT_SPREAD")
        generation = RayGeneration(0, devices, backend, self.address, group)
        try:  # from here on, whatever ends the start (Ctrl-C too) removes the group and the hosts
            if not group.wait(timeout_seconds=min(timeout, 60.0)):
                raise ClusterError(
                    f"the Ray cluster did not reserve {count} node(s) x {amounts(bundle)} for {n} {devices} "
                    "ranks; " + free_line(per_rank)
                )
            for node_rank in range(count):
                strategy = PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=node_rank)
                options = {  # the node's whole bundle: Ray gives the host (and so its ranks) the node's GPUs
                    "num_cpus": bundle["CPU"],
                    "num_gpus": bundle.get("GPU", 0.0),
                    "resources": {k: v for k, v in bundle.items() if k not in ("CPU", "GPU")},
                    "scheduling_strategy": strategy,
                }
                generation.hosts.append(RayRankHost.options(**options).remote())
            facts = _answers(
                [host.describe.remote(node == 0 and port is None) for node, host in enumerate(generation.hosts)],
                timeout,
                "start their hosts",
            )
            _check_versions(facts)
            generation.port = port or int(facts[0].port)
            environments = self._environments(n, local, generation.port, facts, devices, backend, principal)
            _answers(
                [
                    host.start.remote({rank: environments[rank] for rank in range(node * local, (node + 1) * local)})
                    for node, host in enumerate(generation.hosts)
                ],
                timeout,
                "start their ranks",
            )
            for node, host in enumerate(generation.hosts):
                ranks = [RayRank(rank, host, node, facts[node]) for rank in range(node * local, (node + 1) * local)]
                generation.ranks.extend(ranks)
                generation.watch(host, ranks, collector)
        except BaseException:
            generation.kill()
            raise
        return generation

    def _node_count(self, n: int, per_rank: Mapping[str, float]) -> int:
        """How many nodes to spread ``n`` ranks over: ``nodes``, else the fewest that hold them evenly."""
        alive = alive_nodes()
        counts = [self.nodes] if self.nodes is not None else [k for k in range(1, n + 1) if n % k == 0]
        for k in counts:
            holding = [node for node in alive if fits(node.free, per_rank, n // k)]
            if len(holding) >= k:
                return k
        wanted = f"{self.nodes} node(s) with {n // self.nodes} ranks each" if self.nodes else f"{n} ranks"
        raise ClusterError(f"the Ray cluster has too few free resources for {wanted}: " + free_line(per_rank))

    def _environments(
        self,
        n: int,
        local: int,
        port: int,
        facts: list[Any],
        devices: str,
        backend: str,
        principal: str,
    ) -> list[dict[str, str]]:
        forwarded = {name: value for name, value in os.environ.items() if name in FORWARDED or name in _FORWARDED_AWS}
        environments = []
        for rank in range(n):
            node_rank, local_rank = divmod(rank, local)
            environment = {
                **forwarded,
                **rank_environment(
                    rank=rank,
                    size=n,
                    local_rank=local_rank,
                    local_size=local,
                    node_rank=node_rank,
                    master_addr=str(facts[0].ip),
                    port=port,
                    principal=principal,
                    devices=devices,
                    backend=backend,
                ),
                "UC_JUPYTER_RAY_ADDRESS": str(facts[node_rank].gcs_address),
                # Ray sets the host's own to its CPU count (the node's ranks): each rank has one CPU.
                "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
            }
            if devices == "cuda":  # the rank sees its node's GPUs of this pool (its host's) and uses its own
                environment["UC_JUPYTER_RANK_CUDA_INDEX"] = str(local_rank)
            environments.append(environment)
        return environments


def _answers(references: list[Any], timeout: float, what: str) -> list[Any]:
    """The hosts' answers; a host that cannot be made (uc_jupyter missing on its node, say) or does not
    answer in time is one line, not Ray's traceback."""
    import ray

    try:
        return list(ray.get(references, timeout=timeout))
    except ray.exceptions.GetTimeoutError:
        raise ClusterError(f"the Ray nodes did not {what} within {timeout:g} s; the ranks were stopped") from None
    except ray.exceptions.RayError as exc:
        raise ClusterError(
            f"the Ray nodes could not {what} ({described(exc)}); check that uc_jupyter and torch are "
            "installed on every node"
        ) from None


def _relay(host: Any, ranks: dict[int, RayRank], inbox: Inbox, collector: Collector) -> None:
    """One per node: long-poll its host and pass on what its ranks said; a host silent for LOST_AFTER
    seconds, or gone, ends every rank still there as lost, with where it was."""
    import ray

    from uc_jupyter.distributed.launch.ray_host import Relayed

    def lose(how: str) -> None:
        for handle in ranks.values():
            if not handle.gone.is_set():
                handle.lost = True
                handle.gone.set()
                inbox.put((handle.rank, Exited(None, how=how)))

    while not all(handle.gone.is_set() for handle in ranks.values()):
        try:
            reference = host.take.remote(_POLL)
            # fetch_local=False: liveness is the host answering, not how long a large reply takes to travel
            ready, _ = ray.wait([reference], timeout=_POLL + LOST_AFTER, fetch_local=False)
        except Exception:  # Ray shut down under us: the generation was ended
            ready = []
        if all(handle.gone.is_set() for handle in ranks.values()):
            return  # the generation ended them: nothing to report
        if not ready:
            lose(f"lost: its node stopped answering for {LOST_AFTER:g} s (the host is down, hung or cut off)")
            return
        try:
            items = ray.get(reference)
        except Exception as exc:
            lose(f"lost: its Ray host is gone ({type(exc).__name__})")
            return
        for rank, item in items:
            handle = ranks[rank]
            if isinstance(item, Relayed):
                handle.gone.set()
                inbox.put((rank, Exited(item.returncode)))
            elif not handle.gone.is_set():
                deliver(rank, decode(item), inbox, collector)


def _check_versions(facts: list[Any]) -> None:
    """Every node runs the kernel's Python, torch and uc_jupyter: a rank elsewhere could not unpickle
    what the kernel sends, or would compute with another torch."""
    from uc_jupyter.distributed.launch.ray_host import versions

    mine = versions()
    for fact in facts:
        for name, version in mine.items():
            theirs = fact.versions.get(name, "not installed")
            if theirs != version:
                raise ClusterError(
                    f"the Ray node {fact.ip} ({str(fact.node_id)[:8]}) runs {name} {theirs}, this kernel {version}: "
                    f"ranks must run the kernel's versions; install {name} {version} on the cluster's nodes "
                    "(or use a cluster image that matches this kernel)"
                )
