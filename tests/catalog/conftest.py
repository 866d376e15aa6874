"""What the catalog's tests share: a fresh embedded home holding ``main.ml``, the principals a test
names, and a local folder to make an external location of."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from uc_jupyter.catalog.embedded.local import LocalCatalog


def home_with_main_ml(root: Path, **options: Any) -> LocalCatalog:
    """A fresh embedded catalog at ``root`` (``options`` as LocalCatalog takes them) with catalog
    ``main`` and schema ``main.ml``, as its admin."""
    catalog = LocalCatalog(root, **options)
    catalog.create_catalog("main")
    catalog.create_schema("main.ml")
    return catalog


def with_principals(catalog: LocalCatalog, *principals: str, use_schema: bool = False) -> LocalCatalog:
    """``catalog`` with ``principals`` made; ``use_schema``: each may also use ``main`` and ``main.ml``."""
    for principal in principals:
        catalog.create_principal(principal)
        if use_schema:
            catalog.grant("main", "USE CATALOG", principal)
            catalog.grant("main.ml", "USE SCHEMA", principal)
    return catalog


@pytest.fixture
def main_ml(tmp_path: Path) -> LocalCatalog:
    """A fresh home under ``tmp_path`` with ``main.ml`` (see :func:`home_with_main_ml`)."""
    return home_with_main_ml(tmp_path / "home")


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    """A local folder to make an external location of (resolved, as the catalog stores locations)."""
    folder = (tmp_path / "lake").resolve()
    folder.mkdir()
    return folder
