"""FsspecStorage (uc_jupyter.storage.filesystem): fsspec listings, one filesystem per process, its options."""

from __future__ import annotations

import os
import uuid

import fsspec
import pytest

from uc_jupyter.errors import NotFound
from uc_jupyter.storage.downloads import MAX_PREFETCH
from uc_jupyter.storage.filesystem import FsspecStorage

WHERE = "/Volumes/main/ml/mem/data"


@pytest.fixture
def base() -> str:
    """A fresh folder of the process's memory filesystem: ``data`` with files, and a look-alike ``data2``."""
    top = f"/t{uuid.uuid4().hex[:12]}"
    memory = fsspec.filesystem("memory")
    for path, data in {
        "data/a.bin": b"abc",
        "data/sub/b.bin": b"0123456",
        "data/.hidden/c.bin": b"c",
        "data2/not-mine.bin": b"other",
        "data.bin": b"a file beside the folder",
    }.items():
        memory.pipe(f"{top}/{path}", data)
    return top


def test_a_recursive_listing_is_one_page_of_every_file_below_the_folder_only(base: str) -> None:
    pages = list(FsspecStorage(f"memory:/{base}/data", {}, where=WHERE).pages(recursive=True))
    assert len(pages) == 1
    [page] = pages
    assert sorted((relative, size) for relative, size, _ in page.files) == [
        (".hidden/c.bin", 1),  # hidden files are the caller's to drop
        ("a.bin", 3),
        ("sub/b.bin", 7),
    ]
    assert page.folders == [] and tuple(page.skipped) == ()


def test_a_flat_listing_names_its_visible_sub_folders(base: str) -> None:
    [page] = FsspecStorage(f"memory:/{base}/data/", {}, where=WHERE).pages(recursive=False)
    assert [(relative, size) for relative, size, _ in page.files] == [("a.bin", 3)]
    assert page.folders == ["sub"]


def test_each_file_carries_its_version_as_the_filesystem_lists_it_read_afresh(base: str) -> None:
    storage = FsspecStorage(f"memory:/{base}/data", {}, where=WHERE)
    memory = fsspec.filesystem("memory")

    def listed_created() -> str:
        entries = {entry["name"]: entry for entry in memory.ls(f"{base}/data", detail=True)}
        return str(entries[f"{base}/data/a.bin"]["created"])

    [page] = storage.pages(recursive=False)
    assert [version for _, _, version in page.files] == [listed_created()]
    memory.rm(f"{base}/data/a.bin")
    memory.pipe(f"{base}/data/a.bin", b"abc")  # the same size: only the version tells them apart
    [again] = storage.pages(recursive=False)
    assert [version for _, _, version in again.files] == [listed_created()]


def test_a_missing_folder_and_a_file_are_one_line_each(base: str) -> None:
    with pytest.raises(NotFound, match=rf"^{WHERE} does not exist$"):
        next(FsspecStorage(f"memory:/{base}/nothing", {}, where=WHERE).pages(recursive=True))
    with pytest.raises(NotADirectoryError, match=rf"^{WHERE} is a file, not a folder; give the folder"):
        next(FsspecStorage(f"memory:/{base}/data.bin", {}, where=WHERE).pages(recursive=False))


def test_errors_name_the_url_when_no_volume_path_is_given(base: str) -> None:
    url = f"memory:/{base}/nothing"
    assert FsspecStorage(url, {}).where == url
    with pytest.raises(NotFound, match=f"^{url} does not exist$"):
        next(FsspecStorage(url, {}).pages(recursive=True))


def test_one_filesystem_per_storage_and_process_made_afresh_after_a_fork(base: str) -> None:
    storage = FsspecStorage(f"memory:/{base}/data", {}, where=WHERE)
    fs = storage.filesystem()
    assert storage.filesystem() is fs
    assert FsspecStorage(f"memory:/{base}/data", {}, where=WHERE).filesystem() is not fs  # no shared instance
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: a filesystem of its own (an async one would not survive the fork)
        try:
            os.write(write, b"own" if storage.filesystem() is not fs else b"inherited")
        finally:
            os._exit(0)
    os.close(write)
    try:
        answer = os.read(read, 64)
    finally:
        os.close(read)
        os.waitpid(pid, 0)
    assert answer == b"own"
    assert storage.filesystem() is fs  # the parent's stays


def test_vending_options_are_not_handed_to_fsspec(base: str) -> None:
    given = {"vending": "static", "role_arn": "arn:aws:iam::1:role/r"}
    fs = FsspecStorage(f"memory:/{base}/data", given, where=WHERE).filesystem()
    assert fs.storage_options == {}
    assert given == {"vending": "static", "role_arn": "arn:aws:iam::1:role/r"}  # the caller's dict untouched


def test_s3_clients_get_a_pool_as_deep_as_the_prefetch_unless_the_options_say_otherwise() -> None:
    pytest.importorskip("s3fs")
    fs = FsspecStorage("s3://bucket/data", {"anon": True, "vending": "static"}).filesystem()  # makes no request
    assert fs.config_kwargs == {"max_pool_connections": MAX_PREFETCH}
    assert "vending" not in fs.storage_options
    given = {"anon": True, "config_kwargs": {"max_pool_connections": 3, "read_timeout": 9}}
    own = FsspecStorage("s3a://bucket/data", given).filesystem()
    assert own.config_kwargs == {"max_pool_connections": 3, "read_timeout": 9}
    assert given["config_kwargs"] == {"max_pool_connections": 3, "read_timeout": 9}
    assert FsspecStorage("memory://x/data", {}).filesystem().storage_options == {}  # other protocols: as given
