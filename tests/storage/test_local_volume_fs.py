"""LocalVolumeFileSystem: a local volume through fsspec, read only, every open and look walked from the
volume's root without following a symlink; a fresh interpreter knows its protocol once it unpickles
the options that name a volume."""

from __future__ import annotations

import base64
import os
import pickle
from pathlib import Path

import fsspec
import pytest

from uc_jupyter.storage.errors import VolumeReadError
from uc_jupyter.storage.local_volume_fs import PROTOCOL, VolumeRoot, url_of
from uc_jupyter.testing.scripts import run_python

WHERE = "/Volumes/main/ml/v"


@pytest.fixture
def root(tmp_path: Path) -> VolumeRoot:
    """A volume holding t/a.bin and t/sub/b.bin, and a symlink t/link.bin to a file outside it."""
    volume = tmp_path / "volume"
    (volume / "t" / "sub").mkdir(parents=True)
    (volume / "t" / "a.bin").write_bytes(b"inside-a")
    (volume / "t" / "sub" / "b.bin").write_bytes(b"inside-b")
    (tmp_path / "secret.bin").write_bytes(b"OUTSIDE!")
    (volume / "t" / "link.bin").symlink_to(tmp_path / "secret.bin")
    return VolumeRoot(str(volume), WHERE)


def filesystem(root: VolumeRoot) -> fsspec.AbstractFileSystem:
    return fsspec.filesystem(PROTOCOL, volume=root)


def test_files_read_look_and_list_as_fsspec_says(root: VolumeRoot) -> None:
    fs = filesystem(root)
    with fsspec.open(url_of(root, "t/a.bin"), "rb", **{PROTOCOL: {"volume": root}}) as handle:
        assert handle.read() == b"inside-a"
    info = fs.info(url_of(root, "t/a.bin"))
    assert (info["type"], info["size"]) == ("file", 8) and info["ETag"].startswith('"')
    assert fs.info(url_of(root, "t/sub"))["type"] == "directory"
    # The symlink is not offered; folders are.
    assert sorted(fs.ls(url_of(root, "t"), detail=False)) == [f"{root.path}/t/a.bin", f"{root.path}/t/sub"]
    assert fs.glob(url_of(root, "t/a.bin")) == [f"{root.path}/t/a.bin"]


def test_a_symlink_is_refused_in_one_line_never_followed(root: VolumeRoot) -> None:
    fs = filesystem(root)
    assert not fs.exists(url_of(root, "t/missing.bin"))  # absent is absent; a symlink is refused, not absent
    for look in (fs.info, fs.exists, fs.cat_file):
        with pytest.raises(VolumeReadError) as refused:
            look(url_of(root, "t/link.bin"))
        assert str(refused.value) == (
            f"cannot read {WHERE}/t/link.bin: {WHERE}/t/link.bin is a symbolic link now (no read follows a "
            "symlink inside a volume); load it again to list the folder again"
        )


def test_a_folder_swapped_for_a_symlink_is_not_walked_through(root: VolumeRoot, tmp_path: Path) -> None:
    fs = filesystem(root)
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "sub" / "b.bin").write_bytes(b"OUTSIDE!")
    (Path(root.path) / "t" / "sub").rename(tmp_path / "kept")
    (Path(root.path) / "t" / "sub").symlink_to(outside / "sub", target_is_directory=True)
    with pytest.raises(VolumeReadError, match=f"{WHERE}/t/sub is a symbolic link now"):
        fs.cat_file(url_of(root, "t/sub/b.bin"))


def test_paths_outside_the_volume_and_writes_are_refused(root: VolumeRoot, tmp_path: Path) -> None:
    fs = filesystem(root)
    with pytest.raises(FileNotFoundError, match="is not inside the volume"):
        fs.cat_file(f"{PROTOCOL}://{tmp_path}/secret.bin")
    with pytest.raises(FileNotFoundError, match="is not inside the volume"):
        fs.cat_file(url_of(root, "t/../../secret.bin"))
    with pytest.raises(PermissionError, match="read only"):
        fs.open(url_of(root, "t/new.bin"), "wb")
    assert not os.path.exists(Path(root.path) / "t" / "new.bin")


def test_a_fresh_interpreter_that_unpickles_the_options_reads_through_the_protocol(root: VolumeRoot) -> None:
    """As a spawned DataLoader worker given a streamed Hugging Face dataset: nothing of ours imported first."""
    options = base64.b64encode(pickle.dumps({PROTOCOL: {"volume": root}})).decode()
    script = (
        "import base64, json, pickle, sys, fsspec\n"
        "options = pickle.loads(base64.b64decode(sys.argv[1]))\n"
        "with fsspec.open(sys.argv[2], 'rb', **options) as f:\n"
        "    print(json.dumps(f.read().decode()))\n"
    )
    read, _ = run_python(script, options, url_of(root, "t/sub/b.bin"))
    assert read == "inside-b"
