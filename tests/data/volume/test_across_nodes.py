"""Data read by ranks on several nodes: exactly once across every rank of every node, one download per
file per node (a node's ranks share its cache; nodes do not share one), every rank's telemetry in the
kernel, and the DataLoader's consistency check across the whole world. Runs on this machine and on the
two-node Ray cluster (the ``placement`` parameter); on Ray each node has its own cache folder, as
separate machines would."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cloudpickle
import pyarrow as pa
import pytest

from tests.conftest import PoolMaker
from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.distributed import RankError
from uc_jupyter.testing.s3_server import S3TestServer

Volume = Callable[..., tuple[str, Path]]

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # ranks cannot import test modules by name


def read_volume(path: str, epochs: int) -> dict[str, Any]:
    """On each rank: the file names it was given in each epoch (shuffled anew each epoch), and its node."""
    import os

    from uc_jupyter.data import DataLoader, UCVolumeDataset

    def name_of(local: str) -> str:
        with open(local, "rb") as handle:
            return handle.read().decode()

    dataset = UCVolumeDataset(path, shuffle=True, seed=11, on_uneven="allow", transform=name_of)
    seen = []
    with DataLoader(dataset, batch_size=3, num_workers=0) as loader:
        for epoch in range(epochs):
            dataset.set_epoch(epoch)
            seen.append([name for batch in loader for name in batch])
    return {"node": os.environ.get("NODE_RANK", "0"), "epochs": seen}


def test_a_volume_is_read_exactly_once_across_nodes_with_one_download_per_node(
    make_pool: PoolMaker, s3_volume: Volume, s3: S3TestServer
) -> None:
    path, folder = s3_volume()
    names = [f"file-{i:02d}" for i in range(30)]
    for name in names:
        (folder / name).write_bytes(name.encode())
    with make_pool(4, devices="cpu") as pool:
        results = pool.run(read_volume, path, 2)
    # Every rank's DataLoader telemetry reached this kernel's collector, from both nodes.
    assert {rank for rank, _ in pool.collector.snapshot().samples} == {0, 1, 2, 3}
    for epoch in range(2):
        delivered = Counter(name for result in results for name in result["epochs"][epoch])
        assert delivered == Counter(names), f"epoch {epoch}: not every file exactly once across the 4 ranks"
    # What each node read over both epochs; each such file was downloaded once on that node, by
    # whichever of its ranks came first, and the other reads were hits in the node's cache.
    by_node: dict[str, set[str]] = {}
    for result in results:
        by_node.setdefault(result["node"], set()).update(n for epoch in result["epochs"] for n in epoch)
    gets = s3.stats()["gets"]
    assert sum(gets.values()) == sum(len(read) for read in by_node.values())
    if pool.cluster is not None:
        assert sorted(by_node) == ["0", "1"]
        assert sum(gets.values()) > len(names)  # the nodes' caches are their own: both fetched some files


def read_table(table: str) -> list[int]:
    from uc_jupyter.data import DataLoader, UCTableDataset

    dataset = UCTableDataset(table, batch_size=4, shuffle=True, seed=3, on_uneven="allow")
    with DataLoader(dataset, batch_size=None, num_workers=0) as loader:
        return [int(i) for batch in loader for i in batch["id"]]


def test_a_table_is_read_exactly_once_across_nodes(make_pool: PoolMaker, catalog: LocalCatalog) -> None:
    catalog.create_table("main.ml.events", pa.table({"id": list(range(37))}))
    with make_pool(4, devices="cpu") as pool:
        per_rank = pool.run(read_table, "main.ml.events")
    assert sorted(i for ids in per_rank for i in ids) == list(range(37))
    assert all(per_rank)  # every rank had rows


def disagree_on_rank_3() -> int:
    import torch.distributed as dist

    from uc_jupyter.data import DataLoader

    loader = DataLoader(list(range(16)), batch_size=8 if dist.get_rank() == 3 else 4, num_workers=0)
    return sum(len(batch) for batch in loader)


def test_the_loaders_consistency_check_spans_every_node(make_pool: PoolMaker) -> None:
    with make_pool(4, devices="cpu") as pool, pytest.raises(RankError) as caught:
        pool.run(disagree_on_rank_3)
    assert caught.value.ranks == (0, 1, 2, 3)  # every rank refuses, on both nodes
    assert "ranks disagree on batch_size: rank 0 has 4, rank 3 has 8" in str(caught.value)
