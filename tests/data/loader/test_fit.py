"""A loader's shape against its dataset (uc_jupyter.data.loader.fit), checked as the DataLoader is
made (and, for what a listing still arriving leaves open, as its first pass starts): a batch_size
beyond what a pass holds, and a cache budget that cannot hold the files the loop holds at once, are
one-line errors at once, not a 15 GB allocation or a 120 s wait. On real datasets: remote volumes
on the S3 test server, read by real DataLoader workers."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch.utils.data

from tests.data.conftest import write_files
from uc_jupyter.data import DataLoader, UCVolumeDataset
from uc_jupyter.data.cache import CacheBudgetError, FileCache
from uc_jupyter.data.loader.fit import HARMLESS_BATCH, files_held_at_once
from uc_jupyter.testing.s3_server import S3TestServer

Volume = Callable[..., tuple[str, Path]]


class Numbers(torch.utils.data.Dataset[int]):
    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> int:
        return index


def test_the_loop_needs_a_batch_per_worker_and_its_own_and_holds_up_to_every_batch_asked_for() -> None:
    assert files_held_at_once(2, 2, 2) == (
        (6, "a batch in each worker and the loop's: batch_size 2 x (2 workers + 1)"),
        (10, "batch_size 2 x (2 workers x prefetch_factor 2 + 1)"),
    )
    assert files_held_at_once(None, 2, 4)[1] == (9, "batch_size None (1 item) x (2 workers x prefetch_factor 4 + 1)")
    assert files_held_at_once(8, 0, None) == ((8, "batch_size 8, without workers"),) * 2


def test_a_batch_beyond_a_map_style_datasets_length_is_refused_at_construction() -> None:
    with pytest.raises(ValueError, match=r"^batch_size 1,000,000,000 is larger than the 10 items a pass of this "):
        DataLoader(Numbers(10), batch_size=10**9, num_workers=0, mlflow=False)
    sampled = torch.utils.data.RandomSampler(Numbers(10), replacement=True, num_samples=100)
    loader = DataLoader(Numbers(10), batch_size=50, sampler=sampled, num_workers=0, mlflow=False)
    assert [len(batch) for batch in loader] == [50, 50]  # a pass draws what the sampler draws


def test_a_modest_batch_beyond_a_pass_is_one_batch_of_it_as_in_torch_unless_drop_last_leaves_nothing() -> None:
    """The default 32 over 12 items is one batch of 12 (torch's behaviour, a small folder's first
    try); with drop_last=True the pass would yield nothing, which is refused instead of an empty loop."""
    loader = DataLoader(Numbers(12), batch_size=32, num_workers=0, mlflow=False)
    assert [batch.tolist() for batch in loader] == [list(range(12))]
    assert [
        len(batch) for batch in DataLoader(Numbers(12), batch_size=HARMLESS_BATCH, num_workers=0, mlflow=False)
    ] == [12]
    with pytest.raises(
        ValueError, match=r"^batch_size 32 with drop_last=True leaves no batch of the 12 items .* at most 12$"
    ):
        DataLoader(Numbers(12), batch_size=32, drop_last=True, num_workers=0, mlflow=False)
    assert len(DataLoader(Numbers(12), batch_size=12, drop_last=True, num_workers=0, mlflow=False)) == 1


def test_a_batch_beyond_a_volume_listing_is_refused_at_construction(s3_volume: Volume) -> None:
    path, folder = s3_volume()
    write_files(folder, 12, size=100)
    dataset = UCVolumeDataset(path)
    started = time.monotonic()
    with pytest.raises(ValueError, match=r"^batch_size 1,000,000,000 is larger than") as caught:
        DataLoader(dataset, batch_size=10**9, num_workers=2, mlflow=False)
    assert time.monotonic() - started < 5
    message = str(caught.value)
    assert "1,000,000,000" in message and "the 12 items" in message and "\n" not in message
    assert "give a batch_size of at most 12" in message


def test_a_batch_beyond_a_listing_still_arriving_is_refused_before_any_batch_is_collected(
    s3_volume: Volume, s3: S3TestServer
) -> None:
    """Its length is unknown as the loader is made (len() would wait for the listing's end): the
    first pass waits for as many files as one batch takes, or the end, and refuses then; torch's
    sampler, which makes a list of batch_size indices per batch, never runs."""
    path, folder = s3_volume()
    for part in range(2):
        write_files(folder, 2500, size=10, sub=f"part-{part}/")  # three pages a sub-folder
    s3.configure(list_latency=0.5)  # each page half a second: the listing takes about two
    dataset = UCVolumeDataset(path, recursive=True)
    started = time.monotonic()
    loader = DataLoader(dataset, batch_size=10**9, num_workers=0, mlflow=False)
    assert dataset.stats().listed_files < 5000  # made without waiting for the listing's end
    with pytest.raises(ValueError, match=r"than the 5,000 items"):
        iter(loader)
    assert time.monotonic() - started < 20


def test_a_budget_below_the_files_the_loop_holds_is_refused_at_construction(s3_volume: Volume, tmp_path: Path) -> None:
    """Before, a budget for one and a half files under two workers waited the cache's wait_seconds
    (120 s by default) and then failed deep in a worker."""
    path, folder = s3_volume()
    write_files(folder, 12, size=1000)
    cache = FileCache(tmp_path / "cache", max_bytes=1500, min_free_bytes=0, wait_seconds=10)
    dataset = UCVolumeDataset(path, cache_dir=cache)
    started = time.monotonic()
    with pytest.raises(CacheBudgetError) as caught:
        DataLoader(
            dataset, batch_size=1, num_workers=2, prefetch_factor=2, multiprocessing_context="fork", mlflow=False
        )
    assert time.monotonic() - started < 5
    assert str(caught.value).startswith(
        f"{path}: cache_max_bytes 1,500 bytes holds 1 of its files, but this loader needs room for 3 at once (a "
        "batch in each worker and the loop's: batch_size 1 x (2 workers + 1)) and holds up to 5 (batch_size 1 x "
        "(2 workers x prefetch_factor 2 + 1))"
    )


def test_a_budget_that_holds_every_batch_the_loop_may_hold_reads_every_file(s3_volume: Volume, tmp_path: Path) -> None:
    path, folder = s3_volume()
    files = write_files(folder, 12, size=1000)
    cache = FileCache(tmp_path / "cache", max_bytes=5500, min_free_bytes=0, wait_seconds=10)
    dataset = UCVolumeDataset(path, cache_dir=cache)
    loader = DataLoader(
        dataset,
        batch_size=1,
        num_workers=2,
        prefetch_factor=2,
        multiprocessing_context="fork",
        collate_fn=lambda batch: [Path(p).read_bytes() for p in batch],
        mlflow=False,
    )
    assert sorted(item for batch in loader for item in batch) == sorted(files.values())
