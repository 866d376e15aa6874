"""A real DataLoader over a local volume, its snapshots shown by the dashboard and monitor()."""

from __future__ import annotations

import io
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from IPython.core.interactiveshell import InteractiveShell
from PIL import Image

from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.data import DataLoader, FileCache, UCVolumeDataset
from uc_jupyter.telemetry.model import Snapshot
from uc_jupyter.testing.clocks import ManualClock
from uc_jupyter.testing.waits import wait_until
from uc_jupyter.widgets import LoaderDashboard, LoaderMonitor, monitor
from uc_jupyter.widgets.charts import COLORS

from .conftest import CommLog


def make_volume(catalog: LocalCatalog, name: str, files: int) -> str:
    info = catalog.create_volume(f"main.ml.{name}")
    folder = Path(info.storage_location.removeprefix("file://"))
    for i in range(files):
        (folder / f"f{i:03d}.bin").write_bytes(os.urandom(100))
    return info.path


def settled(loader: DataLoader, items: int, within: float = 30.0) -> Snapshot:
    """Stats once every worker's last sample crossed its queue (a moment after the last batch)."""

    def every_sample_in() -> Snapshot | None:
        stats = loader.stats()
        return stats if sum(stats.shard_sizes().values()) == items and stats.batches else None

    return wait_until(every_sample_in, f"every worker's last sample ({items} items)", within, interval_s=0.02)


def normal_pixels(png: Any) -> int:
    rgb = [int(COLORS["normal"][i : i + 2], 16) for i in (1, 3, 5)]
    return int(np.all(np.asarray(Image.open(io.BytesIO(bytes(png))).convert("RGB")) == rgb, axis=-1).sum())


def test_a_dataloader_with_workers_feeds_the_dashboard(catalog: LocalCatalog, comms: CommLog, tmp_path: Path) -> None:
    dataset = UCVolumeDataset(
        make_volume(catalog, "shards", 40),
        cache="always",
        cache_dir=tmp_path / "cache",
        cache_max_bytes=1_000_000,
        min_free_bytes=0,
    )
    loader = DataLoader(dataset, batch_size=4, num_workers=2, mlflow=False)
    clock, shown = ManualClock(), []
    latest = [loader.stats()]  # stats() belongs to the loop's thread: the monitor reads what it took
    with monitor(lambda: latest[-1], interval=0.001, clock=clock, display=shown.append) as watch:
        for _ in loader:
            clock.advance(0.2)
            latest.append(loader.stats())
    # A build the poll thread began may finish after the loop (seconds on a loaded machine): it is shown then.
    wait_until(lambda: watch.dashboard is not None, "the dashboard the poll thread builds", 60)
    assert watch.dashboard is not None and shown == [watch.dashboard.widget]

    final = settled(loader, 40)
    dashboard = watch.dashboard
    dashboard.update(final, force=True)
    assert final.shard_sizes() == {0: 40}
    assert final.worker_shard_sizes() == {(0, 0): 20, (0, 1): 20}
    assert dashboard.shard_label.value == "shards: 1 rank x 2 workers, 40 items"
    assert dashboard.flagged_ranks == ()
    assert normal_pixels(dashboard.shard_image.value) > 1000
    assert dashboard.throughput_label.value.startswith("10 batches, 40 samples at ")
    assert dashboard.latency_label.value.startswith("fetch p50 ")
    assert dashboard.cache_bar.max == 1_000_000
    assert dashboard.cache_label.value.startswith("cache ") and "of 1.00 MB" in dashboard.cache_label.value


def test_cache_evictions_reach_the_dashboard(catalog: LocalCatalog, comms: CommLog, tmp_path: Path) -> None:
    # Another user of the shared cache fills it and has it cleared: the cache's eviction counter
    # is the cache's own, so this loader's telemetry carries it too.
    cache = FileCache(tmp_path / "cache", max_bytes=1_000_000, min_free_bytes=0)
    for i in range(5):

        def fetch(tmp: str, i: int = i) -> None:
            Path(tmp).write_bytes(b"x" * (100 + i))

        cache.release(cache.get(FileCache.key(f"s3://b/other{i}", 100 + i, "v1"), 100 + i, fetch, group="other"))
    evicted = cache.clear()
    assert evicted == 5

    dataset = UCVolumeDataset(
        make_volume(catalog, "evicted", 12),
        cache="always",
        cache_dir=tmp_path / "cache",
        cache_max_bytes=1_000_000,
        min_free_bytes=0,
    )
    loader = DataLoader(dataset, batch_size=3, num_workers=0, mlflow=False)
    assert sum(len(batch) for batch in loader) == 12
    snapshot = loader.stats()
    assert snapshot.cache_evictions == 5
    dashboard = LoaderDashboard(clock=ManualClock())
    dashboard.update(snapshot)
    assert dashboard.cache_label.value.endswith(", hit rate 0%, 5 evictions")
    assert dashboard.shard_label.value == "shards: 1 rank x 1 worker, 12 items"


class FailsWhileFlagged(torch.utils.data.IterableDataset[int]):
    """Items 0..59 split over the workers; while ``flag`` exists, the item 20 raises in its worker."""

    def __init__(self, flag: Path) -> None:
        self.flag = str(flag)

    def __iter__(self) -> Iterator[int]:
        info = torch.utils.data.get_worker_info()
        first, step = (info.id, info.num_workers) if info is not None else (0, 1)
        for item in range(first, 60, step):
            if item == 20 and os.path.exists(self.flag):
                raise ValueError(f"cannot decode item {item}")
            yield item


def test_a_pass_that_fails_in_a_worker_is_marked_and_the_next_pass_runs(
    comms: CommLog, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flag = tmp_path / "fail"
    flag.touch()
    loader = DataLoader(FailsWhileFlagged(flag), batch_size=2, num_workers=2, monitor=True, mlflow=False)
    clock, shown = ManualClock(), []
    watch = LoaderMonitor(
        loader.live_stats, title="DataLoader", interval=0.001, show_after=0.0, clock=clock, display=shown.append
    )
    loader.dashboard_monitor = watch

    def train() -> None:
        for _ in loader:
            clock.advance(0.3)

    with pytest.raises(ValueError, match="cannot decode item 20"):
        train()
    failed = "epoch 0: failed: ValueError: Caught ValueError in DataLoader worker process 0."
    # The pass may have ended while its poll thread was still making the dashboard: it shows the end then.
    wait_until(
        lambda: watch.dashboard is not None and failed in watch.dashboard.status_label.value,
        "the dashboard to show the failed pass",
        30,
        interval_s=0.01,
    )
    dashboard = watch.dashboard
    assert dashboard is not None
    assert COLORS["failed"] in dashboard.status_label.value

    flag.unlink()  # the workers persist; the next pass reads every item
    clock.advance(1.0)
    assert sum(len(batch) for batch in loader) == 60
    assert dashboard.status_label.value.endswith(">epoch 1: done</span>")
    assert [record.state for record in watch.passes] == ["failed", "done"]
    assert dashboard.throughput_label.value.startswith("epoch 1: 30 batches, 60 samples at ")
    assert 'title="failed: ValueError: Caught ValueError' in dashboard.epochs_table.value
    assert shown == [dashboard.widget]  # the same one dashboard for both passes
    assert watch.error is None and "telemetry failed" not in capsys.readouterr().err
    wait_until(
        lambda: not [t for t in threading.enumerate() if t.name == "uc_jupyter-monitor"],
        "the monitor threads to end with their pass",
        30,
        interval_s=0.01,
    )


@pytest.fixture
def monitored_in_ipython(comms: CommLog) -> Iterator[tuple[InteractiveShell, DataLoader, LoaderMonitor, list[Any]]]:
    """An IPython shell whose ``loader`` (40 items in batches of 4) has a dashboard monitor that shows
    at once; the widgets it displayed."""
    shell = InteractiveShell.instance()
    try:
        loader = DataLoader(list(range(40)), batch_size=4, num_workers=0, monitor=True, mlflow=False)
        shown: list[Any] = []
        watch = LoaderMonitor(
            loader.live_stats, interval=600.0, show_after=0.0, clock=ManualClock(), display=shown.append
        )
        loader.dashboard_monitor = watch
        shell.user_ns["loader"] = loader
        yield shell, loader, watch, shown
    finally:
        InteractiveShell.clear_instance()


def test_a_loop_body_that_raises_in_ipython_marks_the_pass_failed(
    monitored_in_ipython: tuple[InteractiveShell, DataLoader, LoaderMonitor, list[Any]],
) -> None:
    shell, _, watch, _ = monitored_in_ipython
    result = shell.run_cell("for i, batch in enumerate(loader):\n    if i == 3:\n        raise KeyError('label')")
    assert isinstance(result.error_in_exec, KeyError)
    assert [(p.label, p.state, p.error) for p in watch.passes] == [("epoch 0", "failed", "KeyError: 'label'")]
    assert watch.dashboard is not None
    assert "epoch 0: failed: KeyError: &#x27;label&#x27;" in watch.dashboard.status_label.value

    # A break is no failure: the pass says where it stopped.
    assert shell.run_cell("for i, batch in enumerate(loader):\n    if i == 5:\n        break").success
    assert watch.passes[-1].status == "stopped after 6 batches"


def test_a_loader_reused_in_a_new_cell_numbers_its_epochs_from_zero_in_a_dashboard_of_its_own(
    monitored_in_ipython: tuple[InteractiveShell, DataLoader, LoaderMonitor, list[Any]],
) -> None:
    shell, loader, watch, shown = monitored_in_ipython
    assert shell.run_cell("for epoch in range(2):\n    for batch in loader:\n        pass").success
    first = watch.dashboard
    assert shell.run_cell("for batch in loader:\n    pass").success  # the loader's third epoch
    second = watch.dashboard
    assert first is not None and second is not None and first is not second
    assert shown == [first.widget, second.widget]
    assert [p.label for p in first.passes] == ["epoch 0", "epoch 1"]
    assert [(p.label, p.epoch) for p in watch.passes] == [("epoch 0", 2)]  # the user's epoch 0 of this cell
    assert loader.epoch == 3  # the data's epochs go on (shuffling, checkpoints)
    rows = re.findall(r"<tr><td[^>]*>([^<]+)</td>", second.epochs_table.value)
    assert rows[:1] == ["epoch 0"] and "epoch 2" not in second.epochs_table.value


@pytest.mark.parametrize("workers", [0, 2])
def test_a_loader_that_resumed_mid_epoch_marks_that_epoch(catalog: LocalCatalog, comms: CommLog, workers: int) -> None:
    path = make_volume(catalog, f"resumed{workers}", 12)
    first = DataLoader(UCVolumeDataset(path), batch_size=2, num_workers=workers, mlflow=False)
    stream = iter(first)
    for _ in range(2):
        next(stream)
    position = first.state_dict()  # 4 of the epoch's 12 items delivered
    del stream
    loader = DataLoader(UCVolumeDataset(path), batch_size=2, num_workers=workers, monitor=True, mlflow=False)
    clock, shown = ManualClock(), []
    watch = LoaderMonitor(loader.live_stats, interval=600.0, show_after=0.0, clock=clock, display=shown.append)
    loader.dashboard_monitor = watch
    loader.load_state_dict(position)
    assert sum(len(batch) for batch in loader) == 8  # the rest of epoch 0
    assert sum(len(batch) for batch in loader) == 12  # epoch 1, whole
    dashboard = watch.dashboard
    assert dashboard is not None
    assert [(p.label, p.epoch, p.state) for p in watch.passes] == [("epoch 0", 0, "done"), ("epoch 1", 1, "done")]
    table = dashboard.epochs_table.value
    assert re.search(r"<td[^>]*>epoch 0 \(resumed\)</td><td[^>]*>done</td><td[^>]*>4</td>", table), table
    assert re.search(r"<td[^>]*>epoch 1</td><td[^>]*>done</td><td[^>]*>6</td>", table), table
