"""The verdict and the advice on real loaders whose bottleneck is built on purpose: each cause is named,
no other is, and where the advice names a change, that change applied lowers the exposed wait.

Real DataLoader workers over a local volume, a remote one on the S3 test server and a table; the causes
are waits (a step, storage that answers slowly, a transform or a collate that takes its time, workers
slow to start) rather than CPU, so that they hold on a loaded 2-core machine. The stage that holds the
loop back is named from the stage times the batches carry.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest

from tests.data.conftest import write_files
from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.data import DataLoader, UCTableDataset, UCVolumeDataset
from uc_jupyter.distributed import distributed
from uc_jupyter.distributed.shared import current_shared_pool
from uc_jupyter.telemetry.model import Snapshot
from uc_jupyter.testing.s3_server import S3TestServer
from uc_jupyter.widgets.advice import advise, straggler, verdict
from uc_jupyter.widgets.passes import since
from uc_jupyter.widgets.ranks import rank_rows, ranks_text

Volume = Callable[..., tuple[str, Path]]


def slow_transform(path: str) -> str:
    """Each file takes 20 ms to decode (off CPU: it holds on a loaded machine)."""
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
    loader = DataLoader(UCVolumeDataset(files, transform=slow_transform), batch_size=4, num_workers=2, mlflow=False)
    stats = run(loader, step=0.0)
    judged = verdict(stats)
    assert judged.kind == "no-work" and not judged.input_bound, judged.text
    assert advise(stats, cpus=8) == ()


def bound_stage(figures: Snapshot) -> str:
    """The stage that caused most of the (only) rank's exposed wait."""
    (loop,) = figures.loops().values()
    return loop.bound_stage()


def measured(make: Callable[[int], DataLoader], workers: int, step: float) -> Snapshot:
    """A second pass's own figures (the first starts the persistent workers) of ``make(workers)``."""
    loader = make(workers)
    run(loader, step)
    before = loader.stats()
    return since(run(loader, step), before)


def test_slow_storage_is_latency_bound_fetch_and_the_window_or_the_workers_it_asks_for_lower_the_wait(
    s3_volume: Volume, s3: S3TestServer
) -> None:
    path, folder = s3_volume()
    write_files(folder, 48)
    s3.configure(latency=0.03)  # every request waits 30 ms, as from a store far away

    def make(prefetch: int) -> Callable[[int], DataLoader]:
        def loader(workers: int) -> DataLoader:
            # Never cached: each epoch goes to storage, ``prefetch`` downloads in flight per worker.
            dataset = UCVolumeDataset(path, cache="never", prefetch=prefetch)
            return DataLoader(dataset, batch_size=4, num_workers=workers, persistent_workers=True, mlflow=False)

        return loader

    # A step of 30 ms: the loop takes 133 files a second, which a loaded 2-core machine still downloads
    # with CPU to spare once enough are in flight (the cause stays the latency, not the CPU).
    own = measured(make(1), 1, step=0.03)
    judged = verdict(own)
    assert judged.kind == "input-bound" and "(latency-bound fetch " in judged.text, judged.text
    assert bound_stage(own) == "fetch"
    streamed, advice = advise(own, cpus=8)
    assert "streamed through the cache, not kept (cache='never'" in streamed, streamed
    said = re.fullmatch(
        r"fetch is latency-bound \(fetch \d+%.* of the wait\): each read waits ([\d.]+) ms for the store's answer "
        r"\((\d+)% of it\) with ([\d.]+) in flight on average, and the loop's pace needs about (\d+): raise the "
        r"dataset's prefetch= to (\d+) \(reads in flight per worker\) \(exposed wait \d+% -> about (\d+)%\), "
        r"or num_workers from 1 to 2 \(exposed wait \d+% -> about (\d+)%\)",
        advice,
    )
    assert said, advice
    latency, answering, in_flight, needed = float(said[1]), int(said[2]), float(said[3]), int(said[4])
    assert 25 <= latency <= 100 and answering >= 70 and in_flight <= 1.2 and needed >= 5, advice
    assert "bandwidth" not in " ".join(advise(own, cpus=8))  # no other cause

    window = measured(make(int(said[5])), 1, step=0.03)  # the window it asks for, and what it expected of it
    assert own.exposed_wait is not None and window.exposed_wait is not None
    assert window.exposed_wait < own.exposed_wait * 0.5, (own.exposed_wait, window.exposed_wait, advice)
    assert window.exposed_wait * 100 < int(said[6]) + 25, (window.exposed_wait, advice)

    workers = measured(make(1), 2, step=0.03)  # the other change it names
    assert workers.exposed_wait is not None
    assert workers.exposed_wait < own.exposed_wait and abs(workers.exposed_wait * 100 - int(said[7])) < 15, advice


def test_a_narrow_link_is_bandwidth_bound_fetch_where_a_deeper_window_does_not_help_and_the_cache_does(
    s3_volume: Volume, s3: S3TestServer, tmp_path: Path
) -> None:
    path, folder = s3_volume()
    # Larger than the test server's 64 KiB chunk: it answers at once and sends the bytes at the link's
    # pace, as a store does; 6.4 MB a pass over 8 MB/s takes 0.8 s.
    write_files(folder, 32, size=200_000)
    s3.configure(bandwidth=8e6)

    def make(prefetch: int | None, cache: str = "never") -> Callable[[int], DataLoader]:
        def loader(workers: int) -> DataLoader:
            dataset = UCVolumeDataset(path, cache=cache, cache_dir=tmp_path / "cache", prefetch=prefetch)
            return DataLoader(dataset, batch_size=2, num_workers=workers, persistent_workers=True, mlflow=False)

        return loader

    own = measured(make(2), 1, step=0.01)
    judged = verdict(own)
    assert judged.kind == "input-bound" and "(bandwidth-bound fetch " in judged.text, judged.text
    advice = advise(own, cpus=8)
    (line,) = (line for line in advice if line.startswith("fetch is"))
    said = re.search(r"reads spend (\d+)% of their time receiving bytes, ([\d.]+) MB/s in all", line)
    assert said and int(said[1]) >= 50 and 4.0 <= float(said[2]) <= 8.8, line
    assert "more reads at once share the same link" in line and "keep them in the cache" in line, line
    assert not any("latency" in text or "prefetch=" in text for text in advice), advice  # no other cause

    # What it says will not help: 16 times the reads in flight share the same link. (Its pass's rate,
    # not its steady wait: a window this deep fetches much of the pass while the first batch waits.)
    deeper = measured(make(32), 1, step=0.01)
    assert deeper.samples_per_second < own.samples_per_second * 1.25, (own, deeper)
    assert own.exposed_wait is not None
    cached = measured(make(2, cache="always"), 1, step=0.01)  # what it asks for: the next epochs read locally
    assert cached.exposed_wait is not None
    assert cached.exposed_wait < own.exposed_wait * 0.5, (own.exposed_wait, cached.exposed_wait)


def test_a_cache_below_the_data_re_downloads_each_epoch_and_the_budget_it_asks_for_lowers_the_wait(
    s3_volume: Volume, s3: S3TestServer, tmp_path: Path
) -> None:
    path, folder = s3_volume()
    write_files(folder, 32, size=20_000)  # 640 kB a pass
    s3.configure(latency=0.03)

    def make(budget: int) -> Callable[[int], DataLoader]:
        def loader(workers: int) -> DataLoader:
            cache = tmp_path / f"cache-{budget}"  # each budget its own cache: none starts warm
            dataset = UCVolumeDataset(path, cache="always", cache_dir=cache, cache_max_bytes=budget, min_free_bytes=0)
            return DataLoader(dataset, batch_size=4, num_workers=workers, persistent_workers=True, mlflow=False)

        return loader

    own = measured(make(320_000), 1, step=0.01)  # the second pass: an LRU cache of half the data keeps nothing of use
    judged = verdict(own)
    assert judged.kind == "input-bound" and bound_stage(own) == "fetch", judged.text
    advice = advise(own, cpus=8)
    re_downloaded = re.match(r"cache budget 320 kB < data 640 kB: each epoch re-downloads (\d+)%; raise", advice[0])
    assert re_downloaded and int(re_downloaded[1]) >= 50, advice
    assert not any("num_workers" in line and "decode" in line for line in advice), advice  # no other cause
    asked = re.search(r"raise cache_max_bytes to ([\d.]+) (kB|MB) \(the data, the files in flight", advice[0])
    assert asked, advice
    raised = int(float(asked[1]) * {"kB": 1e3, "MB": 1e6}[asked[2]])
    applied = measured(make(raised), 1, step=0.01)  # its second pass reads every file from the cache
    assert own.exposed_wait is not None and applied.exposed_wait is not None
    assert applied.exposed_wait < own.exposed_wait * 0.5, (own.exposed_wait, applied.exposed_wait)
    assert applied.hit_rate == 1.0 and not any("cache" in line for line in advise(applied, cpus=8))


def test_a_slow_transform_is_decode_and_the_workers_it_asks_for_lower_the_wait(files: str) -> None:
    def make(workers: int) -> DataLoader:
        dataset = UCVolumeDataset(files, transform=slow_transform)
        return DataLoader(dataset, batch_size=4, num_workers=workers, persistent_workers=True, mlflow=False)

    own = measured(make, 1, step=0.02)
    judged = verdict(own)
    assert judged.kind == "input-bound" and bound_stage(own) == "decode", judged.text
    (advice,) = advise(own, cpus=8)  # the cache holds the data: nothing to say of it
    assert advice.startswith("raise num_workers from 1 to 2: decode takes "), advice
    expected = int(advice.split(" -> about ", 1)[1].split("%", 1)[0])
    applied = measured(make, 2, step=0.02)
    assert own.exposed_wait is not None and applied.exposed_wait is not None
    assert applied.exposed_wait < own.exposed_wait * 0.8, (own.exposed_wait, applied.exposed_wait)
    # The expected effect was computed from the stage times: the measured one lies near it.
    assert abs(applied.exposed_wait * 100 - expected) < 25, (applied.exposed_wait, advice)


def slow_collate(batch: dict[str, object]) -> dict[str, object]:
    time.sleep(0.02)  # a collate_fn that costs 20 ms a batch, off CPU
    return batch


def test_a_slow_collate_on_a_table_is_named_and_no_file_advice_is_given(catalog: LocalCatalog) -> None:
    catalog.create_table("main.ml.rows", pa.table({"x": list(range(256)), "y": [1.0] * 256}))
    dataset = UCTableDataset("main.ml.rows", batch_size=16)
    loader = DataLoader(dataset, batch_size=None, num_workers=1, collate_fn=slow_collate, mlflow=False)
    own = measured(lambda workers: loader, 1, step=0.005)
    judged = verdict(own)
    assert judged.kind == "input-bound" and bound_stage(own) == "collate", judged.text
    (advice,) = advise(own, cpus=8)
    assert advice.startswith("collate takes ") and "a lighter collate_fn" in advice, advice
    assert "file" not in advice and "cache" not in advice


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


def test_one_slow_rank_is_the_straggler_and_the_headline_follows_it(catalog: LocalCatalog) -> None:
    """Two real ranks over one volume; rank 1's items take 15 ms each to make, rank 0's nothing: the
    job's verdict follows rank 1 (under DDP it sets the step), the advice names it first."""
    info = catalog.create_volume("main.ml.ranks")
    write_files(Path(info.storage_location.removeprefix("file://")), 48)

    @distributed(gpus=2)
    def train(path: str) -> int:
        import time as clock

        import torch.distributed as dist

        from uc_jupyter.data import DataLoader, UCVolumeDataset

        slow = dist.get_rank() == 1

        def decode(file: str) -> str:
            if slow:
                clock.sleep(0.015)
            return file

        loader = DataLoader(UCVolumeDataset(path, transform=decode), batch_size=4, num_workers=1, mlflow=False)
        batches = 0
        for _ in loader:
            clock.sleep(0.01)  # the step
            batches += 1
        return batches

    assert train.distributed(info.path) == [6, 6]
    pool = current_shared_pool()
    assert pool is not None
    figures = pool.collector.snapshot()
    waits = figures.exposed_waits()
    judged = verdict(figures)
    assert judged.kind == "input-bound" and judged.rank == 1, (judged.text, waits)
    assert judged.text.startswith("input-bound: rank 1 waited for data ") and "; rank 0 waited " in judged.text
    assert straggler(waits) == 1, waits
    said = advise(figures, cpus=8)
    assert said[0].startswith("rank 1 is the straggler: it waits "), said
    assert any(line.startswith("rank 1: raise num_workers from 1 to 2: decode takes ") for line in said), said
    assert not any(line.startswith("rank 0") for line in said), said
    slow_row = rank_rows(figures)[1]
    assert slow_row.straggler and slow_row.bound_stage == "decode"
    assert "1 waited " in ranks_text(rank_rows(figures)) and "most in decode), straggler" in ranks_text(
        rank_rows(figures)
    )


def test_small_batches_cost_more_to_hand_over_than_to_make_and_no_workers_lower_the_wait(
    catalog: LocalCatalog,
) -> None:
    catalog.create_table("main.ml.small", pa.table({f"c{i}": list(range(960)) for i in range(6)}))

    def make(workers: int) -> DataLoader:
        dataset = UCTableDataset("main.ml.small", batch_size=8)  # 6 tiny tensors a batch
        return DataLoader(dataset, batch_size=None, num_workers=workers, persistent_workers=workers > 0, mlflow=False)

    own = measured(make, 1, step=0.002)
    judged = verdict(own)
    assert judged.kind == "input-bound" and bound_stage(own) == "transfer", judged.text
    (advice,) = advise(own, cpus=8)
    assert advice.startswith("moving each batch from a worker to the loop takes longer than making it"), advice
    assert "num_workers=0 makes them in the loop" in advice
    applied = measured(make, 0, step=0.002)
    assert own.exposed_wait is not None and applied.exposed_wait is not None
    assert applied.exposed_wait < own.exposed_wait * 0.7, (own.exposed_wait, applied.exposed_wait)
