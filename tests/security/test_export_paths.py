"""Attacks on export folders: a manifest edited to name files outside its export, symlinks swapped into a
local export folder, and exports aimed through symlinks. Nothing outside the export's own prefix is read
or written, and each refusal is one line."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from uc_jupyter.catalog.embedded.local import EscapesVolume, LocalCatalog
from uc_jupyter.data import UCVolumeDataset
from uc_jupyter.data.volume.committed import ExportIncomplete
from uc_jupyter.storage.errors import VolumeReadError
from uc_jupyter.storage.export_manifest import MANIFEST, ExportFile, Manifest, ManifestError, new_export_id
from uc_jupyter.tables import export_table, load_hf_dataset
from uc_jupyter.testing.catalogs import external_location
from uc_jupyter.testing.s3_server import S3TestServer

VolumeMaker = Callable[..., tuple[str, Path]]
OUTSIDE_IDS = [0, 2, 4, 6, 8]  # another file's rows, in a Parquet file as large as write_export's


@pytest.fixture
def local_volume(catalog: LocalCatalog) -> VolumeMaker:
    """Make a managed volume; returns (its /Volumes path, its folder on disk)."""

    def make(name: str) -> tuple[str, Path]:
        info = catalog.create_volume(f"main.ml.{name}")
        return info.path, Path(info.storage_location.removeprefix("file://"))

    return make


def write_export(folder: Path) -> Manifest:
    """A committed export of one Parquet file (ids 0..4) in ``folder``."""
    manifest = Manifest(new_export_id(), "main.ml.t", 0, (ExportFile("part-00000.parquet", 0, 5),))
    prefix = folder / manifest.prefix
    prefix.mkdir(parents=True)
    pq.write_table(pa.table({"id": list(range(5))}), prefix / "part-00000.parquet")
    size = (prefix / "part-00000.parquet").stat().st_size
    manifest = Manifest(manifest.id, manifest.table, 0, (ExportFile("part-00000.parquet", size, 5),))
    (folder / MANIFEST).write_bytes(manifest.to_bytes())
    return manifest


def edit(folder: Path, **changes: object) -> None:
    body = json.loads((folder / MANIFEST).read_text())
    for key, value in changes.items():
        if key == "name":
            body["files"][0]["name"] = value
        else:
            body[key] = value
    (folder / MANIFEST).write_text(json.dumps(body))


@pytest.mark.parametrize(
    "name",
    ["../../other/secret.parquet", "/etc/passwd", "sub/part-00000.parquet", "..", ".hidden.parquet", "a\\..\\b", ""],
)
def test_a_manifest_naming_a_file_outside_its_export_is_refused(
    catalog: LocalCatalog, local_volume: VolumeMaker, name: str
) -> None:
    path, folder = local_volume("exports")
    write_export(folder / "t")
    secret = folder / "other" / "secret.parquet"  # a file the edited name would reach, of the right size
    secret.parent.mkdir()
    pq.write_table(pa.table({"id": [666] * 5}), secret)
    edit(folder / "t", name=name)
    with pytest.raises(ManifestError, match=r"^/Volumes/main/ml/exports/t/_uc_export.json is not a valid export .*"):
        UCVolumeDataset(f"{path}/t")
    with pytest.raises(ManifestError, match="which is not a file name of its own export; export the table again$"):
        load_hf_dataset(f"{path}/t")


@pytest.mark.parametrize("export_id", ["../../other", "/tmp/x", "20261202T030500Z-1a2b3c4d/../../other"])
def test_a_manifest_whose_id_climbs_out_is_refused(
    catalog: LocalCatalog, local_volume: VolumeMaker, export_id: str
) -> None:
    path, folder = local_volume("exports")
    write_export(folder / "t")
    edit(folder / "t", id=export_id)
    with pytest.raises(ManifestError, match="invalid id"):
        UCVolumeDataset(f"{path}/t")


@pytest.mark.servers  # starts an S3 test server of its own
@pytest.mark.in_a_fork
def test_an_edited_manifest_on_s3_is_refused(catalog: LocalCatalog, tmp_path: Path) -> None:
    with S3TestServer(tmp_path / "s3") as server:
        folder = server.bucket("exports") / "data"
        write_export(folder / "t")
        (folder / "other.parquet").write_bytes(b"outside the export")
        edit(folder / "t", name="../../other.parquet")
        external_location(catalog, "s3://exports", server.storage_options)
        catalog.create_volume("main.ml.remote", "s3://exports/data")
        with pytest.raises(ManifestError, match="'../../other.parquet', which is not a file name of its own export"):
            UCVolumeDataset("/Volumes/main/ml/remote/t", recursive=True, shuffle=False)


def test_symlinks_swapped_into_a_local_export_folder_are_never_followed(
    catalog: LocalCatalog, local_volume: VolumeMaker, tmp_path: Path
) -> None:
    path, folder = local_volume("exports")
    manifest = write_export(folder / "t")
    prefix = folder / "t" / manifest.prefix
    outside = tmp_path / "outside"  # the same names and sizes: only where the files lie tells them apart
    outside.mkdir()
    (outside / "part-00000.parquet").write_bytes((prefix / "part-00000.parquet").read_bytes())

    # The part file swapped for a symlink to a file outside: not read, reported missing.
    (prefix / "part-00000.parquet").rename(tmp_path / "kept.parquet")
    (prefix / "part-00000.parquet").symlink_to(outside / "part-00000.parquet")
    with pytest.raises(ExportIncomplete, match="part-00000.parquet, which is missing"):
        UCVolumeDataset(f"{path}/t")

    # The whole prefix swapped for a symlink to a folder outside: refused.
    (prefix / "part-00000.parquet").unlink()
    prefix.rmdir()
    prefix.symlink_to(outside, target_is_directory=True)
    with pytest.raises(EscapesVolume, match="goes through the symbolic link"):
        load_hf_dataset(f"{path}/t")

    # The manifest swapped for a symlink to one outside: the folder holds no committed export to read.
    prefix.unlink()
    (outside / MANIFEST).write_bytes((folder / "t" / MANIFEST).read_bytes())
    (folder / "t" / MANIFEST).unlink()
    (folder / "t" / MANIFEST).symlink_to(outside / MANIFEST)
    with pytest.raises(ValueError, match="holds no files to read"):
        UCVolumeDataset(f"{path}/t")


def same_size_elsewhere(part: Path, outside: Path) -> Path:
    """A Parquet file of ``part``'s size, with other rows, in the folder ``outside``."""
    other = outside / part.name
    pq.write_table(pa.table({"id": OUTSIDE_IDS}), other)
    assert other.stat().st_size == part.stat().st_size
    return other


def swap(prefix: Path, part: Path, what: str, outside: Path, kept: Path) -> None:
    """The attacker's move: the export's file, or its whole prefix, swapped for a symlink out of the volume."""
    moved = part if what == "file" else prefix
    moved.rename(kept)
    moved.symlink_to(outside / part.name if what == "file" else outside, target_is_directory=what != "file")


MOMENTS = {  # when the swap lands: (what is wrapped to land it, streamed)
    "before-hugging-face-looks": ("datasets.load_dataset", False),
    "before-its-cache-copy": ("datasets.utils.file_utils.fsspec_get", False),
    "before-the-stream-reads": ("datasets.load_dataset, after it returns", True),
}


@pytest.mark.parametrize("what", ["file", "prefix"])
@pytest.mark.parametrize("moment", MOMENTS)
def test_an_export_swapped_for_a_symlink_after_the_listing_is_never_read_by_hugging_face(
    catalog: LocalCatalog,
    local_volume: VolumeMaker,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    moment: str,
    what: str,
) -> None:
    """The swap lands between the listing's check and Hugging Face's read: before it looks at the
    files, just before it copies one into its cache, or once a streamed dataset is made and before
    its first row is read. Each time the one line names the symlink, and no row comes back."""
    import datasets
    import datasets.utils.file_utils as hf_files

    path, folder = local_volume("exports")
    manifest = write_export(folder / "t")
    prefix = folder / "t" / manifest.prefix
    part = prefix / "part-00000.parquet"
    outside = tmp_path / "outside"
    outside.mkdir()
    same_size_elsewhere(part, outside)
    copy, load = hf_files.fsspec_get, datasets.load_dataset

    def attack() -> None:
        swap(prefix, part, what, outside, tmp_path / "kept")

    def swap_then_load(*args: object, **kwargs: object) -> object:
        attack()
        return load(*args, **kwargs)

    def swap_then_copy(*args: object, **kwargs: object) -> object:
        attack()
        return copy(*args, **kwargs)

    def load_then_swap(*args: object, **kwargs: object) -> object:
        loaded = load(*args, **kwargs)
        attack()
        return loaded

    if moment == "before-its-cache-copy":
        monkeypatch.setattr(hf_files, "fsspec_get", swap_then_copy)
    else:
        monkeypatch.setattr(datasets, "load_dataset", load_then_swap if MOMENTS[moment][1] else swap_then_load)
    with pytest.raises(VolumeReadError) as refused:  # no row comes back: the outside file's never do
        [row["id"] for row in load_hf_dataset(f"{path}/t", streaming=MOMENTS[moment][1])]
    link = f"{path}/t/{manifest.prefix}" + ("/part-00000.parquet" if what == "file" else "")
    assert str(refused.value) == (
        f"cannot read {path}/t/{manifest.prefix}/part-00000.parquet: {link} is a symbolic link now "
        "(no read follows a symlink inside a volume); load it again to list the folder again"
    )
    assert (part if what == "file" else prefix).is_symlink()  # the swap happened


@pytest.mark.parametrize("inside", [True, False])
def test_an_export_aimed_through_a_symlink_writes_nothing(
    catalog: LocalCatalog, local_volume: VolumeMaker, tmp_path: Path, inside: bool
) -> None:
    catalog.create_table("main.ml.t", pa.table({"id": [1, 2]}))
    path, folder = local_volume("exports")
    target = folder / "elsewhere" if inside else tmp_path / "outside"
    target.mkdir()
    os.symlink(target, folder / "evil")
    with pytest.raises(EscapesVolume, match="symbolic link|through a symlink"):
        export_table("main.ml.t", f"{path}/evil")  # refused before the table is read: no Spark needed
    assert list(target.iterdir()) == []


def test_a_file_the_seam_cannot_name_does_not_fail_a_committed_export(
    catalog: LocalCatalog, local_volume: VolumeMaker, spark_remote: str
) -> None:
    catalog.create_table("main.ml.t", pa.table({"id": [1, 2]}))
    path, folder = local_volume("exports")
    (folder / "t").mkdir()
    (folder / "t" / "odd\\name.parquet").write_bytes(b"a name no key can spell")  # backslash: refused by the seam
    (folder / "t" / "part-0.parquet").write_bytes(b"an export made before manifests")
    with pytest.warns(UserWarning, match=r"^/Volumes/main/ml/exports/t: exported, but 1 file\(s\) whose names cannot"):
        assert export_table("main.ml.t", f"{path}/t") == f"{path}/t"
    assert sorted(p.name for p in (folder / "t").iterdir() if not p.name.startswith(".")) == [
        MANIFEST,
        "odd\\name.parquet",
    ]
    assert sorted(row["id"] for row in load_hf_dataset(f"{path}/t")) == [1, 2]


@pytest.mark.servers  # starts an S3 test server of its own
@pytest.mark.parametrize("streamed", [False, True], ids=["copied-into-its-cache", "streamed"])
def test_an_export_rewritten_with_as_many_bytes_after_the_listing_is_never_read_by_hugging_face(
    catalog: LocalCatalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, streamed: bool
) -> None:
    """On S3 the export's objects are rewritten with other rows of the same size once the listing
    has seen them (as Hugging Face starts): every read names the listed ETag, so the one line says
    the file changed, and no row of the rewrite comes back."""
    import datasets

    with S3TestServer(tmp_path / "s3") as server:
        folder = server.bucket("exports") / "data"
        manifest = write_export(folder / "t")
        part = folder / "t" / manifest.prefix / "part-00000.parquet"
        same_size_elsewhere(part, tmp_path)
        rewrite = (tmp_path / part.name).read_bytes()
        assert len(rewrite) == part.stat().st_size and rewrite != part.read_bytes()
        external_location(catalog, "s3://exports", server.storage_options)
        catalog.create_volume("main.ml.remote", "s3://exports/data")
        load = datasets.load_dataset

        def rewrite_then_load(*args: object, **kwargs: object) -> object:
            listed = part.stat().st_mtime_ns
            part.write_bytes(rewrite)
            os.utime(part, ns=(listed + 10**9, listed + 10**9))  # the server's ETag is made of it
            return load(*args, **kwargs)

        monkeypatch.setattr(datasets, "load_dataset", rewrite_then_load)
        with pytest.raises(VolumeReadError) as refused:
            [row["id"] for row in load_hf_dataset("/Volumes/main/ml/remote/t", streaming=streamed)]
        assert str(refused.value) == (
            f"cannot read /Volumes/main/ml/remote/t/{manifest.prefix}/part-00000.parquet: it changed since the "
            f"dataset listed it ({len(rewrite)} bytes, rewritten since with as many: its ETag is another); make the "
            "dataset again to list the folder again"
        )
