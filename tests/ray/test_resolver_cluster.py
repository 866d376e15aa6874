"""``ray.data.read_delta(name, catalog=uc_jupyter.ray.catalog())`` on the session's 2-node Ray cluster,
on the embedded catalog and over ``uc-jupyter serve``: the rows are the catalog's own reader's
(:func:`uc_jupyter.tables.delta.read_arrow`), for a table of several commits and versions, and Ray's
``Dataset.write_delta(catalog=...)`` appends to an existing table with MODIFY."""

from __future__ import annotations

import pyarrow as pa
import pytest

import uc_jupyter.ray as ucray
from tests.ray.conftest import made, with_readers
from uc_jupyter.catalog import Catalog, as_principal
from uc_jupyter.tables.delta import read_arrow
from uc_jupyter.testing.ray_cluster import RayTestCluster

ray_data = pytest.importorskip("ray.data")

pytestmark = pytest.mark.both_backends


def rows(table: pa.Table, *columns: str) -> list[tuple[object, ...]]:
    return sorted(zip(*(table.column(c).to_pylist() for c in columns), strict=True))


def test_read_delta_gives_the_catalogs_rows(catalog: Catalog, ray_driver: RayTestCluster) -> None:
    made(catalog, "main.ml.t", x=[1, 2, 3], s=["a", "b", "c"])
    catalog.create_table("main.ml.t", pa.table({"x": [4, 5], "s": ["d", "e"]}), mode="append")
    catalog.create_table("main.ml.t", pa.table({"x": [6], "s": ["f"]}), mode="append")
    with_readers(catalog, "main.ml.t")
    with as_principal("alice"):
        ds = ray_data.read_delta("main.ml.t", catalog=ucray.catalog(), override_num_blocks=3)
        got = pa.Table.from_pylist(ds.take_all())
        expected = read_arrow("main.ml.t")
        old = pa.Table.from_pylist(ray_data.read_delta("main.ml.t", version=0, catalog=ucray.catalog()).take_all())
        picked = ray_data.read_delta("main.ml.t", catalog=ucray.catalog(), columns=["s"]).take_all()
    assert rows(got, "x", "s") == rows(expected, "x", "s") and len(expected) == 6
    assert rows(old, "x") == [(1,), (2,), (3,)]  # a pinned version, as Ray reads it
    assert sorted(r["s"] for r in picked) == ["a", "b", "c", "d", "e", "f"] and set(picked[0]) == {"s"}


def test_ray_s_own_write_delta_appends_to_an_existing_table_with_modify(
    catalog: Catalog, ray_driver: RayTestCluster
) -> None:
    made(catalog, "main.ml.t", x=[1, 2])
    with_readers(catalog, "main.ml.t")
    catalog.grant("main.ml.t", "MODIFY", "alice")
    with as_principal("alice"):
        ray_data.from_items([{"x": 3}, {"x": 4}]).write_delta("main.ml.t", catalog=ucray.catalog(), mode="append")
        assert sorted(read_arrow("main.ml.t").column("x").to_pylist()) == [1, 2, 3, 4]
