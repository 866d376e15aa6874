"""Room within the budget and the free-disk floor, and whose files go first."""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

import pytest

from tests.data.cache.conftest import get
from tests.data.conftest import wall_clock
from uc_jupyter.data.cache import CacheBudgetError, FileCache


def test_a_group_in_use_keeps_its_files_and_the_coldest_group_goes_first(tmp_path: Path) -> None:
    """Recency is per group (one dataset's listing): a pass marks its group used, so another
    group's downloads evict the files of groups unused for the grace period instead."""
    clock = wall_clock()
    cache = FileCache(
        tmp_path, max_bytes=4_000, min_free_bytes=0, headroom=0.0, grace_seconds=60, clock=clock, sleep=clock.sleep
    )
    first = {name: get(cache, name, name.encode() * 500, group=name[0]) for name in ("a0", "c0", "a1")}
    for got in first.values():
        cache.release(got)
    clock.advance(61)
    cache.mark_used("a")  # a pass over a's listing starts
    newcomer = get(cache, "b0", b"b" * 1000, group="b")  # room for it: one file must go
    assert newcomer.resident
    cache.release(newcomer)
    assert {name: Path(got.path).exists() for name, got in first.items()} == {"a0": True, "c0": False, "a1": True}
    assert cache.stats().evictions == 1


def test_a_full_disk_refuses_within_seconds_not_after_the_whole_wait(tmp_path: Path) -> None:
    clock = wall_clock()
    floor = shutil.disk_usage(tmp_path).total  # more than can ever be free
    cache = FileCache(tmp_path, max_bytes=10_000, min_free_bytes=floor, clock=clock, sleep=clock.sleep)
    waited_from = clock.now
    with pytest.raises(CacheBudgetError, match="the disk holding the cache .* is full") as caught:
        get(cache, "a", b"a" * 10)
    assert caught.value.errno == errno.ENOSPC
    assert clock.now - waited_from < 10  # wait_seconds is 120
