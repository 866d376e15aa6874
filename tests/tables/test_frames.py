"""Catalog tables through a real Spark Connect server and the deltalake-backed data source; the tests
marked ``both_backends`` also run with RestCatalog + a served home (tests/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from uc_jupyter.catalog import NotFound, PermissionDenied
from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.tables import QueryError, get_spark, table, to_numpy, to_pandas
from uc_jupyter.tables.spark import SparkUnavailable, local_server
from uc_jupyter.testing.deletion_vectors import delete_with_deletion_vector


@pytest.mark.both_backends
def test_table_round_trips_through_spark(catalog: LocalCatalog, spark_remote: str) -> None:
    frame = to_pandas(table("main.ml.points")).sort_values("id").reset_index(drop=True)
    expected = pd.DataFrame(
        {"id": range(50), "x": [i * 0.5 for i in range(50)], "tag": [f"t{i % 3}" for i in range(50)]}
    )
    pd.testing.assert_frame_equal(frame, expected, check_dtype=False)
    values = to_numpy(table("main.ml.points").select("id", "x").where("id < 4").orderBy("id"))
    assert values.dtype == np.float64 and values.tolist() == [[0, 0.0], [1, 0.5], [2, 1.0], [3, 1.5]]


@pytest.mark.both_backends
def test_versions_are_pinned_and_travel(catalog: LocalCatalog, spark_remote: str) -> None:
    before = table("main.ml.points")
    catalog.create_table("main.ml.points", pa.table({"id": [100], "x": [1.0], "tag": ["new"]}), mode="append")
    assert before.count() == 50  # pinned when table() was called
    assert table("main.ml.points").count() == 51
    assert table("main.ml.points", version=0).count() == 50


@pytest.mark.both_backends
def test_errors_surface_at_table_before_spark(catalog: LocalCatalog, spark_remote: str) -> None:
    with pytest.raises(NotFound, match="table main.ml.pionts does not exist; did you mean main.ml.points?"):
        table("main.ml.pionts")
    with pytest.raises(ValueError, match="that is a path"):
        table("/Volumes/main/ml/points")
    catalog.create_principal("alice")
    catalog.grant("main", "USE CATALOG", "alice")
    catalog.grant("main.ml", "USE SCHEMA", "alice")
    with catalog.as_principal("alice"), pytest.raises(PermissionDenied, match="alice lacks SELECT on main.ml.points"):
        table("main.ml.points")


@pytest.mark.both_backends
@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"version": True}, TypeError, "invalid version True: give a whole number >= 0, not a bool"),
        ({"version": -1}, ValueError, "invalid version -1"),
        ({"version": "3"}, TypeError, "invalid version '3'"),
        ({"timestamp": 1700000000}, TypeError, "invalid timestamp 1700000000: give an ISO 8601 str or a datetime"),
        ({"version": 0, "timestamp": "2024-01-01"}, ValueError, "give version or timestamp, not both"),
    ],
)
def test_bad_time_travel_values_are_refused_before_any_session(
    catalog: LocalCatalog, kwargs: dict[str, object], error: type[Exception], message: str
) -> None:
    """No Spark server here: the values are checked before a session is asked for."""
    with pytest.raises(error, match=message) as caught:
        table("main.ml.points", **kwargs)  # type: ignore[arg-type]
    assert "\n" not in str(caught.value)


@pytest.mark.servers  # starts a Spark Connect server of its own
def test_local_server_is_started_once_reused_and_stopped(tmp_path: Path) -> None:
    env = {**os.environ, "UC_JUPYTER_HOME": str(tmp_path / "home")}
    env.pop("UC_JUPYTER_SPARK_REMOTE", None)
    count = "from uc_jupyter.tables import get_spark; print(get_spark(progress=lambda l: None).range(7).count())"
    for _ in range(2):  # the second kernel finds the first one's server
        out = subprocess.run([sys.executable, "-W", "ignore", "-c", count], env=env, capture_output=True, text=True)
        assert out.stdout.strip() == "7", out.stderr[-2000:]
    status = subprocess.run(
        [sys.executable, "-m", "uc_jupyter.cli", "--json", "spark", "status"], env=env, capture_output=True, text=True
    )
    assert '"running": true' in status.stdout
    stop = subprocess.run(
        [sys.executable, "-m", "uc_jupyter.cli", "spark", "stop"], env=env, capture_output=True, text=True
    )
    assert stop.stdout.strip() == "stopped local Spark Connect server"
    after = subprocess.run(
        [sys.executable, "-m", "uc_jupyter.cli", "spark", "status"], env=env, capture_output=True, text=True
    )
    assert after.stdout.strip() == "no local Spark Connect server"


def test_missing_java_is_one_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("UC_JUPYTER_HOME", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(SparkUnavailable, match="Java is needed for the local Spark Connect server: install Java 17"):
        local_server(progress=lambda _line: None)


def test_deletion_vectors_are_honoured_by_spark(catalog: LocalCatalog, spark_remote: str) -> None:
    location = catalog.get_table("main.ml.points").storage_location.removeprefix("file://")
    delete_with_deletion_vector(location, {0: [0, 10, 49]})
    ids = sorted(row["id"] for row in table("main.ml.points").select("id").collect())
    assert ids == [i for i in range(50) if i not in (0, 10, 49)]
    assert table("main.ml.points", version=0).count() == 50


def test_a_missing_column_fails_where_it_is_named(catalog: LocalCatalog, spark_remote: str) -> None:
    frame = table("main.ml.points")
    with pytest.raises(QueryError, match="^table main.ml.points has no column 'nope'"):
        frame.select("id", "nope")
    with pytest.raises(QueryError, match="^this DataFrame has no column 'missing'; its columns are x$"):
        frame.where("id > 3").select("x").filter("missing > 1")
    assert frame.select("id").where("id < 3").count() == 3  # chains of valid calls still work


def test_a_table_the_session_catalog_knows_is_read_with_spark_table(
    catalog: LocalCatalog, spark_remote: str, tmp_path: Path
) -> None:
    """``spark_catalog.default.shared`` is a Delta table in our catalog and a Parquet table in the
    Spark session's own catalog (as on a Unity-Catalog-enabled Spark, where both name one table);
    the two hold different rows here, so the rows tell which one was read."""

    catalog.create_catalog("spark_catalog")
    catalog.create_schema("spark_catalog.default")
    catalog.create_table("spark_catalog.default.shared", pa.table({"id": [1, 2, 3], "x": [0.5, 1.5, 2.5]}))
    folder = tmp_path / "session_table"
    folder.mkdir()
    pq.write_table(pa.table({"id": [7, 8], "x": [7.0, 8.0]}), folder / "part-0.parquet")
    spark = get_spark(progress=lambda _line: None)
    spark.sql(f"CREATE TABLE spark_catalog.default.shared (id BIGINT, x DOUBLE) USING parquet LOCATION '{folder}'")
    try:
        frame = table("spark_catalog.default.shared")
        assert frame.inputFiles() == [(folder / "part-0.parquet").as_uri()]
        assert sorted(row["id"] for row in frame.collect()) == [7, 8]
        with pytest.raises(QueryError, match="^table spark_catalog.default.shared has no column 'nope'"):
            frame.select("id", "nope")
        # Parquet cannot travel in time: the version comes from the Delta files, as for any table.
        assert sorted(row["id"] for row in table("spark_catalog.default.shared", version=0).collect()) == [1, 2, 3]
        now = datetime.now(timezone.utc)
        assert table("spark_catalog.default.shared", timestamp=now).count() == 3
        catalog.create_principal("bob")
        catalog.grant("spark_catalog", "USE CATALOG", "bob")
        catalog.grant("spark_catalog.default", "USE SCHEMA", "bob")
        with catalog.as_principal("bob"), pytest.raises(PermissionDenied, match="bob lacks SELECT"):
            table("spark_catalog.default.shared")  # our catalog still decides who may read
    finally:
        spark.sql("DROP TABLE IF EXISTS spark_catalog.default.shared")
