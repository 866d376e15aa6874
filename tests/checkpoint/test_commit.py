"""A save killed with SIGKILL half-way (its data files, their temporaries, its in-progress marker) is
removed by the next save of the run, with or without keep_last; a save whose process lives is not, and
committed checkpoints stay whole."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.checkpoint.conftest import assert_bit_equal, every_kind, load, save
from uc_jupyter.checkpoint import latest
from uc_jupyter.checkpoint.layout import saving_marker
from uc_jupyter.processes import stamp
from uc_jupyter.storage.keys import TEMPORARY
from uc_jupyter.testing.waits import wait_until

pytestmark = pytest.mark.filterwarnings("ignore:torch.distributed is disabled:UserWarning")

Volume = Callable[..., tuple[str, Path]]

# A child that saves 128 MB (8 tensors of 16 MB, two files at once) into the folder it is given.
_SAVE = """
import sys, torch, torch.distributed.checkpoint as dcp
from uc_jupyter.checkpoint import UCVolumeWriter
state = {f"w{i}": torch.randn(4_000_000) for i in range(8)}
dcp.save(state, storage_writer=UCVolumeWriter(sys.argv[1], threads=2), no_dist=True)
"""


def _killed_save(path: str, folder: Path) -> dict[str, int]:
    """Kill a save into ``folder`` once it is writing data; what it left (name: bytes)."""
    child = subprocess.Popen([sys.executable, "-c", _SAVE, path])
    try:
        wait_until(
            # The marker first (its own temporary is not data), then a data file begun.
            lambda: (
                folder.is_dir()
                and "_SAVING" in (names := os.listdir(folder))
                and any(n.startswith((TEMPORARY, "__")) for n in names)
            ),
            "the save's marker and first data file",
            timeout_s=120,
        )
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    left = {name: (folder / name).stat().st_size for name in os.listdir(folder)}
    assert "_SAVING" in left and "_COMMITTED" not in left
    return left


@pytest.mark.in_a_fork
def test_the_next_save_removes_what_a_killed_save_left(local_volume: Volume) -> None:
    path, folder = local_volume("ckpt")
    save(f"{path}/run/step-1", every_kind(1))
    left = _killed_save(f"{path}/run/step-2", folder / "run/step-2")
    assert sum(left.values()) > 0
    save(f"{path}/run/step-3", every_kind(3))  # no keep_last: the killed save goes all the same
    assert not (folder / "run/step-2").exists() or os.listdir(folder / "run/step-2") == []
    assert latest(f"{path}/run") == f"{path}/run/step-3"
    assert_bit_equal(load(f"{path}/run/step-1", every_kind(1)), every_kind(1))
    assert_bit_equal(load(f"{path}/run/step-3", every_kind(3)), every_kind(3))


@pytest.mark.in_a_fork
def test_a_save_into_a_killed_save_s_folder_removes_its_temporaries(local_volume: Volume) -> None:
    path, folder = local_volume("ckpt")
    _killed_save(f"{path}/run/step-1", folder / "run/step-1")
    save(f"{path}/run/step-1", every_kind(1))
    assert not [n for n in os.listdir(folder / "run/step-1") if n.startswith(TEMPORARY)]
    assert_bit_equal(load(f"{path}/run/step-1", every_kind(1)), every_kind(1))


@pytest.mark.in_a_fork
def test_a_save_whose_process_lives_is_left_alone_even_by_keep_last(local_volume: Volume) -> None:
    path, folder = local_volume("ckpt")
    living = folder / "run/step-0"  # a slow save of this (live) process: old files, no commit yet
    living.mkdir(parents=True)
    (living / "__0_0.distcp").write_bytes(b"written an hour ago, still saving")
    (living / "_SAVING").write_bytes(saving_marker("slow", began=time.time() - 3600, writer=stamp()))
    for name in os.listdir(living):
        os.utime(living / name, (time.time() - 3600, time.time() - 3600))
    save(f"{path}/run/step-1", every_kind(1), keep_last=1)
    assert sorted(os.listdir(living)) == ["_SAVING", "__0_0.distcp"]
