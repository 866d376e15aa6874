"""The fetch-ahead of one stream through the cache, through its public class (and composed with the
hand-out stage after it, as a dataset's pass is): hits and misses in order, the window and its
batched reservations, a budget too small for the files in flight (what is relieved), downloads
cancelled when the consumer stops, download errors and a full disk that must reach the consuming
loop, and the pace measured on an injected clock (the pace on its own: test_pace.py). Downloads are
the test's own objects (:class:`Controlled`, the Downloads protocol) or fsspec's local filesystem."""

from __future__ import annotations

import concurrent.futures as cf
import errno
import os
import shutil
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from fsspec.implementations.local import LocalFileSystem

from tests.data.conftest import wall_clock, write_files
from uc_jupyter.data import DataLoader, UCVolumeDataset, decode_bytes
from uc_jupyter.data.cache import CachedFile, FileCache
from uc_jupyter.data.stream.loop_progress import UNKNOWN, Consumer, Progress
from uc_jupyter.data.volume.handed_out import Held
from uc_jupyter.data.volume.prefetch import Prefetcher
from uc_jupyter.storage.downloads import Job, ThreadDownloads, Wanted
from uc_jupyter.storage.errors import VolumeReadError
from uc_jupyter.storage.retry import RetryPolicy
from uc_jupyter.testing.clocks import ManualClock
from uc_jupyter.testing.waits import wait_until

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


class Pass:
    """One pass as a dataset composes it: the fetch-ahead window, then the hand-out stage that keeps
    each file pinned while ``consumer`` may use it (its ``relieve`` is the window's)."""

    def __init__(
        self, cache: FileCache, downloads: Any, *, consumer: Consumer = UNKNOWN, window: int = 512, **options: Any
    ) -> None:
        self.held = Held(cache, window, consumer)
        relieve = self.held.relieve
        self.fetch = Prefetcher(
            cache, downloads, group="g", keep=True, window=window, consumer=consumer, relieve=relieve, **options
        )
        self.counted: list[tuple[bool, bool]] = []  # (downloaded, resident) of each file handed out
        self.lingering: list[CachedFile] = []  # what the pass left pinned when it ended

    def paths(self, wanted: Sequence[Wanted]) -> Iterator[str]:
        def count(size: int, downloaded: bool, resident: bool) -> None:
            self.counted.append((downloaded, resident))

        def ended(lingering: list[CachedFile], completed: bool) -> None:
            self.lingering = lingering

        return self.held.hand_out(self.fetch.run(wanted), range(len(wanted)), None, count, ended)


def stream(fetch: Pass, wanted: Sequence[Wanted], downloads: list[bool] | None = None) -> list[bytes]:
    """Run one pass the way a consumer does: read each file; ``downloads`` gets whether each file
    was downloaded."""
    read = [Path(path).read_bytes() for path in fetch.paths(wanted)]
    if downloads is not None:
        downloads.extend(downloaded for downloaded, _ in fetch.counted)
    return read


def consume_within(seconds: float, fetch: Pass, wanted: Sequence[Wanted]) -> BaseException | list[bytes]:
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


class Controlled:
    """Downloads of the test's own (the Downloads protocol): each copies its source file, at once,
    or, with ``hold``, only when the test calls :meth:`finish`; ``cancel`` ends what is held with
    an error, as a download that stopped does. ``took`` seconds of ``clock`` pass per started batch
    (the batch's downloads run side by side); ``fail`` is raised by every download instead."""

    def __init__(
        self, *, hold: bool = False, clock: ManualClock | None = None, took: float = 0.0, fail: Exception | None = None
    ) -> None:
        self.hold, self.clock, self.took, self.fail = hold, clock, took, fail
        self.batches: list[list[str]] = []  # the remote paths of each start(), in order
        self.held: dict[str, tuple[cf.Future[None], str]] = {}  # remote -> (future, local path)
        self.cancelled: list[str] = []
        self.started = threading.Event()  # set once a batch has started
        self.closed = False

    def start(self, jobs: Sequence[Job]) -> list[cf.Future[None]]:
        self.batches.append([job.remote for job in jobs])
        if self.clock is not None:
            self.clock.sleep(self.took)
        futures = []
        for remote, local, *_ in jobs:
            future: cf.Future[None] = cf.Future()
            future.set_running_or_notify_cancel()
            if self.hold:
                self.held[remote] = (future, local)
            else:
                self._end(future, remote, local)
            futures.append(future)
        self.started.set()
        return futures

    def finish(self, remote: str) -> None:
        future, local = self.held.pop(remote)
        self._end(future, remote, local)

    def _end(self, future: cf.Future[None], remote: str, local: str) -> None:
        if self.fail is not None:
            future.set_exception(self.fail)
            return
        shutil.copyfile(remote, local)
        future.set_result(None)

    def cancel(self, futures: Sequence[cf.Future[None]]) -> None:
        for remote, (future, _) in list(self.held.items()):
            if future in futures:
                del self.held[remote]
                self.cancelled.append(remote)
                future.set_exception(VolumeReadError(f"cannot read {remote}: cancelled"))

    def close(self) -> None:
        self.closed = True


# ------------------------------------------------------------------ hits and misses


def test_a_pass_yields_every_file_in_order_and_the_next_pass_hits(tmp_path: Path) -> None:
    files = source_files(tmp_path / "volume", [100 + i for i in range(100)])
    cache = FileCache(tmp_path / "cache", max_bytes=10**6, min_free_bytes=0)
    wanted = [w for w, _ in files]
    for expected_downloads in (100, 0):
        downloads = ThreadDownloads(LocalFileSystem(), ONCE, threads=8)
        fetch = Prefetcher(cache, downloads, group="g", keep=True)
        got = [g for run in fetch.run(wanted) for g in run]
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
    clock = wall_clock()
    cache = FileCache(tmp_path / "cache", max_bytes=1500, min_free_bytes=0, clock=clock, sleep=clock.sleep)
    fetch = Pass(cache, ThreadDownloads(LocalFileSystem(), ONCE, threads=4))
    assert stream(fetch, [w for w, _ in files]) == [content for _, content in files]
    assert len(fetch.lingering) == 1  # the last file stays until the next pass (a batch may hold it)
    for leftover in fetch.lingering:
        cache.release(leftover)
    stats = cache.stats()
    assert (stats.entries, stats.in_flight_bytes) == (0, 0)  # none kept: each streamed in turn
    fetch.fetch.downloads.close()


def test_a_budget_for_a_few_files_keeps_what_fits_and_streams_the_rest(tmp_path: Path) -> None:
    files = source_files(tmp_path / "volume", [1000] * 10)
    clock = wall_clock()
    cache = FileCache(tmp_path / "cache", max_bytes=3500, min_free_bytes=0, clock=clock, sleep=clock.sleep)
    # Resident files may take 3500 - 1000 bytes (room for one more to stream past): two stay.
    for expected in ([True] * 10, [False] * 2 + [True] * 8):
        fetch = Pass(cache, ThreadDownloads(LocalFileSystem(), ONCE, threads=4))
        downloaded: list[bool] = []
        assert stream(fetch, [w for w, _ in files], downloaded) == [content for _, content in files]
        assert downloaded == expected
        for leftover in fetch.lingering:
            cache.release(leftover)
        fetch.fetch.downloads.close()
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
    def cat_file(self, path: str, start: int | None = None, end: int | None = None, **kwargs: Any) -> bytes:
        with open("/dev/full", "wb", buffering=0) as target:
            target.write(super().cat_file(path, start=start, end=end))  # ENOSPC from the kernel
        return b""


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_full_disk_under_thread_downloads_raises_in_the_loop_naming_the_file(tmp_path: Path) -> None:
    files = source_files(tmp_path / "volume", [500] * 20)
    cache = FileCache(tmp_path / "cache", max_bytes=10**6, min_free_bytes=0)
    fetch = Pass(cache, ThreadDownloads(FullDisk(), ONCE, threads=4))
    error = consume_within(30, fetch, [w for w, _ in files])
    assert isinstance(error, VolumeReadError)
    assert str(error).startswith(
        f"cannot read /Volumes/main/ml/v/f000.bin: the disk holding the cache {cache.root} is full"
    )
    fetch.fetch.downloads.close()
    assert_nothing_left_in_flight(cache)


def test_a_full_disk_under_any_downloads_raises_in_the_loop_naming_the_file(tmp_path: Path) -> None:
    """Whatever the Downloads (the storage seam's, threads, an event loop), ENOSPC in a download
    reaches the consuming loop as one line naming the /Volumes path and the cache's disk."""
    files = source_files(tmp_path / "volume", [500] * 20)
    cache = FileCache(tmp_path / "cache", max_bytes=10**6, min_free_bytes=0)
    downloads = Controlled(fail=OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))
    fetch = Pass(cache, downloads)
    error = consume_within(30, fetch, [w for w, _ in files])
    assert isinstance(error, VolumeReadError)
    assert str(error) == (
        f"cannot read /Volumes/main/ml/v/f000.bin: the disk holding the cache {cache.root} is full "
        f"({os.strerror(errno.ENOSPC)}); free disk space, or lower cache_max_bytes or raise min_free_bytes "
        "so that the cache leaves room"
    )
    assert_nothing_left_in_flight(cache)


def assert_nothing_left_in_flight(cache: FileCache) -> None:
    """Downloads cancelled when the loop stopped give their room back once they have stopped."""
    wait_until(lambda: cache.stats().in_flight_bytes == 0, "the cancelled downloads to give their room back", 10)


# ------------------------------------------------------------------ the window, through a Downloads of our own


def test_misses_start_in_order_in_batches_that_fill_the_window(tmp_path: Path) -> None:
    files = source_files(tmp_path / "volume", [100] * 10)
    wanted = [w for w, _ in files]
    cache = FileCache(tmp_path / "cache", max_bytes=10**6, min_free_bytes=0)
    downloads = Controlled()
    fetch = Pass(cache, downloads, prefetch=4)
    ahead = []
    for yielded, _ in enumerate(fetch.paths(wanted), start=1):
        ahead.append(sum(map(len, downloads.batches)) - yielded)  # started, not yet handed out
    sources = [w.source for w in wanted]
    assert downloads.batches == [sources[0:4], sources[4:8], sources[8:10]]  # one reservation each
    assert max(ahead) <= 4 - 1  # never more than the window ahead of the consumer
    for leftover in fetch.lingering:
        cache.release(leftover)
    downloads.batches.clear()
    again = Pass(cache, downloads, prefetch=4)
    assert stream(again, wanted) == [content for _, content in files]
    assert downloads.batches == []  # every file a hit: pinned, nothing started


def test_the_window_reserves_only_what_fits_and_relieves_delivered_files_for_the_rest(tmp_path: Path) -> None:
    """A budget for three files: the first top-up reserves what fits; the files after it wait
    until the consumer reaches them, then the delivered files it is done with make room."""
    files = source_files(tmp_path / "volume", [1000] * 8)
    wanted = [w for w, _ in files]
    clock = wall_clock()
    cache = FileCache(tmp_path / "cache", max_bytes=3500, min_free_bytes=0, clock=clock, sleep=clock.sleep)
    downloads = Controlled()
    fetch = Pass(cache, downloads, prefetch=8)
    assert stream(fetch, wanted) == [content for _, content in files]
    assert len(downloads.batches[0]) < len(wanted)  # not every file was reserved up front
    assert [s for batch in downloads.batches for s in batch] == [w.source for w in wanted]  # each once, in order
    for leftover in fetch.lingering:
        cache.release(leftover)
    assert cache.stats().in_flight_bytes == 0
    assert cache.stats().used_bytes <= 3500


def test_closing_a_pass_cancels_its_downloads_and_gives_their_room_back(tmp_path: Path) -> None:
    files = source_files(tmp_path / "volume", [1000] * 6)
    wanted = [w for w, _ in files]
    cache = FileCache(tmp_path / "cache", max_bytes=10**6, min_free_bytes=0)
    downloads = Controlled(hold=True)
    fetch = Prefetcher(cache, downloads, group="g", keep=True, prefetch=6)
    run = fetch.run(wanted)
    first: list[Any] = []
    consumer = threading.Thread(target=lambda: first.extend(next(run)), daemon=True)
    consumer.start()  # it waits in next() for the first file
    assert downloads.started.wait(10)
    downloads.finish(wanted[0].source)
    consumer.join(10)
    assert [Path(got.path).read_bytes() for got in first] == [files[0][1]]  # the only file ready: a run of one
    assert cache.stats().in_flight_bytes == 5 * 1000  # the other five reserved
    cache.release(first[0])
    run.close()  # the consumer stops early
    assert sorted(downloads.cancelled) == sorted(w.source for w in wanted[1:])
    assert downloads.held == {}
    assert cache.stats().in_flight_bytes == 0  # their room given back
    assert cache.stats().entries == 1  # only the file that was downloaded stays


def test_the_pace_measures_downloads_on_the_clock_it_is_given(tmp_path: Path) -> None:
    files = source_files(tmp_path / "volume", [100] * 200)
    clock = wall_clock()
    cache = FileCache(tmp_path / "cache", max_bytes=10**6, min_free_bytes=0)
    downloads = Controlled(clock=clock, took=0.25)
    fetch = Pass(cache, downloads, clock=clock)
    for _ in fetch.paths([w for w, _ in files]):
        clock.sleep(0.01)  # the consumer's work per file
    pace = fetch.fetch.pace
    assert pace.fetch_seconds == pytest.approx(0.25, abs=1e-6)
    assert pace.consume_seconds >= 0.01 - 1e-6  # the consumer's own work per file at least, on that clock
    assert len(downloads.batches[0]) == 64  # before anything was measured


def test_the_resident_set_leaves_room_for_the_files_in_use_and_the_rest_streams_in_batches(tmp_path: Path) -> None:
    """A consumer that holds 8 files at once (two batches of 4) and a window of 4: the resident set
    stops where the budget less its headroom still has room for them, and later misses stream
    through the cache in whole windows, never one download at a time (which is what a resident set
    up to the cap left: no room for the files in use)."""
    files = source_files(tmp_path / "volume", [1000] * 40)
    clock = wall_clock()
    cache = FileCache(tmp_path / "cache", max_bytes=20_000, min_free_bytes=0, clock=clock, sleep=clock.sleep)
    progress = Progress(workers=0, batch_size=4)
    progress.new_pass()
    downloads = Controlled()
    fetch = Pass(cache, downloads, prefetch=4, consumer=progress.consumer(0))
    for position, _ in enumerate(fetch.paths([w for w, _ in files]), start=1):
        if position % 4 == 0:
            progress.moved_past(0)  # the loop asks for the batch after this one
    kept = [resident for _, resident in fetch.counted]
    # Room kept: (8 in use + 4 in the window) files, at most half the budget: 10,000 bytes of the
    # 18,000 the resident set may take; checked before each window of 4.
    assert kept == [True] * 12 + [False] * 28
    assert [len(batch) for batch in downloads.batches] == [4] * 10
    for leftover in fetch.lingering:
        cache.release(leftover)
    assert cache.stats().entries == 12 and cache.stats().in_flight_bytes == 0
