"""A real IPython shell with the extension loaded, and a catalog with a table and a volume."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from IPython.core.interactiveshell import InteractiveShell

from uc_jupyter.catalog.embedded.local import LocalCatalog


@pytest.fixture
def shell() -> Iterator[InteractiveShell]:
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "uc_jupyter")
    yield ip
    ip.run_line_magic("unload_ext", "uc_jupyter")  # also stops the kernel's rank pool
    ip.user_ns.pop("result", None)


@pytest.fixture
def catalog(catalog: LocalCatalog) -> LocalCatalog:
    """main.ml.points (50 rows) and main.ml.docs (a volume of 12 text files in two folders)."""
    catalog.create_table(
        "main.ml.points",
        pa.table({"id": list(range(50)), "x": [i * 0.5 for i in range(50)], "tag": [f"t{i % 3}" for i in range(50)]}),
    )
    info = catalog.create_volume("main.ml.docs")
    folder = Path(info.storage_location.removeprefix("file://"))
    for i in range(12):
        path = folder / ("cats" if i % 2 else "dogs") / f"doc{i:02d}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"document {i}")
    return catalog
