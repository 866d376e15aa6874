"""Export to volumes through Spark (local volumes) or pyarrow (object storage), and Hugging Face loading;
the tests marked ``both_backends`` also run with RestCatalog + a served home (tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from uc_jupyter.catalog import AlreadyExists, PermissionDenied
from uc_jupyter.catalog.local import LocalCatalog
from uc_jupyter.tables import export_table, load_hf_dataset
from uc_jupyter.testing.catalogs import external_location
from uc_jupyter.testing.s3_server import S3TestServer


def volume_folder(catalog: LocalCatalog, name: str) -> Path:
    return Path(catalog.get_volume(name).storage_location.removeprefix("file://"))


def rows_of(dataset: object) -> list[tuple[int, float, str]]:
    return sorted((r["id"], r["x"], r["tag"]) for r in dataset)  # type: ignore[attr-defined]


EXPECTED = [(i, i * 0.5, f"t{i % 3}") for i in range(50)]


@pytest.mark.both_backends
def test_export_then_load_with_hugging_face_row_for_row(catalog: LocalCatalog, spark_remote: str) -> None:
    catalog.create_volume("main.ml.exports")
    assert export_table("main.ml.points", "/Volumes/main/ml/exports/points") == "/Volumes/main/ml/exports/points"
    folder = volume_folder(catalog, "main.ml.exports") / "points"
    assert any(p.name == "_SUCCESS" for p in folder.iterdir())  # Spark's marker, skipped when loading
    loaded = load_hf_dataset("/Volumes/main/ml/exports/points")
    assert rows_of(loaded) == EXPECTED
    streamed = load_hf_dataset("/Volumes/main/ml/exports/points", streaming=True)
    assert rows_of(streamed) == EXPECTED
    assert [p.name for p in folder.parent.iterdir()] == ["points"]  # no staging folder left behind


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


def test_export_to_object_storage_is_refused_clearly(catalog: LocalCatalog, tmp_path: Path) -> None:
    external_location(catalog, "memory://exports")
    catalog.create_volume("main.ml.remote", "memory://exports/data")
    with pytest.raises(
        ValueError, match="cannot export into /Volumes/main/ml/remote/points: its volume is at memory://"
    ):
        export_table("main.ml.points", "/Volumes/main/ml/remote/points")


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
