"""UCCatalog without a Ray cluster: what it resolves a table to, on the embedded catalog and over
``uc-jupyter serve``, and every refusal, one line, raised by Ray's own readers before Ray starts
(``ray.data.read_delta`` would otherwise connect this process to a Ray of its own: the tests check it
did not). The reads themselves, on the cluster: test_resolver_cluster.py."""

from __future__ import annotations

import pickle
import re
from collections.abc import Iterator
from typing import Any

import pytest

import uc_jupyter.ray as ucray
from tests.ray.conftest import made, with_readers
from uc_jupyter.catalog import Catalog, CatalogError, InvalidName, NotFound, PermissionDenied, as_principal
from uc_jupyter.ray import UCCatalog
from uc_jupyter.storage import urls as st
from uc_jupyter.testing.deletion_vectors import delete_with_deletion_vector

ray_data = pytest.importorskip("ray.data")

pytestmark = pytest.mark.both_backends


@pytest.fixture
def no_ray() -> Iterator[None]:
    """Each refusal must come before Ray starts: none is running before, none may be after."""
    import ray

    assert not ray.is_initialized()
    yield
    started = ray.is_initialized()
    ray.shutdown()  # a refusal that came too late must not leave this process a driver
    assert not started, "Ray was started: the refusal came after the read began"


@pytest.fixture
def tables(catalog: Catalog) -> Catalog:
    """main.ml.t (x: 1, 2, 3) and main.ml.dv (x: 1..4, row 2 deleted by a deletion vector); alice reads both."""
    made(catalog, "main.ml.t", x=[1, 2, 3])
    dv = made(catalog, "main.ml.dv", x=[1, 2, 3, 4])
    delete_with_deletion_vector(st.local_path(dv.storage_location), {0: [1]})
    with_readers(catalog, "main.ml.t", "main.ml.dv")
    return catalog


def test_a_table_resolves_to_its_delta_location_with_the_catalogs_options(tables: Catalog) -> None:
    from ray.data.catalog import CatalogAccessMode, ReaderFormat

    with as_principal("alice"):
        source = ucray.catalog().resolve("main.ml.t", reader=ReaderFormat.DELTA)
        expected = tables.resolve_table("main.ml.t")
    assert source.path == st.delta_uri(expected.storage_location)
    assert (source.data_format, source.filesystem) == (ReaderFormat.DELTA, None)
    assert source.storage_options == (dict(expected.storage_options) or None)
    with pytest.raises(PermissionDenied, match=r"^alice lacks MODIFY on main\.ml\.t$"), as_principal("alice"):
        ucray.catalog().resolve("main.ml.t", reader=ReaderFormat.DELTA, mode=CatalogAccessMode.WRITE)


def _read_delta(name: str, **kwargs: Any) -> Any:
    return ray_data.read_delta(name, catalog=ucray.catalog(), **kwargs)


def _read_parquet(name: str) -> Any:
    return ray_data.read_parquet(name, catalog=ucray.catalog())


@pytest.mark.parametrize(
    ("who", "read", "name", "error", "line"),
    [
        ("alice", _read_delta, "main.ml.nope", NotFound, r"table main\.ml\.nope does not exist"),
        ("bob", _read_delta, "main.ml.t", PermissionDenied, r"bob lacks SELECT on main\.ml\.t"),
        (
            "alice",
            _read_delta,
            "s3://lake/tables/t",
            InvalidName,
            r"ray\.data\.read_delta\(catalog=\.\.\.\) takes a "
            r"table name like 'main\.ml\.t', not the path 's3://lake/tables/t': .*",
        ),
        (
            "alice",
            _read_delta,
            "main.ml.dv",
            CatalogError,
            r"table main\.ml\.dv uses deletion vectors, which "
            r"ray\.data\.read_delta cannot apply .*",
        ),
        (
            "alice",
            _read_parquet,
            "main.ml.t",
            CatalogError,
            r"table main\.ml\.t is a Delta table: .*; read it with "
            r"ray\.data\.read_delta\('main\.ml\.t', catalog=\.\.\.\)",
        ),
    ],
)
@pytest.mark.usefixtures("no_ray")
def test_a_read_ray_must_not_make_is_refused_in_one_line_before_ray_starts(
    tables: Catalog, who: str, read: Any, name: str, error: type[Exception], line: str
) -> None:
    with pytest.raises(error) as raised, as_principal(who):
        read(name)
    assert isinstance(raised.value, error)
    text = str(raised.value)
    assert "\n" not in text and re.fullmatch(line, text), text


@pytest.mark.usefixtures("no_ray")
def test_a_table_whose_delta_files_are_gone_is_not_found(tables: Catalog) -> None:
    import shutil

    location = tables.resolve_table("main.ml.t").storage_location
    shutil.rmtree(st.local_path(location))
    with pytest.raises(NotFound, match=r"^table main\.ml\.t: no Delta table at "):
        _read_delta("main.ml.t")


@pytest.mark.usefixtures("no_ray")
def test_ray_s_write_of_a_table_that_does_not_exist_points_to_write_delta(tables: Catalog) -> None:
    from ray.data.catalog import CatalogAccessMode, ReaderFormat

    with pytest.raises(NotFound) as raised:
        ucray.catalog().resolve("main.ml.new", reader=ReaderFormat.DELTA, mode=CatalogAccessMode.WRITE)
    assert str(raised.value) == (
        "table main.ml.new does not exist; Ray's write_delta cannot register a table when its write commits: "
        "create it with uc_jupyter.ray.write_delta(ds, 'main.ml.new')"
    )


def test_a_pickled_catalog_carries_nothing_of_the_catalog_and_resolves_nothing(tables: Catalog) -> None:
    from ray.data.catalog import ReaderFormat

    shipped = pickle.dumps(UCCatalog(tables))  # what Ray sends to a write task inside its datasink
    http = getattr(tables, "_http", None)
    if http is not None:  # over a server: the catalog's token must not travel
        assert http.token.encode() not in shipped
    assert b"Catalog(" not in shipped and len(shipped) < 200  # a reference to a class, no state
    with pytest.raises(CatalogError, match="resolves tables in the process that made it, never in a Ray task"):
        pickle.loads(shipped).resolve("main.ml.t", reader=ReaderFormat.DELTA)
