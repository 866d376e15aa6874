"""Resolved volume and storage paths carry a URL, options and a path; their fsspec filesystem is made
on first use, so gs:// and Azure volumes (read through object_store) resolve without gcsfs or adlfs;
open() reads a local file by a walk from its root that follows no symlink swapped in after the resolve."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.storage.errors import VolumeReadError
from uc_jupyter.testing.catalogs import external_location


@pytest.fixture
def cat(main_ml: LocalCatalog) -> LocalCatalog:
    return main_ml


@pytest.mark.parametrize(
    ("location", "path", "package", "options"),
    [
        ("gs://lake/images", "lake/images/c0/a.png", "gcsfs", {"token": "/keys/service-account.json"}),
        ("az://raw/images", "raw/images/c0/a.png", "adlfs", {"account_name": "lake", "account_key": "a2V5"}),
        ("abfss://raw@lake.dfs.core.windows.net/images", "raw/images/c0/a.png", "adlfs|abfss", {"account_key": "a2V5"}),
    ],
)
def test_cloud_volumes_resolve_without_their_fsspec_package(
    cat: LocalCatalog, location: str, path: str, package: str, options: dict[str, str]
) -> None:
    external_location(cat, location.rsplit("/", 1)[0], options)  # each its store's own options
    cat.create_volume("main.ml.images", location)
    resolved = cat.resolve_volume_path("/Volumes/main/ml/images/c0/a.png")
    assert (resolved.url, resolved.path) == (f"{location}/c0/a.png", path)
    assert resolved.storage_options == options
    with pytest.raises((ImportError, ValueError), match=package):
        resolved.fs  # noqa: B018  (asked for: only then is the filesystem made)
    on_path = cat.resolve_storage_path(location.rsplit("/", 1)[0] + "/other/x.bin")
    assert on_path.path.endswith("/other/x.bin")


def test_a_local_volumes_filesystem_is_made_once_per_resolution(cat: LocalCatalog, tmp_path: Path) -> None:
    root = tmp_path / "data"
    (root / "images").mkdir(parents=True)
    (root / "images" / "a.txt").write_text("hello")
    external_location(cat, str(root))
    cat.create_volume("main.ml.images", str(root / "images"))
    resolved = cat.resolve_volume_path("/Volumes/main/ml/images/a.txt")
    assert resolved.fs is resolved.fs and resolved.fs.cat_file(resolved.path) == b"hello"
    renewed = dataclasses.replace(resolved, expires_at=None)
    assert renewed == resolved and renewed.fs.cat_file(renewed.path) == b"hello"


@pytest.fixture
def labels(cat: LocalCatalog, tmp_path: Path) -> Path:
    """A local volume main.ml.images holding sub/labels.csv, and the same file in the folder raw/ of its
    external location (a file read by its storage path); returns the volume's folder."""
    root = tmp_path / "data"
    for folder in ("images", "raw"):
        (root / folder / "sub").mkdir(parents=True)
        (root / folder / "sub" / "labels.csv").write_text("path,label\n")
    external_location(cat, str(root))
    cat.create_volume("main.ml.images", str(root / "images"))
    return root / "images"


def test_open_reads_the_file_resolved(cat: LocalCatalog, labels: Path) -> None:
    with cat.resolve_volume_path("/Volumes/main/ml/images/sub/labels.csv").open() as handle:
        assert handle.read() == b"path,label\n"
    with cat.resolve_storage_path(f"file://{labels.parent}/raw/sub/labels.csv").open() as handle:
        assert handle.read() == b"path,label\n"


@pytest.mark.parametrize("swapped", ["sub/labels.csv", "sub"])
def test_open_refuses_a_symlink_swapped_in_after_the_resolve(
    cat: LocalCatalog, labels: Path, tmp_path: Path, swapped: str
) -> None:
    resolved = cat.resolve_volume_path("/Volumes/main/ml/images/sub/labels.csv")
    raw = labels.parent / "raw"
    on_path = cat.resolve_storage_path(f"file://{raw}/sub/labels.csv")
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "sub" / "labels.csv").write_text("OUTSIDE!!!\n")  # as many bytes
    for folder in (labels, raw):
        (folder / swapped).rename(tmp_path / f"moved-{folder.name}")
        (folder / swapped).symlink_to(outside / swapped)
    with pytest.raises(VolumeReadError) as refused:
        resolved.open()
    assert str(refused.value) == (
        f"cannot read /Volumes/main/ml/images/sub/labels.csv: /Volumes/main/ml/images/{swapped} is a symbolic "
        "link now (no read follows a symlink inside a volume); resolve the path again to read what it holds now"
    )
    with pytest.raises(VolumeReadError, match=f"^cannot read file://{raw}/sub/labels.csv: .* is a symbolic link now"):
        on_path.open()


def test_open_refuses_the_volume_itself_and_a_folder(cat: LocalCatalog, labels: Path) -> None:
    with pytest.raises(IsADirectoryError, match="^/Volumes/main/ml/images is a volume, not a file"):
        cat.resolve_volume_path("/Volumes/main/ml/images").open()
    with pytest.raises(VolumeReadError, match="sub: it is not a regular file now"):
        cat.resolve_volume_path("/Volumes/main/ml/images/sub").open()
