"""LocalDownloads: copies of a local volume's files, taken through the checked descriptor, of at
most the listed size + 1 bytes."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.data.volume.listing import RemoteFile
from uc_jupyter.storage.downloads import Job
from uc_jupyter.storage.errors import VolumeReadError
from uc_jupyter.storage.local_downloads import LocalDownloads
from uc_jupyter.storage.local_volume import LocalVolume
from uc_jupyter.testing.waits import wait_until


@pytest.fixture
def folder(catalog: LocalCatalog) -> Path:
    info = catalog.create_volume("main.ml.v")
    root = Path(info.storage_location.removeprefix("file://"))
    (root / "sub").mkdir()
    (root / "sub" / "a.bin").write_bytes(b"A" * 3000)
    (root / "big.bin").write_bytes(os.urandom(3 << 20))  # several sendfile chunks
    return root


BIG, SMALL = RemoteFile("big.bin", 3 << 20, None), RemoteFile("sub/a.bin", 3000, None)
JobMaker = Callable[[RemoteFile, Path], Job]


@pytest.fixture
def job(folder: Path) -> JobMaker:
    """The copy of a listed file into ``local``, as a dataset's window asks for it: by its local path."""

    def make(listed: RemoteFile, local: Path) -> Job:
        return Job(f"{folder}/{listed.relative}", str(local), f"/Volumes/main/ml/v/{listed.relative}", listed.size)

    return make


@pytest.fixture
def downloads(catalog: LocalCatalog, folder: Path) -> Iterator[LocalDownloads]:
    copies = LocalDownloads(LocalVolume.of(catalog.resolve_volume_path("/Volumes/main/ml/v")), threads=2)
    yield copies
    copies.close()


def test_files_are_copied_whole_and_private(
    downloads: LocalDownloads, job: JobMaker, folder: Path, tmp_path: Path
) -> None:
    jobs = [job(SMALL, tmp_path / "1"), job(BIG, tmp_path / "2")]
    for future in downloads.start(jobs):
        assert future.result() is None
    assert (tmp_path / "1").read_bytes() == b"A" * 3000
    assert (tmp_path / "2").read_bytes() == (folder / "big.bin").read_bytes()
    assert stat.S_IMODE(os.stat(tmp_path / "2").st_mode) == 0o600


def test_a_symlink_is_not_copied_and_nothing_is_left(
    downloads: LocalDownloads, job: JobMaker, folder: Path, tmp_path: Path
) -> None:
    (tmp_path / "secret").write_bytes(b"OUTSIDE")
    (folder / "sub" / "a.bin").unlink()
    (folder / "sub" / "a.bin").symlink_to(tmp_path / "secret")
    future = downloads.start([job(SMALL, tmp_path / "copy")])[0]
    with pytest.raises(VolumeReadError, match="/Volumes/main/ml/v/sub/a.bin is a symbolic link now"):
        future.result()
    assert not (tmp_path / "copy").exists()


def test_a_copy_that_cannot_be_written_names_the_file_and_leaves_nothing(
    downloads: LocalDownloads, job: JobMaker, tmp_path: Path
) -> None:
    target = tmp_path / "missing-folder" / "copy"
    future = downloads.start([job(BIG, target)])[0]
    with pytest.raises(
        VolumeReadError, match="cannot copy /Volumes/main/ml/v/big.bin into the cache: FileNotFoundError"
    ):
        future.result()
    assert not target.exists()


def test_the_copy_never_writes_through_a_symlink_at_the_cache_path(
    downloads: LocalDownloads, job: JobMaker, tmp_path: Path
) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep")
    (tmp_path / "tmp-copy").symlink_to(victim)
    future = downloads.start([job(SMALL, tmp_path / "tmp-copy")])[0]
    with pytest.raises(VolumeReadError, match="cannot copy"):
        future.result()
    assert victim.read_bytes() == b"keep"


def test_a_file_no_longer_the_listed_size_is_not_copied(
    downloads: LocalDownloads, job: JobMaker, folder: Path, tmp_path: Path
) -> None:
    (folder / "sub" / "a.bin").write_bytes(b"A" * 3001)
    future = downloads.start([job(SMALL, tmp_path / "copy")])[0]
    with pytest.raises(VolumeReadError, match=r"changed since the dataset listed it \(3000 bytes then, 3001 now\)"):
        future.result()
    assert not (tmp_path / "copy").exists()


def test_cancelled_copies_end(downloads: LocalDownloads, job: JobMaker, tmp_path: Path) -> None:
    futures = downloads.start([job(BIG, tmp_path / f"c{i}") for i in range(6)])
    downloads.cancel(futures)
    downloads.close()
    assert all(f.done() for f in futures)


def test_a_file_that_grows_after_its_checked_open_is_refused_at_one_byte_more(
    downloads: LocalDownloads, job: JobMaker, folder: Path, tmp_path: Path
) -> None:
    """The open checked the listed size; the file grows before the copy reads it. The target is a
    FIFO, whose open for writing waits for the test to open it for reading: a point between the
    checked open and the copy, where the test appends. Before, the copy took the first 3000
    bytes, which then passed the cache's size check as if they were the listed file. Either check
    (the open's or the copy's) ends it with the same error."""
    source = folder / "sub" / "a.bin"
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    future = downloads.start([job(SMALL, pipe)])[0]

    def source_open() -> bool:  # the copy's thread holds the checked descriptor
        return any(os.path.realpath(f"/proc/self/fd/{fd}") == str(source) for fd in os.listdir("/proc/self/fd"))

    wait_until(source_open, "the copy to open its source", interval_s=0.005)
    with open(source, "ab") as grow:
        grow.write(b"B" * (1 << 20))
    # A reader lets the copy open its target (at once: no wait, should the checked open have seen
    # the growth first, in a rare race, and ended the copy before it); what the copy writes fits
    # in the pipe's buffer.
    reader = os.open(pipe, os.O_RDONLY | os.O_NONBLOCK)
    try:
        with pytest.raises(VolumeReadError) as failed:
            future.result(30)
        copied = b""
        with contextlib.suppress(BlockingIOError):
            while piece := os.read(reader, 1 << 16):
                copied += piece
    finally:
        os.close(reader)
    assert str(failed.value) == (
        f"cannot read /Volumes/main/ml/v/sub/a.bin: it changed since the dataset listed it (3000 bytes then, "
        f"{3000 + (1 << 20)} now); make the dataset again to list the folder again"
    )
    assert len(copied) <= 3001
    assert not pipe.exists()


@pytest.mark.parametrize(
    "remote",
    [
        "/etc/passwd",
        "{folder}/../outside",
        "{folder}/sub/../../outside",
        "{folder}/sub//a.bin",
        "{folder}/./big.bin",
        "{folder}",
    ],
)
def test_a_job_naming_a_path_outside_the_folder_is_refused_before_anything_is_opened(
    downloads: LocalDownloads, folder: Path, tmp_path: Path, remote: str
) -> None:
    (folder.parent / "outside").write_bytes(b"OUTSIDE")
    target = tmp_path / "copy"
    future = downloads.start([Job(remote.format(folder=folder), str(target), "/Volumes/main/ml/v/x", 7)])[0]
    with pytest.raises(VolumeReadError, match=r"^cannot copy /Volumes/main/ml/v/x: .* is not a file below "):
        future.result()
    assert not target.exists()
