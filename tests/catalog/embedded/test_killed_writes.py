"""An append killed with SIGKILL half-way leaves Parquet files no commit names: the next append of the
table, or ``uc-jupyter gc``, removes them; every committed file stays and the table reads whole."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import deltalake
import pyarrow as pa
import pytest

from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.cli import main
from uc_jupyter.testing.waits import wait_until

# A child that appends 20 million rows (about 160 MB of Parquet) to main.ml.t: long enough to be killed
# while its files are being written.
_APPEND = """
import sys, numpy as np, pyarrow as pa
from uc_jupyter.catalog.embedded.local import LocalCatalog
rows = pa.table({"x": np.random.default_rng(0).integers(0, 2**62, 20_000_000)})
LocalCatalog(sys.argv[1]).create_table("main.ml.t", rows, mode="append")
"""


def _killed_append(catalog: LocalCatalog) -> tuple[Path, dict[str, int]]:
    """Make main.ml.t (10 rows), kill an append of it once its first new file appears; the table's
    folder and the files the killed append left (name: bytes)."""
    info = catalog.create_table("main.ml.t", pa.table({"x": list(range(10))}))
    folder = Path(info.storage_location.removeprefix("file://"))
    committed = set(os.listdir(folder))
    child = subprocess.Popen([sys.executable, "-c", _APPEND, str(catalog.root)])
    try:
        wait_until(lambda: set(os.listdir(folder)) - committed, "the append's first file", timeout_s=120)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    left = {name: (folder / name).stat().st_size for name in set(os.listdir(folder)) - committed}
    assert left and all(name.startswith("part-") for name in left)
    return folder, left


def _rows(folder: Path) -> list[int]:
    return sorted(deltalake.DeltaTable(str(folder)).to_pyarrow_table().column("x").to_pylist())


def test_the_next_append_removes_what_a_killed_append_left(catalog: LocalCatalog) -> None:
    folder, left = _killed_append(catalog)
    catalog.create_table("main.ml.t", pa.table({"x": [100, 101]}), mode="append")
    assert not set(left) & set(os.listdir(folder))
    assert _rows(folder) == [*range(10), 100, 101]  # every committed file is there


def test_gc_removes_what_a_killed_append_left(catalog: LocalCatalog, capsys: pytest.CaptureFixture[str]) -> None:
    folder, left = _killed_append(catalog)
    assert main(["gc"]) == 0
    out = capsys.readouterr().out
    assert not set(left) & set(os.listdir(folder))
    assert out.splitlines()[-1] == f"removed {len(left)} leftover(s), {sum(left.values())} bytes"
    assert all(f"main.ml.t: {name} ({size} bytes)" in out for name, size in left.items())
    assert _rows(folder) == list(range(10))
    assert main(["gc"]) == 0 and capsys.readouterr().out.strip() == "removed 0 leftover(s), 0 bytes"


def test_a_write_that_is_running_keeps_its_files(catalog: LocalCatalog) -> None:
    """A record of a live writer (this process, as a writer beside the one that asks) is never acted on."""
    info = catalog.create_table("main.ml.t", pa.table({"x": [1]}))
    folder = Path(info.storage_location.removeprefix("file://"))
    uncommitted = folder / "part-00000-0f0f0f0f-0000-0000-0000-000000000000-c000.snappy.parquet"
    with catalog._recorded_write("main.ml.t", info.storage_location, {}):
        uncommitted.write_bytes(b"a live writer's file, not committed yet")
        assert catalog.remove_killed_writes() == []
    assert uncommitted.exists()
