"""A checkpoint's folder (uc_jupyter.checkpoint.folder): the privilege is checked before the storage is
opened, at the volume's own root, so a checkpoint and its siblings are keys of one store."""

from __future__ import annotations

from pathlib import Path

import pytest

from uc_jupyter.catalog import as_principal
from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.checkpoint.folder import open_folder


@pytest.fixture
def runs(catalog: LocalCatalog) -> Path:
    """Volume main.ml.runs (its folder on disk), which bob may read and not write."""
    info = catalog.create_volume("main.ml.runs")
    catalog.create_principal("bob")
    for securable, privilege in (("main", "USE CATALOG"), ("main.ml", "USE SCHEMA"), ("main.ml.runs", "READ VOLUME")):
        catalog.grant(securable, privilege, "bob")
    return Path(info.storage_location.removeprefix("file://"))


def test_a_folder_is_a_key_of_its_volumes_store(catalog: LocalCatalog, runs: Path) -> None:
    folder = open_folder("/Volumes/main/ml/runs/a/step-100", write=True, catalog=catalog)
    assert (folder.key, folder.parent_key, folder.volume) == ("a/step-100", "a", "/Volumes/main/ml/runs")
    assert folder.path_of(folder.parent_key) == "/Volumes/main/ml/runs/a"
    assert folder.path_of("") == "/Volumes/main/ml/runs"
    folder.writes.put_bytes(folder.file(".metadata"), b"m")  # the volume's root is the store's
    assert (runs / "a" / "step-100" / ".metadata").read_bytes() == b"m"
    assert folder.writes.list("a") == ["a/step-100/.metadata"]  # its siblings are listed from the same store


def test_the_privilege_is_checked_first_in_one_line_naming_path_and_principal(
    catalog: LocalCatalog, runs: Path
) -> None:
    step = "/Volumes/main/ml/runs/a/step-1"
    refused = rf"^cannot save the checkpoint {step}: bob lacks WRITE VOLUME on main\.ml\.runs$"
    with as_principal("bob"):
        assert open_folder(step, write=False, catalog=catalog).key == "a/step-1"
        with pytest.raises(PermissionError, match=refused):
            open_folder(step, write=True, catalog=catalog)
    assert not (runs / "a").exists()  # nothing was made


def test_the_volume_itself_is_no_checkpoint_folder_unless_asked(catalog: LocalCatalog, runs: Path) -> None:
    with pytest.raises(ValueError, match=r"^cannot use /Volumes/main/ml/runs itself as a checkpoint folder: give "):
        open_folder("/Volumes/main/ml/runs", write=True, catalog=catalog)
    whole = open_folder("/Volumes/main/ml/runs", write=False, catalog=catalog, whole_volume=True, what="run")
    assert (whole.key, whole.path_of(whole.key)) == ("", "/Volumes/main/ml/runs")
