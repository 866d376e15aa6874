"""Pool status files for the JupyterLab status item: published, updated while busy, withdrawn."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from uc_jupyter.distributed import RankPool
from uc_jupyter.distributed.board import read_boards


def test_a_pool_announces_its_state_and_withdraws_it(isolated_home: Path) -> None:
    assert read_boards() == []
    with RankPool(2, devices="cpu") as pool:
        pool.start()
        [idle] = read_boards()
        assert (idle["size"], idle["state"], idle["backend"], idle["kernel_id"]) == (2, "idle", "gloo", None)
        assert [r["rank"] for r in idle["ranks"]] == [0, 1] and all(r["alive"] for r in idle["ranks"])
        seen: list[str] = []
        watcher = threading.Thread(target=lambda: (time.sleep(0.5), seen.extend(b["state"] for b in read_boards())))
        watcher.start()
        pool.call(time.sleep, (1.5,))
        watcher.join()
        assert seen == ["busy"]
        assert [b["state"] for b in read_boards()] == ["idle"]
    assert read_boards() == []


def test_files_of_dead_kernels_are_skipped_and_removed(isolated_home: Path) -> None:
    folder = isolated_home / "pools"
    folder.mkdir()
    stale = folder / "gone.1.json"
    stale.write_text(json.dumps({"pid": 2**22 + 12345, "state": "idle"}))
    (folder / "broken.1.json").write_text("{not json")
    assert read_boards() == []
    assert not stale.exists()
