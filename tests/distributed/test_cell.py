"""run_cell (what %%uc_distributed calls) with ``cluster``: a cell on the ranks of a Ray cluster reached
through Ray Client, and a bad cluster refused in one line before anything runs."""

from __future__ import annotations

import pytest

from uc_jupyter.distributed.cell import CellUsageError, run_cell
from uc_jupyter.distributed.shared import current_shared_pool
from uc_jupyter.testing.ray_cluster import RayTestCluster


def test_a_cell_runs_on_the_cluster_it_names_over_ray_client(ray_cluster: RayTestCluster) -> None:
    assert ray_cluster.client_address is not None
    namespace = {"base": 10}
    values = run_cell(
        "import os\nnode = int(os.environ['NODE_RANK']) + base\nnode",
        namespace=namespace,
        gpus=2,
        gpu_type="GPU_1xH100",  # one rank per node: 2 nodes
        cluster=ray_cluster.client_address,
        push=["base"],
        pull=["node"],
    )
    assert values == [10, 11] and namespace["node"] == [10, 11]
    status = current_shared_pool().status()  # type: ignore[union-attr]
    assert status.cluster == ray_cluster.client_address and status.size == 2


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"n": 2, "cluster": "ray:/10.0.0.5"}, "cluster must be None (this machine), 'ray' (the address in"),
        ({"gpus": 12, "gpu_type": "GPU_8xH100"}, "gpus=12 is not a multiple of 8"),
        ({"n": 2, "gpus": 2, "cluster": "bad"}, "cluster must be None"),  # the cluster is judged first
    ],
)
def test_bad_options_are_one_line_and_nothing_runs(options: dict[str, object], message: str) -> None:
    with pytest.raises(CellUsageError) as caught:
        run_cell("x = 1", **options)  # type: ignore[arg-type]
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)
    assert current_shared_pool() is None
