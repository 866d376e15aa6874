"""read_range: on S3 (s3fs) a range names the listed ETag and another version is refused; other
filesystems answer the range by its size alone."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import fsspec
import pytest

from uc_jupyter.storage.downloads import entity_tag
from uc_jupyter.storage.filesystem import FsspecStorage
from uc_jupyter.storage.fsspec_ranges import NotTheListedVersion, read_range
from uc_jupyter.testing.s3_server import S3TestServer


@pytest.fixture(scope="module")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3TestServer]:
    with S3TestServer(tmp_path_factory.mktemp("s3")) as server:
        yield server


def listed_etag(fs: fsspec.AbstractFileSystem, path: str) -> str:
    fs.invalidate_cache(path)
    found = entity_tag(str(fs.info(path)["ETag"]))
    assert found is not None
    return found


def test_the_listed_version_is_read_in_ranges(s3_server: S3TestServer) -> None:
    body = os.urandom(1000)
    (s3_server.bucket("ranges") / "a.bin").write_bytes(body)
    fs = FsspecStorage("s3://ranges", s3_server.storage_options).filesystem()
    etag = listed_etag(fs, "ranges/a.bin")
    assert read_range(fs, "ranges/a.bin", 0, 10, etag=etag) == body[:10]
    assert read_range(fs, "ranges/a.bin", 990, 1001, etag=etag) == body[990:]  # one byte past the end: none came


def test_a_rewrite_of_the_same_size_is_refused(s3_server: S3TestServer) -> None:
    file = s3_server.bucket("rewrites") / "a.bin"
    file.write_bytes(os.urandom(1000))
    fs = FsspecStorage("s3://rewrites", s3_server.storage_options).filesystem()
    etag = listed_etag(fs, "rewrites/a.bin")
    file.unlink()
    file.write_bytes(os.urandom(1000))
    with pytest.raises(NotTheListedVersion, match=r"^.*rewrites/a\.bin is not the version .* now$"):
        read_range(fs, "rewrites/a.bin", 0, 1001, etag=etag)
    assert read_range(fs, "rewrites/a.bin", 0, 1001, etag=None) == file.read_bytes()  # no ETag, no condition


def test_other_filesystems_answer_the_range_whatever_the_etag(tmp_path: Path) -> None:
    fs = fsspec.filesystem("memory")
    fs.pipe_file("/ranges/a.bin", b"0123456789")
    assert read_range(fs, "/ranges/a.bin", 2, 5, etag='"not-checked"') == b"234"
