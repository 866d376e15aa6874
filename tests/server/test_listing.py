"""Volume folders for the sidebar, one page at a time, over a real embedded catalog (no server)."""

from __future__ import annotations

import doctest
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from uc_jupyter.catalog import InvalidName, NotFound, PermissionDenied
from uc_jupyter.catalog.embedded.local import EscapesVolume, LocalCatalog
from uc_jupyter.server import listing
from uc_jupyter.server.browse import status_of
from uc_jupyter.server.listing import (
    MAX_PAGE,
    PAGE_SIZE,
    BadRequest,
    Entry,
    is_hidden,
    list_folder,
    page_token,
    parse_limit,
    volume_entries,
)
from uc_jupyter.testing.catalogs import external_location
from uc_jupyter.testing.s3_server import S3TestServer

# The sidebar's catalog calls, on the embedded catalog and over uc-jupyter serve (tests/conftest.py).
pytestmark = pytest.mark.both_backends


def _volume_folder(catalog: LocalCatalog, name: str) -> Path:
    return Path(catalog.resolve_volume_path("/Volumes/" + name.replace(".", "/")).path)


@pytest.fixture
def folder(catalog: LocalCatalog, tmp_path: Path) -> Path:
    """Volume main.ml.files: b.txt (3 bytes), a/ and c/ folders, hidden and marker files, symlinks out of the
    volume, inside it and nowhere, and a FIFO."""
    catalog.create_volume("main.ml.files")
    root = _volume_folder(catalog, "main.ml.files")
    root.mkdir(parents=True, exist_ok=True)
    (root / "b.txt").write_text("abc")
    (root / "c" / "deeper").mkdir(parents=True)
    (root / "a").mkdir()
    (root / "a" / "inner.bin").write_bytes(b"\x00" * 10)
    for hidden in (".DS_Store", "_SUCCESS", "_committed_1", "_started_1"):
        (root / hidden).write_text("")
    (root / ".cache").mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "big").write_bytes(b"1" * 100)
    (root / "escape").symlink_to(tmp_path / "outside")
    (root / "escape.txt").symlink_to(tmp_path / "outside" / "big")
    (root / "inside").symlink_to(root / "a")
    (root / "inside.bin").symlink_to(root / "a" / "inner.bin")
    (root / "broken").symlink_to(root / "gone")
    os.mkfifo(root / "pipe")
    return root


@pytest.fixture
def many(catalog: LocalCatalog, folder: Path) -> Path:
    """files/many: 450 files f00000..f00449 (sizes 0..449 bytes) and 3 folders d0..d2."""
    many = folder / "many"
    many.mkdir()
    for i in range(450):
        (many / f"f{i:05d}").write_bytes(b"x" * i)
    for i in range(3):
        (many / f"d{i}").mkdir()
    return many


def test_a_folder_lists_folders_first_then_files_by_name(catalog: LocalCatalog, folder: Path) -> None:
    root = volume_entries(catalog, "/Volumes/main/ml/files")
    assert root["path"] == "/Volumes/main/ml/files"
    assert (root["total"], root["next"]) == (5, None)
    assert root["entries"] == [
        {"name": "a", "path": "/Volumes/main/ml/files/a", "kind": "directory", "size": None},
        {"name": "c", "path": "/Volumes/main/ml/files/c", "kind": "directory", "size": None},
        {"name": "inside", "path": "/Volumes/main/ml/files/inside", "kind": "directory", "size": None},
        {"name": "b.txt", "path": "/Volumes/main/ml/files/b.txt", "kind": "file", "size": 3},
        {"name": "inside.bin", "path": "/Volumes/main/ml/files/inside.bin", "kind": "file", "size": 10},
    ]  # hidden, Spark markers, the FIFO and symlinks out of the volume or nowhere are left out
    assert volume_entries(catalog, "/Volumes/main/ml/files/./a/")["entries"] == [
        {"name": "inner.bin", "path": "/Volumes/main/ml/files/a/inner.bin", "kind": "file", "size": 10}
    ]
    assert volume_entries(catalog, "/Volumes/main/ml/files/c/deeper") == {
        "path": "/Volumes/main/ml/files/c/deeper",
        "entries": [],
        "total": 0,
        "next": None,
    }


def test_a_big_folder_comes_in_pages_that_cover_it_once(catalog: LocalCatalog, many: Path) -> None:
    first = volume_entries(catalog, "/Volumes/main/ml/files/many")
    assert len(first["entries"]) == PAGE_SIZE == 200 and first["total"] == 453
    assert [e["name"] for e in first["entries"][:4]] == ["d0", "d1", "d2", "f00000"]
    second = volume_entries(catalog, "/Volumes/main/ml/files/many", after=first["next"])
    third = volume_entries(catalog, "/Volumes/main/ml/files/many", after=second["next"])
    assert (len(second["entries"]), len(third["entries"]), third["next"]) == (200, 53, None)
    names = [e["name"] for page in (first, second, third) for e in page["entries"]]
    assert names == ["d0", "d1", "d2", *(f"f{i:05d}" for i in range(450))]
    assert third["entries"][-1] == {
        "name": "f00449",
        "path": "/Volumes/main/ml/files/many/f00449",
        "kind": "file",
        "size": 449,
    }


def test_a_page_token_survives_files_added_and_removed_meanwhile(catalog: LocalCatalog, many: Path) -> None:
    first = volume_entries(catalog, "/Volumes/main/ml/files/many", limit=10)
    assert first["entries"][-1]["name"] == "f00006"
    (many / "f00003").unlink()  # before the token: no entry of the next page is skipped
    (many / "f00006").unlink()  # the token's own entry: the next page still starts after it
    (many / "f00007a").touch()  # after it: shown in its place
    second = volume_entries(catalog, "/Volumes/main/ml/files/many", limit=3, after=first["next"])
    assert [e["name"] for e in second["entries"]] == ["f00007", "f00007a", "f00008"]
    assert second["total"] == 452


def test_limits(catalog: LocalCatalog, many: Path) -> None:
    assert len(volume_entries(catalog, "/Volumes/main/ml/files/many", limit=MAX_PAGE)["entries"]) == 453
    one = volume_entries(catalog, "/Volumes/main/ml/files/many", limit=1)
    assert [e["name"] for e in one["entries"]] == ["d0"] and one["next"] == page_token(Entry("d0", directory=True))
    for wrong in (0, MAX_PAGE + 1):
        with pytest.raises(BadRequest, match=f"limit must be an integer from 1 to 1000, got {wrong}"):
            volume_entries(catalog, "/Volumes/main/ml/files/many", limit=wrong)


@pytest.mark.parametrize("token", ["not a token", "WzAsIDFd", "e30", "WzJd", "WzIsICJhIl0"])
def test_a_forged_page_token_is_a_bad_request(catalog: LocalCatalog, folder: Path, token: str) -> None:
    with pytest.raises(BadRequest, match="^after must be the 'next' token of an earlier page") as raised:
        volume_entries(catalog, "/Volumes/main/ml/files", after=token)
    assert status_of(raised.value) == 400


@pytest.fixture(scope="module")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3TestServer]:
    with S3TestServer(tmp_path_factory.mktemp("s3")) as server:
        yield server


def test_an_object_store_folder_comes_in_pages_too(catalog: LocalCatalog, s3_server: S3TestServer) -> None:
    folder = s3_server.bucket("scans") / "data"
    (folder / "sub").mkdir(parents=True, exist_ok=True)  # the bucket is the module's: both backends fill it alike
    (folder / "sub" / "x.txt").write_text("x")
    (folder / "_SUCCESS").write_text("")
    (folder / ".hidden").write_text("")
    for i in range(250):
        (folder / f"s{i:04d}.bin").write_bytes(b"x" * i)
    # static: the test server checks no keys, so a catalog server may hand its own out (unscoped)
    external_location(catalog, "s3://scans", {**s3_server.storage_options, "vending": "static"})
    catalog.create_volume("main.ml.scans", "s3://scans/data")
    first = volume_entries(catalog, "/Volumes/main/ml/scans")
    assert (len(first["entries"]), first["total"]) == (200, 251)
    assert first["entries"][:2] == [
        {"name": "sub", "path": "/Volumes/main/ml/scans/sub", "kind": "directory", "size": None},
        {"name": "s0000.bin", "path": "/Volumes/main/ml/scans/s0000.bin", "kind": "file", "size": 0},
    ]
    second = volume_entries(catalog, "/Volumes/main/ml/scans", after=first["next"])
    assert [e["name"] for e in second["entries"]] == [f"s{i:04d}.bin" for i in range(199, 250)]
    assert second["entries"][-1]["size"] == 249 and second["next"] is None
    assert [e["name"] for e in volume_entries(catalog, "/Volumes/main/ml/scans/sub")["entries"]] == ["x.txt"]
    with pytest.raises(NotADirectoryError, match="^/Volumes/main/ml/scans/s0001.bin is a file, not a folder$"):
        volume_entries(catalog, "/Volumes/main/ml/scans/s0001.bin")
    with pytest.raises(NotFound, match="^/Volumes/main/ml/scans/nope does not exist$"):
        volume_entries(catalog, "/Volumes/main/ml/scans/nope")


def test_a_listed_folder_keeps_its_order_and_location(catalog: LocalCatalog, folder: Path) -> None:
    listed = list_folder(catalog, "/Volumes/main/ml/files/a")
    assert listed.path == "/Volumes/main/ml/files/a" and listed.entries == (Entry("inner.bin", False),)
    assert Path(listed.child("inner.bin")).read_bytes() == b"\x00" * 10


@pytest.mark.parametrize(
    ("path", "error", "status", "message"),
    [
        ("/Volumes/main/ml/files/../other", InvalidName, 400, "'..' may not climb out of the volume"),
        ("/Volumes/main/ml/files/a/../../x", InvalidName, 400, "'..' may not climb out of the volume"),
        ("/Volumes/main/ml/files//a", InvalidName, 400, "empty segment"),
        ("main/ml/files", InvalidName, 400, "must start with '/Volumes/<catalog>/<schema>/<volume>'"),
        ("/Volumes/main/ml", InvalidName, 400, "got 2 name part(s)"),
        ("/Volumes/main/ml/files/escape", EscapesVolume, 400, "leads outside volume main.ml.files"),
        (
            "/Volumes/main/ml/files/b.txt",
            NotADirectoryError,
            400,
            "/Volumes/main/ml/files/b.txt is a file, not a folder",
        ),
        ("/Volumes/main/ml/files/nope", NotFound, 404, "/Volumes/main/ml/files/nope does not exist"),
        ("/Volumes/main/ml/filez", NotFound, 404, "volume main.ml.filez does not exist; did you mean main.ml.files?"),
    ],
)
def test_bad_volume_paths(
    catalog: LocalCatalog, folder: Path, path: str, error: type[Exception], status: int, message: str
) -> None:
    with pytest.raises(error) as raised:
        volume_entries(catalog, path)
    assert str(raised.value).startswith(message) or message in str(raised.value)
    assert status_of(raised.value) == status
    assert str(folder) not in str(raised.value)  # never the storage path


def test_a_volume_folder_needs_read_volume(catalog: LocalCatalog) -> None:
    for name in ("v1", "v2"):
        catalog.create_volume(f"main.ml.{name}")
        _volume_folder(catalog, f"main.ml.{name}").mkdir(parents=True, exist_ok=True)
    catalog.create_principal("alice")
    catalog.grant("main", "USE CATALOG", "alice")
    catalog.grant("main.ml", "USE SCHEMA", "alice")
    catalog.grant("main.ml.v1", "WRITE VOLUME", "alice")
    catalog.grant("main.ml.v2", "READ VOLUME", "alice")
    with catalog.as_principal("alice"):
        assert volume_entries(catalog, "/Volumes/main/ml/v2")["entries"] == []
        with pytest.raises(PermissionDenied, match="^alice lacks READ VOLUME on main.ml.v1$"):
            volume_entries(catalog, "/Volumes/main/ml/v1")


@pytest.mark.parametrize(("text", "limit"), [(None, 200), ("", 200), ("1", 1), ("1000", 1000), (" 7 ", 7)])
def test_parse_limit_accepts_1_to_1000(text: str | None, limit: int) -> None:
    assert parse_limit(text) == limit


@pytest.mark.parametrize("text", ["0", "1001", "-1", "1.5", "ten", "1e2", "٣"])
def test_parse_limit_refuses_anything_else(text: str) -> None:
    with pytest.raises(BadRequest, match="limit must be an integer from 1 to 1000, got") as raised:
        parse_limit(text)
    assert status_of(raised.value) == 400


def test_hidden_names() -> None:
    assert [is_hidden(n) for n in (".git", "_started_9", "data_SUCCESS", "_SUCCESS.txt", "x")] == [
        True,
        True,
        False,
        False,
        False,
    ]


def test_docstring_examples() -> None:
    result = doctest.testmod(listing, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
