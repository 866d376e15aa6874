"""uc_jupyter.testing.disk_use: the peak disk use of a folder, by walking it or from its own file system."""

from __future__ import annotations

import doctest
from collections.abc import Iterator
from pathlib import Path

import pytest

from uc_jupyter.testing import disk_use
from uc_jupyter.testing.disk_use import DiskPeak
from uc_jupyter.testing.mounts import MountUnavailable, mounted

MIB = 1 << 20


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    try:
        with mounted(tmp_path / "disk", "tmpfs", "size=16m") as disk:
            yield disk
    except MountUnavailable as exc:
        pytest.skip(str(exc))


def _write_and_remove(folder: Path, peak: DiskPeak) -> None:
    (folder / "sub").mkdir()
    (folder / "sub" / "a.bin").write_bytes(b"a" * (2 * MIB))
    (folder / "b.bin").write_bytes(b"b" * MIB)
    peak.sample()  # both files on disk
    (folder / "sub" / "a.bin").unlink()
    (folder / "b.bin").unlink()


def test_the_walk_sees_the_peak_of_files_written_and_removed_in_the_block(tmp_path: Path) -> None:
    with DiskPeak(tmp_path) as peak:
        assert not peak.whole_file_system  # a plain folder: walked
        _write_and_remove(tmp_path, peak)
    assert peak.peak >= 3 * MIB
    assert peak.used() < MIB
    assert peak.samples >= 3  # on entering, the explicit one, on leaving


def test_a_mounted_folder_is_read_whole_by_statvfs(tmpfs: Path) -> None:
    with DiskPeak(tmpfs) as peak:
        assert peak.whole_file_system
        assert peak.interval == 0.002
        _write_and_remove(tmpfs, peak)
    assert 3 * MIB <= peak.peak < 4 * MIB
    assert peak.used() < MIB


def test_a_sparse_file_counts_its_blocks_not_its_length(tmp_path: Path) -> None:
    with (tmp_path / "sparse.bin").open("wb") as handle:
        handle.truncate(64 * MIB)
    assert DiskPeak(tmp_path).used() < MIB


def test_the_docstring_examples_run() -> None:
    result = doctest.testmod(disk_use, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
