"""Every test runs against its own catalog home and a fixed principal, never ~/.uc_jupyter; tests that
need Spark share one real local Spark Connect server per session, reached like a remote one."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from uc_jupyter.catalog import get_catalog
from uc_jupyter.catalog.local import LocalCatalog
from uc_jupyter.tables.spark import LocalServer, local_server, stop_local_server

ADMIN = "admin"


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path_factory.mktemp("uc_home")
    monkeypatch.setenv("UC_JUPYTER_HOME", str(home))
    monkeypatch.setenv("UC_JUPYTER_PRINCIPAL", ADMIN)
    monkeypatch.delenv("UC_JUPYTER_SPARK_REMOTE", raising=False)
    return home


@pytest.fixture
def catalog(isolated_home: Path) -> LocalCatalog:
    """The embedded catalog of this test's home, with catalog ``main`` and schema ``main.ml``."""
    cat = get_catalog()
    assert isinstance(cat, LocalCatalog)
    cat.create_catalog("main")
    cat.create_schema("main.ml")
    return cat


@pytest.fixture(scope="session")
def spark_home(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("spark_home"))


@pytest.fixture(scope="session")
def spark_server(spark_home: str) -> Iterator[LocalServer]:
    """The session's server. Like any local server it stops itself 30 minutes after its last use, so
    a killed test run leaves no JVM behind; ``spark_remote`` counts as a use and restarts it if needed."""
    home = spark_home
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
def spark_remote(spark_server: LocalServer, spark_home: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Point UC_JUPYTER_SPARK_REMOTE at the session's server (the remote code path)."""
    previous = os.environ.get("UC_JUPYTER_HOME")
    os.environ["UC_JUPYTER_HOME"] = spark_home
    try:
        url = local_server(progress=lambda _line: None).url  # a use: the idle clock starts again
    finally:
        _restore(previous)
    monkeypatch.setenv("UC_JUPYTER_SPARK_REMOTE", url)
    return url


@pytest.fixture
def busy_machine() -> Iterator[None]:
    """Two processes spinning beside the test, one per core of a 2-core CI machine: the load under
    which threads that forward data (queue feeders, channel readers) run late."""
    import subprocess
    import sys

    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
