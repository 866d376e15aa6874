"""Stream folders of DataLoader workers outlive the workers while their parent lives (torch ends a
worker whose stream ended while its last batches still wait in the loop's queue)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from uc_jupyter.data.cache import FileCache
from uc_jupyter.data.cache.streams import owner, owners


def dead_pid() -> int:
    """The pid of a process that ran and is gone (reaped)."""
    done = subprocess.Popen([sys.executable, "-c", ""])
    done.wait()
    return done.pid


def folder(cache: FileCache, name: str) -> Path:
    path = Path(cache.root) / "stream" / name
    path.mkdir(parents=True)
    (path / "0.png").write_bytes(b"streamed")
    return path


def test_names_say_whose_a_folder_is() -> None:
    assert owner("12.7") == (12, 7) and owner("12") == (12, None)
    assert owner("x.7") == owner("12.x") == owner(".tmp") == (None, None)
    assert owners(["12.7", "13", "notes"]) == {12: 7, 13: None}


def test_a_dead_workers_files_stay_while_its_parent_lives_and_go_when_the_parent_says(tmp_path: Path) -> None:
    cache = FileCache(tmp_path / "cache", max_bytes=10**6, min_free_bytes=0)
    mine = folder(cache, f"{dead_pid()}.{os.getpid()}")  # a worker of this process that ended
    orphan = folder(cache, f"{dead_pid()}.{dead_pid()}")  # a worker whose loop is gone too
    plain = folder(cache, str(dead_pid()))  # a process that was no worker
    cache.reclaim_dead()  # what any process does while it waits for room
    assert mine.exists() and not orphan.exists() and not plain.exists()
    cache.reclaim_finished_workers()  # this process, the worker's parent: a new pass begins
    assert not mine.exists()


def test_a_parent_takes_back_only_its_own_workers(tmp_path: Path) -> None:
    cache = FileCache(tmp_path / "cache", max_bytes=10**6, min_free_bytes=0)
    parent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        theirs = folder(cache, f"{dead_pid()}.{parent.pid}")  # another loop's ended worker
        cache.reclaim_finished_workers()
        cache.reclaim_dead()
        assert theirs.exists()  # its loop still lives
    finally:
        parent.kill()
        parent.wait()
    cache.reclaim_dead()
    assert not theirs.exists()
