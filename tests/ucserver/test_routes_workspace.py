"""uc_jupyter.ucserver.routes_workspace, in-process: ``POST /api/2.0/unity-catalog/temporary-table-credentials``
(where Databricks serves it, and databricks-sdk asks) answers exactly as the UC route under 2.1 does, for a
reader, a principal without SELECT, an id that names nothing and a malformed id. Over a real server, with
keys S3 enforces, through databricks-sdk and Ray: tests/readers/test_ray_data.py."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from starlette.testclient import TestClient

from uc_jupyter.catalog import as_principal
from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.catalog.embedded.tokens import TokenStore
from uc_jupyter.ucserver import PREFIX
from uc_jupyter.ucserver.app import build_app
from uc_jupyter.ucserver.routes_workspace import WORKSPACE_PREFIX
from uc_jupyter.ucserver.vendor import Vendor

ADMIN = "admin"
ROUTE = "/temporary-table-credentials"


@dataclass
class App:
    client: TestClient
    table_id: str
    storage_location: str
    tokens: dict[str, str]

    def vend(self, who: str, prefix: str, body: dict[str, Any]) -> tuple[int, Any]:
        answer = self.client.post(prefix + ROUTE, json=body, headers={"Authorization": f"Bearer {self.tokens[who]}"})
        return answer.status_code, answer.json()


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    """A managed table ``main.ml.t``; ``reader`` holds SELECT on it, ``nosy`` only USE CATALOG/SCHEMA."""
    home = tmp_path / "home"
    with as_principal(ADMIN):
        catalog = LocalCatalog(home)
        catalog.create_catalog("main")
        catalog.create_schema("main.ml")
        catalog.create_table("main.ml.t", pa.table({"x": [1, 2]}))
        for who in ("reader", "nosy"):
            catalog.create_principal(who)
            catalog.grant("main", "USE CATALOG", who)
            catalog.grant("main.ml", "USE SCHEMA", who)
        catalog.grant("main.ml.t", "SELECT", "reader")
        store = TokenStore(catalog)
        tokens = {who: store.create(who)[1] for who in (ADMIN, "reader", "nosy")}
        table = catalog.get_table("main.ml.t")
    vendor = Vendor(home, reaper=False)
    with TestClient(build_app(catalog, store, vendor), raise_server_exceptions=False) as client:
        assert table.id is not None
        yield App(client, table.id, table.storage_location, tokens)
    vendor.close()


def test_a_reader_gets_the_tables_credentials_under_both_prefixes(app: App) -> None:
    body = {"table_id": app.table_id, "operation": "READ"}
    (status_20, answer_20), (status_21, answer_21) = (app.vend("reader", p, body) for p in (WORKSPACE_PREFIX, PREFIX))
    assert (status_20, status_21) == (200, 200)
    assert answer_20["url"] == answer_21["url"] == app.storage_location


@pytest.mark.parametrize(
    ("who", "body", "status", "error_code"),
    [
        ("nosy", {"operation": "READ"}, 403, "PERMISSION_DENIED"),  # sees the schema, lacks SELECT
        ("nosy", {"operation": "READ_WRITE"}, 403, "PERMISSION_DENIED"),
        ("reader", {"operation": "READ_WRITE"}, 403, "PERMISSION_DENIED"),  # SELECT without MODIFY
        ("reader", {"operation": "READ", "table_id": "00000000-0000-4000-8000-000000000000"}, 403, "PERMISSION_DENIED"),
        ("reader", {"operation": "READ", "table_id": "main.ml.t"}, 400, "INVALID_ARGUMENT"),  # a name, not an id
        ("reader", {"operation": "WRITE"}, 400, "INVALID_ARGUMENT"),
    ],
)
def test_refusals_are_the_uc_routes_own(app: App, who: str, body: dict[str, Any], status: int, error_code: str) -> None:
    body = {"table_id": app.table_id, **body}
    answers = [app.vend(who, prefix, body) for prefix in (WORKSPACE_PREFIX, PREFIX)]
    assert answers[0] == answers[1]
    assert (answers[0][0], answers[0][1]["error_code"]) == (status, error_code)
    assert "\n" not in answers[0][1]["message"]
