"""LocalDownloads: copies of a local volume's files, taken through the checked descriptor."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from uc_jupyter.catalog.local import LocalCatalog
from uc_jupyter.data.local_downloads import LocalDownloads
from uc_jupyter.data.local_volume import LocalVolume
from uc_jupyter.data.remote import RemoteFile, VolumeReadError


@pytest.fixture
def folder(catalog: LocalCatalog) -> Path:
    info = catalog.create_volume("main.ml.v")
    root = Path(info.storage_location.removeprefix("file://"))
    (root / "sub").mkdir()
    (root / "sub" / "a.bin").write_bytes(b"A" * 3000)
    (root / "big.bin").write_bytes(os.urandom(3 << 20))  # several sendfile chunks
    return root


FILES = (RemoteFile("big.bin", 3 << 20, None), RemoteFile("sub/a.bin", 3000, None))
BIG, SMALL = "0", "1"  # positions in FILES, as a dataset's listing gives them


@pytest.fixture
def downloads(catalog: LocalCatalog, folder: Path) -> Iterator[LocalDownloads]:
    copies = LocalDownloads(LocalVolume.of(catalog.resolve_volume_path("/Volumes/main/ml/v")), FILES, threads=2)
    yield copies
    copies.close()


def test_files_are_copied_whole_and_private(downloads: LocalDownloads, folder: Path, tmp_path: Path) -> None:
    jobs = [
        (SMALL, str(tmp_path / "1"), "/Volumes/main/ml/v/sub/a.bin"),
        (BIG, str(tmp_path / "2"), "/Volumes/main/ml/v/big.bin"),
    ]
    for future in downloads.start(jobs):
        assert future.result() is None
    assert (tmp_path / "1").read_bytes() == b"A" * 3000
    assert (tmp_path / "2").read_bytes() == (folder / "big.bin").read_bytes()
    assert stat.S_IMODE(os.stat(tmp_path / "2").st_mode) == 0o600


def test_a_symlink_is_not_copied_and_nothing_is_left(downloads: LocalDownloads, folder: Path, tmp_path: Path) -> None:
    (tmp_path / "secret").write_bytes(b"OUTSIDE")
    (folder / "sub" / "a.bin").unlink()
    (folder / "sub" / "a.bin").symlink_to(tmp_path / "secret")
    future = downloads.start([(SMALL, str(tmp_path / "copy"), "/Volumes/main/ml/v/sub/a.bin")])[0]
    with pytest.raises(VolumeReadError, match="/Volumes/main/ml/v/sub/a.bin is a symbolic link now"):
        future.result()
    assert not (tmp_path / "copy").exists()


def test_a_copy_that_cannot_be_written_names_the_file_and_leaves_nothing(
    downloads: LocalDownloads, tmp_path: Path
) -> None:
    target = tmp_path / "missing-folder" / "copy"
    future = downloads.start([(BIG, str(target), "/Volumes/main/ml/v/big.bin")])[0]
    with pytest.raises(
        VolumeReadError, match="cannot copy /Volumes/main/ml/v/big.bin into the cache: FileNotFoundError"
    ):
        future.result()
    assert not target.exists()


def test_the_copy_never_writes_through_a_symlink_at_the_cache_path(downloads: LocalDownloads, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep")
    (tmp_path / "tmp-copy").symlink_to(victim)
    future = downloads.start([(SMALL, str(tmp_path / "tmp-copy"), "/Volumes/main/ml/v/sub/a.bin")])[0]
    with pytest.raises(VolumeReadError, match="cannot copy"):
        future.result()
    assert victim.read_bytes() == b"keep"


def test_a_file_no_longer_the_listed_size_is_not_copied(
    downloads: LocalDownloads, folder: Path, tmp_path: Path
) -> None:
    (folder / "sub" / "a.bin").write_bytes(b"A" * 3001)
    future = downloads.start([(SMALL, str(tmp_path / "copy"), "/Volumes/main/ml/v/sub/a.bin")])[0]
    with pytest.raises(VolumeReadError, match=r"changed since the dataset listed it \(3000 bytes then, 3001 now\)"):
        future.result()
    assert not (tmp_path / "copy").exists()


def test_cancelled_copies_end(downloads: LocalDownloads, tmp_path: Path) -> None:
    futures = downloads.start([(BIG, str(tmp_path / f"c{i}"), "/Volumes/main/ml/v/big.bin") for i in range(6)])
    downloads.cancel(futures)
    downloads.close()
    assert all(f.done() for f in futures)
