"""LocalStorage (uc_jupyter.storage.local_storage): a local folder's one-page listing and its copies."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from uc_jupyter.errors import EscapesVolume
from uc_jupyter.storage.downloads import Job
from uc_jupyter.storage.errors import VolumeReadError
from uc_jupyter.storage.local_storage import LocalStorage
from uc_jupyter.storage.local_volume import LocalVolume
from uc_jupyter.storage.pages import Page
from uc_jupyter.storage.retry import RetryPolicy

WHERE = "/Volumes/main/ml/vol"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A volume root holding ``data/``: two files, a sub-folder, a hidden folder, a FIFO and symlinks."""
    data = tmp_path / "vol" / "data"
    (data / "sub").mkdir(parents=True)
    (data / ".git").mkdir()
    (data / "a.bin").write_bytes(b"A" * 30)
    (data / "sub" / "b.bin").write_bytes(b"B" * 7)
    (data / ".git" / "config").write_bytes(b"c")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret").write_bytes(b"S" * 5)
    os.symlink(tmp_path / "outside", data / "out-link")
    os.symlink(tmp_path / "outside" / "secret", data / "sub" / "file-link")
    os.mkfifo(data / "pipe")
    return tmp_path / "vol"


def storage_of(root: Path, below: str = "data") -> LocalStorage:
    folder = root / below if below else root
    volume = LocalVolume.below(str(root), str(folder), where=f"{WHERE}/{below}".rstrip("/"))
    return LocalStorage(volume, f"file://{folder}")


def sizes(page: Page) -> dict[str, int]:
    return {relative: size for relative, size, _ in page.files}


def test_a_recursive_listing_is_one_page_of_the_regular_files_naming_what_it_skipped(root: Path) -> None:
    pages = list(storage_of(root).pages(recursive=True))
    assert len(pages) == 1
    [page] = pages
    assert sizes(page) == {"a.bin": 30, "sub/b.bin": 7}  # no hidden folder entered, no link followed
    assert page.folders == []
    assert sorted(page.skipped) == ["out-link", "pipe", "sub/file-link"]
    mtime = os.stat(root / "data" / "a.bin").st_mtime
    assert [version for relative, _, version in page.files if relative == "a.bin"] == [str(mtime)]


def test_a_flat_listing_names_the_real_sub_folders_only(root: Path) -> None:
    [page] = storage_of(root).pages(recursive=False)
    assert sizes(page) == {"a.bin": 30}
    assert page.folders == ["sub"]  # not .git, not the symlinked folder
    assert sorted(page.skipped) == ["out-link", "pipe"]


def test_each_listing_reads_the_folder_afresh(root: Path) -> None:
    storage = storage_of(root)
    [first] = storage.pages(recursive=True)
    (root / "data" / "new.bin").write_bytes(b"N")
    (root / "data" / "a.bin").unlink()
    [second] = storage.pages(recursive=True)
    assert set(sizes(first)) == {"a.bin", "sub/b.bin"} and set(sizes(second)) == {"new.bin", "sub/b.bin"}


def test_a_folder_reached_through_a_symlink_is_refused_naming_the_link(root: Path) -> None:
    os.symlink(root / "data" / "sub", root / "alias")  # inside the volume: still not followed
    with pytest.raises(EscapesVolume, match=rf"^{WHERE}/alias goes through the symbolic link {WHERE}/alias; "):
        list(storage_of(root, "alias").pages(recursive=True))
    with pytest.raises(EscapesVolume, match=rf"goes through the symbolic link {WHERE}/data/out-link;"):
        list(storage_of(root, "data/out-link/deeper").pages(recursive=False))


def test_the_volume_root_itself_is_listed_when_the_folder_is_the_root(root: Path) -> None:
    [page] = storage_of(root, "").pages(recursive=True)
    assert sizes(page) == {"data/a.bin": 30, "data/sub/b.bin": 7}


def test_copies_are_made_through_the_checked_walk(root: Path, tmp_path: Path) -> None:
    storage = storage_of(root)
    retried: list[None] = []
    downloads = storage.downloads(RetryPolicy(attempts=5), on_retry=lambda: retried.append(None), threads=64)
    try:
        futures = downloads.start(
            [
                Job(f"{root}/data/a.bin", str(tmp_path / "a.copy"), f"{WHERE}/data/a.bin", 30),
                Job(f"{root}/data/sub/b.bin", str(tmp_path / "b.copy"), f"{WHERE}/data/sub/b.bin", 7),
            ]
        )
        assert [future.result(30) for future in futures] == [None, None]
    finally:
        downloads.close()
    assert (tmp_path / "a.copy").read_bytes() == b"A" * 30 and (tmp_path / "b.copy").read_bytes() == b"B" * 7
    assert retried == []


def test_a_copy_that_fails_says_why_at_once_and_is_never_retried(root: Path, tmp_path: Path) -> None:
    storage = storage_of(root)
    retried: list[None] = []
    downloads = storage.downloads(RetryPolicy(attempts=5), on_retry=lambda: retried.append(None), threads=2)
    try:
        linked = Job(f"{root}/data/sub/file-link", str(tmp_path / "1"), f"{WHERE}/data/sub/file-link", 5)
        with pytest.raises(VolumeReadError, match="is a symbolic link now"):
            downloads.start([linked])[0].result(30)
        # A sibling folder whose name only begins like the storage's own: not below it.
        (root / "data2").mkdir()
        (root / "data2" / "x").write_bytes(b"X")
        sibling = Job(f"{root}/data2/x", str(tmp_path / "2"), f"{WHERE}/data2/x", 1)
        with pytest.raises(VolumeReadError, match=r"is not a file below .*/vol/data/$"):
            downloads.start([sibling])[0].result(30)
    finally:
        downloads.close()
    assert retried == [] and not (tmp_path / "1").exists() and not (tmp_path / "2").exists()
