"""uc_jupyter.distributed.launch.local: the devices and backend planned for a pool on this machine, the
torchrun environment each rank gets, and a rank process started on its own (its session, its log, the
reason it could not start coming back over its channel)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.distributed.conftest import one_rank
from uc_jupyter.distributed.launch.local import SUPERVISED, plan_devices, rank_environment, start_rank_process
from uc_jupyter.distributed.protocol import Output, StartFailed


@pytest.mark.parametrize(
    ("n", "devices", "backend", "gpus", "planned"),
    [
        (2, "auto", "auto", 0, ("cpu", "gloo")),  # no GPU: CPU ranks over gloo
        (2, "auto", "auto", 1, ("cpu", "gloo")),  # too few GPUs for every rank: auto stays on CPU
        (2, "auto", "auto", 4, ("cuda", "nccl")),
        (2, "cpu", "auto", 4, ("cpu", "gloo")),  # asked for CPU: GPUs are not used
        (2, "cuda", "gloo", 2, ("cuda", "gloo")),  # an explicit backend is kept
        (1, "cpu", "gloo", 0, ("cpu", "gloo")),
    ],
)
def test_devices_and_backend_follow_the_gpus_there_are(
    n: int, devices: str, backend: str, gpus: int, planned: tuple[str, str]
) -> None:
    assert plan_devices(n, devices, backend, gpus, "on this machine") == planned


def test_cuda_without_a_gpu_per_rank_is_one_line_saying_how_many_and_where() -> None:
    said = "devices='cuda' needs one GPU per rank: 4 ranks asked, 2 on node 10.0.0.5; use fewer ranks or devices='cpu'"
    with pytest.raises(ValueError, match=f"^{re.escape(said)}$"):
        plan_devices(4, "cuda", "auto", 2, "on node 10.0.0.5")


@pytest.mark.parametrize(("devices", "gpus"), [("cpu", 8), ("auto", 1)])
def test_nccl_on_cpu_ranks_is_refused_with_the_backend_to_use(devices: str, gpus: int) -> None:
    with pytest.raises(ValueError, match=r"^backend='nccl' needs a GPU per rank; use backend='gloo'"):
        plan_devices(2, devices, "nccl", gpus, "on this machine")


def test_each_rank_gets_torchrun_variables_and_the_principal_it_acts_as() -> None:
    environment = rank_environment(
        rank=3,
        size=4,
        local_rank=1,
        local_size=2,
        node_rank=1,
        master_addr="10.0.0.5",
        port=29500,
        principal="alice",
        devices="cpu",
        backend="gloo",
    )
    assert environment == {
        "RANK": "3",
        "WORLD_SIZE": "4",
        "LOCAL_RANK": "1",
        "LOCAL_WORLD_SIZE": "2",
        "GROUP_RANK": "1",
        "NODE_RANK": "1",
        "MASTER_ADDR": "10.0.0.5",
        "MASTER_PORT": "29500",
        "UC_JUPYTER_PRINCIPAL": "alice",
        "UC_JUPYTER_RANK_BACKEND": "gloo",
        "UC_JUPYTER_RANK_DEVICE": "cpu",
    }


def test_a_rank_that_cannot_start_says_why_over_its_channel_and_exits(tmp_path: Path) -> None:
    rank = start_rank_process(0, one_rank(backend="no-such-backend"), tmp_path)
    try:
        assert os.getsid(rank.process.pid) == rank.process.pid  # its own session: a terminal's Ctrl-C is ours
        said = rank.channel.recv()
        while isinstance(said, Output):  # torch's warnings on the way come first, as the rank's stderr
            assert said.stream == "stderr"
            said = rank.channel.recv()
        assert isinstance(said, StartFailed) and said.failure.rank == 0
        assert "no-such-backend" in said.failure.message
        assert rank.process.wait(30) == 1 and not rank.running() and rank.returncode() == 1
        assert rank.log == tmp_path / "rank-0.log" and rank.log.exists()
    finally:
        rank.terminate()
        rank.end(5.0)
        rank.channel.close()
    assert (os.uname().sysname == "Linux") == SUPERVISED
