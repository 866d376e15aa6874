"""The one no-follow walk (uc_jupyter.storage.nofollow) that local volumes' reads and writes share:
real folders are walked, a symlink or a file on the way is refused and named, missing folders are
made only when asked, and no descriptor is left open whatever happens."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from uc_jupyter.storage.nofollow import LISTABLE, descend

REFUSED = r"Not a directory|symbolic links"  # O_DIRECTORY | O_NOFOLLOW on a symlink: ENOTDIR or ELOOP


@pytest.fixture
def top(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "file").write_bytes(b"x")
    (tmp_path / "outside").mkdir()
    (tmp_path / "a" / "link").symlink_to(tmp_path / "outside")
    start = os.open(tmp_path, LISTABLE)
    try:
        yield start, tmp_path
    finally:
        os.close(start)


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_real_folders_are_walked_and_start_stays_open(top: tuple[int, Path]) -> None:
    start, root = top
    fd = descend(start, ["a", "b"], LISTABLE)
    try:
        assert os.path.samestat(os.fstat(fd), os.stat(root / "a" / "b"))
    finally:
        os.close(fd)
    os.fstat(start)  # still open


@pytest.mark.parametrize(
    ("parts", "named"),
    [
        (["a", "link"], "a/link"),
        (["a", "link", "x"], "a/link"),
        (["a", "file"], "a/file"),
        (["a", "file", "x"], "a/file"),
    ],
)
def test_a_symlink_or_a_file_on_the_way_is_refused_and_named(
    top: tuple[int, Path], parts: list[str], named: str
) -> None:
    start, _ = top
    before = _open_descriptors()
    with pytest.raises(OSError, match=REFUSED) as raised:
        descend(start, parts)
    assert raised.value.errno in (errno.ELOOP, errno.ENOTDIR)
    assert raised.value.filename == named
    assert _open_descriptors() == before


def test_missing_folders_are_made_only_when_asked(top: tuple[int, Path]) -> None:
    start, root = top
    with pytest.raises(FileNotFoundError) as raised:
        descend(start, ["a", "new", "deeper"])
    assert raised.value.filename == "a/new"
    assert not (root / "a" / "new").exists()
    os.close(descend(start, ["a", "new", "deeper"], make=True))
    assert (root / "a" / "new" / "deeper").is_dir()
    with pytest.raises(OSError, match=REFUSED):  # making never goes through a symlink either
        descend(start, ["a", "link", "made"], make=True)
    assert list((root / "outside").iterdir()) == []


def test_a_folder_swapped_for_a_symlink_between_walks_is_refused(top: tuple[int, Path]) -> None:
    start, root = top
    os.close(descend(start, ["a", "b"]))
    (root / "a" / "b").rmdir()
    (root / "a" / "b").symlink_to(root / "outside")
    with pytest.raises(OSError, match=REFUSED):
        descend(start, ["a", "b"])


def test_no_part_is_refused_rather_than_giving_start_back(top: tuple[int, Path]) -> None:
    start, _ = top
    with pytest.raises(ValueError, match=r"^descend needs a part to open: give \['\.'\]"):
        descend(start, [])
    own = descend(start, ["."])
    try:
        assert own != start and os.path.samestat(os.fstat(own), os.fstat(start))
    finally:
        os.close(own)
