"""Listing a volume folder through object_store in pages, first page first: what a listing finds,
a missing folder, a file given for a folder, and sub-folders a flat listing reports."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from uc_jupyter.catalog import NotFound
from uc_jupyter.data.remote import RetryPolicy
from uc_jupyter.data.storage import open_storage
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
    downloads.start([("hostile/data/ok.bin", str(tmp_path / "ok"), f"{WHERE}/ok.bin")])[0].result(60)
    downloads.close()
    assert (tmp_path / "ok").read_bytes() == b"12"
