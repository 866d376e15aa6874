"""Every test runs against its own catalog home and a fixed principal, never ~/.uc_jupyter."""

from __future__ import annotations

from pathlib import Path

import pytest

ADMIN = "admin"


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path_factory.mktemp("uc_home")
    monkeypatch.setenv("UC_JUPYTER_HOME", str(home))
    monkeypatch.setenv("UC_JUPYTER_PRINCIPAL", ADMIN)
    monkeypatch.delenv("UC_JUPYTER_SPARK_REMOTE", raising=False)
    return home
