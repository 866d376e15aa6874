"""Every test runs against its own catalog home and a fixed principal, never ~/.uc_jupyter."""

from __future__ import annotations

from pathlib import Path

import pytest

from uc_jupyter.catalog import get_catalog
from uc_jupyter.catalog.local import LocalCatalog

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
