"""A local volume's pass read in place, through its public function: each file checked as it is handed
out (a symbolic link swapped in after the listing is never read), a decoder that reads open files fed
the descriptor the check opened, and each file counted as a resident hit."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from uc_jupyter.data import decode_bytes
from uc_jupyter.data.stream.stages import StageTimes
from uc_jupyter.data.volume.decode import DecodeError, Decoding
from uc_jupyter.data.volume.in_place import read_in_place
from uc_jupyter.data.volume.listing import RemoteFile
from uc_jupyter.storage.errors import VolumeReadError
from uc_jupyter.storage.local_volume import LocalVolume

WHERE = "/Volumes/main/ml/files"


@pytest.fixture
def volume(tmp_path: Path) -> LocalVolume:
    root = tmp_path / "volume"
    (root / "a").mkdir(parents=True)
    (root / "a" / "x.bin").write_bytes(b"xx")
    (root / "y.bin").write_bytes(b"yyy")
    (tmp_path / "secret.bin").write_bytes(b"sss")  # outside the volume
    return LocalVolume.below(str(root), str(root), where=WHERE)


FILES = [RemoteFile("a/x.bin", 2, "v"), RemoteFile("y.bin", 3, "v")]


@pytest.mark.parametrize("transform", [None, decode_bytes], ids=["paths", "through-descriptors"])
def test_each_file_is_checked_when_handed_out_and_a_symlink_swapped_in_is_never_read(
    volume: LocalVolume, transform: object
) -> None:
    counted: list[tuple[int, bool, bool]] = []
    decoding = Decoding(transform, WHERE, {})  # type: ignore[arg-type]
    items = read_in_place(FILES, [0, 1], volume, volume.path, decoding, lambda *c: counted.append(c), StageTimes())
    assert next(items) == (b"xx" if transform else f"{volume.path}/a/x.bin")
    target = Path(volume.path) / "y.bin"
    target.unlink()
    target.symlink_to(Path(volume.path).parent / "secret.bin")  # same size as the listed file
    with pytest.raises(VolumeReadError, match=rf"^cannot read {WHERE}/y\.bin"):
        next(items)
    assert counted == [(2, False, True)]  # a hit that is resident: nothing downloaded, nothing streamed


def test_labels_come_from_the_class_folder_and_the_positions_choose_the_files(volume: LocalVolume) -> None:
    decoding = Decoding(decode_bytes, WHERE, {"a": 7, "y.bin": 9})
    items = list(read_in_place(FILES, [1, 0, 1], volume, volume.path, decoding, lambda *c: None, StageTimes()))
    assert items == [(b"yyy", 9), (b"xx", 7), (b"yyy", 9)]


def test_a_file_that_fails_to_decode_names_its_volume_path_not_the_local_one(volume: LocalVolume) -> None:
    def fails(source: object) -> object:
        raise ValueError(f"cannot parse {source}")

    items = read_in_place(FILES, [1], volume, volume.path, Decoding(fails, WHERE, {}), lambda *c: None, StageTimes())
    failed = rf"^{WHERE}/y\.bin: .* could not decode it \(ValueError: cannot parse"
    with pytest.raises(DecodeError, match=failed) as raised:
        next(items)
    assert volume.path not in str(raised.value)


def test_the_check_is_the_fetch_stage_and_the_transform_the_decode_stage(volume: LocalVolume) -> None:
    def slow(source: object) -> object:
        time.sleep(0.02)  # the transform's own time, what the decode stage measures
        return source

    stages = StageTimes()
    list(read_in_place(FILES, [0, 1], volume, volume.path, Decoding(slow, WHERE, {}), lambda *c: None, stages))
    assert stages.decode >= 0.04 and 0 < stages.fetch < stages.decode and stages.collate == 0
