"""The budget is the disk: what the cache folder really takes (its blocks, as ``du`` counts them,
index, log and folders included) never exceeds ``cache_max_bytes``: measured at every download and
after every file handed out by two processes sharing the cache over several passes, and after every
file a DataLoader's two workers deliver over several epochs."""

from __future__ import annotations

import collections
import multiprocessing
import os
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.data.cache.conftest import disk_use
from uc_jupyter.data import DataLoader, UCVolumeDataset
from uc_jupyter.data.cache import CachedFile, FileCache
from uc_jupyter.data.cache.admission import Budget
from uc_jupyter.data.cache.disk import DISK_BUDGET_MIN, PER_FILE, charge, structure

BUDGET = DISK_BUDGET_MIN + (1 << 20)  # a budget that is the disk, about half the data below
FILES = 400  # of 1 byte to 96 KiB: about 19 MB, most of them not a whole number of blocks
HELD = 16  # files a process keeps pinned behind the one it uses, as a loader's batches do
STARVE_S = 0.05


def _sizes() -> list[int]:
    rng = random.Random(16)
    return [rng.randint(1, 96 << 10) for _ in range(FILES)]


def _passes(root: str, process: int, passes: int, barrier: Any, out: Any) -> None:
    """One process's passes over the listing in its own order; puts (peak disk use, files streamed
    past the full cache, files handed out)."""
    sizes, base = _sizes(), Path(root)
    # Each waits briefly for the other's room before taking its own group's (starve_seconds, 1 s by
    # default): the disk use must stay in the budget whatever the wait, and the test waits less.
    cache = FileCache(root, max_bytes=BUDGET, min_free_bytes=0, starve_seconds=STARVE_S)
    peak = streamed = handed = 0

    def fetch_of(size: int) -> Any:
        def fetch(tmp: str) -> None:
            nonlocal peak
            with open(tmp, "wb") as handle:
                handle.write(b"d" * size)
            peak = max(peak, disk_use(base))  # the download complete, not yet put in place

        return fetch

    held: collections.deque[CachedFile] = collections.deque()
    barrier.wait()
    for number in range(passes):
        order = list(range(FILES))
        random.Random(100 * process + number).shuffle(order)
        for i in order:
            key = FileCache.key(f"s3://b/f{i}.png", sizes[i], "v1")
            got = cache.get(key, sizes[i], fetch_of(sizes[i]), group="g", name=f"f{i}.png")
            streamed += not got.resident
            handed += 1
            held.append(got)
            if len(held) > HELD:
                cache.release(held.popleft())
            peak = max(peak, disk_use(base))  # handed out, with the last ones still pinned
    while held:
        cache.release(held.popleft())
    out.put((peak, streamed, handed))


def test_two_processes_over_several_passes_never_take_more_disk_than_the_budget(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    FileCache(root, max_bytes=BUDGET, min_free_bytes=0)  # the index made before the processes start
    assert sum(_sizes()) > 1.8 * BUDGET  # the data is about twice the budget
    context = multiprocessing.get_context("fork")
    barrier, out = context.Barrier(2), context.Queue()
    workers = [context.Process(target=_passes, args=(str(root), p, 3, barrier, out)) for p in range(2)]
    for worker in workers:
        worker.start()
    results = [out.get(timeout=300) for _ in workers]
    for worker in workers:
        worker.join(timeout=60)
    peak = max(result[0] for result in results)
    assert peak <= BUDGET, f"the cache folder took {peak} bytes of disk, over its budget of {BUDGET}"
    assert sum(result[2] for result in results) == 2 * 3 * FILES
    assert sum(result[1] for result in results) > 0  # the cache was full: files streamed past it
    stats = FileCache(root, max_bytes=BUDGET, min_free_bytes=0).stats()
    assert stats.in_flight_bytes == 0
    assert stats.resident_bytes > 0.6 * BUDGET  # and it kept most of the budget's worth resident
    assert disk_use(root) <= stats.disk_bytes <= BUDGET  # what admission counts is what the disk holds, or more


def test_a_data_loader_s_two_workers_over_several_epochs_never_take_more_disk_than_the_budget(
    local_volume: Callable[..., tuple[str, Path]], tmp_path: Path
) -> None:
    path, folder = local_volume()
    for i, size in enumerate(_sizes()):
        (folder / f"f{i:04d}.png").write_bytes(b"p" * size)
    root = tmp_path / "cache"

    def measured(got: str) -> tuple[int, int]:  # in the worker, with the file just delivered
        return os.path.getsize(got), disk_use(root)

    dataset = UCVolumeDataset(
        path, cache="always", shuffle=True, cache_dir=root, cache_max_bytes=BUDGET, min_free_bytes=0, transform=measured
    )
    peak = delivered = 0
    for epoch in range(3):
        dataset.set_epoch(epoch)
        loader = DataLoader(
            dataset, batch_size=16, num_workers=2, collate_fn=list, multiprocessing_context="fork", mlflow=False
        )
        for batch in loader:
            delivered += len(batch)
            peak = max(peak, *(use for _, use in batch))
    assert delivered == 3 * FILES
    assert peak <= BUDGET, f"the cache folder took {peak} bytes of disk, over its budget of {BUDGET}"
    stats = FileCache(root, max_bytes=BUDGET, min_free_bytes=0).stats()
    # It kept files (fewer than the budget could hold: room is kept for the batches the loop holds).
    assert stats.resident_bytes > 0.25 * BUDGET


def test_a_file_costs_its_whole_blocks_and_the_index_and_folders_come_off_the_budget(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    cache = FileCache(root, max_bytes=BUDGET, min_free_bytes=0)
    block = os.statvfs(root).f_frsize
    assert charge(1, block=block) == charge(block, block=block) == block + PER_FILE
    taken = structure(str(root), block=block)
    assert disk_use(root) <= taken  # an empty cache: only the index and folders, all counted
    budget = Budget(BUDGET, 0, cache.headroom, cache.grace_seconds)
    assert budget.is_disk and not Budget(DISK_BUDGET_MIN - 1, 0, 0.1, 600).is_disk
    # The headroom comes out of what is left of the budget, not on top of it.
    assert budget.resident_cap(block, taken) == int((BUDGET - taken) * (1 - cache.headroom))


def test_a_file_that_fits_the_listed_budget_but_not_the_disk_s_is_refused_at_once(tmp_path: Path) -> None:
    cache = FileCache(tmp_path / "cache", max_bytes=DISK_BUDGET_MIN, min_free_bytes=0)
    with pytest.raises(Exception, match=r"of which the index and folders take \d+ .*raise cache_max_bytes$"):
        cache.get("ab" * 32, DISK_BUDGET_MIN - 1, lambda tmp: None, group="g")


def test_the_index_s_log_stays_short_however_many_downloads_it_enters(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    cache = FileCache(root, max_bytes=64 << 20, min_free_bytes=0)
    largest = 0
    for i in range(1500):  # SQLite's default log would grow to 4 MB here, and keep that size
        key = FileCache.key(f"s3://b/w{i}.png", 10, "v1")
        cache.release(cache.get(key, 10, lambda tmp: Path(tmp).write_bytes(b"w" * 10), group="g", name="w.png"))
        largest = max(largest, (root / "index.db-wal").stat().st_size)
    assert cache.stats().entries == 1500
    assert largest <= 1 << 20
