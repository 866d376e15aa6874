"""The cache's index as a process uses it: recovery from damage found while in use, and the timer that
enters finished downloads, run on the test's own clock."""

from __future__ import annotations

import contextlib
import re
import sqlite3
import threading
import warnings
from collections.abc import Callable
from pathlib import Path

from tests.data.cache.conftest import get
from uc_jupyter.data.cache import CacheIntegrityWarning, CacheStats, FileCache, Ticket
from uc_jupyter.data.cache.index import FLUSH_SECONDS
from uc_jupyter.testing.clocks import ManualClock


def test_an_index_damaged_while_in_use_is_rebuilt_by_the_next_operation(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    cache = FileCache(root, max_bytes=10**6, min_free_bytes=0)
    cache.release(get(cache, "a.png", b"a" * 100))
    cache.release(get(cache, "b.png", b"b" * 100))
    index = root / "index.db"
    with contextlib.closing(sqlite3.connect(index)) as conn:  # everything written into the file itself
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    with open(index, "r+b") as handle:  # what a stray write can do to a database in use
        handle.write(b"\0" * index.stat().st_size)
    outcome: list[object] = []

    def use() -> None:  # another thread: its own connection reads the damaged file afresh
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            outcome.append(cache.stats())
        outcome.extend(str(w.message) for w in seen if issubclass(w.category, CacheIntegrityWarning))

    thread = threading.Thread(target=use)
    thread.start()
    thread.join(60)
    stats, warned = outcome
    assert isinstance(stats, CacheStats)
    assert (stats.entries, stats.resident_bytes) == (0, 0)  # its checksums gone, nothing proves the objects
    assert re.match(
        r"cache index .*index.db was damaged \(.*\): rebuilt it empty and removed the 2 cached", str(warned)
    )
    assert cache.lookup(FileCache.key("s3://b/a.png", 100, "v1"), 100, name="a.png") is None  # this thread too
    cache.release(get(cache, "a.png", b"a" * 100))  # downloaded again, into the rebuilt index
    assert cache.stats().entries == 1


class Timers:
    """The cache's flush timer on a clock of the test's own: work runs when ``advance`` passes its time."""

    def __init__(self) -> None:
        self.clock = ManualClock(now=1000.0)
        self.started: list[tuple[float, Callable[[], None]]] = []

    def __call__(self, seconds: float, work: Callable[[], None]) -> None:
        self.started.append((self.clock() + seconds, work))

    def advance(self, seconds: float) -> None:
        now = self.clock.advance(seconds)
        due = [work for at, work in self.started if at <= now]
        self.started = [(at, work) for at, work in self.started if at > now]
        for work in due:
            work()


def test_finished_downloads_are_entered_by_the_flush_timer_once_its_time_has_come(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    timers = Timers()
    cache = FileCache(root, max_bytes=10**6, min_free_bytes=0, clock=timers.clock, timer=timers)
    other = FileCache(root, max_bytes=10**6, min_free_bytes=0)  # another process's view: its own bookkeeping
    wanted = [(FileCache.key(f"s3://b/{n}.png", 5, "v1"), 5, f"{n}.png") for n in "ab"]
    tickets = cache.reserve(wanted, group="g")
    for ticket in tickets:
        assert isinstance(ticket, Ticket)
        Path(ticket.tmp).write_bytes(b"hello")
        cache.release(cache.finish(ticket))
    assert [at for at, _ in timers.started] == [timers.clock() + FLUSH_SECONDS]  # one timer for both
    assert other.reserve(wanted, group="g") == ["busy", "busy"]  # put in place, not entered yet
    timers.advance(FLUSH_SECONDS / 2)
    assert other.reserve(wanted, group="g") == ["busy", "busy"]
    timers.advance(FLUSH_SECONDS / 2)
    assert timers.started == []
    assert other.reserve(wanted, group="g") == ["present", "present"]
    assert other.stats().entries == 2
    [again] = cache.reserve([(FileCache.key("s3://b/c.png", 5, "v1"), 5, "c.png")], group="g")
    assert isinstance(again, Ticket)
    Path(again.tmp).write_bytes(b"hello")
    cache.release(cache.finish(again))
    assert len(timers.started) == 1  # the next download after a flush starts the timer again
