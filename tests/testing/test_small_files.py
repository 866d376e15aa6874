"""uc_jupyter.testing.small_files: folders of small files with lognormal sizes, the same for a seed."""

from __future__ import annotations

import doctest
import statistics
from pathlib import Path

import pytest

from uc_jupyter.testing import small_files
from uc_jupyter.testing.small_files import MAX_SIZE, MEAN_SIZE, MEDIAN_SIZE, MIN_SIZE, write_small_files


def test_sizes_are_lognormal_around_16_kib_and_clipped(tmp_path: Path) -> None:
    relatives, total = write_small_files(tmp_path, 4000, seed=5)
    sizes = [(tmp_path / relative).stat().st_size for relative in relatives]
    assert sum(sizes) == total
    assert min(sizes) >= MIN_SIZE
    assert max(sizes) <= MAX_SIZE
    assert statistics.median(sizes) == pytest.approx(MEDIAN_SIZE, rel=0.05)
    assert statistics.fmean(sizes) == pytest.approx(MEAN_SIZE, rel=0.05)
    assert round(MEAN_SIZE / 1024, 1) == 18.1
    assert {relative.split("/")[0] for relative in relatives} == {f"part-{i:02d}" for i in range(8)}


def test_the_same_seed_writes_the_same_bytes(tmp_path: Path) -> None:
    first, _ = write_small_files(tmp_path / "a", 20, seed=9)
    second, _ = write_small_files(tmp_path / "b", 20, seed=9)
    other, _ = write_small_files(tmp_path / "c", 20, seed=10)

    def read(folder: str, names: tuple[str, ...]) -> list[bytes]:
        return [(tmp_path / folder / name).read_bytes() for name in names]

    assert first == second == other
    assert read("a", first) == read("b", second)
    assert read("a", first) != read("c", other)


def test_the_docstring_examples_run() -> None:
    result = doctest.testmod(small_files, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
