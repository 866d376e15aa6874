"""The fetch-ahead of one stream through the cache: hits and misses in order, a budget too small
for the files in flight, and download errors that must reach the consuming loop."""

from __future__ import annotations

import concurrent.futures as cf
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from fsspec.implementations.local import LocalFileSystem

from uc_jupyter.data import DataLoader, UCVolumeDataset, decode_bytes
from uc_jupyter.data.cache import FileCache
from uc_jupyter.data.downloads import ThreadDownloads, Wanted
from uc_jupyter.data.held import Held
from uc_jupyter.data.prefetch import Prefetcher
from uc_jupyter.data.remote import RetryPolicy, VolumeReadError
from uc_jupyter.data.s3_reader import S3Reader, reader_for
from uc_jupyter.testing.s3_server import S3TestServer

from .conftest import FakeClock, write_files

ONCE = RetryPolicy(attempts=1)


def source_files(folder: Path, sizes: Sequence[int]) -> list[tuple[Wanted, bytes]]:
    """Files of those sizes in ``folder``, each as the prefetcher wants it, with its content."""
    folder.mkdir(parents=True, exist_ok=True)
    made = []
    for i, size in enumerate(sizes):
        name = f"f{i:03d}.bin"
        content = os.urandom(size)
        (folder / name).write_bytes(content)
        key = FileCache.key(f"file://{folder}/{name}", size, "v")
        made.append((Wanted(key, size, name, str(folder / name), f"/Volumes/main/ml/v/{name}"), content))
    return made


def stream(fetch: Prefetcher, wanted: Sequence[Wanted], downloads: list[bool] | None = None) -> list[bytes]:
    """Run one pass the way a consumer does: use each file, then hand it back; ``downloads`` gets
    whether each file was downloaded."""
    read = []
    for got in fetch.run(wanted):
        read.append(Path(got.path).read_bytes())
        if downloads is not None:
            downloads.append(got.downloaded)
        fetch.delivered(got)
    return read


def consume_within(seconds: float, fetch: Prefetcher, wanted: Sequence[Wanted]) -> BaseException | list[bytes]:
    """:func:`stream` on a thread; what it returned or raised, failing the test if it hangs."""
    outcome: list[BaseException | list[bytes]] = []

    def run() -> None:
        try:
            outcome.append(stream(fetch, wanted))
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert outcome, f"the consuming loop still waits after {seconds} s"
    return outcome[0]


# ------------------------------------------------------------------ hits and misses


def test_a_pass_yields_every_file_in_order_and_the_next_pass_hits(tmp_path: Path) -> None:
    files = source_files(tmp_path / "volume", [100 + i for i in range(100)])
    cache = FileCache(tmp_path / "cache", max_bytes=10**6, min_free_bytes=0)
    wanted = [w for w, _ in files]
    for expected_downloads in (100, 0):
        downloads = ThreadDownloads(LocalFileSystem(), ONCE, threads=8)
        fetch = Prefetcher(cache, downloads, group="g", keep=True)
        got = list(fetch.run(wanted))
        assert [Path(g.path).read_bytes() for g in got] == [content for _, content in files]
        assert sum(g.downloaded for g in got) == expected_downloads
        for g in got:
            cache.release(g)
        downloads.close()


# ------------------------------------------------------------------ a budget too small


@pytest.mark.parametrize(
    "sizes",
    [[1000] * 12, [600, 1400, 900, 1100, 700, 1300, 1000, 800]],
    ids=["equal-sizes", "mixed-sizes"],
)
def test_a_budget_between_one_and_two_files_streams_every_file_through(tmp_path: Path, sizes: list[int]) -> None:
    """Before, the first file stayed resident (and pinned), and the second waited for room that
    never came: CacheBudgetError after wait_seconds."""
    files = source_files(tmp_path / "volume", sizes)
    clock = FakeClock()
    cache = FileCache(tmp_path / "cache", max_bytes=1500, min_free_bytes=0, clock=clock, sleep=clock.sleep)
    fetch = Prefetcher(cache, ThreadDownloads(LocalFileSystem(), ONCE, threads=4), group="g", keep=True)
    assert stream(fetch, [w for w, _ in files]) == [content for _, content in files]
    assert len(fetch.lingering) == 1  # the last file stays until the next pass (a batch may hold it)
    for leftover in fetch.lingering:
        cache.release(leftover)
    stats = cache.stats()
    assert (stats.entries, stats.in_flight_bytes) == (0, 0)  # none kept: each streamed in turn
    fetch.downloads.close()


def test_a_budget_for_a_few_files_keeps_what_fits_and_streams_the_rest(tmp_path: Path) -> None:
    files = source_files(tmp_path / "volume", [1000] * 10)
    clock = FakeClock()
    cache = FileCache(tmp_path / "cache", max_bytes=3500, min_free_bytes=0, clock=clock, sleep=clock.sleep)
    # Resident files may take 3500 - 1000 bytes (room for one more to stream past): two stay.
    for expected in ([True] * 10, [False] * 2 + [True] * 8):
        fetch = Prefetcher(cache, ThreadDownloads(LocalFileSystem(), ONCE, threads=4), group="g", keep=True)
        downloaded: list[bool] = []
        assert stream(fetch, [w for w, _ in files], downloaded) == [content for _, content in files]
        assert downloaded == expected
        for leftover in fetch.lingering:
            cache.release(leftover)
        fetch.downloads.close()
        stats = cache.stats()
        assert (stats.entries, stats.resident_bytes, stats.in_flight_bytes) == (2, 2000, 0)


def test_tiny_budget_with_workers_that_decode_streams_every_file(s3_volume: Any) -> None:
    """Two DataLoader workers, a budget for one and a half files: each worker's file is released as
    soon as it is decoded, so the other gets room."""
    path, folder = s3_volume()
    files = write_files(folder, 16, size=1000)
    dataset = UCVolumeDataset(path, transform=decode_bytes, cache_max_bytes=1500, min_free_bytes=0)
    loader = DataLoader(dataset, batch_size=None, num_workers=2, multiprocessing_context="fork", mlflow=False)
    started = time.monotonic()
    assert sorted(loader) == sorted(files.values())
    assert time.monotonic() - started < 60


def test_held_files_are_relieved_streamed_first_then_resident(tmp_path: Path) -> None:
    cache = FileCache(tmp_path / "cache", max_bytes=10_000, min_free_bytes=0, headroom=0.5)
    held = Held(cache, window=10)
    got = []
    for i in range(8):  # five resident (half the budget), then three streamed
        key = FileCache.key(f"s3://b/{i}", 1000, "v")
        got.append(cache.get(key, 1000, lambda tmp: Path(tmp).write_bytes(b"x" * 1000), group="g", name=f"{i}.bin"))
        held.add(got[-1])
    assert [g.resident for g in got] == [True] * 5 + [False] * 3
    assert held.relieve() == 1  # the oldest half of the streamed ones (at least one)
    assert [Path(g.path).exists() for g in got[5:]] == [False, True, True]
    assert (held.relieve(), held.relieve()) == (1, 1)
    assert cache.stats().in_flight_bytes == 0
    assert held.relieve() == 2  # no streamed file left: the oldest half of the resident ones
    assert cache.clear() == 2  # those two are unpinned now, the other three still held
    held.release_all()


# ------------------------------------------------------------------ a full disk


class FullDisk(LocalFileSystem):  # fsspec's local filesystem, whose downloads land on a full disk
    def get_file(self, rpath: str, lpath: str, **kwargs: Any) -> None:
        with open(rpath, "rb") as source, open("/dev/full", "wb", buffering=0) as target:
            target.write(source.read())  # ENOSPC from the kernel


class ReaderOntoFullDisk:
    """The lean S3 reader writing each body onto a full disk (a symlink to /dev/full per download:
    a failed download removes its local path, which must not be the device)."""

    def __init__(self, reader: S3Reader, folder: Path) -> None:
        self._reader, self._folder = reader, folder
        self._made = 0

    def start(self, jobs: Sequence[tuple[str, str, str]]) -> list[cf.Future[None]]:
        redirected = []
        for remote, _, where in jobs:
            self._made += 1
            link = self._folder / f"full{self._made}"
            link.symlink_to("/dev/full")
            redirected.append((remote, str(link), where))
        return self._reader.fetch_many(redirected, policy=ONCE)

    def cancel(self, futures: Sequence[cf.Future[None]]) -> None:
        self._reader.cancel(futures)

    def close(self) -> None:
        pass


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_full_disk_under_thread_downloads_raises_in_the_loop_naming_the_file(tmp_path: Path) -> None:
    files = source_files(tmp_path / "volume", [500] * 20)
    cache = FileCache(tmp_path / "cache", max_bytes=10**6, min_free_bytes=0)
    fetch = Prefetcher(cache, ThreadDownloads(FullDisk(), ONCE, threads=4), group="g", keep=True)
    error = consume_within(30, fetch, [w for w, _ in files])
    assert isinstance(error, VolumeReadError)
    assert str(error).startswith(
        f"cannot read /Volumes/main/ml/v/f000.bin: the disk holding the cache {cache.root} is full"
    )
    fetch.downloads.close()
    assert_nothing_left_in_flight(cache)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_full_disk_under_the_lean_s3_reader_raises_in_the_loop_naming_the_file(
    tmp_path: Path, s3: S3TestServer
) -> None:
    bucket = s3.bucket("full")
    for i in range(20):
        (bucket / f"f{i:03d}.bin").write_bytes(os.urandom(500))
    reader = reader_for("s3://full/", s3.storage_options)
    assert reader is not None
    wanted = [
        Wanted(
            FileCache.key(f"s3://full/f{i:03d}.bin", 500, "v"),
            500,
            f"f{i:03d}.bin",
            f"full/f{i:03d}.bin",
            f"/Volumes/main/ml/v/f{i:03d}.bin",
        )
        for i in range(20)
    ]
    cache = FileCache(tmp_path / "cache", max_bytes=10**6, min_free_bytes=0)
    links = tmp_path / "links"
    links.mkdir()
    fetch = Prefetcher(cache, ReaderOntoFullDisk(reader, links), group="g", keep=True)
    error = consume_within(30, fetch, wanted)
    assert isinstance(error, VolumeReadError)
    assert str(error).startswith(
        f"cannot read /Volumes/main/ml/v/f000.bin: the disk holding the cache {cache.root} is full"
    )
    assert os.path.exists("/dev/full")
    assert_nothing_left_in_flight(cache)


def assert_nothing_left_in_flight(cache: FileCache) -> None:
    """Downloads cancelled when the loop stopped give their room back once they have stopped."""
    deadline = time.monotonic() + 10
    while cache.stats().in_flight_bytes and time.monotonic() < deadline:
        time.sleep(0.05)
    assert cache.stats().in_flight_bytes == 0
