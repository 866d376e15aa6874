"""Held: files handed out stay pinned until the consumer is done with them, on a real cache."""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path

import pytest

from uc_jupyter.data.cache import CacheBudgetError, CachedFile, FileCache
from uc_jupyter.data.stream.loop_progress import UNKNOWN, Progress
from uc_jupyter.data.volume.handed_out import Held


def streamed(cache: FileCache, i: int, size: int = 1000) -> CachedFile:
    """A file streamed through ``cache`` (deleted once released)."""
    key = FileCache.key(f"s3://b/{i}", size, "v")
    got = cache.get(key, size, lambda tmp: Path(tmp).write_bytes(b"x" * size), group="g", name=f"{i}.bin", keep=False)
    assert not got.resident
    return got


def present(files: list[CachedFile]) -> list[bool]:
    return [Path(f.path).exists() for f in files]


@pytest.fixture
def cache(tmp_path: Path) -> FileCache:
    return FileCache(tmp_path / "cache", max_bytes=10_000, min_free_bytes=0)


def test_files_in_use_are_never_relieved_and_files_done_with_are(cache: FileCache) -> None:
    progress = Progress(workers=0, batch_size=2)
    progress.new_pass()
    held = Held(cache, window=100, consumer=progress.consumer(0))
    files = [streamed(cache, i) for i in range(3)]
    for f in files:
        held.add(f)
    assert held.relieve(1000) == 0  # the loop holds batch 0 (files 0, 1) and batch 1 is being made
    progress.moved_past(0)  # it asked for batch 1: done with files 0 and 1
    assert held.relieve(1000) == 2
    assert present(files) == [False, False, True]


def test_files_done_with_go_at_each_batch_the_stream_completes(cache: FileCache) -> None:
    progress = Progress(workers=0, batch_size=2)
    progress.new_pass()
    held = Held(cache, window=100, consumer=progress.consumer(0))
    files = [streamed(cache, i) for i in range(6)]
    held.add(files[0])
    held.add(files[1])
    progress.moved_past(0)
    held.add(files[2])
    assert present(files[:3]) == [True, True, True]  # asked only once a batch is complete
    held.add(files[3])
    assert present(files[:4]) == [False, False, True, True]
    progress.moved_past(0)
    held.add(files[4])
    held.add(files[5])
    assert present(files) == [False] * 4 + [True] * 2


def test_a_budget_that_cannot_hold_the_files_in_use_and_the_next_is_an_error_at_once(tmp_path: Path) -> None:
    cache = FileCache(tmp_path / "cache", max_bytes=2500, min_free_bytes=0)
    progress = Progress(workers=0, batch_size=4)
    progress.new_pass()
    held = Held(cache, window=100, consumer=progress.consumer(0))
    for i in range(2):
        held.add(streamed(cache, i))
    with pytest.raises(CacheBudgetError, match=r"the 2 files .* \(2000 bytes\) and the next one \(1000 bytes\)"):
        held.relieve(1000)
    assert held.relieve(500) == 0  # that one fits beside them: wait for room as usual


def test_the_end_of_a_pass_keeps_what_the_loop_still_uses_until_another_pass_begins(cache: FileCache) -> None:
    progress = Progress(workers=0, batch_size=2)
    progress.new_pass()
    held = Held(cache, window=100, consumer=progress.consumer(0))
    files = [streamed(cache, i) for i in range(4)]
    for f in files:
        held.add(f)
    progress.moved_past(0)
    lingering = held.finish(completed=True)
    assert lingering == files[2:] and present(files) == [False, False, True, True]
    progress.new_pass()  # a stream stopped early and closed once the next pass began: all done with
    again = Held(cache, window=100, consumer=progress.consumer(0))
    more = [streamed(cache, i) for i in range(10, 13)]
    for f in more:
        again.add(f)
    progress.new_pass()
    assert again.finish(completed=False) == [] and present(more) == [False] * 3
    for f in lingering:
        cache.release(f)


def test_a_consumer_that_says_nothing_keeps_a_whole_completed_pass_and_nothing_of_a_stopped_one(
    cache: FileCache,
) -> None:
    held = Held(cache, window=2, consumer=UNKNOWN)
    files = [streamed(cache, i) for i in range(4)]
    for f in files:
        held.add(f)
    assert present(files) == [False, False, True, True]  # the window: the last two
    assert held.finish(completed=True) == files[2:]
    other = Held(cache, window=10, consumer=UNKNOWN)
    for f in files[2:]:
        other.add(f)
    assert other.finish(completed=False) == [] and present(files) == [False] * 4


def test_the_stage_hands_out_runs_in_order_and_a_pass_stopped_early_releases_what_it_did_not_hand_out(
    cache: FileCache,
) -> None:
    files = [streamed(cache, i) for i in range(5)]
    closed: list[bool] = []

    def runs() -> Generator[list[CachedFile], None, None]:  # the fetch-ahead window's runs of pinned files
        try:
            yield files[:3]
            yield files[3:]
        finally:
            closed.append(True)

    counted: list[int] = []
    ended: list[tuple[list[CachedFile], bool]] = []
    held = Held(cache, window=100, consumer=UNKNOWN)
    items = held.hand_out(runs(), range(5), None, lambda size, *_: counted.append(size), lambda *e: ended.append(e))
    assert next(items) == files[0].path
    items.close()  # the loop stopped after one file
    assert closed == [True] and ended == [([], False)]  # nothing kept of a stopped pass: it moved on
    assert counted == [1000]
    assert present(files) == [False, False, False, True, True]  # the rest of its run released too
    for f in files[3:]:  # the window's own, never handed out
        cache.release(f)


def test_the_stage_decodes_each_file_and_without_hold_releases_it_once_its_item_is_made(cache: FileCache) -> None:
    files = [streamed(cache, i, size=10 + i) for i in range(4)]
    ended: list[tuple[list[CachedFile], bool]] = []
    held = Held(cache, window=100, consumer=UNKNOWN, hold=False)

    def decode(path: str, position: int) -> tuple[int, int]:  # the decode stage: sees the file, then it may go
        assert present([files[position]]) == [True]
        return position, len(Path(path).read_bytes())

    items = held.hand_out(
        (run for run in [files[:1], files[1:]]), [0, 1, 2, 3], decode, lambda *_: None, lambda *e: ended.append(e)
    )
    assert list(items) == [(0, 10), (1, 11), (2, 12), (3, 13)]
    assert present(files) == [False] * 4 and ended == [([], True)]
