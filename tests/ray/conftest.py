"""The Ray driver of ``tests/ray``: this process connected to the session's 2-node Ray cluster
(tests/conftest.py's ``ray_cluster``) for one module, and disconnected after it, so that no later test
finds itself a Ray driver. Catalog tables for the tests, made as their owner (the admin)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from uc_jupyter.catalog import Catalog, TableInfo
from uc_jupyter.storage import urls as st
from uc_jupyter.testing.ray_cluster import RayTestCluster


@pytest.fixture(scope="module")
def ray_driver(ray_cluster: RayTestCluster) -> Iterator[RayTestCluster]:
    import ray

    ray.init(address=ray_cluster.address, log_to_driver=False)
    try:
        yield ray_cluster
    finally:
        ray.shutdown()


def fails_late(row: dict[str, Any]) -> dict[str, Any]:
    """A Dataset.map function whose task for the row ``x == 0`` fails after the other tasks have had
    3 s to write their files (a write killed mid-way); every other row passes through."""
    if row["x"] == 0:
        time.sleep(3)
        raise RuntimeError("task killed mid-write")
    return row


def with_readers(catalog: Catalog, *tables: str) -> None:
    """``alice`` may use main.ml and read ``tables`` (SELECT); ``bob`` may use it and holds nothing more."""
    for who in ("alice", "bob"):
        catalog.create_principal(who)
        catalog.grant("main", "USE CATALOG", who)
        catalog.grant("main.ml", "USE SCHEMA", who)
    for table in tables:
        catalog.grant(table, "SELECT", "alice")


def made(catalog: Catalog, name: str, **columns: list[object]) -> TableInfo:
    """A managed table ``name`` of ``columns``, written by the catalog itself."""
    return catalog.create_table(name, pa.table(columns))


def files_below(location: str) -> list[str]:
    """Every file under a local table's or staging table's folder, relative to it (none: it is gone)."""
    root = Path(st.local_path(location))
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()) if root.exists() else []


def managed_folders(home: Path) -> list[str]:
    """The managed tables' folders of a home's storage (staging ones included)."""
    root = home / "storage" / "tables"
    return sorted(p.name for p in root.iterdir()) if root.exists() else []
