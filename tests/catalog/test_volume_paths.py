"""uc_jupyter.catalog.volume_paths: where a checked /Volumes path lies in its volume's storage."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

import pytest

from uc_jupyter.catalog.model import EscapesVolume, VolumeInfo
from uc_jupyter.catalog.rules.names import parse_volume_path
from uc_jupyter.catalog.volume_paths import open_volume_path

CREATED = datetime(2024, 1, 1, tzinfo=timezone.utc)


def volume(storage_location: str, volume_type: str = "EXTERNAL") -> VolumeInfo:
    return VolumeInfo("main", "ml", "raw", "alice", volume_type, storage_location, CREATED)  # type: ignore[arg-type]


@pytest.fixture
def local(tmp_path: Path) -> tuple[VolumeInfo, Path]:
    """A local volume over tmp_path/vol (as stored: resolved), with a file and a sub folder."""
    root = (tmp_path / "vol").resolve()
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("a")
    return volume(f"file://{root}", "MANAGED"), root


def test_an_object_store_path_is_the_key_below_the_volume_and_its_url() -> None:
    info = volume("s3://lake/raw")
    resolved = open_volume_path(parse_volume_path("/Volumes/main/ml/raw/a/b.png"), info, {"key": "AK"})
    assert (resolved.path, resolved.url) == ("lake/raw/a/b.png", "s3://lake/raw/a/b.png")
    assert resolved.volume_path == "/Volumes/main/ml/raw/a/b.png"
    assert resolved.volume == info and resolved.relative == "a/b.png"


def test_the_volume_root_is_its_storage_location_itself() -> None:
    resolved = open_volume_path(parse_volume_path("/Volumes/main/ml/raw/"), volume("s3://lake/raw/"), {})
    assert (resolved.path, resolved.url, resolved.relative) == ("lake/raw", "s3://lake/raw/", "")


def test_the_vendors_options_never_reach_the_filesystem() -> None:
    options = {"key": "AK", "secret": "S", "vending": "static", "role_arn": "arn:aws:iam::1:role/r", "external_id": "x"}
    resolved = open_volume_path(parse_volume_path("/Volumes/main/ml/raw/a"), volume("s3://lake/raw"), options)
    assert resolved.storage_options == {"key": "AK", "secret": "S"}
    assert "vending" in options  # the caller's dict is left as it was


def test_a_local_path_inside_the_volume_opens_there(local: tuple[VolumeInfo, Path]) -> None:
    info, root = local
    for relative in ("a.txt", "sub", "sub/not/yet/written.bin"):  # a file still to be written is inside too
        resolved = open_volume_path(parse_volume_path(f"/Volumes/main/ml/raw/{relative}"), info, {})
        assert resolved.path == f"{root}/{relative}"
        assert resolved.url == f"file://{root}/{relative}"
    assert open_volume_path(parse_volume_path("/Volumes/main/ml/raw/a.txt"), info, {}).fs.cat_file(f"{root}/a.txt") == (
        b"a"
    )


def test_a_symlink_that_stays_inside_the_volume_is_followed(local: tuple[VolumeInfo, Path]) -> None:
    info, root = local
    (root / "sub" / "link").symlink_to(root / "a.txt")
    resolved = open_volume_path(parse_volume_path("/Volumes/main/ml/raw/sub/link"), info, {})
    assert resolved.path == f"{root}/sub/link"


@pytest.mark.parametrize(
    "target",
    [
        "outside.txt",  # a file beside the volume
        "vol2",  # a sibling whose name only starts like the volume's
        "vol2/secret.txt",
        ".",  # the folder holding the volume
        "/etc/passwd",
        "missing",  # a dangling link out is refused too: a write through it would land outside
    ],
)
def test_a_symlink_leading_out_of_the_volume_is_refused(local: tuple[VolumeInfo, Path], target: str) -> None:
    info, root = local
    parent = root.parent
    (parent / "outside.txt").write_text("secret")
    (parent / "vol2").mkdir(exist_ok=True)
    (parent / "vol2" / "secret.txt").write_text("secret")
    (root / "sub" / "out").symlink_to(target if target.startswith("/") else parent / target)
    for relative in ("sub/out", "sub/out/deeper.txt"):
        with pytest.raises(EscapesVolume, match=r"/Volumes/main/ml/raw/sub/out.* leads outside volume main\.ml\.raw"):
            open_volume_path(parse_volume_path(f"/Volumes/main/ml/raw/{relative}"), info, {})


def test_a_symlinked_folder_out_refuses_every_path_below_it(local: tuple[VolumeInfo, Path], tmp_path: Path) -> None:
    info, root = local
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "deep").mkdir(parents=True)
    os.symlink(elsewhere, root / "escape")
    for relative in ("escape", "escape/deep", "escape/deep/new.bin"):
        with pytest.raises(EscapesVolume):
            open_volume_path(parse_volume_path(f"/Volumes/main/ml/raw/{relative}"), info, {})
