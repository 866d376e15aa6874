"""uc_jupyter.data.loader.headroom and DataLoader.headroom: a step fed by the loader against the same
step on batches replayed from memory, with the test's clock; and a real loader left where it was."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.data.conftest import write_files
from uc_jupyter.data import DataLoader, UCVolumeDataset
from uc_jupyter.data.loader.headroom import Headroom, measure_headroom
from uc_jupyter.testing.clocks import ManualClock


def loading(clock: ManualClock, count: int, seconds: float) -> Iterator[int]:
    """``count`` batches, each taking ``seconds`` of the clock to arrive."""
    for batch in range(count):
        clock.advance(seconds)
        yield batch


def stepping(clock: ManualClock, seconds: float, seen: list[int]) -> Callable[[int], None]:
    def step(batch: int) -> None:
        seen.append(batch)
        clock.advance(seconds)

    return step


def test_the_same_steps_fed_and_replayed_give_what_a_perfect_loader_would_gain() -> None:
    clock, seen = ManualClock(), []
    report = measure_headroom(loading(clock, 100, 0.03), stepping(clock, 0.02, seen), steps=5, clock=clock)
    assert report == Headroom(steps=4, loaded_step_seconds=pytest.approx(0.05), ideal_step_seconds=pytest.approx(0.02))
    assert report.speedup == pytest.approx(2.5)
    assert seen == [0, 1, 2, 3, 4, 1, 2, 3, 4]  # the first batch is start-up: never replayed, never timed
    assert repr(report) == (
        "Headroom(with a perfect loader the loop would run 2.50x faster: 50.0 ms a step fed by this loader, "
        "20.0 ms from memory, over 4 steps)"
    )


def test_a_loader_that_keeps_up_says_so_and_a_short_pass_is_what_it_gives() -> None:
    clock: ManualClock = ManualClock()
    report = measure_headroom(loading(clock, 3, 0.0), stepping(clock, 0.02, []), steps=20, clock=clock)
    assert report.steps == 2 and report.speedup == pytest.approx(1.0)
    assert repr(report).startswith("Headroom(the loader keeps up: 20.0 ms a step fed by this loader, 20.0 ms")


@pytest.mark.parametrize(("count", "said"), [(0, "the loader delivered none"), (1, "at least 2 batches")])
def test_too_few_batches_are_one_line(count: int, said: str) -> None:
    clock = ManualClock()
    with pytest.raises(ValueError, match=said):
        measure_headroom(loading(clock, count, 0.01), stepping(clock, 0.01, []), steps=5, clock=clock)


def test_a_passes_loader_ends_the_pass_it_took_batches_from() -> None:
    clock, closed = ManualClock(), []

    def batches() -> Iterator[int]:
        try:
            yield from range(100)
        finally:
            closed.append(True)

    measure_headroom(batches(), stepping(clock, 0.01, []), steps=3, clock=clock)
    assert closed == [True]


@pytest.fixture
def loader(local_volume: Callable[..., tuple[str, Path]]) -> DataLoader:
    path, folder = local_volume()
    write_files(folder, 24)
    return DataLoader(UCVolumeDataset(path, shuffle=True, seed=3), batch_size=4, num_workers=0, mlflow=False)


def names(batches: Any) -> list[str]:
    return [Path(p).name for batch in batches for p in batch]


def test_a_loaders_headroom_leaves_its_position_and_its_next_epoch_as_they_were(loader: DataLoader) -> None:
    twin = DataLoader(UCVolumeDataset(loader.dataset.volume_path, shuffle=True, seed=3), batch_size=4, num_workers=0)
    report = loader.headroom(lambda batch: None, steps=4)
    assert report.steps == 3 and loader.epoch == 0
    assert names(loader) == names(twin)  # the pass after it is epoch 0, shuffled as epoch 0
    assert loader.epoch == 1 and loader.stats().batches == 4 + 6  # its batches count in stats()


def test_bad_arguments_and_a_pending_resume_are_refused_in_one_line(loader: DataLoader) -> None:
    with pytest.raises(TypeError, match="^headroom\\(\\) needs your training step, a function of a batch; got int$"):
        loader.headroom(123)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="steps"):
        loader.headroom(print, steps=1)
    it = iter(loader)
    next(it)
    state = loader.state_dict()
    it.close()
    loader.load_state_dict(state)
    with pytest.raises(RuntimeError, match="^headroom\\(\\) runs a pass of its own, and a loaded position waits"):
        loader.headroom(print)
