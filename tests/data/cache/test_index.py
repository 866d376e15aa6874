"""The cache's index as a process uses it: recovery from damage found while in use."""

from __future__ import annotations

import contextlib
import re
import sqlite3
import threading
import warnings
from pathlib import Path

from uc_jupyter.data.cache import CacheIntegrityWarning, CacheStats, FileCache

from .conftest import get


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
    assert (stats.entries, stats.resident_bytes) == (2, 200)
    assert re.match(r"cache index .*index.db was damaged \(.*\): rebuilt it from the 2 cached files", str(warned))
    hit = cache.lookup(FileCache.key("s3://b/a.png", 100, "v1"), 100, name="a.png")  # this thread too
    assert hit is not None
    cache.release(hit)
    assert cache.stats().entries == 2
