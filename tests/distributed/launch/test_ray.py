"""What only a pool on a Ray cluster does: Ray Client, nodes that are lost (killed, or frozen as a
partitioned host is), and the errors said before any rank starts (no cluster, too few resources,
other versions on a node). Everything a local pool also does is in test_pool.py, run on both."""

from __future__ import annotations

import importlib.metadata
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import cloudpickle
import pytest

from tests.distributed.conftest import pool_pids, wait_until_gone, with_supervisors
from uc_jupyter.distributed import RankDied, RankPool
from uc_jupyter.distributed.errors import ClusterError
from uc_jupyter.processes import free_port
from uc_jupyter.testing.ray_cluster import RayTestCluster

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # ranks cannot import test modules by name


def all_reduce_and_where() -> tuple[float, str, str]:
    import torch
    import torch.distributed as dist

    value = torch.ones(1)
    dist.all_reduce(value)
    return float(value.item()), os.environ["NODE_RANK"], os.environ["LOCAL_RANK"]


def sleep_then_answer(seconds: float) -> str:
    time.sleep(seconds)
    return "done"


@pytest.fixture
def on_cluster(ray_cluster: RayTestCluster, monkeypatch: pytest.MonkeyPatch) -> RayTestCluster:
    monkeypatch.setenv("UC_JUPYTER_RAY_ADDRESS", ray_cluster.address)
    return ray_cluster


def test_four_ranks_on_two_nodes_are_numbered_node_by_node(on_cluster: RayTestCluster) -> None:
    with RankPool(4, devices="cpu", cluster="ray", nodes=2) as pool:
        assert pool.run(all_reduce_and_where) == [(4.0, "0", "0"), (4.0, "0", "1"), (4.0, "1", "0"), (4.0, "1", "1")]
        status = pool.status()
        assert status.cluster == on_cluster.address
        assert [info.node_rank for info in status.ranks] == [0, 0, 1, 1]
        node_of = {node.ip for node in on_cluster.nodes}
        assert {info.node for info in status.ranks} <= node_of
        assert len(set(on_cluster.rank_hosts())) == 2  # one host actor per node
    assert not wait_until_gone(set(on_cluster.rank_hosts()))


def test_ray_client_places_ranks_the_same_way(ray_cluster: RayTestCluster) -> None:
    assert ray_cluster.client_address is not None
    with RankPool(2, devices="cpu", cluster=ray_cluster.client_address, nodes=2) as pool:
        assert pool.run(all_reduce_and_where) == [(2.0, "0", "0"), (2.0, "1", "0")]
        assert pool.status().cluster == ray_cluster.client_address


def test_a_frozen_node_is_reported_lost_within_seconds_with_its_address(on_cluster: RayTestCluster) -> None:
    with RankPool(2, devices="cpu", cluster="ray", nodes=2, stop_grace=1.0) as pool:
        pool.start()
        # Freeze the cluster's second node (not the head: that would freeze Ray itself), whichever rank is there.
        [victim] = [info for info in pool.status().ranks if info.node == on_cluster.nodes[1].ip]
        ranks = with_supervisors(pool_pids(pool))
        freezer = threading.Timer(1.0, on_cluster.freeze_node, args=(1,))
        try:
            freezer.start()
            started = time.monotonic()
            with pytest.raises(RankDied) as caught:
                pool.run(sleep_then_answer, 60)
            lost_after = time.monotonic() - started - 1.0
        finally:
            freezer.join()
            on_cluster.thaw_node(1)
        message = str(caught.value)
        assert f"rank {victim.rank} died: lost: its node stopped answering for 3 s" in message
        assert f"(on node {victim.node_rank}, {victim.node}, Ray node " in message
        assert lost_after < 5.0, f"the lost node was reported {lost_after:.1f} s after it froze"
        assert pool.status().state == "stopped"
        assert not wait_until_gone(ranks, within=20)  # thawed, its rank and host were ended
        assert pool.run(all_reduce_and_where) == [(2.0, "0", "0"), (2.0, "1", "0")]  # a fresh start


@pytest.mark.servers  # starts a Ray cluster of its own
def test_a_killed_node_is_reported_with_its_address_and_the_others_are_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with RayTestCluster(nodes=2, cpus_per_node=2) as cluster:
        monkeypatch.setenv("UC_JUPYTER_RAY_ADDRESS", cluster.address)
        with RankPool(2, devices="cpu", cluster="ray", nodes=2, stop_grace=1.0) as pool:
            pool.start()
            [victim] = [info for info in pool.status().ranks if info.node == cluster.nodes[1].ip]
            survivors = with_supervisors({pool.status().ranks[1 - victim.rank].pid})
            killer = threading.Timer(1.0, cluster.kill_node, args=(1,))
            killer.start()
            started = time.monotonic()
            with pytest.raises(RankDied) as caught:
                pool.run(sleep_then_answer, 60)
            killer.join()
            assert time.monotonic() - started - 1.0 < 5.0
            message = str(caught.value)
            assert f"rank {victim.rank} died: lost: " in message
            assert f"(on node {victim.node_rank}, {victim.node}, Ray node " in message
            assert not wait_until_gone(survivors, within=15)  # the rank on the node that lives was ended too


# ---------------------------------------------------------------- said before any rank starts
def test_no_cluster_at_the_address_is_one_line() -> None:
    address = f"ray://127.0.0.1:{free_port()}"
    with pytest.raises(ClusterError, match=r"^no Ray cluster answers at ray://127\.0\.0\.1:\d+ \(connection refused\)"):
        RankPool(2, devices="cpu", cluster=address).start()


def test_cluster_ray_without_an_address_says_which_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("UC_JUPYTER_RAY_ADDRESS", raising=False)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with pytest.raises(ClusterError, match="cluster='ray' needs the cluster's address: set UC_JUPYTER_RAY_ADDRESS"):
        RankPool(2, devices="cpu", cluster="ray").start()


def test_too_few_resources_says_what_is_free(on_cluster: RayTestCluster) -> None:
    with pytest.raises(ClusterError) as caught:
        RankPool(12, devices="cpu", cluster="ray").start()
    message = str(caught.value)
    assert message.startswith(
        "the Ray cluster has too few free resources for 12 ranks: each rank needs 1 CPU; free now: "
    )
    assert message.count(" CPU") == 3  # what each rank needs, then each node's free CPUs
    assert not on_cluster.rank_hosts()
    with pytest.raises(ValueError, match="devices='cuda' needs one GPU per rank: 2 ranks asked, 0 free GPU"):
        RankPool(2, devices="cuda", cluster="ray").start()
    import ray

    assert not ray.is_initialized()  # a pool that did not start holds no connection to the cluster


@pytest.fixture
def other_torch_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RayTestCluster]:
    """A one-node cluster whose Python finds another torch's metadata first (as a node with another
    torch installed would)."""
    shadow = tmp_path / "shadow"
    info = shadow / "torch-0.0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 0.0.1\n")
    path = os.pathsep.join(p for p in (str(shadow), os.environ.get("PYTHONPATH", "")) if p)
    with RayTestCluster(nodes=1, cpus_per_node=2, node_env=[{"PYTHONPATH": path}]) as cluster:
        monkeypatch.setenv("UC_JUPYTER_RAY_ADDRESS", cluster.address)
        yield cluster


def test_a_node_with_another_torch_is_refused_before_any_rank_starts(other_torch_node: RayTestCluster) -> None:
    node = other_torch_node.nodes[0]
    with pytest.raises(ClusterError) as caught:
        RankPool(2, devices="cpu", cluster="ray").start()
    mine = importlib.metadata.version("torch")
    assert str(caught.value) == (
        f"the Ray node {node.ip} ({node.node_id[:8]}) runs torch 0.0.1, this kernel {mine}: ranks must run the "
        f"kernel's versions; install torch {mine} on the cluster's nodes "
        "(or use a cluster image that matches this kernel)"
    )
    assert not wait_until_gone(set(other_torch_node.rank_hosts()))  # the hosts that asked were ended; no rank started


def test_bad_cluster_values_are_refused_at_once() -> None:
    with pytest.raises(ValueError, match="cluster must be None .* or 'ray://host:port' \\(Ray Client\\), got 'spark'"):
        RankPool(2, cluster="spark")
    with pytest.raises(ValueError, match="nodes=3 does not divide n=4"):
        RankPool(4, cluster="ray", nodes=3)
