"""Attacks on checkpoints in a local volume: folders swapped for symlinks to outside (before a save,
between making the writer and saving, under keep_last's pruning), a marker that is a symlink, and
other spellings of a checkpoint's path. No write, delete or read ever lands outside the volume."""

from __future__ import annotations

import os
import pickle
import re
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.distributed.checkpoint as dcp

from uc_jupyter.catalog import InvalidName
from uc_jupyter.catalog.embedded.local import EscapesVolume, LocalCatalog
from uc_jupyter.checkpoint import UCVolumeReader, UCVolumeWriter, latest

pytestmark = pytest.mark.filterwarnings("ignore:torch.distributed is disabled:UserWarning")
Volume = Callable[[], tuple[str, Path]]


@pytest.fixture
def volume(catalog: LocalCatalog) -> Volume:
    def make() -> tuple[str, Path]:
        info = catalog.create_volume("main.ml.ckpt")
        return info.path, Path(info.storage_location.removeprefix("file://"))

    return make


def state() -> dict[str, object]:
    return {"w": torch.arange(1000.0), "step": 7}


def save(writer: UCVolumeWriter) -> None:
    dcp.save(state(), storage_writer=writer, no_dist=True)


def outside_with_a_checkpoint(tmp_path: Path) -> Path:
    """A folder outside every volume holding files named as a checkpoint's are."""
    outside = tmp_path / "outside"
    outside.mkdir()
    for name in ("__0_0.distcp", ".metadata", "keep.txt"):
        (outside / name).write_bytes(b"not yours")
    return outside


def test_a_run_folder_swapped_for_a_symlink_before_the_save(volume: Volume, tmp_path: Path) -> None:
    path, folder = volume()
    outside = outside_with_a_checkpoint(tmp_path)
    os.symlink(outside, folder / "run")
    with pytest.raises(EscapesVolume, match=r"step-1 leads outside volume main.ml.ckpt \(through a symlink\)"):
        UCVolumeWriter(f"{path}/run/step-1")  # the catalog's own check, before anything is written
    assert sorted(os.listdir(outside)) == [".metadata", "__0_0.distcp", "keep.txt"]
    assert all((outside / name).read_bytes() == b"not yours" for name in os.listdir(outside))


def test_a_step_folder_swapped_between_the_writer_and_the_save(volume: Volume, tmp_path: Path) -> None:
    path, folder = volume()
    outside = outside_with_a_checkpoint(tmp_path)
    writer = UCVolumeWriter(f"{path}/run/step-1")  # checked and resolved now
    (folder / "run").mkdir()
    os.symlink(outside, folder / "run/step-1")  # swapped in afterwards
    with pytest.raises(dcp.api.CheckpointException, match="step-1 is a symbolic link"):
        save(writer)
    assert sorted(os.listdir(outside)) == [".metadata", "__0_0.distcp", "keep.txt"]
    assert latest(f"{path}/run") is None


def test_keep_last_never_prunes_through_a_symlinked_sibling(volume: Volume, tmp_path: Path) -> None:
    path, folder = volume()
    outside = outside_with_a_checkpoint(tmp_path)
    os.utime(outside / "__0_0.distcp", (0, 0))  # old enough to look like an abandoned save
    save(UCVolumeWriter(f"{path}/run/step-1"))
    os.symlink(outside, folder / "run/step-0")
    save(UCVolumeWriter(f"{path}/run/step-2", keep_last=1))
    assert sorted(os.listdir(outside)) == [".metadata", "__0_0.distcp", "keep.txt"]
    assert not (folder / "run/step-1").exists()
    assert latest(f"{path}/run") == f"{path}/run/step-2"


def test_a_marker_that_is_a_symlink_commits_nothing(volume: Volume, tmp_path: Path) -> None:
    path, folder = volume()
    save(UCVolumeWriter(f"{path}/run/step-1"))
    forged = folder / "run/step-2"
    forged.mkdir()
    for name in ("__0_0.distcp", ".metadata"):
        (forged / name).write_bytes((folder / "run/step-1" / name).read_bytes())
    os.symlink(folder / "run/step-1/_COMMITTED", forged / "_COMMITTED")
    assert latest(f"{path}/run") == f"{path}/run/step-1"  # the listing does not count a symlink
    with pytest.raises(EscapesVolume, match=r"step-2/_COMMITTED: it is a symbolic link"):
        UCVolumeReader(f"{path}/run/step-2")


@pytest.mark.parametrize(
    ("spelling", "error"),
    [
        ("/Volumes/main/ml/ckpt/run/../../other/step-1", InvalidName),
        ("/Volumes/main/ml/ckpt//run/step-1", InvalidName),
        ("/Volumes/main/ml/ckpt/run/step-1\0", InvalidName),
        ("/tmp/run/step-1", InvalidName),
        ("/Volumes/main/ml/ckpt", ValueError),
    ],
)
def test_other_spellings_of_a_checkpoint_path_are_refused(volume: Volume, spelling: str, error: type) -> None:
    volume()
    with pytest.raises(error) as raised:
        UCVolumeWriter(spelling)
    assert "\n" not in str(raised.value)


def test_a_differently_cased_path_names_the_same_checkpoint(volume: Volume) -> None:
    path, folder = volume()
    save(UCVolumeWriter("/Volumes/MAIN/ml/Ckpt/run/step-1"))
    assert latest(f"{path}/run") == f"{path}/run/step-1"
    assert (folder / "run/step-1/_COMMITTED").is_file()
    with pytest.raises(FileExistsError, match="committed checkpoint already"):
        UCVolumeWriter(f"{path}/run/step-1")


class _Planted:
    """An object whose unpickling runs a command: what someone who may write the volume could plant."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, (f"touch {self.marker}",))


def test_a_planted_pickle_among_the_items_does_not_run_on_load(volume: Volume, tmp_path: Path) -> None:
    path, _ = volume()
    ran = tmp_path / "ran"
    dcp.save(
        {"w": torch.arange(4.0), "extra": _Planted(ran)},
        storage_writer=UCVolumeWriter(f"{path}/run/step-1"),
        no_dist=True,
    )
    assert not ran.exists()
    target: dict[str, object] = {"w": torch.zeros(4), "extra": None}
    with pytest.raises(dcp.api.CheckpointException, match=r"item 'extra' is a pickle of more than plain values"):
        dcp.load(target, storage_reader=UCVolumeReader(f"{path}/run/step-1"), no_dist=True)
    assert not ran.exists()
    plain: dict[str, object] = {"w": torch.zeros(4)}  # a state dict that does not ask for it loads
    dcp.load(plain, storage_reader=UCVolumeReader(f"{path}/run/step-1"), no_dist=True)
    assert torch.equal(plain["w"], torch.arange(4.0))  # type: ignore[arg-type]
    dcp.load(target, storage_reader=UCVolumeReader(f"{path}/run/step-1", trust_pickles=True), no_dist=True)
    assert ran.exists()  # the opt-in does what it says


def _stack_global_call(module: str, name: str, argument: str) -> bytes:
    """A protocol-4 pickle that looks up ``module``'s ``name`` with STACK_GLOBAL and calls it with ``argument``."""

    def text(value: str) -> bytes:
        encoded = value.encode()
        return pickle.SHORT_BINUNICODE + bytes([len(encoded)]) + encoded

    return (
        pickle.PROTO + b"\x04" + text(module) + text(name) + pickle.STACK_GLOBAL
        + text(argument) + pickle.TUPLE1 + pickle.REDUCE + pickle.STOP
    )  # fmt: skip


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("torch.distributed.checkpoint.metadata", "os.system"),  # a dotted name walks to os.system
        ("torch.distributed.checkpoint.metadata", "torch.load"),
        ("torch.distributed.checkpoint.metadata", "os"),  # a module the metadata module imports
        ("torch", "load"),
        ("posix", "system"),
    ],
)
def test_a_planted_metadata_naming_a_callable_does_not_run(
    volume: Volume, tmp_path: Path, module: str, name: str
) -> None:
    path, folder = volume()
    save(UCVolumeWriter(f"{path}/run/step-1"))
    ran = tmp_path / "ran"
    argument = f"touch {ran}" if name.endswith("system") else str(ran)
    (folder / "run/step-1/.metadata").write_bytes(_stack_global_call(module, name, argument))
    refusal = f"step-1/.metadata is not a checkpoint's metadata (UnpicklingError: {module}.{name})"
    with pytest.raises(ValueError, match=re.escape(refusal)) as refused:
        UCVolumeReader(f"{path}/run/step-1")
    assert "\n" not in str(refused.value)
    assert not ran.exists()


def test_a_planted_metadata_that_breaks_an_allowed_call_is_refused_in_one_line(volume: Volume) -> None:
    path, folder = volume()
    save(UCVolumeWriter(f"{path}/run/step-1"))
    (folder / "run/step-1/.metadata").write_bytes(_stack_global_call("torch.serialization", "_get_layout", "nope"))
    with pytest.raises(ValueError, match=r"step-1/.metadata is not a checkpoint's metadata \(KeyError: 'nope'\)"):
        UCVolumeReader(f"{path}/run/step-1")
