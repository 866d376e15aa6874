"""Checkpoints saved and loaded by real ranks (RankPool, gloo on CPU): 2 ranks write their shards of a
sharded tensor in parallel, on a file:// and an s3:// volume, with dcp.save and dcp.async_save; 3 ranks
load them (DCP reshards); a rank killed in the middle of a save leaves the previous checkpoint the
latest and nothing of the new one readable. Three pool starts in all."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cloudpickle
import pytest

from uc_jupyter.checkpoint import UCVolumeReader, latest
from uc_jupyter.distributed import RankDied, RankPool
from uc_jupyter.testing.s3_server import S3TestServer

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # ranks cannot import test modules by name

Volume = Callable[..., tuple[str, Path]]
ROWS = 6000  # the sharded tensor's rows: 6000 x 64 float32, 1.5 MB


def _full(seed: int) -> Any:
    import torch

    return torch.randn(ROWS, 64, generator=torch.Generator().manual_seed(seed))


def _state(seed: int, *, empty: bool) -> dict[str, Any]:
    """This rank's part of the state: a tensor sharded by rows over every rank, a replicated one, a
    bf16 one, and plain values."""
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    full = torch.zeros(ROWS, 64) if empty else _full(seed)
    bias = torch.zeros(64) if empty else torch.arange(64.0) * seed
    half = torch.zeros(5, dtype=torch.bfloat16) if empty else torch.full((5,), seed / 3).to(torch.bfloat16)
    extra = {"step": -1} if empty else {"step": seed}
    return {"model": {"weight": distribute_tensor(full, mesh, [Shard(0)]), "bias": bias, "half": half}, "extra": extra}


def save_on_ranks(path: str, seed: int, how: str = "sync", keep_last: int | None = None) -> float:
    """Save the state into ``path``; for ``async`` the seconds the caller was blocked."""
    import time

    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp

    from uc_jupyter.checkpoint import UCVolumeWriter

    state = _state(seed, empty=False)
    writer = UCVolumeWriter(path, keep_last=keep_last, file_bytes=256 << 10)
    if how == "async":
        group = dist.new_group(backend="gloo")  # the loop's own collectives stay on the default group
        began = time.perf_counter()
        pending = dcp.async_save(state, storage_writer=writer, process_group=group)
        blocked = time.perf_counter() - began
        pending.result()
        return blocked
    dcp.save(state, storage_writer=writer)
    return 0.0


def load_on_ranks(path: str, seed: int) -> bool:
    """Load ``path`` into zeros on this grid; whether every value came back bit for bit."""
    import torch
    import torch.distributed.checkpoint as dcp

    from uc_jupyter.checkpoint import UCVolumeReader

    state = _state(seed, empty=True)
    dcp.load(state, storage_reader=UCVolumeReader(path))
    expected = _state(seed, empty=False)
    model, wanted = state["model"], expected["model"]
    same = torch.equal(model["weight"].full_tensor(), wanted["weight"].full_tensor())
    same &= torch.equal(model["weight"].to_local(), wanted["weight"].to_local())
    same &= torch.equal(model["bias"], wanted["bias"]) and torch.equal(model["half"], wanted["half"])
    return bool(same and state["extra"] == expected["extra"])


def save_and_die(path: str, endpoint: str) -> None:
    """Rank 1 kills itself (SIGKILL) once the S3 server has received the first bytes of the save."""
    import json
    import os
    import signal
    import threading
    import urllib.request

    import torch.distributed as dist

    from uc_jupyter.testing.waits import wait_until

    def received() -> bool:
        with urllib.request.urlopen(f"{endpoint}/_control/stats", timeout=10) as answer:
            return bool(json.loads(answer.read())["bytes_received"] > 256 << 10)

    def killer() -> None:
        wait_until(received, "the S3 server to receive the save's first bytes", timeout_s=300, interval_s=0.005)
        os.kill(os.getpid(), signal.SIGKILL)

    if dist.get_rank() == 1:
        threading.Thread(target=killer, daemon=True).start()
    save_on_ranks(path, 3)


@pytest.mark.in_a_fork
def test_two_ranks_save_and_three_load_on_local_and_s3(local_volume: Volume, s3_volume: Volume) -> None:
    paths = [local_volume("ckpt")[0], s3_volume("remote")[0]]
    with RankPool(2, devices="cpu", stop_grace=2.0) as pool:
        for path in paths:
            assert pool.run(save_on_ranks, f"{path}/run/step-1", 1) == [0.0, 0.0]
            assert pool.run(load_on_ranks, f"{path}/run/step-1", 1) == [True, True]
            blocked = pool.run(save_on_ranks, f"{path}/run/step-2", 2, "async", 1)
            assert all(b < 60 for b in blocked)
            assert pool.run(load_on_ranks, f"{path}/run/step-2", 2) == [True, True]
    for path in paths:
        assert latest(f"{path}/run") == f"{path}/run/step-2"
        with pytest.raises(FileNotFoundError, match="holds no committed checkpoint"):  # keep_last=1 removed it
            UCVolumeReader(f"{path}/run/step-1")
    with RankPool(3, devices="cpu", stop_grace=2.0) as pool:
        for path in paths:
            assert pool.run(load_on_ranks, f"{path}/run/step-2", 2) == [True, True, True]


def test_a_rank_killed_in_the_middle_of_a_save_leaves_the_previous_checkpoint_latest(
    s3_volume: Volume, s3: S3TestServer
) -> None:
    path, folder = s3_volume("remote")
    with RankPool(2, devices="cpu", stop_grace=1.0) as pool:
        pool.run(save_on_ranks, f"{path}/run/step-1", 1)
        s3.reset()
        s3.configure(bandwidth=2e6)  # 3 MB of shards at 2 MB/s: the save is under way for a while
        with pytest.raises(RankDied):
            pool.run(save_and_die, f"{path}/run/step-2", s3.endpoint)
    s3.configure(bandwidth=0)
    assert latest(f"{path}/run") == f"{path}/run/step-1"
    with pytest.raises(FileNotFoundError, match=r"step-2 holds no committed checkpoint"):
        UCVolumeReader(f"{path}/run/step-2")
    assert not (folder / "run/step-2/_COMMITTED").exists() and not (folder / "run/step-2/.metadata").exists()
