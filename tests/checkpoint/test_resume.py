"""Training state through a volume across pools of ranks: the data position and the random
generators saved with ``torch.distributed.checkpoint`` into a UCVolumeWriter folder, loaded on the
same grid (the very batches of a run never interrupted) and on other world sizes and worker counts
(every file of the interrupted epoch exactly once, sample by sample), on a local and an S3 volume."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import cloudpickle
import pytest

from uc_jupyter.distributed import RankPool

Volume = Callable[..., tuple[str, Path]]
Pools = Callable[[int], RankPool]

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # ranks cannot import test modules by name

FILES = [f"file-{i:02d}" for i in range(45)]  # uneven over 2, 3 and 4 streams


def train(
    path: str,
    workers: int,
    batches: int | None,
    load_from: str | None,
    save_to: str | None,
    then_an_epoch: bool = False,
) -> dict[str, Any]:
    """On each rank: resume from ``load_from`` (if given), take ``batches`` batches of the loader's
    pass (None: to its end), then save into ``save_to`` (if given), then (``then_an_epoch``) run the
    next pass whole. Returns the file names the loop received in order, the epoch, the model's
    weight, the next draw of Python's generator and the epochs the telemetry says were resumed."""
    import random

    import torch
    import torch.distributed.checkpoint as dcp

    from uc_jupyter.checkpoint import RandomState, UCVolumeReader, UCVolumeWriter
    from uc_jupyter.data import DataLoader, UCVolumeDataset

    def name_of(local: str) -> str:
        with open(local, "rb") as handle:
            return handle.read().decode()

    dataset = UCVolumeDataset(path, shuffle=True, seed=7, on_uneven="allow", transform=name_of)
    loader = DataLoader(dataset, batch_size=2, num_workers=workers, mlflow=False)
    model = torch.nn.Linear(3, 1)
    resumed_from: float | None = None
    if load_from is not None:
        state = {"model": model.state_dict(), "data": loader, "rng": RandomState()}
        dcp.load(state, storage_reader=UCVolumeReader(load_from))
        model.load_state_dict(state["model"])
        resumed_from = random.random()  # drawn from the generator the checkpoint gave back
    epoch = loader.epoch
    seen: list[str] = []
    stream = iter(loader)
    for _ in range(batches if batches is not None else 10**6):
        batch = next(stream, None)
        if batch is None:
            break
        seen += batch
        with torch.no_grad():
            model.weight += 1.0  # a training step: the saved weights must be these
    next_draw = None
    if save_to is not None:
        dcp.save(
            {"model": model.state_dict(), "data": loader, "rng": RandomState()}, storage_writer=UCVolumeWriter(save_to)
        )
        next_draw = random.random()
    del stream
    following = [name for batch in loader for name in batch] if then_an_epoch else []
    return {
        "following": following,
        "seen": seen,
        "epoch": epoch,
        "weight": model.weight.sum().item(),
        "next_draw": next_draw,
        "resumed_draw": resumed_from,
        "resumed_epochs": loader.stats().resumed_epochs,
    }


@pytest.fixture(params=["file", pytest.param("s3", marks=pytest.mark.servers)])  # s3: the S3 test server
def volume(request: pytest.FixtureRequest) -> tuple[str, str]:
    """(the data's /Volumes folder, a run folder for checkpoints) on a local or an S3 volume."""
    make: Volume = request.getfixturevalue("local_volume" if request.param == "file" else "s3_volume")
    path, folder = make("data")
    for name in FILES:
        (folder / name).write_bytes(name.encode())
    runs, _ = make("runs")
    return path, f"{runs}/job"


@pytest.fixture
def pools() -> Iterator[Pools]:
    """Pools of n CPU ranks, started on first use in the test (each start costs seconds). Each call
    is bounded: a call that hangs (about one run in 20 to 40 of the [file] case, once) fails with
    RankTimeout saying where each rank was, instead of meeting pytest's timeout with nothing said."""
    started: dict[int, RankPool] = {}

    def pool(n: int) -> RankPool:
        if n not in started:
            started[n] = RankPool(n, devices="cpu", timeout=120)
        return started[n]

    yield pool
    for p in started.values():
        p.shutdown()


def seen(results: list[dict[str, Any]]) -> Counter[str]:
    return Counter(name for result in results for name in result["seen"])


def test_resumed_on_the_same_ranks_and_workers_the_run_is_the_one_never_interrupted(
    volume: tuple[str, str], pools: Pools
) -> None:
    path, run = volume
    whole = pools(2).run(train, path, 2, None, None, None)
    first = pools(2).run(train, path, 2, 3, None, f"{run}/step-3")
    rest = pools(2).run(train, path, 2, None, f"{run}/step-3", None)
    for rank in (0, 1):
        assert first[rank]["seen"] + rest[rank]["seen"] == whole[rank]["seen"]  # batch for batch
        assert rest[rank]["epoch"] == 0 and rest[rank]["resumed_epochs"] == (0,)
        assert rest[rank]["resumed_draw"] == first[rank]["next_draw"]  # each rank's own generator back
    assert first[0]["next_draw"] != first[1]["next_draw"]
    assert seen(whole) == Counter(FILES)


def test_resumed_on_other_world_sizes_and_worker_counts_each_file_arrives_once(
    volume: tuple[str, str], pools: Pools
) -> None:
    """One epoch interrupted three times: 2 ranks x 2 workers, then 3 ranks (no workers), then
    2 x 2, then to its end on 2 x 4; every file once in all, and the next epoch is whole."""
    path, run = volume
    steps = [
        pools(2).run(train, path, 2, 3, None, f"{run}/a"),
        pools(3).run(train, path, 0, 2, f"{run}/a", f"{run}/b"),  # 2 -> 3 ranks
        pools(2).run(train, path, 2, 2, f"{run}/b", f"{run}/c"),  # 3 -> 2 ranks
        pools(2).run(train, path, 4, None, f"{run}/c", None, True),  # 2 -> 4 workers: to the end, then an epoch
    ]
    delivered = [seen(step) for step in steps]
    assert all(delivered[:3]) and all(result["epoch"] == 0 for step in steps for result in step)
    assert sum(delivered, Counter()) == Counter(FILES), "not every file of the epoch exactly once"
    # The weights went through every checkpoint: one step per batch of each rank (replicated ranks
    # each add their own steps to their own copy; DCP stores one of them).
    assert steps[1][0]["weight"] != steps[0][0]["weight"]
    # The telemetry says the pass resumed (the last call's stats are those of the pass after it).
    assert [[result["resumed_epochs"] for result in step] for step in steps[1:]] == [[(0,)] * 3, [(0,)] * 2, [()] * 2]
    assert Counter(name for result in steps[3] for name in result["following"]) == Counter(FILES)
