"""@distributed on CPU ranks: the reference's calling convention, validation at call time, data built
inside the function, and rank telemetry reaching the kernel."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import cloudpickle
import numpy as np
import pytest

from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.distributed import PayloadError, distributed
from uc_jupyter.distributed.shared import current_shared_pool
from uc_jupyter.testing.ray_cluster import RayTestCluster

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # ranks cannot import test modules by name


@distributed(gpus=2)
def world(offset: int = 0) -> tuple[int, int]:
    import torch
    import torch.distributed as dist

    total = torch.tensor([float(dist.get_rank())])
    dist.all_reduce(total)
    return dist.get_rank() + offset, int(total.item())


def test_runs_on_every_rank_and_returns_results_in_rank_order() -> None:
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        assert world.distributed() == [(0, 1), (1, 1)]
        assert world.distributed(offset=10) == [(10, 1), (11, 1)]
    assert world.__name__ == "world" and world.gpus == 2


def test_calling_it_directly_says_how_to_run_it() -> None:
    with pytest.raises(TypeError, match=r"world is decorated with @distributed: run it with world.distributed\(...\)"):
        world()


def test_without_gpus_it_runs_cpu_ranks_and_says_so_once(capsys: pytest.CaptureFixture[str]) -> None:
    from uc_jupyter import notices

    notices.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # one plain line, never a UserWarning
        world.distributed()
        world.distributed()
    said = [line for line in capsys.readouterr().err.splitlines() if "CUDA" in line]
    assert said == ["no CUDA device is visible: running 2 CPU ranks with gloo instead of GPUs"]
    status = current_shared_pool().status()  # type: ignore[union-attr]
    assert (status.devices, status.backend, status.size) == ("cpu", "gloo", 2)


def test_reference_spellings_are_accepted() -> None:
    @distributed(num_accelerators=2, accelerator_type="H100")  # on CPU-only machines the type is not enforced
    def size() -> int:
        import torch.distributed as dist

        return dist.get_world_size()

    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        assert size.distributed() == [2, 2]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"gpus": 0}, "gpus must be a positive whole number of ranks, got 0"),
        ({"gpus": -2}, "gpus must be a positive whole number of ranks, got -2"),
        ({"gpus": 1.5}, "gpus must be a positive whole number of ranks, got 1.5"),
        ({"gpus": "2"}, "gpus must be a positive whole number of ranks, got '2'"),
        ({}, "gpus must be a positive whole number of ranks, got None"),
        ({"gpus": 2, "gpu_type": "H1000"}, "unknown gpu_type 'H1000': did you mean 'H100'?"),
        ({"gpus": 2, "gpu_type": ""}, "gpu_type must be a GPU model name"),
        ({"gpus": 12, "gpu_type": "GPU_8xH100"}, "gpus=12 is not a multiple of 8, the GPUs per node of gpu_type="),
        ({"num_accelerators": 3, "accelerator_type": "GPU_2xA10"}, "num_accelerators=3 is not a multiple of 2"),
        ({"gpus": 2, "cluster": "yarn"}, r"cluster must be None \(this machine\), 'ray' \(the address in"),
    ],
)
def test_bad_requests_fail_at_call_time_with_one_line(kwargs: dict[str, object], message: str) -> None:
    @distributed(**kwargs)  # decorating never fails: the machine is checked when it runs
    def noop() -> None:
        return None

    with pytest.raises(ValueError, match=message) as caught:
        noop.distributed()
    assert "\n" not in str(caught.value)


def test_a_per_node_type_without_a_count_is_one_node_of_them() -> None:
    @distributed(accelerator_type="GPU_2xH100")  # 2 ranks; this machine's CPUs stand in
    def size() -> int:
        import torch.distributed as dist

        return dist.get_world_size()

    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        assert size.distributed() == [2, 2]


def test_on_a_cluster_gpus_count_the_clusters_and_a_per_node_type_places_them_node_by_node(
    ray_cluster: RayTestCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UC_JUPYTER_RAY_ADDRESS", ray_cluster.address)

    def where() -> tuple[int, int]:
        import os

        import torch
        import torch.distributed as dist

        total = torch.ones(1)
        dist.all_reduce(total)
        return int(os.environ["NODE_RANK"]), int(total.item())

    split = distributed(num_accelerators=2, accelerator_type="GPU_1xH100", cluster="ray")(where)
    packed = distributed(gpus=2, cluster="ray")(where)  # no split asked: as few nodes as hold them
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        assert split.distributed() == [(0, 2), (1, 2)]
        status = current_shared_pool().status()  # type: ignore[union-attr]
        assert (status.cluster, status.devices, status.size) == (ray_cluster.address, "cpu", 2)  # no GPU there
        assert {info.node for info in status.ranks} == {node.ip for node in ray_cluster.nodes}
        assert packed.distributed() == [(0, 2), (0, 2)]


def test_bad_decorations() -> None:
    with pytest.raises(ValueError, match="gpus=2 and num_accelerators=4 disagree"):
        distributed(gpus=2, num_accelerators=4)
    with pytest.raises(TypeError, match=r"write @distributed\(gpus=N\)"):

        @distributed
        def bare() -> None:
            return None


def test_a_captured_dataset_over_the_limit_is_refused_naming_it() -> None:
    table = np.zeros(400_000)  # 3.2 MB

    @distributed(gpus=2, max_pickle_bytes=1_000_000)
    def train() -> float:
        return float(table.sum())

    with pytest.raises(PayloadError, match=r"the largest: table \(a closure variable, 3\.2 MB\); build table inside"):
        train.distributed()
    pool = current_shared_pool()
    assert pool is not None and pool.max_payload_bytes == 100_000_000  # the limit was this call's only


@pytest.mark.usefixtures("busy_machine")  # where the kernel once counted 32 of the 37 files
def test_a_volume_dataset_built_inside_covers_the_volume_once_and_telemetry_reaches_the_kernel(
    catalog: LocalCatalog,
) -> None:
    info = catalog.create_volume("main.ml.shards")
    folder = Path(info.storage_location.removeprefix("file://"))
    names = [f"item{i:03d}.txt" for i in range(37)]  # not divisible by 2 ranks x 2 workers
    for name in names:
        (folder / name).write_text(name)

    @distributed(gpus=2)
    def read_my_share(path: str) -> list[str]:
        from uc_jupyter.data import DataLoader, UCVolumeDataset

        dataset = UCVolumeDataset(path, on_uneven="allow")
        loader = DataLoader(dataset, batch_size=4, num_workers=2, mlflow=False)
        return [Path(p).name for batch in loader for p in batch]  # the pass's end forwards its last counters

    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        shares = read_my_share.distributed(info.path)
    assert sorted(shares[0] + shares[1]) == names
    assert not set(shares[0]) & set(shares[1])
    pool = current_shared_pool()
    assert pool is not None
    snapshot = pool.collector.snapshot()
    assert {rank for rank, _ in snapshot.samples} == {0, 1}
    assert sum(s.files for (rank, worker), s in snapshot.samples.items() if worker >= 0) == 37
