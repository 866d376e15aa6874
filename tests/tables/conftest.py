"""One real local Spark Connect server for the whole test session, reached like a remote one."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pyarrow as pa
import pytest

from uc_jupyter.catalog.local import LocalCatalog
from uc_jupyter.tables.spark import LocalServer, local_server, stop_local_server


@pytest.fixture(scope="session")
def spark_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    home = str(tmp_path_factory.mktemp("spark_home"))
    previous = os.environ.get("UC_JUPYTER_HOME")
    os.environ["UC_JUPYTER_HOME"] = home
    try:
        server = local_server(progress=lambda _line: None)
    finally:
        _restore(previous)
    yield server
    os.environ["UC_JUPYTER_HOME"] = home
    try:
        stop_local_server()
    finally:
        _restore(previous)


def _restore(previous: str | None) -> None:
    if previous is None:
        os.environ.pop("UC_JUPYTER_HOME", None)
    else:
        os.environ["UC_JUPYTER_HOME"] = previous


@pytest.fixture
def spark_remote(spark_server: LocalServer, monkeypatch: pytest.MonkeyPatch) -> str:
    """Point UC_JUPYTER_SPARK_REMOTE at the session's server (the remote code path)."""
    monkeypatch.setenv("UC_JUPYTER_SPARK_REMOTE", spark_server.url)
    return spark_server.url


@pytest.fixture
def catalog(catalog: LocalCatalog) -> LocalCatalog:
    """The shared catalog fixture plus ``main.ml.points``: 50 rows of id, x, tag."""
    catalog.create_table(
        "main.ml.points",
        pa.table({"id": list(range(50)), "x": [i * 0.5 for i in range(50)], "tag": [f"t{i % 3}" for i in range(50)]}),
    )
    return catalog
