"""uc_jupyter.testing.ray_cluster: a real 2-node Ray cluster on this machine: its CPUs, tasks on each
node, each node's own environment, Ray Client, the rank actors found, nodes frozen, thawed and killed,
and nothing left after shutdown; and a cluster that neither needs nor touches the machine's own Ray
state (Ray's shared temporary folder, the user's ~/.ray), with another Ray running beside it.

One cluster serves the module (a cluster takes seconds to start); the test that kills a node shuts it
down, so it comes after the others, and the ones after it start a cluster only once that one is gone.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
import ray

from uc_jupyter.distributed import RankPool, proctree
from uc_jupyter.processes import alive, free_port
from uc_jupyter.testing.ray_cluster import RayTestCluster, leftover_rank_hosts
from uc_jupyter.testing.scripts import run_python
from uc_jupyter.testing.waits import wait_until


@pytest.fixture(scope="module")
def cluster() -> Iterator[RayTestCluster]:
    env = [{"UC_TEST_NODE_VAR": "first"}, {"UC_TEST_NODE_VAR": "second"}]
    with RayTestCluster(nodes=2, cpus_per_node=2, node_env=env, ray_client=True) as started:
        yield started


@pytest.fixture(scope="module")
def driver(cluster: RayTestCluster) -> Iterator[RayTestCluster]:
    """This process connected to the cluster as a Ray driver."""
    ray.init(address=cluster.address, log_to_driver=False)
    yield cluster
    ray.shutdown()


@ray.remote(num_cpus=1)
def _where() -> tuple[str, str | None, int]:
    return ray.get_runtime_context().get_node_id(), os.environ.get("UC_TEST_NODE_VAR"), os.getpid()


@ray.remote(num_cpus=0)
class RankHost:
    """Titled ``ray::RankHost`` like the pool's rank actor."""

    def pid(self) -> int:
        return os.getpid()


def _state(pid: int) -> str:
    """The process's state letter ("T" stopped, "Z" zombie, ...), "X" once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rpartition(b")")[2].split()[0].decode()
    except OSError:
        return "X"


def test_two_nodes_offer_four_cpus_on_their_own_addresses(driver: RayTestCluster) -> None:
    assert driver.address.startswith("127.0.0.2:")
    assert driver.client_address is not None and driver.client_address.startswith("ray://127.0.0.2:")
    assert [node.ip for node in driver.nodes] == ["127.0.0.2", "127.0.0.3"]
    assert ray.cluster_resources()["CPU"] == 4
    alive_nodes = {node["NodeID"]: node["NodeManagerAddress"] for node in ray.nodes() if node["Alive"]}
    assert alive_nodes == {node.node_id: node.ip for node in driver.nodes}


def test_tasks_land_on_each_node_with_that_nodes_environment(driver: RayTestCluster) -> None:
    placed = ray.get([_where.options(resources={node.resource: 0.01}).remote() for node in driver.nodes])
    assert [(node_id, var) for node_id, var, _ in placed] == [
        (driver.nodes[0].node_id, "first"),
        (driver.nodes[1].node_id, "second"),
    ]
    for node, (_, _, pid) in zip(driver.nodes, placed, strict=True):
        assert pid in node.pids()  # a worker is a process of its node


def test_ray_client_reaches_both_nodes(cluster: RayTestCluster) -> None:
    script = (
        "import json, sys, ray\n"
        "ray.init(sys.argv[1], log_to_driver=False)\n"
        "print(json.dumps(sorted(n['NodeManagerAddress'] for n in ray.nodes() if n['Alive'])))\n"
    )
    assert cluster.client_address is not None
    try:
        answer, _ = run_python(script, cluster.client_address)
    except AssertionError as failed:
        # Ray's client proxy forks a server per connection from a threaded gRPC process, and on a
        # loaded machine that child sometimes dies at once: Ray's flake, not the cluster's, so one
        # more connection (from a fresh interpreter) is allowed.
        if "Starting Ray client server failed" not in str(failed):
            raise
        answer, _ = run_python(script, cluster.client_address)
    assert answer == ["127.0.0.2", "127.0.0.3"]


def test_rank_host_actors_are_found_while_they_live(driver: RayTestCluster) -> None:
    actor = RankHost.options(resources={driver.nodes[1].resource: 0.01}).remote()  # type: ignore[attr-defined]
    pid = ray.get(actor.pid.remote())
    wait_until(lambda: pid in leftover_rank_hosts(), "the actor's process titled ray::RankHost")
    assert driver.rank_hosts() == [pid]
    ray.kill(actor)
    wait_until(lambda: pid not in leftover_rank_hosts(), "the killed actor's process to end")
    assert driver.rank_hosts() == []


def test_a_frozen_node_is_stopped_whole_and_thawed_carries_on(driver: RayTestCluster) -> None:
    frozen = driver.freeze_node(1)
    try:
        assert driver.nodes[1].raylet_pid in frozen and driver.nodes[1].pids() <= frozen
        wait_until(lambda: all(_state(pid) in "TtXZ" for pid in frozen), "every process of node 1 stopped")
        assert _state(driver.nodes[0].raylet_pid) not in "Tt"
    finally:
        driver.thaw_node(1)
    wait_until(lambda: all(_state(pid) not in "Tt" for pid in frozen), "every process of node 1 running again")
    node_id, _, _ = ray.get(_where.options(resources={driver.nodes[1].resource: 0.01}).remote(), timeout=60)
    assert node_id == driver.nodes[1].node_id


def test_killed_node_is_gone_and_shutdown_leaves_nothing(driver: RayTestCluster) -> None:
    """Last: it ends the module's cluster."""
    ray.shutdown()  # a driver must not outlive its cluster
    head_pids = driver.nodes[0].pids()
    killed = driver.kill_node(1)
    assert driver.nodes[1].raylet_pid in killed
    wait_until(lambda: not [pid for pid in killed if alive(pid)], "every process of node 1 to be gone")
    assert all(alive(pid) for pid in driver.nodes[0].roots)  # the other node lives on
    driver.shutdown()
    assert not [pid for pid in head_pids if alive(pid)]
    assert not Path(driver.temp_dir).exists()


@pytest.mark.servers  # starts a Ray cluster of its own
def test_a_cluster_ends_with_the_process_that_started_it() -> None:
    """A test process killed outright (no shutdown) takes its cluster with it: nothing is orphaned."""
    script = (
        "import json, os, signal\n"
        "from uc_jupyter.testing.ray_cluster import RayTestCluster\n"
        "cluster = RayTestCluster(nodes=1, cpus_per_node=1)\n"
        "print(json.dumps([sorted(cluster.nodes[0].pids()), cluster.temp_dir]), flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == -signal.SIGKILL, run.stderr[-2000:]
    pids, temp_dir = json.loads(run.stdout.strip().splitlines()[-1])
    assert pids
    wait_until(lambda: not [pid for pid in pids if alive(pid)], "the orphaned cluster's processes to end")
    wait_until(lambda: not Path(temp_dir).exists(), "the orphaned cluster's session folder to be removed")


# ---------------------------------------------------------------- the machine's own Ray state
_FOREIGN_IP = "127.0.0.20"  # the other Ray's node: an address none of a test cluster's nodes has
_TOKEN = "0123456789abcdef0123456789abcdef"


@dataclass(frozen=True)
class Machine:
    """Where Ray keeps its machine-wide state, as Ray finds it: ``tmp`` stands for /tmp (Ray's shared
    folder is ``tmp/ray``, its "current cluster" file ``tmp/ray/ray_current_cluster``), ``home`` for the
    user's home (``home/.ray/auth_token``); ``env`` is that machine's environment."""

    root: Path
    tmp: Path
    home: Path
    env: dict[str, str]


@pytest.fixture
def machine() -> Iterator[Machine]:
    """A fresh machine's Ray state, faked in a folder of the test's through the variables Ray reads it
    from (``RAY_TMPDIR``, ``HOME``), so the real /tmp/ray and ~/.ray, which other Rays on this machine may
    be using, are never touched."""
    root = Path(tempfile.mkdtemp(prefix="m-", dir="/tmp"))  # short: Ray's socket paths under it must fit
    (root / "tmp").mkdir()
    (root / "home").mkdir()
    env = dict(os.environ, RAY_TMPDIR=str(root / "tmp"), HOME=str(root / "home"))
    for name in ("RAY_ADDRESS", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        env.pop(name, None)
    try:
        yield Machine(root, root / "tmp", root / "home", env)
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def foreign_ray(env: Mapping[str, str], log: Path) -> Iterator[str]:
    """Another Ray on the machine, started as its user starts one (``ray start --head`` with Ray's default
    folders, so it writes the machine's "current cluster" file and, with ~/.ray/auth_token there, turns
    token auth on), in a session of its own. Yields its GCS address; ended by its own pids, never by
    ``ray stop``, which ends every Ray on the machine."""
    address = f"{_FOREIGN_IP}:{free_port()}"
    command = [
        *(sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--block", "--disable-usage-stats"),
        *(f"--node-ip-address={_FOREIGN_IP}", f"--port={address.rpartition(':')[2]}", "--num-cpus=0"),
        *("--include-dashboard=false", "--include-log-monitor=false", f"--object-store-memory={80 * 1024 * 1024}"),
        *(f"--ray-client-server-port={free_port()}", f"--dashboard-agent-listen-port={free_port()}"),
    ]
    address_file = Path(env["RAY_TMPDIR"]) / "ray" / "ray_current_cluster"
    with open(log, "wb") as output:
        ray_start = subprocess.Popen(
            command, env=dict(env), stdout=output, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:

        def up() -> bool:
            if ray_start.poll() is not None:
                raise AssertionError(f"the other Ray exited ({ray_start.returncode}): {log.read_text()[-2000:]}")
            return address_file.exists() and address_file.read_text().strip() == address

        wait_until(up, "the other Ray to start", timeout_s=180)
        yield address
    finally:
        proctree.kill_tree(ray_start.pid, include_root=True)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(ray_start.pid, signal.SIGKILL)  # its group: whatever left the tree
        ray_start.wait(timeout=30)
        wait_until(lambda: not proctree.descendants(ray_start.pid), "the other Ray's processes to end")


def runs_a_rank(cluster: RayTestCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """A one-rank pool on the cluster (this process a Ray driver at the cluster's address) runs a call."""
    monkeypatch.setenv("UC_JUPYTER_RAY_ADDRESS", cluster.address)
    with RankPool(1, devices="cpu", cluster="ray", nodes=1) as pool:
        assert pool.run(sum, [1, 2]) == [3]
        status = pool.status()
        assert status.cluster == cluster.address
        assert status.ranks[0].node == cluster.nodes[0].ip


@pytest.mark.servers  # starts a Ray cluster of its own
def test_on_a_fresh_machine_a_cluster_needs_no_ray_folder_of_the_machines(
    machine: Machine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No /tmp/ray and no ~/.ray yet: the cluster keeps all of Ray's files in its own folder, and leaves
    the machine's as it found them (none)."""
    with RayTestCluster(nodes=1, cpus_per_node=1, base_env=machine.env) as cluster:
        runs_a_rank(cluster, monkeypatch)
    assert not (machine.tmp / "ray").exists()
    assert not (machine.home / ".ray").exists()


@pytest.mark.servers  # starts a Ray of the machine's user and a Ray cluster
def test_another_ray_with_token_auth_neither_breaks_the_cluster_nor_is_touched_by_it(
    machine: Machine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The machine's user runs a Ray of their own, with token auth (their ~/.ray/auth_token, and
    RAY_AUTH_MODE=token in their environment): the test cluster comes up beside it without auth, a pool
    runs on it, and the other Ray's "current cluster" file, its folders and the token stay as they were."""
    token = machine.home / ".ray" / "auth_token"
    token.parent.mkdir()
    token.write_text(_TOKEN)
    with foreign_ray(machine.env, machine.root / "foreign.log") as foreign:
        address_file = machine.tmp / "ray" / "ray_current_cluster"
        before = sorted(os.listdir(machine.tmp / "ray"))
        with RayTestCluster(nodes=1, cpus_per_node=1, base_env={**machine.env, "RAY_AUTH_MODE": "token"}) as cluster:
            assert address_file.read_text().strip() == foreign
            runs_a_rank(cluster, monkeypatch)
        assert address_file.read_text().strip() == foreign  # ray.init() there still finds the user's Ray
        assert sorted(os.listdir(machine.tmp / "ray")) == before
    assert os.listdir(token.parent) == ["auth_token"] and token.read_text() == _TOKEN
