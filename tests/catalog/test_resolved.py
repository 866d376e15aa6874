"""Resolved volume and storage paths carry a URL, options and a path; their fsspec filesystem is made
on first use, so gs:// and Azure volumes (read through object_store) resolve without gcsfs or adlfs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from uc_jupyter.catalog.embedded.local import LocalCatalog
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
