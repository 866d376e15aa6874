"""folder_storage and folder_writes (uc_jupyter.data.volume.folder): walked from the volume's own root."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import fsspec
import pytest

from uc_jupyter.catalog import Catalog
from uc_jupyter.data.volume.folder import folder_storage, folder_writes
from uc_jupyter.errors import EscapesVolume, NotFound
from uc_jupyter.storage.reads import VolumeStorage
from uc_jupyter.testing.catalogs import external_location

VolumeMaker = Callable[..., tuple[str, Path]]


def files_of(storage: VolumeStorage, *, recursive: bool = True) -> dict[str, int]:
    return {relative: size for page in storage.pages(recursive=recursive) for relative, size, _ in page.files}


@pytest.fixture
def volume(catalog: Catalog, local_volume: VolumeMaker) -> tuple[str, Path]:
    """A managed volume holding ``data/a.bin``, ``data/sub/b.bin`` and a top file ``top.bin``."""
    path, root = local_volume("v")
    (root / "data" / "sub").mkdir(parents=True)
    (root / "data" / "a.bin").write_bytes(b"A" * 3)
    (root / "data" / "sub" / "b.bin").write_bytes(b"B" * 5)
    (root / "top.bin").write_bytes(b"T")
    return path, root


def test_the_storage_of_a_folder_and_of_one_below_it(catalog: Catalog, volume: tuple[str, Path]) -> None:
    path, _ = volume
    resolved = catalog.resolve_volume_path(f"{path}/data")
    assert files_of(folder_storage(resolved)) == {"a.bin": 3, "sub/b.bin": 5}
    assert files_of(folder_storage(resolved, "sub")) == {"b.bin": 5}
    whole = catalog.resolve_volume_path(path)
    assert files_of(folder_storage(whole), recursive=False) == {"top.bin": 1}


def test_errors_below_a_folder_name_its_volumes_path(catalog: Catalog, volume: tuple[str, Path]) -> None:
    path, _ = volume
    resolved = catalog.resolve_volume_path(f"{path}/data")
    with pytest.raises(NotFound, match=rf"^{path}/data/nothing does not exist$"):
        files_of(folder_storage(resolved, "nothing"))
    with pytest.raises(NotADirectoryError, match=rf"^{path}/data/a.bin is a file, not a folder"):
        files_of(folder_storage(resolved, "a.bin"))


def test_a_symlink_inside_the_volume_is_not_followed_even_to_a_folder_of_it(
    catalog: Catalog, volume: tuple[str, Path]
) -> None:
    """The walk starts at the volume's root, not at the folder: a link on the way is refused, whether
    the resolved path or the ``below`` part holds it, and wherever it points."""
    path, root = volume
    os.symlink(root / "data", root / "alias")
    with pytest.raises(EscapesVolume, match=rf"^{path}/alias goes through the symbolic link {path}/alias;"):
        files_of(folder_storage(catalog.resolve_volume_path(f"{path}/alias")))
    with pytest.raises(EscapesVolume, match=rf"goes through the symbolic link {path}/alias;"):
        files_of(folder_storage(catalog.resolve_volume_path(path), "alias/sub"))
    writes = folder_writes(catalog.resolve_volume_path(f"{path}/alias"))
    assert writes is not None
    with pytest.raises(EscapesVolume, match="alias is a symbolic link or a file"):
        writes.read_bytes("a.bin")


@pytest.mark.parametrize("below", ["../../other", "../..", "sub/../../../v2"])
def test_a_sub_folder_that_climbs_out_of_the_volume_is_refused(
    catalog: Catalog, volume: tuple[str, Path], local_volume: VolumeMaker, below: str
) -> None:
    path, _ = volume
    _, other_root = local_volume("v2")
    (other_root / "secret.bin").write_bytes(b"S")
    resolved = catalog.resolve_volume_path(f"{path}/data")
    with pytest.raises(ValueError, match=rf"^cannot read {path}/data/{below}: .* is not below its volume's root"):
        folder_storage(resolved, below)


def test_a_sub_folder_with_dot_dot_that_stays_inside_is_read(catalog: Catalog, volume: tuple[str, Path]) -> None:
    path, _ = volume
    resolved = catalog.resolve_volume_path(f"{path}/data")
    assert files_of(folder_storage(resolved, "sub/../sub")) == {"b.bin": 5}


def test_the_writes_of_a_local_folder_read_its_files_by_key(catalog: Catalog, volume: tuple[str, Path]) -> None:
    path, root = volume
    writes = folder_writes(catalog.resolve_volume_path(f"{path}/data"))
    assert writes is not None
    assert writes.where == f"{path}/data" and writes.url == f"file://{root}/data"
    assert writes.read_bytes("sub/b.bin") == b"B" * 5
    assert writes.read_range("a.bin", 1, 10) == b"AA"
    with pytest.raises(FileNotFoundError, match=rf"^{path}/data/absent does not exist$"):
        writes.read_bytes("absent")


def test_a_storage_only_fsspec_serves_is_listed_and_has_no_writes(catalog: Catalog, tmp_path: Path) -> None:
    bucket = f"folder-{tmp_path.name}"
    fsspec.filesystem("memory").pipe(f"/{bucket}/data/x/a.bin", b"abc")
    external_location(catalog, f"memory://{bucket}")
    catalog.create_volume("main.ml.mem", f"memory://{bucket}/data")
    resolved = catalog.resolve_volume_path("/Volumes/main/ml/mem/x")
    assert folder_writes(resolved) is None
    assert files_of(folder_storage(resolved)) == {"a.bin": 3}
    with pytest.raises(NotFound, match=r"^/Volumes/main/ml/mem/x/nothing does not exist$"):
        files_of(folder_storage(resolved, "nothing"))
