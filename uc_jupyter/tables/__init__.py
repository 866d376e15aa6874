"""Catalog tables: Delta snapshots read directly (``delta``), as Spark Connect DataFrames (``frames``).

Attributes load lazily so ``import uc_jupyter.tables`` imports neither pyspark nor deltalake.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["export_table", "get_spark", "load_hf_dataset", "read_arrow", "table", "to_numpy", "to_pandas"]

_HOMES = {
    "export_table": "uc_jupyter.tables.export",
    "load_hf_dataset": "uc_jupyter.tables.export",
    "get_spark": "uc_jupyter.tables.spark",
    "read_arrow": "uc_jupyter.tables.delta",
    "table": "uc_jupyter.tables.frames",
    "to_numpy": "uc_jupyter.tables.frames",
    "to_pandas": "uc_jupyter.tables.frames",
}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module 'uc_jupyter.tables' has no attribute {name!r}")
