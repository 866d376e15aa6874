"""The verdict and the advice on real loaders whose bottleneck is built on purpose: each cause is named,
no other is, and where the advice names a change, that change applied lowers the exposed wait.

Real DataLoader workers over a local volume; the causes are sleeps (a step, storage that answers
slowly, workers slow to start) rather than CPU, so that they hold on a loaded 2-core machine.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.data.conftest import write_files
from uc_jupyter.data import DataLoader, UCVolumeDataset
from uc_jupyter.telemetry.model import Snapshot
from uc_jupyter.widgets.advice import advise, verdict
from uc_jupyter.widgets.passes import since

Volume = Callable[..., tuple[str, Path]]


def slow_storage(path: str) -> str:
    """Each file takes 20 ms to arrive, off CPU, as from a store far away."""
    time.sleep(0.02)
    return Path(path).name


def slow_start(worker: int) -> None:
    time.sleep(0.5)  # a worker that takes half a second to start (imports, a model, a connection)


def run(loader: DataLoader, step: float) -> Snapshot:
    for _ in loader:
        time.sleep(step)
    return loader.stats()


@pytest.fixture
def files(local_volume: Volume) -> str:
    path, folder = local_volume()
    write_files(folder, 48)
    return path


def test_a_long_step_is_compute_bound_and_nothing_is_to_change(files: str) -> None:
    loader = DataLoader(UCVolumeDataset(files), batch_size=4, num_workers=2, mlflow=False)
    stats = run(loader, step=0.03)
    judged = verdict(stats)
    assert judged.kind == "compute-bound", judged.text
    assert advise(stats, cpus=8) == (
        "nothing to change in data loading: a faster training step is what speeds this loop up",
    )


def test_a_loop_without_a_step_is_told_its_wait_is_expected(files: str) -> None:
    loader = DataLoader(UCVolumeDataset(files, transform=slow_storage), batch_size=4, num_workers=2, mlflow=False)
    stats = run(loader, step=0.0)
    judged = verdict(stats)
    assert judged.kind == "no-work" and not judged.input_bound, judged.text
    assert advise(stats, cpus=8) == ()


def test_slow_storage_asks_for_more_reads_in_flight_and_more_of_them_lower_the_wait(files: str) -> None:
    def loader(workers: int) -> DataLoader:
        dataset = UCVolumeDataset(files, transform=slow_storage)
        return DataLoader(dataset, batch_size=4, num_workers=workers, persistent_workers=True, mlflow=False)

    few = loader(1)
    run(few, step=0.02)  # the first pass starts the workers
    before = few.stats()
    stats = run(few, step=0.02)
    own = since(stats, before)
    judged = verdict(own)
    assert judged.kind == "input-bound", judged.text
    (advice,) = advise(own, cpus=8)
    assert advice.startswith("the workers wait for their data: on CPU "), advice
    more = loader(4)  # the change it names: more reads in flight
    run(more, step=0.02)
    after = more.stats()
    applied = since(run(more, step=0.02), after)
    assert own.exposed_wait is not None and applied.exposed_wait is not None
    assert applied.exposed_wait < own.exposed_wait * 0.7, (own.exposed_wait, applied.exposed_wait)


def test_workers_slow_to_start_are_start_up_and_persistent_workers_start_them_once(files: str) -> None:
    def loader(persistent: bool) -> DataLoader:
        # Four batches of a 100 ms step: the steady state keeps well under 10% waiting on a loaded machine.
        return DataLoader(
            UCVolumeDataset(files),
            batch_size=16,
            num_workers=2,
            worker_init_fn=slow_start,
            persistent_workers=persistent,
            mlflow=False,
        )

    anew = loader(False)
    run(anew, step=0.1)
    before = anew.stats()
    second = since(run(anew, step=0.1), before)  # a later epoch starts its workers again
    judged = verdict(second)
    assert judged.kind == "start-up", judged.text
    (advice,) = advise(second, cpus=8)
    assert advice.startswith("starting the pass took ") and "persistent_workers=True" in advice, advice
    kept = loader(True)
    run(kept, step=0.1)
    before = kept.stats()
    applied = since(run(kept, step=0.1), before)
    (loop,) = applied.loops().values()
    (anew_loop,) = second.loops().values()
    assert loop.startup < anew_loop.startup / 3, (loop.startup, anew_loop.startup)
    assert verdict(applied).kind != "start-up"
