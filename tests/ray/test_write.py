"""``uc_jupyter.ray.write_delta`` on the session's 2-node Ray cluster, on the embedded catalog and over
``uc-jupyter serve``: a new table is registered only when its one commit is made, appends and
overwrites need MODIFY, and a write that fails half-way (a task raises after others wrote their files)
leaves neither a table nor a file; a write the catalog refuses is refused before any task runs."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import pytest

import uc_jupyter.ray as ucray
from tests.ray.conftest import fails_late, files_below, made, managed_folders, with_readers
from uc_jupyter.catalog import AlreadyExists, Catalog, NotFound, PermissionDenied, as_principal
from uc_jupyter.tables.delta import read_arrow
from uc_jupyter.testing.ray_cluster import RayTestCluster

ray_data = pytest.importorskip("ray.data")

pytestmark = pytest.mark.both_backends


@pytest.fixture
def writers(catalog: Catalog) -> Catalog:
    """main.ml.t (x: 1, 2) that alice may read and change; she may create tables in main.ml, bob may not."""
    made(catalog, "main.ml.t", x=[1, 2])
    with_readers(catalog, "main.ml.t")
    catalog.grant("main.ml.t", "MODIFY", "alice")
    catalog.grant("main.ml", "CREATE TABLE", "alice")
    return catalog


def xs(table: str) -> list[int]:
    return sorted(read_arrow(table).column("x").to_pylist())


def test_a_new_table_is_created_registered_and_readable(writers: Catalog, ray_driver: RayTestCluster) -> None:
    ds = ray_data.from_items([{"x": i, "s": str(i)} for i in range(10)], override_num_blocks=4)
    with as_principal("alice"):
        info = ucray.write_delta(ds, "main.ml.new", mode="error")
        assert (info.full_name, info.table_type, info.owner) == ("main.ml.new", "MANAGED", "alice")
        assert [(c.name, c.type_text) for c in info.columns] == [("x", "long"), ("s", "string")]
        assert xs("main.ml.new") == list(range(10))
        assert sorted(r["x"] for r in ray_data.read_delta("main.ml.new", catalog=ucray.catalog()).take_all()) == list(
            range(10)
        )
        with pytest.raises(AlreadyExists, match=r"^table main\.ml\.new already exists; write with mode"):
            ucray.write_delta(ds, "main.ml.new", mode="error")


def test_append_and_overwrite_change_an_existing_table_and_its_columns(
    writers: Catalog, ray_driver: RayTestCluster
) -> None:
    with as_principal("alice"):
        ucray.write_delta(ray_data.from_items([{"x": 3}, {"x": 4}]), "main.ml.t")
        assert xs("main.ml.t") == [1, 2, 3, 4]
        info = ucray.write_delta(ray_data.from_items([{"x": 9, "y": "new"}]), "main.ml.t", mode="overwrite")
    assert [(c.name, c.type_text) for c in info.columns] == [("x", "long"), ("y", "string")]
    assert [c.name for c in writers.get_table("main.ml.t").columns] == ["x", "y"]  # the catalog read them again
    assert read_arrow("main.ml.t").to_pylist() == [{"x": 9, "y": "new"}]


@pytest.mark.parametrize(
    ("who", "name", "data", "mode", "error", "line"),
    [
        ("bob", "main.ml.new", [{"x": 1}], "append", PermissionDenied, r"bob lacks CREATE TABLE on main\.ml"),
        ("bob", "main.ml.t", [{"x": 1}], "append", PermissionDenied, r"bob lacks MODIFY on main\.ml\.t"),
        ("alice", "main.nope.t", [{"x": 1}], "append", NotFound, r"schema main\.nope does not exist"),
        ("alice", "s3://lake/t", [{"x": 1}], "append", ValueError, r"write_delta\(catalog=\.\.\.\) takes a table .*"),
        # another schema: an append must bring the table's columns, as the catalog's create_table wants them
        (
            "alice",
            "main.ml.t",
            [{"x": "1"}],
            "append",
            ValueError,
            r"table main\.ml\.t: the data's columns do not "
            r"match the table's \(the table has x long, the dataset x string\); write with mode='overwrite' .*",
        ),
        ("alice", "main.ml.t", [{"x": 1, "y": 2}], "append", ValueError, r"table main\.ml\.t: the data's columns .*"),
        ("alice", "main.ml.t", [{"x": 1}], "error", AlreadyExists, r"table main\.ml\.t already exists; .*"),
    ],
)
def test_a_refused_write_is_one_line_and_writes_nothing(
    writers: Catalog,
    ray_driver: RayTestCluster,
    isolated_home: Path,
    who: str,
    name: str,
    data: list[dict[str, Any]],
    mode: Any,
    error: type[Exception],
    line: str,
) -> None:
    before = managed_folders(isolated_home)
    table_files = files_below(writers.get_table("main.ml.t").storage_location)
    ds = ray_data.from_items(data)
    with pytest.raises(error) as raised, as_principal(who):
        ucray.write_delta(ds, name, mode=mode)
    assert "\n" not in str(raised.value) and re.fullmatch(line, str(raised.value)), str(raised.value)
    assert managed_folders(isolated_home) == before  # no staging table, no files
    assert files_below(writers.get_table("main.ml.t").storage_location) == table_files
    assert xs("main.ml.t") == [1, 2]


def _failing(n: int = 8) -> Any:
    return ray_data.from_items([{"x": i} for i in range(n)], override_num_blocks=4).map(fails_late)


def test_a_new_table_whose_write_fails_leaves_no_table_and_no_files(
    writers: Catalog, ray_driver: RayTestCluster, isolated_home: Path
) -> None:
    before = managed_folders(isolated_home)
    with pytest.raises(Exception, match="task killed mid-write"), as_principal("alice"):
        ucray.write_delta(_failing(), "main.ml.new")
    with pytest.raises(NotFound, match=r"^table main\.ml\.new does not exist"):
        writers.get_table("main.ml.new")
    assert managed_folders(isolated_home) == before  # the staging table went with its files


def test_an_append_that_fails_removes_the_files_it_wrote_and_only_those(
    writers: Catalog, ray_driver: RayTestCluster, caplog: pytest.LogCaptureFixture
) -> None:
    location = writers.get_table("main.ml.t").storage_location
    before = files_below(location)
    stray = Path(location.removeprefix("file://")) / "part-00000-another-writer.parquet"
    stray.write_bytes(b"not ours")  # another writer's file, not yet committed: it must stay
    with (
        caplog.at_level(logging.INFO, logger="uc_jupyter.ray.write"),
        pytest.raises(Exception, match="task killed mid-write"),
        as_principal("alice"),
    ):
        ucray.write_delta(_failing(), "main.ml.t")
    removed = [int(m.group(1)) for m in re.finditer(r"removed (\d+) file\(s\) of a failed write", caplog.text)]
    assert removed and removed[0] > 0  # the other tasks had written files: they are gone
    assert files_below(location) == sorted([*before, stray.name])
    assert xs("main.ml.t") == [1, 2]
