"""@ray_launch: a function run once, on rank 0 of a one-rank CPU pool, with Ray connected: on this
machine's own Ray, and on a real two-node Ray cluster (the session's), where its tasks reach both nodes."""

from __future__ import annotations

import contextlib
import shutil
import sys
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path

import cloudpickle
import numpy as np
import psutil
import pytest

from uc_jupyter.distributed import PayloadError, ray_launch
from uc_jupyter.distributed.errors import ClusterError
from uc_jupyter.distributed.ray_driver import launch_cluster
from uc_jupyter.distributed.shared import current_shared_pool
from uc_jupyter.processes import free_port
from uc_jupyter.testing.ray_cluster import RayTestCluster

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # ranks cannot import test modules by name


@pytest.fixture
def no_cluster_address(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("UC_JUPYTER_RAY_ADDRESS", raising=False)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)


@pytest.fixture
def machine_ray_state(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Where the ranks started meanwhile find the machine's Ray state, a folder of the test's: a local
    ``ray.init()`` writes its sessions into Ray's shared folder (/tmp/ray, through ``RAY_TMPDIR``) and,
    with token auth on by default, a token into the user's ~/.ray (through ``HOME``) that turns auth on
    for every later ``ray start`` on the machine. The suite must leave neither behind."""
    root = Path(tempfile.mkdtemp(prefix="m-", dir="/tmp"))  # short: Ray's socket paths under it must fit
    (root / "home").mkdir()
    monkeypatch.setenv("RAY_TMPDIR", str(root))
    monkeypatch.setenv("HOME", str(root / "home"))
    for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(name, raising=False)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def on_cluster(ray_cluster: RayTestCluster, monkeypatch: pytest.MonkeyPatch) -> RayTestCluster:
    """The session's cluster named by UC_JUPYTER_RAY_ADDRESS, as a notebook on a cluster has it."""
    monkeypatch.setenv("UC_JUPYTER_RAY_ADDRESS", ray_cluster.address)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    return ray_cluster


def processes_under(pid: int) -> list[str]:
    """The command lines of the live processes below ``pid`` (a local Ray's raylet and GCS would be)."""
    found = []
    for child in psutil.Process(pid).children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            if child.status() != psutil.STATUS_ZOMBIE:
                found.append(" ".join(child.cmdline()))
    return found


@pytest.mark.servers  # starts a local Ray
@pytest.mark.usefixtures("no_cluster_address")
def test_without_a_cluster_it_runs_once_on_a_ray_of_this_machine(machine_ray_state: Path) -> None:
    # First in the module: its own Ray starts and stops before the session's cluster is asked for.
    @ray_launch
    def squares(n: int) -> tuple[list[int], int, bool]:
        import ray

        @ray.remote
        def square(x: int) -> int:
            return x * x

        return ray.get([square.remote(i) for i in range(n)]), len(ray.nodes()), ray.is_initialized()

    assert squares.distributed(3) == [([0, 1, 4], 1, True)]
    pool = current_shared_pool()
    assert pool is not None
    status = pool.status()
    assert (status.size, status.devices, status.cluster) == (1, "cpu", None)
    # Ray was shut down after the call: the rank can connect again (a second call), nothing is left running
    assert squares.distributed(1) == [([0], 1, True)]
    rank_pid = status.ranks[0].pid
    assert pool.run(lambda: __import__("ray").is_initialized()) == [False]
    assert not processes_under(rank_pid)
    # As on a fresh machine: the rank's Ray kept its sessions, and made its token, where it was told to.
    assert list((machine_ray_state / "ray").glob("session_*"))
    assert (machine_ray_state / "home" / ".ray" / "auth_token").is_file()


def test_on_the_cluster_its_tasks_reach_both_nodes_and_the_result_comes_first(
    on_cluster: RayTestCluster, capfd: pytest.CaptureFixture[str]
) -> None:
    from uc_jupyter import notices

    notices.reset()

    @ray_launch(num_accelerators=2, accelerator_type="GPU_1xH100")  # a cluster of CPUs: said, and run anyway
    def where(resources: list[str]) -> tuple[str, list[str]]:
        import os

        import ray

        @ray.remote(num_cpus=0)
        def node_id() -> str:
            return ray.get_runtime_context().get_node_id()

        ids = ray.get([node_id.options(resources={name: 0.01}).remote() for name in resources])
        return os.environ["RANK"], ids

    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        result = where.distributed([node.resource for node in on_cluster.nodes])
    assert result == [("0", [node.node_id for node in on_cluster.nodes]), None]  # one entry per accelerator
    said = [line for line in capfd.readouterr().err.splitlines() if "has no GPU" in line]
    assert said == ["[rank 0] the Ray cluster has no GPU: running where without the 2 nodes x 1 H100 asked"]
    pool = current_shared_pool()
    assert pool is not None
    status = pool.status()
    assert (status.size, status.devices, status.cluster) == (1, "cpu", on_cluster.address)
    assert status.ranks[0].node in {node.ip for node in on_cluster.nodes}


def test_over_ray_client_its_exception_comes_back_as_itself_and_ray_is_disconnected_after(
    on_cluster: RayTestCluster,
) -> None:
    @ray_launch(gpus=1, cluster=on_cluster.client_address)  # the kernel through Ray Client, rank 0 a driver there
    def fails() -> None:
        raise LookupError("no such run")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(LookupError, match="no such run") as caught:
            fails.distributed()
    report = caught.value.__notes__[-1].splitlines()  # the rank's report: the user's own frame and line
    assert report[0] == "[rank 0] LookupError: no such run"
    assert report[-1] == '    raise LookupError("no such run")' and "test_ray_driver.py" in report[-2]
    pool = current_shared_pool()
    assert pool is not None and pool.status().cluster == on_cluster.client_address
    assert pool.run(lambda: __import__("ray").is_initialized()) == [False]


def test_the_cluster_is_the_environments_when_not_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("UC_JUPYTER_RAY_ADDRESS", raising=False)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert launch_cluster(None) is None
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.5:6379")
    assert launch_cluster(None) == "ray"
    assert launch_cluster("ray://10.0.0.5:10001") == "ray://10.0.0.5:10001"


@pytest.mark.usefixtures("no_cluster_address")
def test_bad_requests_are_one_line_before_anything_starts() -> None:
    def noop() -> None:
        return None

    cases: list[tuple[dict[str, object], type[Exception], str]] = [
        ({"gpus": 12, "gpu_type": "GPU_8xH100"}, ValueError, "gpus=12 is not a multiple of 8"),
        ({"num_accelerators": 12, "accelerator_type": "GPU_8xH100"}, ValueError, "num_accelerators=12 is not a mul"),
        ({"gpu_type": "H1000", "gpus": 1}, ValueError, "unknown gpu_type 'H1000': did you mean 'H100'?"),
        ({"gpus": 0}, ValueError, "gpus must be a positive whole number of ranks, got 0"),
        ({"cluster": "ray:/x"}, ValueError, "cluster must be None (this machine), 'ray'"),
        ({"cluster": f"ray://127.0.0.1:{free_port()}"}, ClusterError, "no Ray cluster answers at ray://127.0.0.1:"),
    ]
    for kwargs, kind, message in cases:
        with pytest.raises(kind) as caught:
            ray_launch(**kwargs)(noop).distributed()
        assert str(caught.value).startswith(message) and "\n" not in str(caught.value), kwargs
        assert current_shared_pool() is None or current_shared_pool().status().state == "stopped"  # type: ignore[union-attr]
    table = np.zeros(400_000)  # 3.2 MB

    def captures() -> float:
        return float(table.sum())

    with pytest.raises(PayloadError, match=r"the largest: table \(a closure variable, 3\.2 MB\); build table inside"):
        ray_launch(max_pickle_bytes=1_000_000)(captures).distributed()
    with pytest.raises(ValueError, match="gpus=2 and num_accelerators=4 disagree"):
        ray_launch(gpus=2, num_accelerators=4)
    with pytest.raises(TypeError, match=r"noop is decorated with @ray_launch: run it with noop.distributed\(...\)"):
        ray_launch(noop)()
