"""A real DataLoader over a local volume, its snapshots shown by the dashboard and monitor()."""

from __future__ import annotations

import io
import os
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from uc_jupyter.catalog.local import LocalCatalog
from uc_jupyter.data import DataLoader, FileCache, UCVolumeDataset
from uc_jupyter.telemetry.model import Snapshot
from uc_jupyter.widgets import LoaderDashboard, monitor
from uc_jupyter.widgets.charts import COLORS

from .conftest import CommLog, FakeClock


def make_volume(catalog: LocalCatalog, name: str, files: int) -> str:
    info = catalog.create_volume(f"main.ml.{name}")
    folder = Path(info.storage_location.removeprefix("file://"))
    for i in range(files):
        (folder / f"f{i:03d}.bin").write_bytes(os.urandom(100))
    return info.path


def settled(loader: DataLoader, items: int, within: float = 30.0) -> Snapshot:
    """Stats once every worker's last sample crossed its queue (a moment after the last batch)."""
    deadline = time.monotonic() + within
    while True:
        stats = loader.stats()
        if (sum(stats.shard_sizes().values()) == items and stats.batches) or time.monotonic() > deadline:
            return stats
        threading.Event().wait(0.02)


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
    clock, shown = FakeClock(), []
    latest = [loader.stats()]  # stats() belongs to the loop's thread: the monitor reads what it took
    with monitor(lambda: latest[-1], interval=0.001, clock=clock, display=shown.append) as watch:
        for _ in loader:
            clock.advance(0.2)
            latest.append(loader.stats())
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
    dashboard = LoaderDashboard(clock=FakeClock())
    dashboard.update(snapshot)
    assert dashboard.cache_label.value.endswith(", hit rate 0%, 5 evictions")
    assert dashboard.shard_label.value == "shards: 1 rank x 1 workers, 12 items"
