"""Attacks on ``uc-jupyter serve`` that must fail: requests without a (live) token on any route, a
token revoked while its client is connected, and two principals at once in two processes seeing each
other's objects (the principal of one request leaking into another through the thread pool).

"0 routes answer without a token": every route of the application times every method, plus random
paths, is answered 401 UNAUTHENTICATED without a token, with a wrong one and with a revoked one.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.ucserver.conftest import ADMIN, Client, Served, start_server
from uc_jupyter.catalog import as_principal
from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.ucserver.app import build_app

METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    server = start_server(tmp_path_factory.mktemp("attacked_home"))
    with as_principal(ADMIN):
        server.catalog.create_catalog("main")
        server.catalog.create_schema("main.ml")
    yield server
    assert server.stop() == (0, "")


def app_paths() -> list[str]:
    """Every route path of the application, its parameters filled with names that exist."""
    app = build_app(LocalCatalog(tempfile.mkdtemp()))
    filled = {"{name}": "main", "{full_name}": "main.ml", "{securable_type}": "schema", "{id}": str(uuid.uuid4())}
    paths = set()
    for route in app.routes:
        path = route.path  # type: ignore[attr-defined]
        for param, value in filled.items():
            path = path.replace(param, value)
        assert "{" not in path, f"a route parameter without a sample value: {path}"
        paths.add(path)
    return sorted(paths)


def revoked_token(server: Served) -> str:
    token = server.token("victim")
    with as_principal(ADMIN):
        server.tokens.revoke(token.split("_")[1])
    return token


def test_no_route_answers_without_a_live_token(served: Served) -> None:
    paths = app_paths()
    assert len(paths) >= 4
    bad_tokens = [None, "ucj_" + "0" * 16 + "_" + "A" * 43, revoked_token(served), served.admin_token + "x"]
    answered = 0
    for token in bad_tokens:
        client = served.client(token)
        for path in paths:
            for method in METHODS:
                body = {"name": "intruder", "catalog_name": "main"} if method in ("POST", "PATCH", "PUT") else None
                answer = client.call(method, path, json_body=body)
                assert answer.status == 401, (token, method, path, answer)
                if method != "HEAD":
                    assert answer.error_code == "UNAUTHENTICATED"
                answered += 1
    assert answered == len(bad_tokens) * len(paths) * len(METHODS)
    with as_principal(ADMIN):
        assert [c.name for c in served.catalog.list_catalogs()] == ["main"]
        assert [s.name for s in served.catalog.list_schemas("main")] == ["ml"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    path=st.lists(
        st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E, exclude_characters="?#%"), max_size=12),
        max_size=5,
    ),
    method=st.sampled_from(METHODS),
)
def test_random_paths_answer_401_without_a_token(served: Served, path: list[str], method: str) -> None:
    target = "/" + "/".join(path)
    client = Client(served.url, None)
    try:
        answer = client.call(method, target)
    finally:
        client.close()
    assert answer.status == 401, (method, target, answer)


def test_a_token_revoked_mid_session_is_refused_on_the_next_request(served: Served) -> None:
    token = served.token("grace")
    client = served.client(token)
    with as_principal(ADMIN):
        served.catalog.grant("main", "USE CATALOG", "grace")
    assert client.call("GET", "catalogs/main").status == 200
    connection = client.conn.sock
    with as_principal(ADMIN):
        served.tokens.revoke(token.split("_")[1])  # another process than the server, as the CLI would
    answer = client.call("GET", "catalogs/main")
    assert (answer.status, answer.error_code) == (401, "UNAUTHENTICATED")
    assert client.conn.sock is connection  # the same keep-alive connection: no per-connection cache


CLIENT_LOOP = r"""
import http.client, json, sys
host, port, token, rounds = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
conn = http.client.HTTPConnection(host, port, timeout=60)
auth = {"Authorization": "Bearer " + token}
seen = set()
for _ in range(rounds):
    conn.request("GET", "/api/2.1/unity-catalog/catalogs", headers=auth)
    seen.add(tuple(sorted(c["name"] for c in json.loads(conn.getresponse().read())["catalogs"])))
    conn.request("GET", "/api/2.1/unity-catalog/schemas?catalog_name=main", headers=auth)
    response = conn.getresponse()
    schemas = json.loads(response.read()).get("schemas", ())
    seen.add(("schemas", response.status, tuple(sorted(s["name"] for s in schemas))))
print(json.dumps(sorted(seen)))
"""


def test_two_principals_in_two_processes_at_once_see_only_their_own(served: Served) -> None:
    with as_principal(ADMIN):
        for who in ("hana", "ivan"):
            served.principal(who)
            served.catalog.create_catalog(f"only_{who}")
            served.catalog.grant(f"only_{who}", "USE CATALOG", who)
        served.catalog.create_schema("main.hana_s")
        served.catalog.grant("main", "USE CATALOG", "hana")
        served.catalog.grant("main.hana_s", "USE SCHEMA", "hana")
    host, port = served.url.removeprefix("http://").split(":")
    rounds = 300
    processes = {
        who: subprocess.Popen(
            [sys.executable, "-c", CLIENT_LOOP, host, port, served.token(who), str(rounds)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for who in ("hana", "ivan")
    }
    seen = {who: json.loads(p.communicate(timeout=120)[0]) for who, p in processes.items()}
    assert all(p.returncode == 0 for p in processes.values())
    assert seen["hana"] == [["main", "only_hana"], ["schemas", 200, ["hana_s"]]]
    assert seen["ivan"] == [["only_ivan"], ["schemas", 403, []]]
