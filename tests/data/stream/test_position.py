"""A DataLoader's data position: resumed on its own grid batch for batch, on other worker counts
exactly once, and what its state holds. (Other world sizes: tests/checkpoint/test_resume.py.)"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.data.conftest import write_files
from uc_jupyter.data import DataLoader, UCVolumeDataset

Volume = Callable[..., tuple[str, Path]]


def name_in(path: str) -> str:
    """The name a test file carries at its start (cached copies are named by their key)."""
    return Path(path).read_bytes().split(b":", 1)[0].decode()


def loader_of(path: str, workers: int, *, on_uneven: str = "allow", batch_size: int = 3) -> DataLoader:
    dataset = UCVolumeDataset(path, shuffle=True, seed=11, on_uneven=on_uneven, transform=name_in)  # type: ignore[arg-type]
    return DataLoader(
        dataset,
        batch_size=batch_size,
        num_workers=workers,
        multiprocessing_context="fork" if workers else None,
        mlflow=False,
    )


def take(loader: DataLoader, batches: int) -> tuple[list[list[str]], dict[str, Any]]:
    """The first ``batches`` batches of the loader's next pass, and its state after them (through
    JSON, as a checkpoint would carry it)."""
    stream = iter(loader)
    got = [next(stream) for _ in range(batches)]
    state = json.loads(json.dumps(loader.state_dict()))
    del stream
    return got, state


@pytest.mark.parametrize("workers", [0, 2, 3])
def test_resumed_on_its_own_grid_the_batches_are_those_of_a_run_never_interrupted(
    local_volume: Volume, workers: int
) -> None:
    path, folder = local_volume()
    write_files(folder, 37)  # uneven over 3 workers and batches of 3
    whole = loader_of(path, workers)
    uninterrupted = [list(whole), list(whole)]  # two epochs

    first, state = take(loader_of(path, workers), 5)
    second_loader = loader_of(path, workers)
    second_loader.load_state_dict(state)
    second, state = take(second_loader, 3)  # interrupted twice in one epoch
    third = loader_of(path, workers)
    third.load_state_dict(state)
    assert third.epoch == 0
    resumed = [first + second + list(third), list(third)]
    assert resumed == uninterrupted


@pytest.mark.parametrize(("before", "after"), [(2, 4), (3, 0), (0, 2)])
def test_resumed_on_another_worker_count_every_file_of_the_epoch_arrives_once(
    local_volume: Volume, before: int, after: int
) -> None:
    path, folder = local_volume()
    files = write_files(folder, 41)
    got, state = take(loader_of(path, before), 4)
    resumed = loader_of(path, after)
    resumed.load_state_dict(state)
    rest = list(resumed)
    epoch = Counter(name for batch in got + rest for name in batch)
    assert epoch == Counter(dict.fromkeys(files, 1))
    assert sorted(name for batch in resumed for name in batch) == sorted(files)  # then a normal epoch
    assert resumed.stats().resumed_epochs == ()  # the second pass is not a resumed one


def joined(names: list[str]) -> str:
    """A collate that makes one object of a batch (as a tokenizer's padded encoding is one)."""
    return "|".join(names)


@pytest.mark.parametrize(("before", "after"), [(0, 2), (2, 0)])
def test_the_position_counts_the_datasets_items_whatever_the_collate_made_of_them(
    local_volume: Volume, before: int, after: int
) -> None:
    path, folder = local_volume()
    files = write_files(folder, 20)

    def loader(workers: int) -> DataLoader:
        dataset = UCVolumeDataset(path, shuffle=True, seed=3, on_uneven="allow", transform=name_in)
        context = "fork" if workers else None
        return DataLoader(
            dataset, batch_size=3, collate_fn=joined, num_workers=workers, multiprocessing_context=context
        )

    first = loader(before)
    stream = iter(first)
    got = [next(stream) for _ in range(3)]
    state = json.loads(json.dumps(first.state_dict()))
    del stream
    assert sum(sum(s[3]) for s in state["segments"]) == 9  # 3 batches of 3 files, each one object
    resumed = loader(after)
    resumed.load_state_dict(state)
    delivered = [name for batch in got + list(resumed) for name in batch.split("|")]
    assert Counter(delivered) == Counter(dict.fromkeys(files, 1))


def test_the_state_is_one_dict_whose_keys_do_not_depend_on_the_grid(local_volume: Volume) -> None:
    path, folder = local_volume()
    write_files(folder, 10)
    fresh = loader_of(path, 2)
    assert fresh.state_dict()["segments"] == [] and fresh.state_dict()["epoch"] == 0
    _, state = take(loader_of(path, 2), 2)
    assert sorted(state) == ["epoch", "fingerprint", "next_stream", "segments"]
    assert state["segments"] == [[1, 2, "allow", [3, 3]]] and state["next_stream"] == [0]
    ended = loader_of(path, 2)
    list(ended)
    assert ended.state_dict()["epoch"] == 1 and ended.state_dict()["segments"] == []  # the next epoch
    loaded = loader_of(path, 4)
    loaded.load_state_dict(state)
    assert loaded.state_dict()["segments"] == state["segments"]  # until its pass starts
