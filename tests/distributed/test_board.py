"""Pool status files for the JupyterLab status item: published, updated while busy, withdrawn; and
what counts as one (a record of the exact shape a pool writes)."""

from __future__ import annotations

import doctest
import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import cloudpickle
import pytest

from uc_jupyter.distributed import RankPool, board
from uc_jupyter.distributed.board import parse_board, publish, read_boards, withdraw
from uc_jupyter.distributed.status import PoolStatus, RankInfo
from uc_jupyter.testing.boards import pool_record
from uc_jupyter.testing.waits import wait_until

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # ranks cannot import test modules by name


def wait_for(started: str, release: str) -> None:
    """In a rank: say it is running (rank 0), then return once the test lets it (failing after a minute)."""
    import torch.distributed as dist

    dist.barrier()  # both ranks are inside the call
    if dist.get_rank() == 0:
        Path(started).touch()
    wait_until(lambda: os.path.exists(release), "the test to release the call", 60, interval_s=0.01)


def test_a_pool_announces_its_state_and_withdraws_it(isolated_home: Path) -> None:
    assert read_boards() == []
    with RankPool(2, devices="cpu") as pool:
        pool.start()
        [idle] = read_boards()
        assert (idle["size"], idle["state"], idle["backend"], idle["kernel_id"]) == (2, "idle", "gloo", None)
        assert [r["rank"] for r in idle["ranks"]] == [0, 1] and all(r["alive"] for r in idle["ranks"])
        started, release = isolated_home / "started", isolated_home / "release"
        call = threading.Thread(target=pool.call, args=(wait_for, (str(started), str(release))))
        call.start()
        try:
            wait_until(started.exists, "both ranks to be inside the call", 60, interval_s=0.01)
            assert [b["state"] for b in read_boards()] == ["busy"]
        finally:
            release.touch()
            call.join()
        assert [b["state"] for b in read_boards()] == ["idle"]
    assert read_boards() == []


def test_files_of_dead_kernels_are_skipped_and_removed(isolated_home: Path) -> None:
    folder = isolated_home / "pools"
    folder.mkdir()
    gone = subprocess.Popen([sys.executable, "-c", ""])
    gone.wait()  # a pid that was a process and is no more
    stale = folder / "gone.1.json"
    stale.write_text(json.dumps({**record(None), "pid": gone.pid}))
    (folder / "broken.1.json").write_text("{not json")
    assert read_boards() == []
    assert not stale.exists()
    assert (folder / "broken.1.json").exists()  # not a file of ours: skipped, never removed


def test_the_record_is_what_a_pool_writes(isolated_home: Path) -> None:
    status = PoolStatus(2, "busy", "cpu", "gloo", 29500, (RankInfo(0, 11, "cpu", True), RankInfo(1, 12, "cpu", False)))
    publish(7, status)
    [path] = (isolated_home / "pools").iterdir()
    assert path.name == f"pid-{os.getpid()}.7.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    raw = json.loads(path.read_text())
    assert parse_board(path.read_bytes()) == raw  # every field a pool writes passes, nothing is added
    assert read_boards() == [raw]
    assert raw["ranks"][1] == {
        "rank": 1,
        "pid": 12,
        "device": "cpu",
        "alive": False,
        "node": "127.0.0.1",
        "node_rank": 0,
    }
    withdraw(7)
    assert read_boards() == [] and not list((isolated_home / "pools").iterdir())


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("pid", 0),
        ("pid", True),
        ("pid", 2**22 + 1),
        ("pool", 1.5),
        ("updated", float("nan")),
        ("updated", "now"),
        ("size", 0),
        ("state", None),
        ("devices", ["cpu"]),
        ("master_port", "29500"),
        ("ranks", [{"rank": 0, "pid": 5, "device": "cpu"}]),
        ("ranks", [{"rank": 0, "pid": 5, "device": "cpu", "alive": 1, "node": "h", "node_rank": 0}]),
    ],
)
def test_a_field_of_the_wrong_type_makes_it_no_record(field: str, value: object) -> None:
    assert parse_board(json.dumps(record("k")).encode()) is not None
    assert parse_board(json.dumps({**record("k"), field: value}).encode()) is None


def test_a_record_missing_a_field_is_no_record() -> None:
    for field in record("k"):
        assert parse_board(json.dumps({k: v for k, v in record("k").items() if k != field}).encode()) is None


def test_the_module_examples_run() -> None:
    result = doctest.testmod(board)
    assert result.attempted > 0 and result.failed == 0


def record(kernel: str | None) -> dict[str, object]:
    """A status record as a live pool of this process writes it."""
    return pool_record(kernel)
