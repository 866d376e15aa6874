"""Catalog tables: Delta snapshots read directly (``delta``), as Spark Connect DataFrames (``frames``).

Attributes load lazily so ``import uc_jupyter.tables`` imports neither pyspark nor deltalake.
"""

from __future__ import annotations

from uc_jupyter.lazy import lazy_attributes

__all__ = [
    "QueryError",
    "export_table",
    "get_spark",
    "load_hf_dataset",
    "read_arrow",
    "table",
    "to_numpy",
    "to_pandas",
]

_HOMES = {
    "QueryError": "uc_jupyter.tables.analysis",
    "export_table": "uc_jupyter.tables.export",
    "load_hf_dataset": "uc_jupyter.tables.export",
    "get_spark": "uc_jupyter.tables.spark",
    "read_arrow": "uc_jupyter.tables.delta",
    "table": "uc_jupyter.tables.frames",
    "to_numpy": "uc_jupyter.tables.frames",
    "to_pandas": "uc_jupyter.tables.frames",
}


__getattr__ = lazy_attributes("uc_jupyter.tables", _HOMES)
