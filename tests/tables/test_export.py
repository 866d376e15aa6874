"""Export to local volumes through Spark and a committed manifest, and Hugging Face loading; the tests
marked ``both_backends`` also run with RestCatalog + a served home (tests/conftest.py). Exports into
object storage, and readers of export folders: tests/data/test_committed_exports.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from uc_jupyter.catalog import AlreadyExists, PermissionDenied
from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.storage.export_manifest import (
    MANIFEST,
    STALE_AFTER_S,
    WRITER,
    ExportFile,
    Manifest,
    ManifestError,
    leftovers,
    new_export_id,
)
from uc_jupyter.tables import export_table, load_hf_dataset
from uc_jupyter.testing.catalogs import external_location
from uc_jupyter.testing.s3_server import S3TestServer
from uc_jupyter.testing.waits import wait_until


def volume_folder(catalog: LocalCatalog, name: str) -> Path:
    return Path(catalog.get_volume(name).storage_location.removeprefix("file://"))


def rows_of(dataset: object) -> list[tuple[int, float, str]]:
    return sorted((r["id"], r["x"], r["tag"]) for r in dataset)  # type: ignore[attr-defined]


EXPECTED = [(i, i * 0.5, f"t{i % 3}") for i in range(50)]


def committed_layout(folder: Path) -> tuple[str, list[str]]:
    """The export folder's one committed prefix and the names of the files under it (the manifest
    beside it, nothing else with files in it)."""
    assert (folder / "_uc_export.json").is_file()
    with_files = sorted(p.name for p in folder.iterdir() if p.is_dir() and any(p.iterdir()))
    assert [p.name for p in folder.iterdir() if p.is_file()] == ["_uc_export.json"]
    assert len(with_files) == 1 and with_files[0].startswith(".uc-export-"), with_files
    return with_files[0], sorted(p.name for p in (folder / with_files[0]).iterdir())


@pytest.mark.both_backends
def test_export_then_load_with_hugging_face_row_for_row(catalog: LocalCatalog, spark_remote: str) -> None:
    catalog.create_volume("main.ml.exports")
    assert export_table("main.ml.points", "/Volumes/main/ml/exports/points") == "/Volumes/main/ml/exports/points"
    folder = volume_folder(catalog, "main.ml.exports") / "points"
    prefix, parts = committed_layout(folder)
    # No Spark marker, no .crc: Parquet files and the stamp of the process that uploaded them.
    assert WRITER in parts and all(p.startswith("part-") and p.endswith(".parquet") for p in parts if p != WRITER)
    manifest = json.loads((folder / "_uc_export.json").read_text())
    assert manifest["table"] == "main.ml.points" and manifest["rows"] == 50 and manifest["table_version"] == 0
    assert prefix == f".uc-export-{manifest['id']}"
    loaded = load_hf_dataset("/Volumes/main/ml/exports/points")
    assert rows_of(loaded) == EXPECTED
    streamed = load_hf_dataset("/Volumes/main/ml/exports/points", streaming=True)
    assert rows_of(streamed) == EXPECTED
    assert [p.name for p in folder.parent.iterdir()] == ["points"]  # no staging folder left behind


def test_a_second_export_replaces_the_first_and_its_files_go(catalog: LocalCatalog, spark_remote: str) -> None:
    catalog.create_volume("main.ml.exports")
    export_table("main.ml.points", "/Volumes/main/ml/exports/points")
    folder = volume_folder(catalog, "main.ml.exports") / "points"
    first, _ = committed_layout(folder)
    more = pa.table({"id": [50, 51], "x": [25.0, 25.5], "tag": ["t2", "t0"]})
    catalog.create_table("main.ml.points", more, mode="append")
    export_table("main.ml.points", "/Volumes/main/ml/exports/points")
    second, _ = committed_layout(folder)  # the first prefix holds no file any more
    assert second != first
    assert json.loads((folder / "_uc_export.json").read_text())["table_version"] == 1
    assert rows_of(load_hf_dataset("/Volumes/main/ml/exports/points")) == [
        *EXPECTED,
        (50, 25.0, "t2"),
        (51, 25.5, "t0"),
    ]


def test_an_export_made_before_manifests_is_read_then_replaced(catalog: LocalCatalog, spark_remote: str) -> None:
    import pyarrow.parquet as pq

    from uc_jupyter.tables.delta import read_arrow

    catalog.create_volume("main.ml.exports")
    folder = volume_folder(catalog, "main.ml.exports") / "points"
    folder.mkdir()
    pq.write_table(read_arrow("main.ml.points", catalog=catalog).slice(0, 10), folder / "part-00000-old.parquet")
    (folder / "_SUCCESS").write_bytes(b"")
    assert rows_of(load_hf_dataset("/Volumes/main/ml/exports/points")) == EXPECTED[:10]
    export_table("main.ml.points", "/Volumes/main/ml/exports/points")
    committed_layout(folder)  # the old Parquet and marker files are gone
    assert rows_of(load_hf_dataset("/Volumes/main/ml/exports/points")) == EXPECTED


def test_a_failed_export_keeps_the_previous_contents(catalog: LocalCatalog, spark_remote: str) -> None:
    catalog.create_volume("main.ml.exports")
    export_table("main.ml.points", "/Volumes/main/ml/exports/points")
    folder = volume_folder(catalog, "main.ml.exports") / "points"
    before = sorted(p.name for p in folder.iterdir())
    storage = Path(catalog.get_table("main.ml.points").storage_location.removeprefix("file://"))
    for data_file in storage.glob("*.parquet"):
        data_file.write_bytes(b"not parquet any more")  # the next read fails midway
    with pytest.raises(Exception, match="(?i)parquet|magic|corrupt|error"):
        export_table("main.ml.points", "/Volumes/main/ml/exports/points")
    assert sorted(p.name for p in folder.iterdir()) == before
    assert [p.name for p in folder.parent.iterdir()] == ["points"]


@pytest.mark.both_backends
def test_export_checks_grants_and_mode(catalog: LocalCatalog, spark_remote: str) -> None:
    catalog.create_volume("main.ml.exports")
    export_table("main.ml.points", "/Volumes/main/ml/exports/points")
    with pytest.raises(AlreadyExists, match="/Volumes/main/ml/exports/points exists; export with mode='overwrite'"):
        export_table("main.ml.points", "/Volumes/main/ml/exports/points", mode="error")
    with pytest.raises(ValueError, match="is a whole volume; export into a folder of it"):
        export_table("main.ml.points", "/Volumes/main/ml/exports")
    catalog.create_principal("alice")
    for securable, privilege in (("main", "USE CATALOG"), ("main.ml", "USE SCHEMA"), ("main.ml.points", "SELECT")):
        catalog.grant(securable, privilege, "alice")
    with (
        catalog.as_principal("alice"),
        pytest.raises(PermissionDenied, match="alice lacks WRITE VOLUME on main.ml.exports"),
    ):
        export_table("main.ml.points", "/Volumes/main/ml/exports/mine")
    catalog.revoke("main.ml.points", "SELECT", "alice")
    catalog.grant("main.ml.exports", "WRITE VOLUME", "alice")
    with catalog.as_principal("alice"), pytest.raises(PermissionDenied, match="alice lacks SELECT on main.ml.points"):
        export_table("main.ml.points", "/Volumes/main/ml/exports/mine")
    assert not (volume_folder(catalog, "main.ml.exports") / "mine").exists()  # nothing written


def test_export_to_storage_that_takes_no_writes_is_refused_clearly(catalog: LocalCatalog) -> None:
    external_location(catalog, "memory://exports")
    catalog.create_volume("main.ml.remote", "memory://exports/data")
    with pytest.raises(ValueError, match="cannot write /Volumes/main/ml/remote/points: only s3://, gs://, Azure"):
        export_table("main.ml.points", "/Volumes/main/ml/remote/points")


@pytest.mark.servers  # starts an S3 test server of its own
def test_load_hf_dataset_reads_parquet_on_object_storage(catalog: LocalCatalog, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    from uc_jupyter.tables.delta import read_arrow

    with S3TestServer(tmp_path / "s3") as server:
        folder = server.bucket("exports") / "data" / "points"
        folder.mkdir(parents=True)
        pq.write_table(read_arrow("main.ml.points", catalog=catalog), folder / "part-0.parquet")
        (folder / "_SUCCESS").write_bytes(b"")
        external_location(catalog, "s3://exports", server.storage_options)
        catalog.create_volume("main.ml.remote", "s3://exports/data")
        assert rows_of(load_hf_dataset("/Volumes/main/ml/remote/points")) == EXPECTED


def test_which_files_an_export_removes_once_committed() -> None:
    hour = 3600.0
    now = 1_796_184_000.0  # 2026-12-02T04:00:00Z
    new = Manifest(new_export_id(now), "t", 2, (ExportFile("p.parquet", 1, 1),))
    old = Manifest(new_export_id(now - 60), "t", 1, (ExportFile("p.parquet", 1, 1),))  # replaced: goes, however young
    running = f".uc-export-{new_export_id(now - hour)}/p.parquet"  # may be uploading beside us: stays
    stale = f".uc-export-{new_export_id(now - STALE_AFTER_S - hour)}/p.parquet"  # a killed export's: goes
    keys = sorted([*new.file_keys(), *old.file_keys(), running, stale, MANIFEST, "part-0.parquet", "_SUCCESS"])
    keys += [".ipynb_checkpoints/x", ".uc-export-not-an-id/x", "sub/part-1.parquet"]
    gone = leftovers(keys, committed=new, replaced=old, now=now)
    assert sorted(gone) == sorted([*old.file_keys(), stale, "part-0.parquet", "_SUCCESS", "sub/part-1.parquet"])


@pytest.mark.parametrize(
    ("change", "what"),
    [
        ({"format": "other/1"}, "its format is not"),
        ({"table_version": True}, "invalid table_version"),
        ({"files": [{"name": "a.parquet", "size": 1, "rows": 1}] * 2}, "it names a file twice"),
        ({"files": [{"name": "a.parquet", "size": -1, "rows": 1}]}, "a.parquet: invalid size -1"),
        ({"files": [{"name": "a.parquet", "size": 1.5, "rows": 1}]}, "a.parquet: invalid size 1.5"),
        ({"files": "a.parquet"}, "'files' is not a list"),
    ],
)
def test_a_manifest_is_read_only_as_an_export_writes_it(change: dict[str, object], what: str) -> None:
    good = Manifest(new_export_id(), "main.ml.t", 0, (ExportFile("a.parquet", 1, 1),))
    body = {**json.loads(good.to_bytes()), **change}
    with pytest.raises(
        ManifestError, match=f"^/Volumes/c/s/v/x/_uc_export.json is not a valid export manifest: {what}"
    ):
        Manifest.parse(json.dumps(body).encode(), where="/Volumes/c/s/v/x")
    with pytest.raises(ManifestError, match="not JSON"):
        Manifest.parse(b"\xff{", where="/Volumes/c/s/v/x")


_EXPORT = """
import sys
from uc_jupyter.tables import export_table
export_table("main.ml.points", sys.argv[1])
"""


def test_the_next_export_removes_what_a_killed_export_left(
    catalog: LocalCatalog, spark_remote: str, isolated_home: Path
) -> None:
    catalog.create_volume("main.ml.exports")
    folder = volume_folder(catalog, "main.ml.exports") / "points"
    export_table("main.ml.points", "/Volumes/main/ml/exports/points")
    child = subprocess.Popen([sys.executable, "-c", _EXPORT, "/Volumes/main/ml/exports/points"])
    try:  # killed once its upload has begun: its prefix names it, its staging folder is made
        wait_until(lambda: len(list(folder.glob(".uc-export-*/_writer"))) == 2, "the killed export's prefix", 120)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    staging = isolated_home / "staging"
    assert [p.name.startswith("export-") for p in staging.iterdir()] == [True]  # what kill -9 left
    export_table("main.ml.points", "/Volumes/main/ml/exports/points")
    committed_layout(folder)  # one prefix with files: the committed one
    assert len(list(folder.glob(".uc-export-*"))) == 1  # the killed export's prefix is gone, not only emptied
    assert os.listdir(staging) == []
    assert rows_of(load_hf_dataset("/Volumes/main/ml/exports/points")) == EXPECTED


def test_a_streamed_local_folder_is_read_in_spawned_dataloader_workers(catalog: LocalCatalog) -> None:
    """Hugging Face's stream opens its files in the workers: there, through the walk from the volume's
    root too (the protocol's options import it in a spawned worker as they are unpickled)."""
    import pyarrow.parquet as pq
    import torch.utils.data

    catalog.create_volume("main.ml.exports")
    folder = volume_folder(catalog, "main.ml.exports") / "points"
    folder.mkdir()
    for part in range(2):
        pq.write_table(pa.table({"id": list(range(part * 5, part * 5 + 5))}), folder / f"part-{part}.parquet")
    streamed = load_hf_dataset("/Volumes/main/ml/exports/points", streaming=True)
    loader = torch.utils.data.DataLoader(streamed, batch_size=None, num_workers=1, multiprocessing_context="spawn")
    assert sorted(int(row["id"]) for row in loader) == list(range(10))


def test_a_local_export_loads_in_hugging_faces_offline_mode(
    catalog: LocalCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its offline mode refuses copies through any filesystem but its local one, and a local volume's
    files reach it through ucvolume:// (no symlink followed): the mode is lifted for that copy only,
    since nothing leaves the machine, and is on again after the load."""
    import datasets.config
    import pyarrow.parquet as pq

    catalog.create_volume("main.ml.exports")
    folder = volume_folder(catalog, "main.ml.exports") / "points"
    folder.mkdir()
    pq.write_table(pa.table({"id": [1, 2]}), folder / "part-0.parquet")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    assert [row["id"] for row in load_hf_dataset("/Volumes/main/ml/exports/points")] == [1, 2]
    assert [row["id"] for row in load_hf_dataset("/Volumes/main/ml/exports/points", streaming=True)] == [1, 2]
    assert datasets.config.HF_HUB_OFFLINE is True
