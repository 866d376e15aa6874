"""Mix (uc_jupyter.data.mix.dataset) over real local volumes and Delta tables of the embedded catalog: proportions,
each source's epochs, resume on the same grid and another, weights changed at resume, and its one-line refusals."""

from __future__ import annotations

import pickle
import re
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests.data.conftest import write_files
from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.data import DataLoader, Mix, UCTableDataset, UCVolumeDataset
from uc_jupyter.widgets.advice import verdict
from uc_jupyter.widgets.sources import sources_text, waited_on

VolumeMaker = Callable[..., tuple[str, Path]]


@pytest.fixture
def volumes(local_volume: VolumeMaker) -> Callable[..., list[str]]:
    """Volumes v0, v1, ... of the given file counts (of ``size`` bytes); returns their /Volumes paths."""

    def make(counts: list[int], size: int = 8) -> list[str]:
        paths = []
        for i, count in enumerate(counts):
            path, folder = local_volume(f"v{i}")
            write_files(folder, count, size=size, prefix=f"v{i}-")
            paths.append(path)
        return paths

    return make


@pytest.fixture
def table(catalog: LocalCatalog) -> str:
    catalog.create_table("main.ml.captions", pa.table({"id": list(range(4)), "text": [f"c{i}" for i in range(4)]}))
    return "main.ml.captions"


def source_of(sample: Any) -> str:
    """``v0`` for a path of volume v0, ``captions`` for a table row."""
    return "captions" if isinstance(sample, dict) else Path(sample).name.split("-")[0]


def name_of(sample: Any) -> str:
    return f"c{int(sample['id'])}" if isinstance(sample, dict) else Path(sample).name


def names_of(batch: list[Any]) -> list[str]:
    return [name_of(s) for s in batch]


def test_a_volume_and_a_table_mix_in_proportion_each_read_once_per_its_epoch(
    volumes: Callable[..., list[str]], table: str
) -> None:
    [images] = volumes([6])
    mix = Mix([UCVolumeDataset(images), UCTableDataset(table, batch_size=3)], [3, 1], until="first_exhausted")
    assert len(mix) == 8 and repr(mix) == f"Mix({images} x 3, {table} x 1, until='first_exhausted')"
    first = list(mix)
    assert [source_of(s) for s in first] == ["v0", "v0", "captions", "v0", "v0", "v0", "captions", "v0"]
    assert sorted(name_of(s) for s in first if source_of(s) == "v0") == [f"v0-{i:05d}.bin" for i in range(6)]
    # The table has 4 rows, read 2 a mix epoch: its own epoch 0 spans both mix epochs, each row once.
    second = list(mix)
    rows = [name_of(s) for s in first + second if source_of(s) == "captions"]
    assert rows == ["c0", "c1", "c2", "c3"]


def test_a_dataloader_batches_a_mix_with_a_collate_that_takes_both_and_refuses_one_that_cannot(
    volumes: Callable[..., list[str]], table: str
) -> None:
    [images] = volumes([3])
    mix = Mix([UCVolumeDataset(images), UCTableDataset(table)], weights=[1, 1])
    differ = r"/Volumes/main/ml/v0 file paths, main.ml.captions rows with columns \['id', 'text'\]"
    with pytest.raises(ValueError, match=rf"^the mix's sources yield different samples: {differ}; give the Data"):
        DataLoader(mix, batch_size=2, num_workers=0)
    loader = DataLoader(mix, batch_size=2, num_workers=0, collate_fn=lambda batch: [name_of(s) for s in batch])
    # all_seen: the epoch lasts until the table's 4 rows have come; the volume begins its second epoch.
    expected = [["v0-00000.bin", "c0"], ["v0-00001.bin", "c1"], ["v0-00002.bin", "c2"], ["v0-00000.bin", "c3"]]
    assert list(loader) == expected


def test_until_first_exhausted_and_steps_end_a_mix_epoch(volumes: Callable[..., list[str]]) -> None:
    small, big = volumes([2, 9])
    assert len(Mix([UCVolumeDataset(small), UCVolumeDataset(big)], [1, 1], until="first_exhausted")) == 3
    assert len(Mix([UCVolumeDataset(small), UCVolumeDataset(big)], [1, 1], until="steps", steps=5)) == 5
    assert len(Mix([UCVolumeDataset(small), UCVolumeDataset(big)], [1, 1])) == 18


def run(loader: DataLoader, batches: int | None = None) -> list[list[str]]:
    """The next pass's batches (``batches`` of them, else all), as sample names."""
    got = []
    for batch in loader:
        got.append([name_of(s) for s in batch])
        if batches is not None and len(got) == batches:
            break
    return got


def five_sources(paths: list[str]) -> Mix:
    return Mix([UCVolumeDataset(p, shuffle=i % 2 == 0, seed=i) for i, p in enumerate(paths)], weights=[1, 2, 3, 1, 1])


def test_five_sources_resume_after_their_first_epoch_batch_for_batch(volumes: Callable[..., list[str]]) -> None:
    # litdata #694: a combined dataset failed to resume after its first epoch.
    paths = volumes([3, 4, 5, 6, 7])
    whole = DataLoader(five_sources(paths), batch_size=3, num_workers=0, collate_fn=names_of)
    uninterrupted = [run(whole), run(whole), run(whole)]

    loader = DataLoader(five_sources(paths), batch_size=3, num_workers=0, collate_fn=names_of)
    assert run(loader) == uninterrupted[0]
    partial = run(loader, batches=4)
    state = pickle.loads(pickle.dumps(loader.state_dict()))
    assert state["epoch"] == 1 and state["schedule"]["bases"] != [0, 0, 0, 0, 0]

    resumed = DataLoader(five_sources(paths), batch_size=3, num_workers=0, collate_fn=names_of)
    resumed.load_state_dict(state)
    assert partial + run(resumed) == uninterrupted[1]  # the shuffled sources' order too (datasets #7156)
    assert run(resumed) == uninterrupted[2]


def test_each_source_is_read_once_per_its_own_epoch_across_passes(volumes: Callable[..., list[str]]) -> None:
    paths = volumes([3, 4, 5, 6, 7])
    mix = five_sources(paths)
    seen: dict[str, list[str]] = defaultdict(list)
    for _ in range(3):
        for sample in mix:
            seen[source_of(sample)].append(name_of(sample))
    for i, count in enumerate([3, 4, 5, 6, 7]):
        names = seen[f"v{i}"]
        for start in range(0, len(names) - count + 1, count):  # every whole epoch of the source
            assert sorted(names[start : start + count]) == [f"v{i}-{k:05d}.bin" for k in range(count)]


def test_a_mix_resumed_on_more_ranks_delivers_each_sample_left_once(
    volumes: Callable[..., list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = volumes([3, 4, 5])

    def make() -> Mix:  # on_uneven="allow": no padding repeats
        sources = [UCVolumeDataset(p, shuffle=True, seed=i) for i, p in enumerate(paths)]
        return Mix(sources, [1, 1, 2], on_uneven="allow")

    whole = [name_of(s) for s in make()]
    mix = make()
    stream = iter(mix)
    taken = [name_of(next(stream)) for _ in range(5)]
    state = mix.state_dict()
    rest: list[str] = []
    monkeypatch.setenv("WORLD_SIZE", "3")
    for rank in range(3):
        monkeypatch.setenv("RANK", str(rank))
        resumed = make()
        resumed.load_state_dict(state)
        rest += [name_of(s) for s in resumed]
    assert Counter(taken + rest) == Counter(whole)  # nothing repeated, nothing skipped


def test_weights_changed_at_resume_rule_from_the_resume_point_and_each_source_gives_what_it_owed(
    volumes: Callable[..., list[str]],
) -> None:
    a, b = volumes([4, 4])
    old = Mix([UCVolumeDataset(a), UCVolumeDataset(b)], [1, 1])
    stream = iter(old)
    taken = [name_of(next(stream)) for _ in range(3)]
    assert taken == ["v0-00000.bin", "v1-00000.bin", "v0-00001.bin"]
    new = Mix([UCVolumeDataset(a), UCVolumeDataset(b)], [3, 1])
    new.load_state_dict(old.state_dict())
    rest = [name_of(s) for s in new]
    # 3:1 from the resume point, until v1 has given the 3 samples its epoch still owed; each source's
    # owed samples first (v0's 2 and 3), then v0 goes on into its next epoch.
    assert [source_of(s) for s in rest] == ["v0", "v0", "v1", "v0"] * 2 + ["v0", "v0", "v1"]
    assert [n for n in rest if n.startswith("v1")] == ["v1-00001.bin", "v1-00002.bin", "v1-00003.bin"]
    assert [n for n in rest if n.startswith("v0")][:4] == [
        "v0-00002.bin",
        "v0-00003.bin",
        "v0-00000.bin",
        "v0-00001.bin",
    ]
    following = [source_of(s) for s in new]  # the next mix epoch: 3:1 again, until v1 has given 4
    assert following == ["v0", "v0", "v1", "v0"] * 3 + ["v0", "v0", "v1"]


def test_a_checkpoint_of_other_sources_is_refused_naming_the_source(
    volumes: Callable[..., list[str]], table: str
) -> None:
    a, b = volumes([3, 4])
    mix = Mix([UCVolumeDataset(a), UCVolumeDataset(b)], [1, 1])
    next(iter(mix))
    state = mix.state_dict()
    other = Mix([UCVolumeDataset(a), UCVolumeDataset(b, shuffle=True)], [1, 1])
    with pytest.raises(ValueError, match=rf"^cannot resume the mix: its source 1 \({b}\) has shuffle True, "):
        other.load_state_dict(state)
    with pytest.raises(ValueError, match=r"^cannot resume: the checkpoint mixes 2 sources, this mix 3$"):
        Mix([UCVolumeDataset(a), UCVolumeDataset(b), UCTableDataset(table)], [1, 1, 1]).load_state_dict(state)
    with pytest.raises(ValueError, match=r"^not a Mix state"):
        other.load_state_dict(UCVolumeDataset(a).state_dict())


def test_bad_mixes_are_refused_in_one_line(volumes: Callable[..., list[str]], table: str) -> None:
    a, b = volumes([3, 4])
    va, vb = UCVolumeDataset(a), UCVolumeDataset(b)
    refusals: list[tuple[Callable[[], object], str]] = [
        (lambda: Mix([va, vb], [1]), "1 weights for 2 sources: give one weight per source"),
        (lambda: Mix([va, vb], [1, -2]), f"the weight of {b} is -2: weights must be >= 0"),
        (lambda: Mix([va, vb], [0, 0]), "every weight is 0: give at least one source a positive weight"),
        (lambda: Mix([va, UCVolumeDataset(a)], [1, 1]), f"{a} is listed twice in the mix (sources 0 and 1): "),
        (lambda: Mix([], []), "Mix needs a list of datasets"),
        (lambda: Mix([va, [1, 2]], [1, 1]), "source 1 of the mix is a list: give UCVolumeDataset or UCTableDataset"),
        (lambda: Mix([va, vb], [1, 1], until="steps"), 'give steps= with until="steps"'),
        (lambda: Mix([va, vb], [1, 1], steps=3), 'give steps= with until="steps"'),
        (lambda: Mix([va, vb], [1, 1], until="never"), "invalid until"),
    ]
    for make, message in refusals:
        with pytest.raises(ValueError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
            make()


def test_with_workers_a_mix_resumes_batch_for_batch_and_onto_another_worker_count(
    volumes: Callable[..., list[str]], table: str
) -> None:
    a, b = volumes([5, 7])

    def loader(workers: int) -> DataLoader:
        sources = [UCVolumeDataset(a, shuffle=True), UCTableDataset(table), UCVolumeDataset(b, seed=3, shuffle=True)]
        mix = Mix(sources, [2, 1, 2], on_uneven="allow")
        return DataLoader(mix, batch_size=2, num_workers=workers, collate_fn=names_of, persistent_workers=False)

    whole = run(loader(2))
    interrupted = loader(2)
    taken = run(interrupted, batches=3)
    state = interrupted.state_dict()
    same = loader(2)
    same.load_state_dict(state)
    assert taken + run(same) == whole  # same grid: batch for batch
    other = loader(3)
    other.load_state_dict(state)
    rest = [name for batch in run(other) for name in batch]
    assert Counter([n for batch in taken for n in batch] + rest) == Counter(n for batch in whole for n in batch)


def test_paths_streamed_through_a_cache_stay_valid_until_the_loop_moves_past_their_batch(
    volumes: Callable[..., list[str]], tmp_path: Path
) -> None:
    # Past a full cache a file is deleted once its source releases it, which must wait for the loop.
    a, b = volumes([24, 12], size=1000)
    budget = {"cache": "always", "cache_max_bytes": 9 * 1000, "min_free_bytes": 0, "prefetch": 2, "pin_window": 1}
    sources = [UCVolumeDataset(p, cache_dir=tmp_path / p.rsplit("/", 1)[1], **budget) for p in (a, b)]
    mix = Mix(sources, [2, 1])
    for workers in (0, 2):
        loader = DataLoader(mix, batch_size=4, num_workers=workers, collate_fn=list, mlflow=False)
        read = [Path(path).read_bytes()[:8] for batch in loader for path in batch]  # read as the loop gets it
        assert len(read) == len(mix)
        if workers == 0:  # the budget was full: files did stream through (counted in this process)
            assert sum(s.streamed for source in sources for s in source.stats().streams) > 0


def test_the_loaders_stats_count_each_sources_samples_and_epoch_over_its_workers(
    volumes: Callable[..., list[str]],
) -> None:
    a, b = volumes([6, 2])
    mix = Mix([UCVolumeDataset(a), UCVolumeDataset(b)], [3, 1])  # all_seen: 6 of a, 2 of b
    loader = DataLoader(mix, batch_size=2, num_workers=2, collate_fn=names_of, mlflow=False)
    for _ in range(2):
        list(loader)
    stats = loader.stats()
    assert stats.source_samples == (12, 4) and stats.source_epochs == (1, 1)
    assert [re.sub(r", [\d.]+ ms a sample$", "", str(row)) for row in mix.figures(stats)] == [  # less its time
        f"{a}: 12 samples, 75.0% of the mix (asked 75.0%), its epoch 1",
        f"{b}: 4 samples, 25.0% of the mix (asked 25.0%), its epoch 1",
    ]
    assert all(row.seconds > 0 and str(row).endswith(" ms a sample") for row in mix.figures(stats))
    alone = Mix([UCVolumeDataset(a), UCVolumeDataset(b)], [1, 1])
    list(alone)  # without a loader: this process's streams
    assert [(row.samples, row.epoch) for row in alone.figures()] == [(6, 0), (5, 2)]  # 1:1 until a has given 6


def slow_decode(path: str) -> str:
    """A source whose every sample takes 10 ms to make (off CPU: it holds on a loaded machine; the
    stages time themselves with the process's clock, which no test can inject)."""
    time.sleep(0.01)
    return path


@pytest.mark.parametrize("workers", [0, 2])
def test_the_loader_measures_each_sources_time_and_names_the_slow_one(
    volumes: Callable[..., list[str]], workers: int
) -> None:
    fast, slow = volumes([24, 8])
    mix = Mix([UCVolumeDataset(fast), UCVolumeDataset(slow, transform=slow_decode)], [3, 1])
    loader = DataLoader(mix, batch_size=4, num_workers=workers, collate_fn=names_of, mlflow=False)
    for _ in loader:
        pass  # no training step: the loader alone, its wait the sources'
    stats = loader.stats()
    assert stats.source_names == (fast, slow) and stats.source_samples == (24, 8)
    quick, slowest = stats.source_seconds
    assert slowest >= 8 * 0.01 and quick < slowest / 4  # the slow source's 8 samples took 10 ms each
    # Every second the stages took went to one source or the other: none lost, none counted twice.
    made = sum(loop.made[0] + loop.made[1] for loop in stats.loops().values())
    assert abs(quick + slowest - made) < 1e-6
    assert waited_on(stats) is not None and waited_on(stats).name == slow  # type: ignore[union-attr]
    line = sources_text(stats)
    assert line.startswith(f"sources: {fast} 75% (its epoch 0, ") and line.endswith(f"the loop waits most for {slow}")
    assert f"mostly for {slow} (" in verdict(stats).text


def test_a_mix_read_without_a_loader_times_its_sources_in_its_own_stats(volumes: Callable[..., list[str]]) -> None:
    fast, slow = volumes([6, 2])
    mix = Mix([UCVolumeDataset(fast), UCVolumeDataset(slow, transform=slow_decode)], [3, 1])
    assert len(list(mix)) == 8
    (stream,) = mix.stats().streams
    assert stream.source_names == (fast, slow) and stream.source_seconds[1] >= 2 * 0.01 > stream.source_seconds[0]


@pytest.fixture
def tracking(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """MLflow on a sqlite store of this test's own."""
    import mlflow

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)
    mlflow.set_tracking_uri(uri)
    yield mlflow
    while mlflow.active_run() is not None:
        mlflow.end_run()


def test_mlflow_gets_the_exposed_wait_each_source_caused(volumes: Callable[..., list[str]], tracking: Any) -> None:
    fast, slow = volumes([24, 8])
    mix = Mix([UCVolumeDataset(fast), UCVolumeDataset(slow, transform=slow_decode)], [3, 1])
    loader = DataLoader(mix, batch_size=4, num_workers=0, collate_fn=names_of)
    with tracking.start_run() as run:
        list(loader)
    loader.close()
    logged = tracking.tracking.MlflowClient().get_run(run.info.run_id).data.metrics
    quick, slowest = (logged[f"dataloader/source_exposed_seconds/{i}/rank_0"] for i in (0, 1))
    assert slowest > 4 * quick and slowest > 0.005  # per batch: about its one 10 ms sample in each
