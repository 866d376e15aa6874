"""``uc_jupyter.ray.read_table`` on the session's 2-node Ray cluster, on the embedded catalog and over
``uc-jupyter serve``: its rows are the catalog's own readers' (:func:`uc_jupyter.tables.delta.read_arrow`,
and Spark's :func:`uc_jupyter.tables.table`),
for a table of several files with rows deleted by deletion vectors in two of them, at its latest and
at a pinned version, and what it refuses it refuses in one line before a task runs."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest

import uc_jupyter.ray as ucray
from tests.ray.conftest import made, with_readers
from uc_jupyter.catalog import Catalog, InvalidName, NotFound, PermissionDenied, as_principal
from uc_jupyter.storage import urls as st
from uc_jupyter.tables.delta import read_arrow
from uc_jupyter.testing.deletion_vectors import delete_with_deletion_vector
from uc_jupyter.testing.ray_cluster import RayTestCluster

pytestmark = pytest.mark.both_backends


@pytest.fixture
def dv_table(catalog: Catalog) -> Catalog:
    """main.ml.dv: three files (x 0..29, s its text); a deletion vector deletes rows of the first and
    the third (version 3); alice may read it."""
    made(catalog, "main.ml.dv", x=list(range(10)), s=[str(i) for i in range(10)])
    for start in (10, 20):
        more = pa.table({"x": list(range(start, start + 10)), "s": [str(i) for i in range(start, start + 10)]})
        catalog.create_table("main.ml.dv", more, mode="append")
    location = catalog.resolve_table("main.ml.dv").storage_location
    delete_with_deletion_vector(st.local_path(location), {0: [0, 3, 9], 2: [5]})
    with_readers(catalog, "main.ml.dv")
    return catalog


def xs(rows: list[dict[str, object]]) -> list[object]:
    return sorted(r["x"] for r in rows)


def test_rows_deleted_by_deletion_vectors_never_appear(dv_table: Catalog, ray_driver: RayTestCluster) -> None:
    with as_principal("alice"):
        expected = sorted(read_arrow("main.ml.dv").column("x").to_pylist())
        got = ucray.read_table("main.ml.dv", override_num_blocks=4).take_all()
        only_s = ucray.read_table("main.ml.dv", columns=["s"]).take_all()
        before = ucray.read_table("main.ml.dv", version=2).take_all()
    assert len(expected) == 26 and xs(got) == expected  # 30 rows less the 4 the vectors delete
    assert sorted(r["s"] for r in got) == sorted(str(x) for x in expected)  # each row whole
    assert {tuple(r) for r in only_s} == {("s",)} and len(only_s) == 26
    assert xs(before) == list(range(30))  # before the delete: every row


def test_rows_are_the_spark_tables(dv_table: Catalog, ray_driver: RayTestCluster, spark_remote: str) -> None:
    from uc_jupyter.tables import table

    with as_principal("alice"):
        spark_rows = sorted((r["x"], r["s"]) for r in table("main.ml.dv").collect())
        ray_rows = sorted((r["x"], r["s"]) for r in ucray.read_table("main.ml.dv").take_all())
    assert len(spark_rows) == 26 and ray_rows == spark_rows


@pytest.mark.parametrize(
    ("who", "name", "kwargs", "error", "line"),
    [
        ("alice", "main.ml.nope", {}, NotFound, r"table main\.ml\.nope does not exist"),
        ("bob", "main.ml.dv", {}, PermissionDenied, r"bob lacks SELECT on main\.ml\.dv"),
        ("alice", "/data/dv", {}, InvalidName, r"read_table\(catalog=\.\.\.\) takes a table name .*"),
        ("alice", "main.ml.dv", {"columns": ["y"]}, ValueError, r"table main\.ml\.dv has no column 'y'.*"),
        ("alice", "main.ml.dv", {"version": 9}, NotFound, r"table main\.ml\.dv: cannot open version 9: .*"),
    ],
)
def test_a_refused_read_is_one_line(
    dv_table: Catalog,
    ray_driver: RayTestCluster,
    who: str,
    name: str,
    kwargs: dict[str, object],
    error: type[Exception],
    line: str,
) -> None:
    with pytest.raises(error) as raised, as_principal(who):
        ucray.read_table(name, **kwargs)
    assert "\n" not in str(raised.value) and re.fullmatch(line, str(raised.value)), str(raised.value)
