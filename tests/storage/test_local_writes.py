"""LocalWrites (uc_jupyter.storage.local_writes): the folder it walks to, temporaries, and what a key may name."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from uc_jupyter.errors import EscapesVolume
from uc_jupyter.storage.local_writes import LocalWrites

WHERE = "/Volumes/main/ml/vol/run"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    made = tmp_path / "vol"
    made.mkdir()
    return made


@pytest.fixture
def writes(root: Path) -> LocalWrites:
    return LocalWrites.below(str(root), str(root / "run"), where=WHERE)


def test_the_writes_of_a_folder_are_below_its_root_and_name_its_url(root: Path) -> None:
    run = LocalWrites.below(f"{root}/", f"{root}//run/", where=WHERE)
    assert (run.root, run.where, run.url) == (str(root), WHERE, f"file://{root}/run")
    whole = LocalWrites.below(str(root), str(root), where="/Volumes/main/ml/vol")
    assert whole.url == f"file://{root}"
    whole.put_bytes("top.bin", b"1")
    run.put_bytes("x", b"2")
    assert (root / "top.bin").read_bytes() == b"1" and (root / "run" / "x").read_bytes() == b"2"
    assert whole.list() == ["run/x", "top.bin"]


@pytest.mark.parametrize("folder", ["{root}2/run", "{root}/../other", "{root}/run/../../vol2", "/etc"])
def test_a_folder_that_only_looks_contained_is_refused(root: Path, folder: str) -> None:
    with pytest.raises(ValueError, match=r"^cannot write /Volumes/main/ml/vol/run: .* is not below its volume's root"):
        LocalWrites.below(str(root), folder.format(root=root), where=WHERE)


def test_dot_dot_that_stays_below_the_root_is_folded_lexically(root: Path) -> None:
    store = LocalWrites.below(str(root), f"{root}/elsewhere/../run", where=WHERE)
    store.put_bytes("a", b"1")
    assert (root / "run" / "a").read_bytes() == b"1" and not (root / "elsewhere").exists()


def test_missing_folders_on_the_way_are_made_and_reads_of_them_say_missing(writes: LocalWrites, root: Path) -> None:
    assert writes.list() == [] and not (root / "run").exists()  # nothing made by a listing
    with pytest.raises(FileNotFoundError, match=rf"^{WHERE}/a/b/c.bin does not exist$"):
        writes.read_bytes("a/b/c.bin")
    writes.delete(["a/b/c.bin"])  # absent: ignored, nothing made
    assert not (root / "run").exists()
    writes.put_bytes("a/b/c.bin", b"abc")
    assert (root / "run" / "a" / "b" / "c.bin").read_bytes() == b"abc"


def test_put_file_copies_the_file_whole_empty_ones_included(writes: LocalWrites, tmp_path: Path) -> None:
    empty, small = tmp_path / "empty", tmp_path / "small"
    empty.write_bytes(b"")
    small.write_bytes(b"0123456789" * 1000)
    writes.put_file("e", empty)
    writes.put_file("s", str(small))
    assert writes.read_bytes("e") == b"" and writes.read_bytes("s") == small.read_bytes()
    assert [(entry.key, entry.size) for entry in writes.listing()] == [("e", 0), ("s", 10_000)]


def test_a_file_being_written_is_invisible_until_its_block_ends(writes: LocalWrites, root: Path) -> None:
    writes.put_bytes("shard", b"old")
    with writes.new_file("shard") as out:
        out.write(b"new")
        out.flush()
        on_disk = sorted(os.listdir(root / "run"))
        assert len(on_disk) == 2 and on_disk[0].startswith(".uc-writing-")  # beside its place, hidden
        assert writes.list() == ["shard"] and writes.read_bytes("shard") == b"old"
    assert os.listdir(root / "run") == ["shard"] and writes.read_bytes("shard") == b"new"


def test_a_temporary_left_by_a_killed_writer_is_never_listed(writes: LocalWrites, root: Path) -> None:
    writes.put_bytes("a", b"1")
    (root / "run" / ".uc-writing-0123-a").write_bytes(b"partial")
    (root / "run" / ".hidden").write_bytes(b"h")  # an ordinary hidden file is a file like another
    assert writes.list() == [".hidden", "a"]


def test_a_write_never_replaces_a_folder_and_leaves_no_temporary(writes: LocalWrites, root: Path) -> None:
    writes.put_bytes("d/inner", b"1")
    with pytest.raises(IsADirectoryError):
        writes.put_bytes("d", b"over a folder")
    assert sorted(os.listdir(root / "run")) == ["d"] and writes.read_bytes("d/inner") == b"1"


def test_a_folder_or_a_fifo_named_by_a_key_is_not_a_file_to_read(writes: LocalWrites, root: Path) -> None:
    writes.put_bytes("d/inner", b"1")
    os.mkfifo(root / "run" / "fifo")  # a read that waited for a writer would hang here
    for key in ("d", "fifo"):
        with pytest.raises(FileNotFoundError, match=rf"^{WHERE}/{key} is not a regular file$"):
            writes.read_bytes(key)
        with pytest.raises(FileNotFoundError, match="is not a regular file"):
            writes.read_range(key, 0, 1)
    assert writes.list() == ["d/inner"]  # the FIFO is not a file of the listing


def test_a_key_naming_a_folder_is_not_deleted(writes: LocalWrites, root: Path) -> None:
    writes.put_bytes("d/inner", b"1")
    with pytest.raises(IsADirectoryError, match=rf"^cannot delete {WHERE}/d: it is a folder$"):
        writes.delete(["d"])
    assert (root / "run" / "d" / "inner").read_bytes() == b"1"


def test_ranges_are_clipped_at_the_end_and_empty_when_nothing_is_asked(writes: LocalWrites) -> None:
    writes.put_bytes("f", b"0123456789")
    assert writes.read_range("f", 8, 100) == b"89"
    assert writes.read_range("f", 10, 5) == b"" and writes.read_range("f", 50, 5) == b""
    assert writes.read_range("f", 3, 0) == b"" and writes.read_range("f", 3, -4) == b""


def test_a_symlink_to_a_file_inside_the_volume_is_not_listed_or_read_either(writes: LocalWrites, root: Path) -> None:
    writes.put_bytes("real", b"r")
    os.symlink(root / "run" / "real", root / "run" / "alias")  # inside the volume: still never followed
    os.symlink("real", root / "run" / "relative-alias")
    assert writes.list() == ["real"]
    for key in ("alias", "relative-alias"):
        with pytest.raises(EscapesVolume, match=rf"^cannot open {WHERE}/{key}: it is a symbolic link; remove it$"):
            writes.read_range(key, 0, 1)


def test_a_symlinked_sub_folder_is_not_listed_into(writes: LocalWrites, root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_bytes(b"s")
    writes.put_bytes("a/x", b"1")
    os.symlink(outside, root / "run" / "a" / "link")
    assert writes.list() == ["a/x"] and writes.list("a") == ["a/x"]
    with pytest.raises(EscapesVolume, match=r"run/a/link is a symbolic link or a file, not a folder of the volume"):
        writes.list("a/link")
    with pytest.raises(EscapesVolume):
        writes.put_bytes("a/link/secret", b"overwritten")
    assert (outside / "secret").read_bytes() == b"s"


def test_below_a_file_there_is_nothing_to_list_but_a_symlinked_way_is_still_refused(
    writes: LocalWrites, root: Path, tmp_path: Path
) -> None:
    writes.put_bytes("a.bin", b"x")
    assert writes.list("a.bin") == [] and writes.listing("a.bin/deeper") == []  # as an object store answers
    outside = tmp_path / "outside"
    (outside / "d").mkdir(parents=True)
    (outside / "d" / "secret").write_bytes(b"s")
    os.symlink(outside, root / "run" / "link")
    with pytest.raises(EscapesVolume, match=r"run/link is a symbolic link or a file"):
        writes.list("link/d")  # a link met before the file's folder: refused, never read as empty
    os.symlink(root / "run" / "a.bin", root / "run" / "file-link")
    with pytest.raises(EscapesVolume):
        writes.list("file-link")  # a link to a file is a link first


def test_a_volume_root_that_is_gone_is_named_not_found(tmp_path: Path) -> None:
    store = LocalWrites.below(str(tmp_path / "gone"), str(tmp_path / "gone" / "run"), where=WHERE)
    with pytest.raises(FileNotFoundError, match=rf"^{WHERE} does not exist$"):
        store.put_bytes("a", b"1")
    assert not (tmp_path / "gone").exists()
