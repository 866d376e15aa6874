"""ThreadDownloads (fsspec): files arrive whole in ranged pieces of at most the listed size + 1
bytes; a file that grew, shrank, or was empty when listed and is not now ends its download with the
one error for a changed file and leaves nothing; transient errors are retried by the policy.
The filesystem is fsspec's local one, watched: each ranged read it answers is recorded."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest
from fsspec.implementations.local import LocalFileSystem

from uc_jupyter.storage.downloads import Job, ThreadDownloads, changed_since_listing
from uc_jupyter.storage.errors import VolumeReadError
from uc_jupyter.storage.retry import RetryPolicy

WHERE = "/Volumes/main/ml/v"
PIECE = 4 << 20  # downloads.py reads a large file in pieces of this many bytes


class Watched(LocalFileSystem):
    """fsspec's local filesystem, recording the bytes each ranged read answered; ``fail`` reads
    raise a reset connection first; ``whole``: every read answers the whole file, as a store that
    ignores ranges would."""

    cachable = False  # a fresh instance per test (fsspec hands out one per arguments otherwise)

    def __init__(self, *, fail: int = 0, whole: bool = False) -> None:
        super().__init__()
        self.answered: list[int] = []
        self.fail, self.whole = fail, whole

    def cat_file(self, path: str, start: int | None = None, end: int | None = None, **kwargs: Any) -> bytes:
        if self.fail:
            self.fail -= 1
            raise ConnectionResetError("Connection reset by peer")
        body = super().cat_file(path) if self.whole else super().cat_file(path, start=start, end=end)
        self.answered.append(len(body))
        return bytes(body)


def job(source: Path, local: Path, size: int) -> Job:
    return Job(str(source), str(local), f"{WHERE}/{source.name}", size)


def fetch(fs: Watched, source: Path, local: Path, size: int, **options: Any) -> None:
    downloads = ThreadDownloads(fs, RetryPolicy(attempts=3, base_seconds=0.0), threads=2, **options)
    try:
        [future] = downloads.start([job(source, local, size)])
        future.result(60)
    finally:
        downloads.close()


@pytest.mark.parametrize("size", [0, 1, 16384, PIECE, PIECE + 1, 2 * PIECE + 5])
def test_files_arrive_whole_and_private_in_pieces_of_the_listed_size_plus_one(tmp_path: Path, size: int) -> None:
    body = os.urandom(size)
    (tmp_path / "a.bin").write_bytes(body)
    fs = Watched()
    fetch(fs, tmp_path / "a.bin", tmp_path / "copy", size)
    assert (tmp_path / "copy").read_bytes() == body
    assert stat.S_IMODE(os.stat(tmp_path / "copy").st_mode) == 0o600
    assert sum(fs.answered) == size  # the last piece asked one byte past the end, and none came
    assert len(fs.answered) == (0 if size == 0 else size // PIECE + 1)  # an empty file: only its size asked


@pytest.mark.parametrize(
    ("listed", "now", "said"),
    [
        (16384, 50 << 20, "more than 16384"),  # grown far past the listing: one byte more is read
        (PIECE + 10, 50 << 20, f"more than {PIECE + 10}"),  # the same over two pieces
        (16384, 100, "100"),  # shrunk
        (0, 50 << 20, str(50 << 20)),  # empty when listed: its size alone tells, nothing is read
    ],
    ids=["grown", "grown-large", "shrunk", "empty-grown"],
)
def test_a_file_changed_after_the_listing_fails_naming_both_sizes_reading_at_most_one_byte_more(
    tmp_path: Path, listed: int, now: int, said: str
) -> None:
    source = tmp_path / "a.bin"
    with open(source, "wb") as handle:
        handle.truncate(now)  # sparse: what it holds does not matter, only how much is read
    fs = Watched()
    with pytest.raises(VolumeReadError) as failed:
        fetch(fs, source, tmp_path / "copy", listed)
    assert str(failed.value) == str(changed_since_listing(f"{WHERE}/a.bin", listed, None if "more" in said else now))
    assert f"({listed} bytes then, {said} now)" in str(failed.value)
    assert sum(fs.answered) <= listed + 1
    assert not (tmp_path / "copy").exists()


def test_a_store_that_ignores_the_range_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    (tmp_path / "a.bin").write_bytes(b"x" * 5000)
    with pytest.raises(VolumeReadError, match=r"\(100 bytes then, more than 100 now\)"):
        fetch(Watched(whole=True), tmp_path / "a.bin", tmp_path / "copy", 100)
    assert not (tmp_path / "copy").exists()


def test_transient_errors_are_retried_by_the_policy_and_the_file_still_arrives_whole(tmp_path: Path) -> None:
    body = os.urandom(PIECE + 7)
    (tmp_path / "a.bin").write_bytes(body)
    retries: list[int] = []
    slept: list[float] = []
    fs = Watched(fail=2)
    fetch(fs, tmp_path / "a.bin", tmp_path / "copy", len(body), on_retry=lambda: retries.append(1), sleep=slept.append)
    assert (tmp_path / "copy").read_bytes() == body
    assert (len(retries), len(slept)) == (2, 2)
    with pytest.raises(VolumeReadError, match=r"^cannot read .*a\.bin after 3 attempts: ConnectionResetError"):
        fetch(Watched(fail=3), tmp_path / "a.bin", tmp_path / "again", len(body), sleep=slept.append)
    assert not (tmp_path / "again").exists()


def test_a_missing_file_is_one_line_at_once_and_a_target_symlink_is_not_followed(tmp_path: Path) -> None:
    fs = Watched()
    with pytest.raises(VolumeReadError, match=rf"^cannot read {WHERE}/gone.bin: FileNotFoundError"):
        fetch(fs, tmp_path / "gone.bin", tmp_path / "copy", 10)
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep me")
    (tmp_path / "target").symlink_to(victim)
    (tmp_path / "a.bin").write_bytes(b"payload")
    with pytest.raises(VolumeReadError, match=rf"^cannot read {WHERE}/a.bin: cannot create"):
        fetch(fs, tmp_path / "a.bin", tmp_path / "target", 7)
    assert victim.read_bytes() == b"keep me"
