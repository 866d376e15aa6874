"""The table tests' catalog: the shared one plus a small table (the Spark server fixtures are in tests/conftest.py)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from uc_jupyter.catalog.embedded.local import LocalCatalog


@pytest.fixture
def catalog(catalog: LocalCatalog) -> LocalCatalog:
    """The shared catalog fixture plus ``main.ml.points``: 50 rows of id, x, tag."""
    catalog.create_table(
        "main.ml.points",
        pa.table({"id": list(range(50)), "x": [i * 0.5 for i in range(50)], "tag": [f"t{i % 3}" for i in range(50)]}),
    )
    return catalog
