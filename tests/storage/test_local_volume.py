"""LocalVolume: listing, checking and opening a local volume's files without following symlinks."""

from __future__ import annotations

import os
import pickle
import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from uc_jupyter.catalog import NotFound
from uc_jupyter.catalog.embedded.local import EscapesVolume, LocalCatalog
from uc_jupyter.storage.errors import VolumeReadError
from uc_jupyter.storage.local_volume import LocalVolume

Make = Callable[[str], LocalVolume]


@pytest.fixture
def root(catalog: LocalCatalog) -> Path:
    """The storage folder of a managed volume main.ml.v, with a few files in a tree."""
    info = catalog.create_volume("main.ml.v")
    folder = Path(info.storage_location.removeprefix("file://"))
    (folder / "top.txt").write_bytes(b"top")
    (folder / "data" / "cls").mkdir(parents=True)
    (folder / "data" / "one.txt").write_bytes(b"one")
    (folder / "data" / "cls" / "two.txt").write_bytes(b"two!")
    return folder


@pytest.fixture
def volume(catalog: LocalCatalog, root: Path) -> Make:
    """The LocalVolume of a folder of main.ml.v, as a dataset makes it."""

    def make(relative: str = "") -> LocalVolume:
        where = "/Volumes/main/ml/v" + (f"/{relative}" if relative else "")
        return LocalVolume.of(catalog.resolve_volume_path(where))

    return make


def read(fd: int) -> bytes:
    with open(fd, "rb") as handle:
        return handle.read()


# ------------------------------------------------------------------ listing


def test_entries_are_the_regular_files_with_size_and_mtime(volume: Make, root: Path) -> None:
    files, skipped = volume("").entries(recursive=True)
    by_path = {path: (size, version) for path, size, version in files}
    assert sorted(by_path) == ["data/cls/two.txt", "data/one.txt", "top.txt"]
    assert by_path["data/cls/two.txt"] == (4, str(os.stat(root / "data" / "cls" / "two.txt").st_mtime))
    assert skipped == []
    flat, _ = volume("data").entries(recursive=False)
    assert [path for path, _, _ in flat] == ["one.txt"]


def test_symlinks_fifos_and_sockets_are_skipped_and_named(
    volume: Make, root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = root / "data"
    (data / "inside-link.txt").symlink_to(data / "one.txt")  # even one that stays inside
    (data / "dir-link").symlink_to(data / "cls", target_is_directory=True)
    (data / "dangling").symlink_to(tmp_path / "nothing")
    os.mkfifo(data / "pipe")
    server = socket.socket(socket.AF_UNIX)
    monkeypatch.chdir(data)  # bound by a relative name: a socket's path may hold 107 bytes at most
    server.bind("sock")
    try:
        files, skipped = volume("data").entries(recursive=True)
    finally:
        server.close()
    assert sorted(path for path, _, _ in files) == ["cls/two.txt", "one.txt"]
    assert sorted(skipped) == ["dangling", "dir-link", "inside-link.txt", "pipe", "sock"]


def test_hidden_folders_are_not_entered_and_hidden_files_are_left_to_the_caller(volume: Make, root: Path) -> None:
    (root / ".git" / "objects").mkdir(parents=True)
    (root / ".git" / "objects" / "x").write_bytes(b"x")
    (root / ".hidden.txt").write_bytes(b"h")
    files, _ = volume("").entries(recursive=True)
    assert ".hidden.txt" in [path for path, _, _ in files]
    assert not any(path.startswith(".git") for path, _, _ in files)


@pytest.mark.parametrize(
    ("setup", "error", "message"),
    [
        ("missing", NotFound, "/Volumes/main/ml/v/data/nope does not exist"),
        ("under-a-file", NotFound, "/Volumes/main/ml/v/data/nope/deeper does not exist"),
        ("file", NotADirectoryError, "/Volumes/main/ml/v/data/nope is a file, not a folder"),
        (
            "symlink",
            EscapesVolume,
            "/Volumes/main/ml/v/data/nope goes through the symbolic link /Volumes/main/ml/v/data",
        ),
    ],
)
def test_a_folder_that_cannot_be_listed_gets_a_one_line_error(
    catalog: LocalCatalog, root: Path, setup: str, error: type[Exception], message: str
) -> None:
    if setup in ("file", "under-a-file"):
        (root / "data" / "nope").write_bytes(b"x")
    where = "/Volumes/main/ml/v/data/nope" + ("/deeper" if setup == "under-a-file" else "")
    volume = LocalVolume.of(catalog.resolve_volume_path(where))  # the catalog's checks first, then the walk
    if setup == "symlink":
        os.rename(root / "data", root / "real")
        (root / "data").symlink_to(root / "real", target_is_directory=True)
        (root / "real" / "nope").mkdir()
    with pytest.raises(error, match=message) as caught:
        volume.entries(recursive=True)
    assert "\n" not in str(caught.value)


def test_a_symlinked_folder_is_skipped_not_entered(volume: Make, root: Path, tmp_path: Path) -> None:
    os.rename(root / "data", tmp_path / "moved")
    (root / "data").symlink_to(tmp_path / "moved", target_is_directory=True)
    files, skipped = volume("").entries(recursive=True)
    assert [path for path, _, _ in files] == ["top.txt"] and skipped == ["data"]


# ------------------------------------------------------------------ checking and opening


def test_check_and_open_accept_the_listed_file(volume: Make) -> None:
    data = volume("data")
    data.check("one.txt", 3)
    data.check("cls/two.txt", 4)
    assert read(data.open("cls/two.txt", 4)) == b"two!"
    assert read(data.open("one.txt", None)) == b"one"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("grow", r"one\.txt: it changed since the dataset listed it \(3 bytes then, 7 now\)"),
        ("delete", r"one\.txt: it no longer exists"),
        ("folder", r"one\.txt: it is not a regular file now"),
        ("symlink", r"one\.txt: /Volumes/main/ml/v/data/one\.txt is a symbolic link now"),
    ],
)
@pytest.mark.parametrize("how", ["check", "open"])
def test_a_file_changed_since_the_listing_is_refused_naming_it(
    volume: Make, root: Path, tmp_path: Path, change: str, message: str, how: str
) -> None:
    data = volume("data")
    target = root / "data" / "one.txt"
    if change == "grow":
        target.write_bytes(b"one and")
    elif change == "delete":
        target.unlink()
    elif change == "folder":
        target.unlink()
        target.mkdir()
    else:
        (tmp_path / "same.txt").write_bytes(b"xyz")
        target.unlink()
        target.symlink_to(tmp_path / "same.txt")
    with pytest.raises(VolumeReadError, match=message) as caught:
        data.check("one.txt", 3) if how == "check" else data.open("one.txt", 3)
    assert "/Volumes/main/ml/v/data/one.txt" in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("how", ["check", "open"])
def test_a_folder_on_the_way_that_changed_is_named(volume: Make, root: Path, tmp_path: Path, how: str) -> None:
    data = volume("data")
    os.rename(root / "data" / "cls", tmp_path / "cls")
    (root / "data" / "cls").symlink_to(tmp_path / "cls", target_is_directory=True)
    with pytest.raises(VolumeReadError, match="/Volumes/main/ml/v/data/cls is a symbolic link now"):
        data.check("cls/two.txt", 4) if how == "check" else data.open("cls/two.txt", 4)
    (root / "data" / "cls").unlink()
    (root / "data" / "cls").write_bytes(b"not a folder")
    with pytest.raises(VolumeReadError, match="/Volumes/main/ml/v/data/cls is not a folder now"):
        data.check("cls/two.txt", 4) if how == "check" else data.open("cls/two.txt", 4)


def test_an_open_file_stays_the_checked_one_whatever_is_swapped_in(volume: Make, root: Path, tmp_path: Path) -> None:
    fd = volume("data").open("one.txt", 3)
    (tmp_path / "other").write_bytes(b"OUT")
    (root / "data" / "one.txt").unlink()
    (root / "data" / "one.txt").symlink_to(tmp_path / "other")
    assert read(fd) == b"one"


def test_a_hard_link_to_an_outside_file_is_a_regular_file_and_is_read(volume: Make, root: Path, tmp_path: Path) -> None:
    """The documented limit: a hard link cannot be told from any other file of the volume."""
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"linked")
    os.link(outside, root / "data" / "hard.txt")
    data = volume("data")
    files, skipped = data.entries(recursive=False)
    assert ("hard.txt", 6) in [(path, size) for path, size, _ in files] and skipped == []
    assert read(data.open("hard.txt", 6)) == b"linked"


def test_a_volume_whose_storage_is_gone_is_not_found(volume: Make, root: Path) -> None:
    data = volume("data")
    os.rename(root, str(root) + ".gone")
    with pytest.raises(NotFound, match="the volume's storage .* does not exist"):
        data.check("one.txt", 3)


# ------------------------------------------------------------------ across processes


def test_the_root_descriptor_is_kept_inherited_by_forks_and_not_pickled(volume: Make, root: Path) -> None:
    """Opened once: moving the volume's storage away afterwards does not disturb this process or a
    forked child (they hold the folder open), while a pickled copy opens its own, by path."""
    data = volume("data")
    data.check("one.txt", 3)
    blob = pickle.dumps(data)
    os.rename(root, f"{root}.moved")
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        try:
            os.write(writer, b"1" if read(data.open("cls/two.txt", 4)) == b"two!" else b"0")
        finally:
            os._exit(0)
    os.close(writer)
    os.waitpid(pid, 0)
    with os.fdopen(reader, "rb") as answer:
        assert answer.read() == b"1"
    assert read(data.open("one.txt", 3)) == b"one"
    with pytest.raises(NotFound, match="the volume's storage"):
        pickle.loads(blob).check("one.txt", 3)
    os.rename(f"{root}.moved", root)
    assert read(pickle.loads(blob).open("one.txt", 3)) == b"one"
