"""uc_jupyter.testing.soak.leftovers: what counts as left behind in the run folder, the S3 server's
uploads, the staging folder and the cache, and what does not (committed checkpoints within
keep_last, folders the S3 test server emptied)."""

from __future__ import annotations

import os
from pathlib import Path

from uc_jupyter.processes import stamp
from uc_jupyter.testing.soak.leftovers import files_left, processes_left, stamped


def _write(path: Path, data: bytes = b"x") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _left(root: Path) -> list[str]:
    return files_left(runs=root / "runs", uploads=root / ".uploads", cache=root / "cache", staging=root / "staging")


def test_two_committed_checkpoints_and_emptied_folders_are_nothing_left(tmp_path: Path) -> None:
    for step in ("step-1", "step-2"):
        _write(tmp_path / "runs" / step / "_COMMITTED")
        _write(tmp_path / "runs" / step / "__0_0.distcp")
    (tmp_path / "runs" / "step-0").mkdir()  # every key deleted: S3 has no such folder
    (tmp_path / "cache" / "tmp").mkdir(parents=True)
    _write(tmp_path / "cache" / "objects" / "ab" / "abcd.png")  # a cached file is the cache's, not a leftover
    assert _left(tmp_path) == []


def test_unfinished_saves_extra_checkpoints_uploads_staged_and_partial_files_are_named(tmp_path: Path) -> None:
    for step in ("step-1", "step-2", "step-3"):
        _write(tmp_path / "runs" / step / "_COMMITTED")
    _write(tmp_path / "runs" / "step-4" / "__0_0.distcp")  # no marker
    _write(tmp_path / "runs" / "step-3" / "_SAVING")
    _write(tmp_path / "runs" / "stray.txt")
    _write(tmp_path / ".uploads" / "u1")
    _write(tmp_path / "staging" / "put-1")
    _write(tmp_path / "cache" / "tmp" / "k.123.0")
    _write(tmp_path / "cache" / "stream" / "123.1" / "0.png")
    assert _left(tmp_path) == [
        "an unfinished checkpoint: step-3 (2 files)",
        "an unfinished checkpoint: step-4 (1 files)",
        "a file in the run folder: stray.txt",
        "5 checkpoints kept, keep_last=2",
        "an unfinished upload at the S3 server: u1",
        "a staged file: put-1",
        "in the cache: tmp/k.123.0",
        "in the cache: stream/123.1/0.png",
    ]


def test_only_running_processes_are_left_and_a_pid_used_again_is_not_ours() -> None:
    assert processes_left(stamped([os.getpid(), 2**22 + 1])) == [os.getpid()]
    me = stamp()
    machine, pid, started = me.rsplit("/", 2)
    assert processes_left([f"{machine}/{pid}/{int(started) - 1}"]) == []  # this pid, another process
