"""The S3 test server's ListObjectsV2 pages: S3's answer for prefixes, delimiters and page sizes,
checked against the definition (every key, then grouped by delimiter) on one folder tree."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from uc_jupyter.testing.s3_listing import Listings

KEYS = [
    "a.bin",
    "b-1.bin",
    "b.bin",
    "b/1.bin",
    "b/2/x.bin",
    "b/2/y.bin",
    "b0.bin",
    "c/d/e/f.bin",
    "only-deep/x/y/z.bin",
    "z.bin",
]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    for key in KEYS:
        path = tmp_path / "bucket" / "top" / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")
    (tmp_path / "bucket" / "top" / "empty" / "nested").mkdir(parents=True)  # S3 has no empty folders
    os.symlink(tmp_path / "bucket" / "top" / "b", tmp_path / "bucket" / "top" / "link")  # neither listed nor entered
    return tmp_path


def expected(prefix: str, delimiter: str) -> list[str]:
    """S3's answer by its definition: the keys below prefix, each one past a delimiter folded into
    its common prefix, in order, once."""
    answer: list[str] = []
    for key in sorted(f"top/{k}" for k in KEYS):
        if not key.startswith(prefix):
            continue
        rest = key[len(prefix) :]
        entry = prefix + rest.split(delimiter, 1)[0] + delimiter if delimiter and delimiter in rest else key
        if not answer or answer[-1] != entry:
            answer.append(entry)
    return answer


@pytest.mark.parametrize("prefix", ["", "top/", "top/b", "top/b/", "top/c/", "top/nothing/"])
@pytest.mark.parametrize("delimiter", ["", "/"])
@pytest.mark.parametrize("max_keys", [1, 2, 1000])
def test_pages_answer_what_s3_would(root: Path, prefix: str, delimiter: str, max_keys: int) -> None:
    listings = Listings(root)
    got: list[str] = []
    after = ""
    for _ in range(100):
        page = listings.page(
            "bucket", prefix, delimiter=delimiter, after=after, max_keys=max_keys, continued=bool(after)
        )
        got += [key for key, _ in page.contents] + page.prefixes
        if not page.truncated:
            break
        after = page.last
    assert sorted(got) == expected(prefix, delimiter)
    assert len(got) == len(set(got))


def test_a_first_page_sees_files_written_since(root: Path) -> None:
    listings = Listings(root)
    assert listings.page("bucket", "top/b/", delimiter="", after="", max_keys=1000).contents[0][0] == "top/b/1.bin"
    (root / "bucket" / "top" / "b" / "0.bin").write_bytes(b"new")
    first = listings.page("bucket", "top/b/", delimiter="", after="", max_keys=1000)
    assert first.contents[0][0] == "top/b/0.bin" and first.contents[0][1].st_size == 3


def test_a_first_page_that_starts_after_a_key_sees_files_written_since(root: Path) -> None:
    """As a Delta reader lists its log from a version on (start-after): before, the walk of an earlier
    listing of the prefix was reused, and a commit written since was missing (deltalake: "No files in
    log segment")."""
    listings = Listings(root)
    assert listings.page("bucket", "top/b/", delimiter="", after="", max_keys=1000).contents[0][0] == "top/b/1.bin"
    (root / "bucket" / "top" / "b" / "1.json").write_bytes(b"new")
    later = listings.page("bucket", "top/b/", delimiter="", after="top/b/1", max_keys=1000)
    assert [key for key, _ in later.contents][:2] == ["top/b/1.bin", "top/b/1.json"]
