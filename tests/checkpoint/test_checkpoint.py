"""UCVolumeWriter / UCVolumeReader / latest in one process (``no_dist``): save and load bit for bit on a
file:// and an s3:// volume, the commit marker, latest(), keep_last, immutability, and the refusals
(no marker, no privilege, tampered metadata). The ranks' own tests are in test_ranks.py."""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
import torch.distributed.checkpoint as dcp

from tests.checkpoint.conftest import assert_bit_equal, every_kind, load, save
from uc_jupyter.catalog import Catalog, as_principal
from uc_jupyter.checkpoint import UCVolumeReader, UCVolumeWriter, latest
from uc_jupyter.checkpoint.layout import StoredAt, load_metadata, saving_marker
from uc_jupyter.errors import UcJupyterWarning
from uc_jupyter.testing.s3_server import S3TestServer

pytestmark = pytest.mark.filterwarnings("ignore:torch.distributed is disabled:UserWarning")
Volume = Callable[..., tuple[str, Path]]


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.servers)])  # s3: the S3 test server
def volume(request: pytest.FixtureRequest) -> tuple[str, Path]:
    """(the /Volumes path of a fresh volume, its folder on disk), local or on the S3 test server."""
    made: tuple[str, Path] = request.getfixturevalue(f"{request.param}_volume")("ckpt")
    return made


@pytest.mark.in_a_fork
def test_save_then_load_gives_every_item_back_bit_for_bit(volume: tuple[str, Path]) -> None:
    path, folder = volume
    state = every_kind(1)
    save(f"{path}/run/step-1", state, file_bytes=4096)  # small files: several per rank
    assert_bit_equal(load(f"{path}/run/step-1", state), state)
    files = sorted(os.listdir(folder / "run/step-1"))
    assert {".metadata", "_COMMITTED"} <= set(files)
    assert len([f for f in files if f.endswith(".distcp")]) >= 2
    marker = json.loads((folder / "run/step-1/_COMMITTED").read_bytes())
    assert marker["format"] == "uc-jupyter-checkpoint" and abs(marker["committed_at"] - time.time()) < 600
    assert marker["files"] == {f: (folder / "run/step-1" / f).stat().st_size for f in files if f != "_COMMITTED"}
    assert latest(f"{path}/run") == f"{path}/run/step-1"


@pytest.mark.in_a_fork
def test_latest_is_the_newest_commit_and_never_an_unfinished_save(volume: tuple[str, Path]) -> None:
    path, folder = volume
    assert latest(f"{path}/run") is None
    save(f"{path}/run/step-9", every_kind(9))
    save(f"{path}/run/step-10", every_kind(10))  # sorts before step-9 by name: the marker's time decides
    assert latest(f"{path}/run") == f"{path}/run/step-10"
    unfinished = folder / "run/step-11"  # a save that stopped before its marker: data and metadata only
    unfinished.mkdir()
    for name in ("__0_0.distcp", ".metadata"):
        (unfinished / name).write_bytes((folder / "run/step-10" / name).read_bytes())
    assert latest(f"{path}/run") == f"{path}/run/step-10"
    with pytest.raises(
        FileNotFoundError, match=r"step-11 holds no committed checkpoint .*latest\('/Volumes/main/ml/ckpt/run'\)"
    ):
        UCVolumeReader(f"{path}/run/step-11")
    assert latest(path) is None  # the volume's root holds no checkpoint folder itself


@pytest.mark.in_a_fork
def test_latest_never_returns_a_checkpoint_missing_a_file_its_marker_names(volume: tuple[str, Path]) -> None:
    path, folder = volume
    for step in (1, 2):
        save(f"{path}/run/step-{step}", every_kind(step))
    assert latest(f"{path}/run") == f"{path}/run/step-2"
    next((folder / "run/step-2").glob("*.distcp")).unlink()  # deleted after its commit: a load would fail
    assert latest(f"{path}/run") == f"{path}/run/step-1"
    metadata = folder / "run/step-1/.metadata"
    metadata.write_bytes(metadata.read_bytes()[:-1])  # cut short
    assert latest(f"{path}/run") is None


@pytest.mark.in_a_fork
def test_keep_last_removes_older_checkpoints_only_after_its_own_commit(volume: tuple[str, Path]) -> None:
    path, folder = volume
    for step in (1, 2):
        save(f"{path}/run/step-{step}", every_kind(step))
    (folder / "run/step-1/notes.txt").write_text("mine")  # not a checkpoint's file: stays
    leftover = folder / "run/step-0"  # a save of ours that never committed, older than the next save
    leftover.mkdir()
    (leftover / "__0_0.distcp").write_bytes(b"partial")
    (leftover / "_SAVING").write_bytes(saving_marker("an-old-save", began=time.time() - 3600))
    for name in ("__0_0.distcp", "_SAVING"):
        os.utime(leftover / name, (time.time() - 3600, time.time() - 3600))
    save(f"{path}/run/step-3", every_kind(3), keep_last=2)
    assert sorted(os.listdir(folder / "run/step-1")) == ["notes.txt"]
    assert not leftover.exists() or os.listdir(leftover) == []  # file://: the emptied folder goes too
    assert latest(f"{path}/run") == f"{path}/run/step-3"
    assert_bit_equal(load(f"{path}/run/step-2", every_kind(2)), every_kind(2))  # kept
    with pytest.raises(FileNotFoundError, match="holds no committed checkpoint"):
        UCVolumeReader(f"{path}/run/step-1")


def _aged(folder: Path) -> Path:
    """``folder``, its files dated an hour ago: older than any save that begins now."""
    for name in os.listdir(folder):
        os.utime(folder / name, (time.time() - 3600, time.time() - 3600))
    return folder


def test_keep_last_leaves_folders_it_did_not_write_alone(local_volume: Volume) -> None:
    path, folder = local_volume("ckpt")
    native = folder / "run/native"  # torch's own FileSystemWriter's checkpoint: .metadata, __0_0.distcp
    dcp.save(every_kind(1), checkpoint_id=native, no_dist=True)
    garbled = folder / "run/garbled"  # a marker that does not parse: whatever it is, it is not ours to remove
    garbled.mkdir()
    (garbled / "__0_0.distcp").write_bytes(b"someone's")
    (garbled / "_COMMITTED").write_bytes(b"{not json")
    not_ours = folder / "run/not-ours"  # an in-progress marker that does not parse
    not_ours.mkdir()
    (not_ours / ".metadata").write_bytes(b"someone's")
    (not_ours / "_SAVING").write_bytes(b"saving, but not with uc_jupyter")
    before = {
        kept: {name: (kept / name).read_bytes() for name in os.listdir(_aged(kept))}
        for kept in (native, garbled, not_ours)
    }
    save(f"{path}/run/step-1", every_kind(1))
    save(f"{path}/run/step-2", every_kind(2), keep_last=1)
    assert {kept: {name: (kept / name).read_bytes() for name in os.listdir(kept)} for kept in before} == before
    assert sorted(os.listdir(folder / "run")) == ["garbled", "native", "not-ours", "step-2"]


def test_keep_last_right_inside_the_volume_is_refused(local_volume: Volume) -> None:
    path, folder = local_volume("ckpt")
    (folder / "other").mkdir()
    (folder / "other/__0_0.distcp").write_bytes(b"another project's")
    with pytest.raises(ValueError, match=r"^keep_last=2: /Volumes/main/ml/ckpt/step-1 lies right inside the volume "):
        UCVolumeWriter(f"{path}/step-1", keep_last=2)
    writer = UCVolumeWriter(f"{path}/run/step-1", keep_last=2)
    with pytest.raises(
        ValueError, match=r"^keep_last=2: .*save into a run folder, e.g. /Volumes/main/ml/ckpt/run/step-100$"
    ):
        writer.reset(f"{path}/step-1")
    save(f"{path}/step-1", every_kind(1))  # without keep_last a checkpoint may lie there
    assert (folder / "other/__0_0.distcp").read_bytes() == b"another project's"


def test_a_sibling_the_storage_cannot_address_is_skipped_by_keep_last(local_volume: Volume) -> None:
    path, folder = local_volume("ckpt")
    odd = folder / "run/step\\0"  # a backslash: a local name no key may hold
    odd.mkdir(parents=True)
    (odd / "__0_0.distcp").write_bytes(b"partial")
    (odd / "_SAVING").write_bytes(saving_marker("an-old-save", began=time.time() - 3600))
    _aged(odd)
    save(f"{path}/run/step-1", every_kind(1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # skipped: neither an error nor a warning
        warnings.filterwarnings("ignore", "torch.distributed is disabled", UserWarning)
        save(f"{path}/run/step-2", every_kind(2), keep_last=1)
    assert sorted(os.listdir(odd)) == ["_SAVING", "__0_0.distcp"]
    assert sorted(os.listdir(folder / "run")) == ["step-2", "step\\0"]


@pytest.mark.in_a_fork
def test_a_prune_that_fails_after_the_commit_is_a_warning_not_a_failed_save(
    s3_volume: Volume, s3: S3TestServer
) -> None:
    path, folder = s3_volume("ckpt")
    save(f"{path}/run/step-1", every_kind(1))
    s3.configure(fail_first=1000, fail_status=403)  # every read of an object is refused from now on
    with pytest.warns(
        UcJupyterWarning, match=r"^\S+/run/step-2 is committed, but removing older checkpoint files failed "
    ):
        save(f"{path}/run/step-2", every_kind(2), keep_last=1)
    s3.configure(fail_first=0, fail_status=503)
    assert latest(f"{path}/run") == f"{path}/run/step-2"
    assert_bit_equal(load(f"{path}/run/step-2", every_kind(2)), every_kind(2))
    assert (folder / "run/step-1/_COMMITTED").exists()  # left, as the warning says


def test_a_committed_checkpoint_is_immutable(local_volume: Volume) -> None:
    path, folder = local_volume("ckpt")
    save(f"{path}/run/step-1", every_kind(1))
    before = {f: (folder / "run/step-1" / f).read_bytes() for f in os.listdir(folder / "run/step-1")}
    with pytest.raises(FileExistsError, match=r"^/Volumes/main/ml/ckpt/run/step-1 is a committed checkpoint already"):
        UCVolumeWriter(f"{path}/run/step-1")
    writer = UCVolumeWriter(f"{path}/run/step-2")
    with pytest.raises(FileExistsError, match="step-1 is a committed checkpoint already"):
        writer.reset(f"{path}/run/step-1")
    assert {f: (folder / "run/step-1" / f).read_bytes() for f in os.listdir(folder / "run/step-1")} == before


def test_a_save_into_an_unfinished_folder_replaces_its_leftovers(local_volume: Volume) -> None:
    path, folder = local_volume("ckpt")
    stale = folder / "run/step-1"
    stale.mkdir(parents=True)
    for name in ("__0_0.distcp", "__1_0.distcp", "__2_7.distcp", ".metadata"):  # a 3-rank attempt that died
        (stale / name).write_bytes(b"stale")
    save(f"{path}/run/step-1", every_kind(1))
    assert_bit_equal(load(f"{path}/run/step-1", every_kind(1)), every_kind(1))
    assert sorted(os.listdir(stale)) == [".metadata", "_COMMITTED", "__0_0.distcp"]


def test_no_write_volume_no_save_no_read_volume_no_load(catalog: Catalog, local_volume: Volume) -> None:
    path, folder = local_volume("ckpt")
    save(f"{path}/run/step-1", every_kind(1))
    catalog.create_principal("bob")
    catalog.grant("main", "USE CATALOG", "bob")
    catalog.grant("main.ml", "USE SCHEMA", "bob")
    with as_principal("bob"):
        with pytest.raises(
            PermissionError,
            match=r"^cannot save the checkpoint /Volumes/\S+/run/step-2: bob lacks WRITE VOLUME on main.ml.ckpt$",
        ):
            UCVolumeWriter(f"{path}/run/step-2")
        with pytest.raises(
            PermissionError,
            match=r"^cannot load the checkpoint /Volumes/\S+/run/step-1: bob lacks READ VOLUME on main.ml.ckpt$",
        ):
            UCVolumeReader(f"{path}/run/step-1")
        with pytest.raises(PermissionError, match="bob lacks READ VOLUME"):
            latest(f"{path}/run")
    assert not (folder / "run/step-2").exists()
    catalog.grant("main.ml.ckpt", "READ VOLUME", "bob")
    with as_principal("bob"):
        assert_bit_equal(load(f"{path}/run/step-1", every_kind(1)), every_kind(1))
        with pytest.raises(PermissionError, match="bob lacks WRITE VOLUME"):
            UCVolumeWriter(f"{path}/run/step-2")


class _Boom:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, ("touch pwned",))


def test_metadata_that_is_not_a_checkpoint_s_is_refused_without_running_it(
    local_volume: Volume, tmp_path: Path
) -> None:
    path, folder = local_volume("ckpt")
    save(f"{path}/run/step-1", every_kind(1))
    (folder / "run/step-1/.metadata").write_bytes(pickle.dumps(_Boom()))
    os.chdir(tmp_path)
    with pytest.raises(
        ValueError, match=r"step-1/.metadata is not a checkpoint's metadata \(UnpicklingError: posix.system\)"
    ):
        load(f"{path}/run/step-1", every_kind(1))
    assert not (tmp_path / "pwned").exists()


def test_bad_arguments_are_refused_in_one_line(local_volume: Volume) -> None:
    path, _ = local_volume("ckpt")
    for wrong in (0, True, 2.0, "3"):  # True is an int to Python: never "keep 1"
        with pytest.raises(ValueError, match=f"^keep_last={wrong!r}: give a number of checkpoints >= 1, or None"):
            UCVolumeWriter(f"{path}/run/step-1", keep_last=wrong)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"cannot use /Volumes/main/ml/ckpt itself as a checkpoint folder"):
        UCVolumeWriter(path)


@pytest.mark.parametrize("module", ["uc_jupyter.checkpoint.layout", "uc_jupyter.storage.writes"])
def test_the_pure_modules_examples_run(module: str) -> None:
    import doctest
    import importlib

    failed, attempted = doctest.testmod(importlib.import_module(module))
    assert failed == 0 and attempted > 0


def crafted(folder: Path, change: Callable[[StoredAt], StoredAt]) -> None:
    """Rewrite the checkpoint's ``.metadata`` with ``change`` applied to its first item's place."""
    metadata = load_metadata((folder / ".metadata").read_bytes(), str(folder))
    first = next(iter(metadata.storage_data))
    metadata.storage_data[first] = change(metadata.storage_data[first])
    (folder / ".metadata").write_bytes(pickle.dumps(metadata))


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda at: dataclasses.replace(at, length=1 << 46), r"lies at bytes .* of __0_0\.distcp, which holds [\d,]+:"),
        (lambda at: dataclasses.replace(at, offset=1 << 46), r"lies at bytes 70,368,744,177,664 to"),
        (lambda at: dataclasses.replace(at, length=-5), r"lies at offset \d+, length -5: the checkpoint is damaged"),
        (lambda at: dataclasses.replace(at, file="__9_9.distcp"), r"lies in __9_9\.distcp, which is not there"),
    ],
)
def test_a_crafted_metadata_is_refused_before_anything_is_read_or_allocated(
    local_volume: Volume, change: Callable[[StoredAt], StoredAt], said: str
) -> None:
    """Before: a declared length of 2^46 made the reader ask for reads until MemoryError (113 s)."""
    path, folder = local_volume("ckpt")
    save(f"{path}/run/step-1", every_kind(1))
    crafted(folder / "run/step-1", change)
    with pytest.raises(ValueError, match=said) as caught:
        UCVolumeReader(f"{path}/run/step-1")
    assert "\n" not in str(caught.value) and str(caught.value).startswith(f"{path}/run/step-1/.metadata: item ")
