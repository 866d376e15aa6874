"""Listing a volume folder through object_store in pages: what a listing finds, its sub-folders
listed at once in key order, a missing folder, a file given for a folder, and sub-folders a flat
listing reports."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from uc_jupyter.catalog import NotFound
from uc_jupyter.storage.downloads import Job
from uc_jupyter.storage.reads import open_storage
from uc_jupyter.storage.retry import RetryPolicy
from uc_jupyter.testing.moto_iam import MotoIam, moto_iam
from uc_jupyter.testing.s3_server import S3TestServer

pytestmark = pytest.mark.in_a_fork  # object_store requests: keep the test process clean (conftest)

WHERE = "/Volumes/c/s/v"


def fill(s3: S3TestServer, bucket: str, count: int) -> Path:
    folder = s3.bucket(bucket) / "data"
    (folder / "sub").mkdir(parents=True)
    for i in range(count):
        (folder / f"f{i:05d}.bin").write_bytes(b"x" * (i % 7))
    (folder / "sub" / "deep.bin").write_bytes(b"deep")
    (s3.bucket(bucket) / "data-sibling.bin").write_bytes(b"not below data/")
    return folder


def test_a_recursive_listing_comes_in_pages_of_the_folder_only(s3: S3TestServer) -> None:
    fill(s3, "paged", 2100)
    storage = open_storage("s3://paged/data", s3.storage_options, where=WHERE)
    pages = list(storage.pages(recursive=True))
    assert [len(page.files) for page in pages] == [1000, 1000, 101]  # S3 answers 1000 keys a request
    found = {relative: size for page in pages for relative, size, _ in page.files}
    assert len(found) == 2101 and found["sub/deep.bin"] == 4 and found["f00003.bin"] == 3
    assert all(version for page in pages for _, _, version in page.files)  # ETags: a changed file is a new key


def test_sub_folders_are_listed_at_once_and_the_entries_come_in_key_order(s3: S3TestServer) -> None:
    folder = s3.bucket("tree") / "data"
    names = ["a.bin", "b-1.bin", "b.bin", "b0.bin", "z.bin"]  # '-' and '.' sort before "b/", '0' after it
    names += [f"{part}/{i:04d}.bin" for part in ("b", "c", "d", "e") for i in range(1100)]  # two pages each
    names += ["b/deeper/x.bin", "c/deeper/even/y.bin"]
    for name in names:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(b"x")
    s3.reset()
    s3.configure(latency=0.05)  # each page waits: listings of one folder after another would never overlap
    try:
        pages = list(open_storage("s3://tree/data", s3.storage_options, where=WHERE).pages(recursive=True))
    finally:
        s3.configure(latency=0.0)
    listed = [relative for page in pages for relative, _, _ in page.files]
    assert listed == sorted(names)  # the order a sequential listing gives, whatever answered first
    stats = s3.stats()
    assert stats["in_flight"]["peak"] >= 4  # the four sub-folders at once
    assert stats["requests"]["LIST"] == 1 + 4 * 2  # one delimiter listing, then each folder's pages once


def test_a_folder_without_sub_folders_is_listed_once(s3: S3TestServer) -> None:
    folder = s3.bucket("flatonly") / "data"
    folder.mkdir(parents=True)
    for i in range(2500):
        (folder / f"{i:05d}.bin").write_bytes(b"x")
    s3.reset()
    pages = list(open_storage("s3://flatonly/data", s3.storage_options, where=WHERE).pages(recursive=True))
    assert sum(len(page.files) for page in pages) == 2500
    assert s3.stats()["requests"]["LIST"] == 3  # the delimiter listing's own pages: nothing listed twice


def test_a_flat_listing_reports_its_sub_folders(s3: S3TestServer) -> None:
    fill(s3, "flat", 3)
    [page] = open_storage("s3://flat/data", s3.storage_options, where=WHERE).pages(recursive=False)
    assert sorted(relative for relative, _, _ in page.files) == ["f00000.bin", "f00001.bin", "f00002.bin"]
    assert page.folders == ["sub"]


def test_a_missing_folder_and_a_file_are_named(s3: S3TestServer) -> None:
    fill(s3, "odd", 1)
    with pytest.raises(NotFound, match=f"^{WHERE} does not exist$"):
        list(open_storage("s3://odd/nothing", s3.storage_options, where=WHERE).pages(recursive=True))
    with pytest.raises(NotADirectoryError, match=f"^{WHERE} is a file, not a folder"):
        list(open_storage("s3://odd/data/f00000.bin", s3.storage_options, where=WHERE).pages(recursive=True))
    with pytest.raises(NotFound, match=f"^{WHERE} does not exist"):
        list(open_storage("s3://no-such-bucket/data", s3.storage_options, where=WHERE).pages(recursive=True))


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoIam]:
    """moto keeps any key S3 allows: folder markers, and keys object_store cannot address."""
    with moto_iam(["markers", "hostile"]) as running:
        s3 = running.admin_client("s3")
        for key, body in {
            "data/": b"",  # the folder's own marker
            "data/sub/": b"",  # a marker with files below it
            "data/sub/x.bin": b"below",
            "data/empty/": b"",  # an empty folder's marker
            "data/zero.bin": b"",  # a real empty file
            "data/a.bin": b"aaa",
        }.items():
            s3.put_object(Bucket="markers", Key=key, Body=body)
        for key in ("data/ok.bin", "data/../up.bin", "data//double.bin", "data/./dot.bin"):
            s3.put_object(Bucket="hostile", Key=key, Body=b"12")
        yield running


def test_folder_markers_are_not_files_and_an_empty_file_is(moto: MotoIam) -> None:
    storage = open_storage("s3://markers/data", moto.options(), where=WHERE)
    found = {relative: size for page in storage.pages(recursive=True) for relative, size, _ in page.files}
    assert found == {"a.bin": 3, "sub/x.bin": 5, "zero.bin": 0}
    [flat] = open_storage("s3://markers/data", moto.options(), where=WHERE).pages(recursive=False)
    assert sorted(r for r, _, _ in flat.files) == ["a.bin", "zero.bin"] and flat.folders == ["empty", "sub"]


def test_keys_object_store_cannot_address_are_left_out_with_a_warning(moto: MotoIam, tmp_path: Path) -> None:
    """One key like ``data/../up.bin`` (S3 allows it) would end object_store's whole listing."""
    storage = open_storage("s3://hostile/data", moto.options(), where=WHERE)
    with pytest.warns(UserWarning, match=r"left out 3 object\(s\) whose keys have an empty, '\.' or '\.\.' part"):
        found = [relative for page in storage.pages(recursive=True) for relative, _, _ in page.files]
    assert found == ["ok.bin"]
    downloads = storage.downloads(RetryPolicy(attempts=1), on_retry=lambda: None, threads=1)
    downloads.start([Job("hostile/data/ok.bin", str(tmp_path / "ok"), f"{WHERE}/ok.bin", 2)])[0].result(60)
    downloads.close()
    assert (tmp_path / "ok").read_bytes() == b"12"
