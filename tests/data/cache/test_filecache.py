"""The shared file cache on its own: real files, real processes, a real S3-compatible server."""

from __future__ import annotations

import dataclasses
import doctest
import multiprocessing
import os
import shutil
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.data.conftest import wall_clock
from uc_jupyter.data.cache import (
    CacheBudgetError,
    CachedFile,
    FileCache,
    Ticket,
)
from uc_jupyter.testing.s3_server import S3TestServer
from uc_jupyter.testing.waits import wait_until


def writer(content: bytes) -> Callable[[str], None]:
    def fetch(tmp: str) -> None:
        Path(tmp).write_bytes(content)

    return fetch


def failing(tmp: str) -> None:
    Path(tmp).write_bytes(b"partial")
    raise ConnectionResetError("connection reset by peer")


def stored_files(cache: FileCache) -> list[Path]:
    """Every data file under the cache (objects, streamed, temporary), not locks or the index."""
    return [p for sub in ("objects", "stream", "tmp") for p in (cache.root / sub).rglob("*") if p.is_file()]


def get(cache: FileCache, name: str, content: bytes, group: str = "g", **kwargs: Any) -> CachedFile:
    key = FileCache.key(f"s3://b/{name}", len(content), "v1")
    return cache.get(key, len(content), writer(content), group=group, name=name, **kwargs)


@pytest.fixture
def cache(tmp_path: Path) -> FileCache:
    clock = wall_clock()  # a wait for room gives up at once instead of sleeping
    return FileCache(tmp_path / "cache", max_bytes=10_000, min_free_bytes=0, clock=clock, sleep=clock.sleep)


def test_a_miss_downloads_once_and_later_gets_hit(cache: FileCache) -> None:
    first = get(cache, "a.png", b"x" * 100)
    assert (first.downloaded, first.resident) == (True, True)
    assert first.path.endswith(".png")  # the extension survives
    assert Path(first.path).read_bytes() == b"x" * 100
    again = get(cache, "a.png", b"y" * 100)  # same name, size and version: a hit
    assert (again.downloaded, Path(again.path).read_bytes()) == (False, b"x" * 100)
    cache.release(first)
    cache.release(again)
    assert [p for p in (cache.root / "pins").rglob("*") if p.is_file()] == []
    stats = cache.stats()
    assert (stats.resident_bytes, stats.in_flight_bytes, stats.entries) == (100, 0, 1)
    assert cache.resident_bytes() == 100  # the cheap read the fetch-ahead window asks per batch


def test_a_hit_is_a_complete_cached_file(cache: FileCache) -> None:
    first = get(cache, "a.png", b"x" * 100)
    hit = cache.lookup(first.key, 100, name="a.png")
    assert hit is not None
    # Every field is set (hits are built without the dataclass's __init__), and is what a hit is.
    assert all(hasattr(hit, f.name) for f in dataclasses.fields(CachedFile))
    assert (hit.key, hit.path, hit.size, hit.resident, hit.downloaded, hit.reservation) == (
        first.key,
        first.path,
        100,
        True,
        False,
        None,
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        hit.path = "elsewhere"  # type: ignore[misc]
    cache.release(hit)
    cache.release(first)


@pytest.mark.parametrize(
    ("names", "suffixes"),
    [
        # The verdict on an extension is remembered: names sharing one must still each get their own.
        (["a.png", ".png", "a..png", "..png"], [".png", "", ".png", ""]),
        (
            ["archive.tar.gz", "noext", "trailing.", "x.a-b", "x.abcdefghijklmnopq", "x.abcdefghijklmno"],
            [".gz", "", "", "", "", ".abcdefghijklmno"],
        ),
    ],
)
def test_cached_files_keep_the_remote_file_s_extension(cache: FileCache, names: list[str], suffixes: list[str]) -> None:
    for name, suffix in zip(names, suffixes, strict=True):
        for got in (get(cache, name, b"z" * 10), get(cache, name, b"z" * 10)):  # a miss, then a hit
            assert Path(got.path).name == f"{got.key}{suffix}", name
            cache.release(got)


def test_a_changed_remote_file_has_a_new_key() -> None:
    assert FileCache.key("s3://b/a", 10, "etag1") != FileCache.key("s3://b/a", 10, "etag2")
    assert FileCache.key("s3://b/a", 10, "etag1") != FileCache.key("s3://b/a", 11, "etag1")
    assert FileCache.key("s3://b/a", 10, "etag1") == FileCache.key("s3://b/a", 10, "etag1")
    assert FileCache.key("s3://b/a", 10, "etag1") == FileCache.key_digest("s3://b/a", 10, "etag1").hex()


def test_a_failed_download_leaves_nothing_behind(cache: FileCache) -> None:
    key = FileCache.key("s3://b/broken", 7, None)
    with pytest.raises(ConnectionResetError):
        cache.get(key, 7, failing, group="g")
    assert stored_files(cache) == []
    assert cache.stats().in_flight_bytes == 0


def test_a_size_different_from_the_listing_is_refused(cache: FileCache) -> None:
    key = FileCache.key("s3://b/grew", 5, None)
    with pytest.raises(OSError, match=r"it changed since the dataset listed it \(5 bytes then, 9 now\)"):
        cache.get(key, 5, writer(b"123456789"), group="g")
    assert stored_files(cache) == []


def test_a_full_cache_keeps_its_resident_set_and_streams_the_rest(cache: FileCache) -> None:
    # Budget 10 000 with 10% headroom: nine 1000-byte files stay, the others stream through.
    def epoch() -> list[CachedFile]:
        handed = []
        for i in range(20):
            got = get(cache, f"f{i}", bytes([i]) * 1000)
            assert Path(got.path).read_bytes() == bytes([i]) * 1000
            assert cache.stats().used_bytes <= cache.max_bytes
            cache.release(got)
            handed.append(got)
        return handed

    first = epoch()
    assert [g.resident for g in first] == [True] * 9 + [False] * 11
    assert cache.stats().in_flight_bytes == 0
    assert list((cache.root / "stream").rglob("f*")) == []
    second = epoch()
    assert [g.downloaded for g in second] == [False] * 9 + [True] * 11  # epoch 2 refetches only the rest
    assert cache.stats().entries == 9  # hits and streamed files add no entries


def test_other_groups_are_evicted_after_the_grace_period(tmp_path: Path) -> None:
    clock = wall_clock()
    cache = FileCache(
        tmp_path,
        max_bytes=5_000,
        min_free_bytes=0,
        headroom=0.2,
        grace_seconds=60,
        clock=clock,
        sleep=clock.sleep,
    )
    for i in range(4):
        cache.release(get(cache, f"old{i}", b"o" * 1000, group="yesterday"))
    fresh = get(cache, "new0", b"n" * 1000, group="today")
    assert not fresh.resident  # the other group was used moments ago: not evicted yet
    cache.release(fresh)
    clock.advance(61)  # recency lives in the index, by the cache's clock: older than the grace period now
    admitted = get(cache, "new1", b"n" * 1000, group="today")
    assert admitted.resident
    stats = cache.stats()
    assert stats.evictions == 1
    assert (stats.entries, stats.resident_bytes) == (4, 4000)  # 3 left of yesterday's, 1 of today's
    cache.release(admitted)


def test_a_pinned_file_is_not_evicted_and_a_released_one_stays_until_evicted(cache: FileCache) -> None:
    held = get(cache, "keep.txt", b"still here")
    assert cache.clear() == 0  # pinned: evicting would free nothing
    assert Path(held.path).read_bytes() == b"still here"
    cache.release(held)
    assert Path(held.path).read_bytes() == b"still here"  # resident: still there after release
    assert cache.stats().entries == 1
    assert cache.clear() == 1
    assert not Path(held.path).exists()
    assert (cache.stats().resident_bytes, cache.stats().entries) == (0, 0)


def test_a_file_larger_than_the_budget_is_refused_at_once(cache: FileCache) -> None:
    with pytest.raises(CacheBudgetError, match=r"a 20000-byte file cannot fit the cache budget of 10000 bytes"):
        get(cache, "huge", b"h" * 20_000)


def test_the_free_disk_floor_is_kept(tmp_path: Path) -> None:
    clock = wall_clock()
    floor = shutil.disk_usage(tmp_path).total  # more than can ever be free
    cache = FileCache(tmp_path, max_bytes=10_000, min_free_bytes=floor, wait_seconds=5, clock=clock, sleep=clock.sleep)
    with pytest.raises(CacheBudgetError, match="free-disk floor"):
        get(cache, "a", b"a" * 10)
    assert stored_files(cache) == []


def test_waiting_for_room_asks_the_holder_to_relieve_then_gives_up(tmp_path: Path) -> None:
    clock = wall_clock()
    cache = FileCache(tmp_path, max_bytes=2_000, min_free_bytes=0, headroom=0.5, clock=clock, sleep=clock.sleep)
    resident = get(cache, "r", b"r" * 1000)
    streamed = get(cache, "s", b"s" * 1000)
    assert (resident.resident, streamed.resident) == (True, False)
    released: list[CachedFile] = []

    def relieve() -> None:
        if streamed not in released:
            cache.release(streamed)
            released.append(streamed)

    third = get(cache, "t", b"t" * 1000, relieve=relieve)
    assert released == [streamed]
    assert not third.resident
    with pytest.raises(CacheBudgetError, match="no room for a 1000-byte file"):
        get(cache, "u", b"u" * 1000)
    assert clock.now > time.time() + 100  # it waited (the injected clock moved on) before giving up
    cache.release(third)
    cache.release(resident)


def test_a_cache_of_an_older_format_is_emptied_not_misread(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    cache = FileCache(root, max_bytes=10_000, min_free_bytes=0)
    cache.release(get(cache, "a", b"a" * 10))
    (root / "FORMAT").write_text("1")
    again = FileCache(root, max_bytes=10_000, min_free_bytes=0)
    assert again.stats().entries == 0
    assert stored_files(again) == []
    assert get(again, "a", b"a" * 10).downloaded


def test_a_starving_download_evicts_its_own_groups_unpinned_files(tmp_path: Path) -> None:
    """Alone in the cache (no other process holds room), a download that finds no room evicts its own
    group's unpinned files at once: nobody else would make room by waiting."""
    clock = wall_clock()
    cache = FileCache(
        tmp_path, max_bytes=4_000, min_free_bytes=0, headroom=0.25, starve_seconds=1.0, clock=clock, sleep=clock.sleep
    )
    for i in range(3):  # the resident set: 3000 of the 3000 bytes it may take
        cache.release(get(cache, f"r{i}", b"r" * 1000))
    in_flight = get(cache, "s0", b"s" * 1000)  # a streamed file some consumer still holds
    assert not in_flight.resident
    waited_from = clock.now
    starving = get(cache, "s1", b"t" * 1000)  # no room until a resident file goes
    assert clock.now - waited_from < 1.0  # not the starve_seconds wait
    assert cache.stats().evictions == 1
    assert cache.stats().used_bytes <= cache.max_bytes
    cache.release(starving)
    cache.release(in_flight)


def _hold_a_reservation(root: str, held: Any, done: Any) -> None:
    """In another process: reserve room for a download and keep it until told to stop."""
    cache = FileCache(root, max_bytes=4_000, min_free_bytes=0, headroom=0.25)
    [ticket] = cache.reserve([(FileCache.key("s3://b/elsewhere", 500, "v1"), 500, "elsewhere")], group="other")
    assert ticket is not None
    held.set()
    done.wait(60)


def test_a_starving_download_waits_while_another_process_holds_room(tmp_path: Path) -> None:
    """Another process's download may end and make room (or be waiting on this very file): wait out
    starve_seconds before evicting this group's own resident files."""
    clock = wall_clock()
    cache = FileCache(
        tmp_path, max_bytes=4_000, min_free_bytes=0, headroom=0.25, starve_seconds=1.0, clock=clock, sleep=clock.sleep
    )
    for i in range(2):  # resident: 2000 bytes
        cache.release(get(cache, f"r{i}", b"r" * 1000))
    context = multiprocessing.get_context("fork")
    held, done = context.Event(), context.Event()
    other = context.Process(target=_hold_a_reservation, args=(str(tmp_path), held, done))
    other.start()
    try:
        assert held.wait(60)
        in_flight = get(cache, "s0", b"s" * 1000)  # 2000 + 500 elsewhere + 1000 in flight here
        waited_from = clock.now
        starving = get(cache, "s1", b"t" * 1000)
        assert clock.now - waited_from >= 1.0
        assert cache.stats().evictions == 1
        cache.release(starving)
        cache.release(in_flight)
    finally:
        done.set()
        other.join(60)


# ----------------------------------------------------------------- across processes


def _get_from_s3(root: str, options: dict[str, Any], path: str, size: int, barrier: Any, out: Any) -> None:
    import s3fs

    fs = s3fs.S3FileSystem(skip_instance_cache=True, **options)
    cache = FileCache(root, max_bytes=10**8, min_free_bytes=0)
    barrier.wait()
    got = cache.get(FileCache.key(f"s3://{path}", size, "v"), size, lambda tmp: fs.get_file(path, tmp), group="g")
    out.put((got.downloaded, Path(got.path).read_bytes() == b"z" * size))
    cache.release(got)


def test_four_processes_asking_for_one_file_download_it_once(tmp_path: Path, s3_server: S3TestServer) -> None:
    s3_server.reset()
    (s3_server.bucket("shared") / "big.bin").write_bytes(b"z" * 400_000)
    s3_server.configure(bandwidth=2_000_000)  # 0.2 s per download: the others arrive meanwhile
    try:
        context = multiprocessing.get_context("spawn")
        barrier, out = context.Barrier(4), context.Queue()
        args = (str(tmp_path / "cache"), s3_server.storage_options, "shared/big.bin", 400_000, barrier, out)
        workers = [context.Process(target=_get_from_s3, args=args) for _ in range(4)]
        for w in workers:
            w.start()
        results = sorted(out.get(timeout=120) for _ in workers)
        for w in workers:
            w.join(timeout=30)
    finally:
        s3_server.configure(bandwidth=0)
    assert results == [(False, True), (False, True), (False, True), (True, True)]
    assert s3_server.stats()["gets"] == {"big.bin": 1}


def _download_forever(root: str, options: dict[str, Any]) -> None:
    import s3fs

    fs = s3fs.S3FileSystem(skip_instance_cache=True, **options)
    cache = FileCache(root, max_bytes=10**8, min_free_bytes=0)
    key = FileCache.key("s3://shared/slow.bin", 2_000_000, "v")
    cache.get(key, 2_000_000, lambda tmp: fs.get_file("shared/slow.bin", tmp), group="g")


def test_a_download_killed_midway_leaves_no_visible_file(tmp_path: Path, s3_server: S3TestServer) -> None:
    (s3_server.bucket("shared") / "slow.bin").write_bytes(b"s" * 2_000_000)
    s3_server.configure(bandwidth=500_000)  # 4 s for the whole file
    root = tmp_path / "cache"
    try:
        process = multiprocessing.get_context("spawn").Process(
            target=_download_forever, args=(str(root), s3_server.storage_options)
        )
        process.start()
        try:
            wait_until(
                lambda: any(p.stat().st_size > 0 for p in (root / "tmp").glob("*")),
                "the download to write its first bytes",
                60,
            )
        finally:
            os.kill(process.pid, signal.SIGKILL)
            process.join()
    finally:
        s3_server.configure(bandwidth=0)
    assert list((root / "tmp").glob("*")), "the download never started"
    assert [p for p in (root / "objects").rglob("*") if p.is_file()] == []
    cache = FileCache(root, max_bytes=10**8, min_free_bytes=0)  # a later process reclaims the remains
    assert list((root / "tmp").glob("*")) == []
    assert cache.stats().in_flight_bytes == 0
    import s3fs

    fs = s3fs.S3FileSystem(skip_instance_cache=True, **s3_server.storage_options)
    got = cache.get(
        FileCache.key("s3://shared/slow.bin", 2_000_000, "v"),
        2_000_000,
        lambda tmp: fs.get_file("shared/slow.bin", tmp),
        group="g",
    )
    assert Path(got.path).stat().st_size == 2_000_000
    cache.release(got)


# ----------------------------------------------------------------- reservations in batches


def test_reserve_hands_out_room_in_order_and_names_busy_and_present_files(cache: FileCache) -> None:
    present = get(cache, "present", b"p" * 100)
    cache.release(present)
    wanted = [(FileCache.key(f"s3://b/w{i}", 3000, "v"), 3000, f"w{i}") for i in range(4)]
    small = (FileCache.key("s3://b/small", 10, "v"), 10, "small")
    first = cache.reserve([(present.key, 100, "present"), *wanted, small], group="g")
    # Budget 10 000, 9000 of it for resident files: two files are kept, the third streams through
    # the headroom, the fourth has no room, and neither has the small one after it (room goes in order).
    assert first[0] == "present"
    tickets = [t for t in first[1:4] if isinstance(t, Ticket)]
    assert [t.resident for t in tickets] == [True, True, False]
    assert first[4:] == [None, None]
    assert cache.reserve([wanted[0]], group="g") == ["busy"]  # downloading here already: wait for it
    for ticket in tickets:
        Path(ticket.tmp).write_bytes(b"t" * 3000)
    done = [cache.finish(t) for t in tickets]
    assert cache.reserve([wanted[0]], group="g") == ["present"]  # in place before it is in the index
    assert cache.stats().entries == 3  # stats() enters finished downloads first
    for got in done:
        cache.release(got)
    assert (cache.stats().resident_bytes, cache.stats().in_flight_bytes) == (6100, 0)
    (streamed,) = cache.reserve([wanted[3]], group="g")
    assert isinstance(streamed, Ticket)
    assert not streamed.resident
    cache.abort(streamed)
    assert cache.stats().in_flight_bytes == 0


def _finish_then_die(root: str) -> None:
    cache = FileCache(root, max_bytes=10**6, min_free_bytes=0)
    (ticket,) = cache.reserve([(FileCache.key("s3://b/x", 5, "v"), 5, "x.bin")], group="g")
    assert isinstance(ticket, Ticket)
    Path(ticket.tmp).write_bytes(b"12345")
    cache.finish(ticket)  # in place, not yet in the index
    os.kill(os.getpid(), signal.SIGKILL)


def test_a_killed_process_s_finished_download_is_adopted(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    process = multiprocessing.get_context("spawn").Process(target=_finish_then_die, args=(str(root),))
    process.start()
    process.join(60)
    assert process.exitcode == -signal.SIGKILL
    cache = FileCache(root, max_bytes=10**6, min_free_bytes=0)  # reclaims what the dead one left
    stats = cache.stats()
    assert (stats.resident_bytes, stats.in_flight_bytes, stats.entries) == (5, 0, 1)
    got = cache.lookup(FileCache.key("s3://b/x", 5, "v"), 5, name="x.bin")
    assert got is not None
    assert Path(got.path).read_bytes() == b"12345"
    cache.release(got)


def _pin_until_told(root: str, key: str, pinned: Any, go: Any) -> None:
    cache = FileCache(root, max_bytes=10**6, min_free_bytes=0)
    got = cache.lookup(key, 4, name="p.txt")
    pinned.set()
    go.wait(60)
    assert got is not None
    cache.release(got)


def test_a_file_pinned_by_another_process_is_not_evicted(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    cache = FileCache(root, max_bytes=10**6, min_free_bytes=0)
    first = get(cache, "p.txt", b"pinn")
    cache.release(first)
    context = multiprocessing.get_context("spawn")
    pinned, go = context.Event(), context.Event()
    process = context.Process(target=_pin_until_told, args=(str(root), first.key, pinned, go))
    process.start()
    try:
        assert pinned.wait(60)
        assert cache.clear() == 0
        assert Path(first.path).read_bytes() == b"pinn"
    finally:
        go.set()
        process.join(60)
    assert cache.clear() == 1  # released by the other process: evictable now


def test_the_cache_s_modules_show_working_examples() -> None:
    from uc_jupyter.data.cache import admission, disk, errors, handles, index, integrity, layout, ledger, pins

    for module in (admission, disk, errors, handles, index, integrity, layout, ledger, pins):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.attempted > 0, module.__name__
        assert result.failed == 0, module.__name__
