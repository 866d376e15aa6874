"""uc_jupyter.ucserver.app, driven in-process (Starlette's TestClient, no socket): each request acts as
its token's principal only, queries and methods as UC has them, and a one-line 500 for the unexpected.
What a real ``uc-jupyter serve`` answers over HTTP is in the other modules here (they start one)."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from uc_jupyter.catalog import as_principal, current_principal
from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.catalog.embedded.tokens import TokenStore
from uc_jupyter.ucserver.app import MAX_BODY, PREFIX, build_app
from uc_jupyter.ucserver.vendor import Vendor

ADMIN = "admin"


@dataclass
class App:
    client: TestClient
    catalog: LocalCatalog
    home: Path
    tokens: dict[str, str]  # principal -> its token

    def call(self, who: str, method: str, path: str, **kwargs: Any) -> tuple[int, Any, str]:
        headers = {"Authorization": f"Bearer {self.tokens[who]}"}
        answer = self.client.request(method, PREFIX + path, headers=headers, **kwargs)
        body = answer.json() if answer.content else {}
        return answer.status_code, body, answer.headers.get("allow", "")


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    """The application over a fresh home with ``admin`` and ``bob`` (no grants), a token each."""
    home = tmp_path / "home"
    with as_principal(ADMIN):
        catalog = LocalCatalog(home)
        catalog.create_principal("bob")
        store = TokenStore(catalog)
        tokens = {who: store.create(who)[1] for who in (ADMIN, "bob")}
    vendor = Vendor(home, reaper=False)
    with TestClient(build_app(catalog, store, vendor), raise_server_exceptions=False) as client:
        yield App(client, catalog, home, tokens)
    vendor.close()


def test_each_request_acts_as_its_tokens_principal_never_the_processes(app: App) -> None:
    assert current_principal() == ADMIN  # the test process (and the app's own) principal
    for _ in range(3):  # interleaved on the same worker threads: nothing carries over
        assert app.call("bob", "GET", "/uc-jupyter/whoami")[1] == {"principal": "bob", "metastore_admin": False}
        assert app.call(ADMIN, "GET", "/uc-jupyter/whoami")[1] == {"principal": ADMIN, "metastore_admin": True}
    status, body, _ = app.call("bob", "POST", "/catalogs", json={"name": "bobs"})
    assert (status, body["error_code"]) == (403, "PERMISSION_DENIED")
    assert str(body["message"]).startswith("bob lacks CREATE CATALOG")
    assert current_principal() == ADMIN  # and nothing leaked back into the caller's context
    with as_principal(ADMIN):
        assert app.catalog.list_catalogs() == []


def test_a_repeated_query_parameter_takes_its_last_value(app: App) -> None:
    for name in ("a", "b", "c"):
        assert app.call(ADMIN, "POST", "/catalogs", json={"name": name})[0] == 200
    status, body, _ = app.call(ADMIN, "GET", "/catalogs", params=[("max_results", "5"), ("max_results", "1")])
    assert status == 200 and [c["name"] for c in body["catalogs"]] == ["a"]
    assert body["next_page_token"]


def test_head_answers_as_get_without_a_body(app: App) -> None:
    answer = app.client.head(PREFIX + "/catalogs", headers={"Authorization": f"Bearer {app.tokens[ADMIN]}"})
    assert (answer.status_code, answer.content) == (200, b"")


def test_a_wrong_method_is_a_405_naming_it_and_allowing_every_method_of_the_path(app: App) -> None:
    status, body, allow = app.call(ADMIN, "PUT", "/catalogs/main")
    assert (status, body["error_code"]) == (405, "METHOD_NOT_ALLOWED")
    assert body["message"] == f"PUT is not allowed on {PREFIX}/catalogs/main"
    assert set(allow.replace(" ", "").split(",")) == {"GET", "HEAD", "PATCH", "DELETE"}


def test_an_unexpected_error_is_a_one_line_500_naming_no_path_and_logged_whole(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    assert app.call(ADMIN, "POST", "/catalogs", json={"name": "main"})[0] == 200
    assert app.call(ADMIN, "POST", "/schemas", json={"name": "s", "catalog_name": "main"})[0] == 200
    shutil.rmtree(app.home / "storage")
    (app.home / "storage").write_text("a file where the managed storage folder belongs")
    volume = {"catalog_name": "main", "schema_name": "s", "name": "v", "volume_type": "MANAGED"}
    with caplog.at_level(logging.ERROR, logger="uc_jupyter.ucserver.app"):
        status, body, _ = app.call(ADMIN, "POST", "/volumes", json=volume)
    assert (status, body["error_code"]) == (500, "INTERNAL")
    assert body["message"] == "internal error (NotADirectoryError); the server's log has the details"
    assert str(app.home) not in str(body)
    (record,) = [r for r in caplog.records if r.name == "uc_jupyter.ucserver.app"]
    assert record.getMessage() == f"POST {PREFIX}/volumes failed"
    assert record.exc_info is not None and record.exc_info[0] is NotADirectoryError
    assert app.call(ADMIN, "GET", "/catalogs")[0] == 200  # and the server goes on serving


def test_a_body_declared_over_the_limit_is_refused_before_it_is_read(app: App) -> None:
    headers = {
        "Authorization": f"Bearer {app.tokens[ADMIN]}",
        "Content-Type": "application/json",
        "Content-Length": str(MAX_BODY + 1),
    }
    # The declared length alone decides: the few bytes actually sent are never parsed.
    answer = app.client.post(PREFIX + "/catalogs", headers=headers, content=b'{"name": "x"}')
    assert (answer.status_code, answer.json()["message"]) == (400, f"request body too large: over {MAX_BODY} bytes")
    with as_principal(ADMIN):
        assert app.catalog.list_catalogs() == []
