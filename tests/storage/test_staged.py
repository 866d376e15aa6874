"""What is staged on local disk is held by its process: a sweep removes a process's entries once it is
killed (SIGKILL), never those of a process that lives, and never follows or removes a planted link."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from uc_jupyter.storage.staged import staged_file, staged_folder, sweep

# A child that stages a folder holding 1 MB and a file, says where, then waits for its standard input.
_HOLD = """
import sys
from uc_jupyter.storage.staged import staged_file, staged_folder
with staged_folder(sys.argv[1], "export-") as folder, staged_file(sys.argv[1], "put-") as file:
    open(folder + "/part-0.parquet", "wb").write(b"x" * 1_000_000)
    open(file, "wb").write(b"y" * 1000)
    print(folder, file, flush=True)
    sys.stdin.read()
"""


def _holder(folder: Path) -> tuple[subprocess.Popen[str], list[str]]:
    child = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(folder)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    return child, child.stdout.readline().split()  # waits on the pipe: staged once it has answered


def test_a_killed_process_s_entries_go_and_a_live_one_s_stay(tmp_path: Path) -> None:
    killed, killed_paths = _holder(tmp_path)
    living, living_paths = _holder(tmp_path)
    try:
        killed.send_signal(signal.SIGKILL)
        killed.wait()
        assert all(os.path.exists(p) for p in killed_paths)  # what kill -9 left
        removed = sweep(str(tmp_path))
        assert sorted(removed) == sorted([(killed_paths[0], 1_000_000), (killed_paths[1], 1000)])
        assert not any(os.path.exists(p) for p in killed_paths)
        assert all(os.path.exists(p) for p in living_paths)
    finally:
        assert living.stdin is not None
        living.stdin.close()
        living.wait()
    assert os.listdir(tmp_path) == []  # its block's end removed its own


def test_a_sweep_never_follows_or_removes_a_planted_link(tmp_path: Path) -> None:
    staging, victim = tmp_path / "staging", tmp_path / "victim"
    staging.mkdir()
    victim.mkdir()
    (victim / "precious").write_bytes(b"keep")
    (staging / "export-planted").symlink_to(victim)
    (staging / "put-planted").symlink_to(victim / "precious")
    (staging / "notes.txt").write_text("not staged by us")
    assert sweep(str(staging)) == []
    assert (victim / "precious").read_bytes() == b"keep"
    assert sorted(os.listdir(staging)) == ["export-planted", "notes.txt", "put-planted"]


def test_a_staged_entry_is_held_until_its_block_ends(tmp_path: Path) -> None:
    with staged_folder(str(tmp_path), "export-") as folder, staged_file(str(tmp_path), "put-") as file:
        assert sweep(str(tmp_path)) == []
        assert os.path.isdir(folder) and os.path.isfile(file)
        assert oct(os.stat(folder).st_mode & 0o777) == "0o700" and oct(os.stat(file).st_mode & 0o777) == "0o600"
    assert os.listdir(tmp_path) == []
