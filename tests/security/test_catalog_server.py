"""Attacks on ``uc-jupyter serve`` through what a client names and how many clients there are.

Names: path escapes through the REST names (``..``, ``%2F``, ``%2E%2E``, NUL, empty parts, over-long
parts, look-alikes) in every route's path parameters, in bodies and in queries, and through the
``storage_location`` of external volumes and tables: each is refused with a UC client error (400
``INVALID_ARGUMENT`` where the name is malformed) and leaves the metastore and the storage as they were.

Clients: a token revoked by ``uc-jupyter token revoke`` (a third process) while two clients hammer the
server with it on keep-alive connections; principals writing at once from several processes, each
seeing only its own; and 8 writer processes whose every acknowledged write is there afterwards and
every refused one left nothing. What tests/ucserver/test_auth.py and tests/security/test_ucserver.py
already try (bad tokens on every route, a revocation between two calls of the test, two readers) is
not repeated here.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from tests.ucserver.conftest import ADMIN, API, Answer, Client, Served, start_server
from uc_jupyter.catalog import NotFound, as_principal
from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.catalog.rules.names import quote_part
from uc_jupyter.testing.catalogs import external_location
from uc_jupyter.ucserver.app import build_app

CLIENTS = Path(__file__).with_name("catalog_clients.py")
ROWS = pa.table({"x": pa.array([1, 2], pa.int64())})

# Raw (already percent-encoded) parts of a path parameter that are malformed names: each must be 400
# INVALID_ARGUMENT wherever it stands in a full name.
MALFORMED = {
    "dot-dot": "..",
    "encoded dot-dot": "%2E%2E",
    "lower-case encoded dot-dot": "%2e%2e",
    "dot": ".",
    "backslash climb": "..%5C..%5Cetc",
    "NUL": "main%00",
    "newline": "main%0A",
    "space": "main%20",
    "over-long part": "x" * 256,
    "very long name": "y" * 10_000,
}
# Parts that decode to a slash: the router finds no route for them (404 NOT_FOUND, "no route"), which
# reads nothing either; a malformed-name answer would do as well.
SLASHED = {"encoded slash": "a%2Fb", "encoded climb": "..%2F..%2Fetc%2Fpasswd", "encoded root": "%2Fetc"}
FULLWIDTH_MAIN = "\uff4d\uff41\uff49\uff4e"  # "main" in fullwidth letters: another name
# Full names with an empty part (the shapes a part's own attack cannot make).
EMPTY_PARTS = ("main..v", ".ml.v", "main.ml.", "..", "main.", ".main")


def full_names(part: str) -> list[str]:
    """``part`` as a whole name and at every level of one, so each route meets it at its own level."""
    return [part, f"main.{part}", f"main.ml.{part}", f"{part}.ml.v", f"main.{part}.v"]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    server = start_server(tmp_path_factory.mktemp("names_home"))
    with as_principal(ADMIN):
        cat = server.catalog
        cat.create_catalog("main")
        cat.create_schema("main.ml")
        cat.create_volume("main.ml.v")
        cat.create_table("main.ml.t", ROWS)
        cat.create_catalog("kitchen")
    server.principal("bob")
    with as_principal(ADMIN):
        server.catalog.grant("metastore", "CREATE CATALOG", "bob", kind="metastore")
    yield server
    assert server.stop() == (0, "")


def snapshot(served: Served) -> dict[str, Any]:
    """Everything an attack could have changed: every object (with owner, storage, comment), every
    grant, principal, credential and location, and every path under the home's storage folder."""
    with as_principal(ADMIN):
        cat = served.catalog
        objects: list[object] = []
        grants: list[object] = []
        for c in cat.list_catalogs():
            objects.append(c)
            grants += cat.show_grants(quote_part(c.name))
            for s in cat.list_schemas(quote_part(c.name)):
                schema = f"{quote_part(c.name)}.{quote_part(s.name)}"
                objects.append(s)
                grants += cat.show_grants(schema)
                for child in (*cat.list_tables(schema), *cat.list_volumes(schema)):
                    objects.append(child)
                    grants += cat.show_grants(f"{schema}.{quote_part(child.name)}")
        grants += cat.show_grants("metastore", kind="metastore")
        return {
            "objects": sorted(map(repr, objects)),
            "grants": sorted(map(repr, grants)),
            "principals": sorted(p.name for p in cat.list_principals()),
            "credentials": sorted(map(repr, cat.list_storage_credentials())),
            "locations": sorted(map(repr, cat.list_external_locations())),
            "storage": sorted(str(p.relative_to(cat.root)) for p in (cat.root / "storage").rglob("*")),
        }


TREE_ROUTES = ("catalogs/", "schemas/", "tables/", "volumes/", "permissions/", "uc-jupyter/tables/")
TREE_TYPES = ("catalog", "schema", "table", "volume")


@functools.cache
def app_routes() -> list[tuple[str, list[str]]]:
    """(path under the API prefix, methods) of every route of the application, HEAD left out."""
    with tempfile.TemporaryDirectory() as home:
        app = build_app(LocalCatalog(home))
        return [
            (route.path.removeprefix(API + "/"), sorted(set(route.methods or ()) - {"HEAD"}))  # type: ignore[attr-defined]
            for route in app.routes
        ]


def route_targets(part: str) -> Iterator[tuple[str, str, Any, bool]]:
    """(method, path, body, tree) for every route with a name in its path, that name being each full
    name made from ``part`` (and a securable type, where there is one, each type in turn); PATCHes carry
    a body that would change something, DELETEs ask for ``force``. ``tree`` says the name is a catalog
    tree's (parsed by the name grammar), not a flat one (a principal, credential, location or id:
    looked up as a string)."""
    for path, methods in app_routes():
        params = [p for p in ("{name}", "{full_name}", "{id}") if p in path]
        if not params:
            continue
        types = [*TREE_TYPES, "external_location", "credential"] if "{securable_type}" in path else [""]
        for securable_type in types:
            tree = path.startswith(TREE_ROUTES) and securable_type in ("", *TREE_TYPES)
            for name in full_names(part):
                target = path.replace("{securable_type}", securable_type).replace(params[0], name)
                for method in methods:
                    body: Any = None
                    if method == "PATCH" and "permissions" in path:
                        body = {"changes": [{"principal": "bob", "add": ["USE CATALOG"], "remove": []}]}
                    elif method in ("PATCH", "POST", "PUT"):
                        body = {"comment": "pwned"}
                    suffix = "?force=true" if method == "DELETE" else ""
                    yield method, target + suffix, body, tree


def call(client: Client, method: str, path: str, body: Any = None) -> Answer:
    return client.call(method, f"{API}/{path}", json_body=body)


def assert_refused(answer: Answer, allowed: set[str], what: object) -> None:
    """A UC client error (400 or 404) whose code is among ``allowed`` (``*NOT_FOUND``: any not-found)."""
    code = answer.error_code or ""
    known = code in allowed or ("*NOT_FOUND" in allowed and code.endswith("NOT_FOUND"))
    assert answer.status in (400, 404) and known, (what, answer)
    assert "\n" not in answer.body["message"], what


@pytest.mark.parametrize("attack", [*MALFORMED, *SLASHED])
def test_malformed_names_in_path_parameters_are_refused_and_change_nothing(served: Served, attack: str) -> None:
    before = snapshot(served)
    part = MALFORMED.get(attack) or SLASHED[attack]
    admin = served.admin()  # the admin may read and drop anything: only the name can stop it
    tried = 0
    for method, path, body, tree in route_targets(part):
        answer = call(admin, method, path, body)
        if attack in SLASHED:  # routing's 404, or refused as a name
            assert_refused(answer, {"INVALID_ARGUMENT", "NOT_FOUND"}, (method, path))
            if answer.error_code == "NOT_FOUND" and tree:
                assert answer.body["message"].startswith("no route"), (method, path, answer)
        else:  # a flat name cannot exist with these characters: not found is as good as invalid
            assert_refused(answer, {"INVALID_ARGUMENT"} if tree else {"INVALID_ARGUMENT", "*NOT_FOUND"}, (method, path))
        tried += 1
    assert tried >= 5 * 8  # every route with a name: catalogs, schemas, tables, volumes, permissions
    assert snapshot(served) == before


def test_empty_parts_in_path_parameters_are_invalid_arguments(served: Served) -> None:
    before = snapshot(served)
    admin = served.admin()
    for name in EMPTY_PARTS:
        for method, path, body, tree in route_targets("v"):
            if tree and path.split("?")[0].endswith("/v"):  # the name alone: put the empty-part shape there
                answer = call(admin, method, path.replace("/v", "/" + name, 1), body)
                assert_refused(answer, {"INVALID_ARGUMENT"}, (method, path, name))
    assert snapshot(served) == before


BODY_NAMES = ("..", ".", "", "a/b", "../etc", "x\x00", "a\nb", "x" * 256, "main.ml", "`main`.`ml`", "ml.v")


def creates(name: str) -> list[tuple[str, dict[str, Any]]]:
    """Every create body, with ``name`` in each of its name fields in turn."""
    bodies: list[tuple[str, dict[str, Any]]] = []
    for field in ("name",):
        bodies.append(("catalogs", {field: name}))
    for field in ("name", "catalog_name"):
        bodies.append(("schemas", {"name": "s", "catalog_name": "main", field: name}))
    for field in ("name", "catalog_name", "schema_name"):
        volume = {"catalog_name": "main", "schema_name": "ml", "name": "w", "volume_type": "MANAGED"}
        bodies.append(("volumes", {**volume, field: name}))
        table = {"catalog_name": "main", "schema_name": "ml", "name": "u", "table_type": "EXTERNAL", "columns": []}
        bodies.append(("tables", {**table, "storage_location": "file:///nowhere", field: name}))
    return bodies


@pytest.mark.parametrize("name", BODY_NAMES, ids=repr)
def test_malformed_names_in_bodies_and_queries_are_refused_and_change_nothing(served: Served, name: str) -> None:
    before = snapshot(served)
    admin = served.admin()
    for path, body in creates(name):
        assert_refused(call(admin, "POST", path, body), {"INVALID_ARGUMENT"}, (path, body))
    queries = [("schemas", {"catalog_name": name})]
    for listing in ("tables", "volumes"):
        queries += [(listing, {"catalog_name": "main", "schema_name": name})]
        queries += [(listing, {"catalog_name": name, "schema_name": "ml"})]
    for path, query in queries:
        answer = admin.call("GET", path, query=query)
        if name == "":  # an empty parameter counts as a missing one: refused for that
            assert answer.error_code == "INVALID_ARGUMENT" and "needs the query parameter" in answer.body["message"]
        assert_refused(answer, {"INVALID_ARGUMENT"}, (path, query))
    change = {"changes": [{"principal": name, "add": ["USE CATALOG"], "remove": []}]}
    answer = call(admin, "PATCH", "permissions/catalog/main", change)
    assert answer.status in (400, 404), answer  # a principal that does not exist gets nothing
    assert snapshot(served) == before


def test_look_alike_names_are_other_names_and_folded_ones_the_same_checked_name(served: Served) -> None:
    bob = served.client(served.token("bob"))
    invisible = call(bob, "GET", f"catalogs/{quote('main' + chr(0x200B))}")  # a zero-width space: no name at all
    assert (invisible.status, invisible.error_code) == (400, "INVALID_ARGUMENT"), invisible
    assert "invisible or direction-changing character U+200B" in invisible.body["message"]
    for look_alike in (
        FULLWIDTH_MAIN,
        "ma\u0131n",
        "main\u2024ml",
        "main\uff0eml",
        "a\u2215b",
        "ma\u0456n",
    ):
        answer = call(bob, "GET", f"catalogs/{quote(look_alike)}")
        assert (answer.status, answer.error_code) == (404, "CATALOG_NOT_FOUND"), (look_alike, answer)
        listing = bob.call("GET", "schemas", query={"catalog_name": look_alike})
        assert (listing.status, listing.error_code) == (404, "CATALOG_NOT_FOUND"), (look_alike, listing)
    made = call(bob, "POST", "catalogs", {"name": FULLWIDTH_MAIN})  # a catalog of its own, not a way into main
    assert (made.status, made.body["owner"], made.body["name"]) == (200, "bob", FULLWIDTH_MAIN)
    assert [s["name"] for s in bob.call("GET", "schemas", query={"catalog_name": FULLWIDTH_MAIN}).body["schemas"]] == []
    assert call(bob, "GET", "schemas/main.ml").error_code == "PERMISSION_DENIED"
    # The Kelvin sign lower-cases to "k": the name is kitchen's, and so are its checks.
    for folded in ("\u212aitchen", "KITCHEN"):
        denied = call(bob, "GET", f"catalogs/{quote(folded)}")
        assert (denied.status, denied.body["message"]) == (403, "bob lacks USE CATALOG on kitchen"), folded
        taken = call(bob, "POST", "catalogs", {"name": folded})
        assert (taken.status, taken.error_code) == (400, "CATALOG_ALREADY_EXISTS"), folded
    with as_principal(ADMIN):
        assert served.catalog.get_catalog_info("kitchen").owner == ADMIN
    assert call(bob, "DELETE", f"catalogs/{quote(FULLWIDTH_MAIN)}").status == 200


def test_a_trailing_slash_is_a_uc_error_not_a_redirect_to_the_host_header(served: Served) -> None:
    answer = served.admin().call("GET", f"{API}/catalogs/", headers={"Host": "attacker.example"})
    assert answer.status in (400, 404) and answer.error_code is not None, answer
    assert "attacker.example" not in answer.headers.get("location", "")


def test_an_over_long_name_is_not_echoed_whole(served: Served) -> None:
    answer = call(served.admin(), "GET", "catalogs/" + "y" * 10_000)
    assert answer.error_code == "INVALID_ARGUMENT" and len(answer.body["message"]) < 1000, len(answer.body["message"])


def test_storage_locations_that_climb_out_of_an_external_location_are_refused(served: Served, tmp_path: Path) -> None:
    inside, outside = tmp_path / "loc", tmp_path / "outside"
    inside.mkdir()
    outside.mkdir()
    write_deltalake(str(outside / "table"), ROWS)
    (inside / "link").symlink_to(outside, target_is_directory=True)
    served.principal("carol")
    with as_principal(ADMIN):
        location = external_location(served.catalog, str(inside))
        for privilege in ("CREATE EXTERNAL VOLUME", "CREATE EXTERNAL TABLE"):
            served.catalog.grant(location.name, privilege, "carol", kind="external_location")
    with as_principal(ADMIN):
        served.catalog.grant("main", "USE CATALOG", "carol")
        for privilege in ("USE SCHEMA", "CREATE VOLUME", "CREATE TABLE"):
            served.catalog.grant("main.ml", privilege, "carol")
    carol = served.client(served.token("carol"))
    before, outside_files = snapshot(served), sorted(outside.rglob("*"))
    escapes = [
        f"file://{inside}/../outside",
        f"file://{inside}/%2E%2E/outside",
        f"file://{inside}/./../outside/table",
        f"{inside}/../outside",
        f"file://{inside}/link",
        f"file://{inside}/link/table",
        f"file://{inside}/..%2Foutside",
        f"file://{served.catalog.root}",
        f"file://{served.catalog.root}/storage/volumes",
    ]
    for url in escapes:
        volume = {"catalog_name": "main", "schema_name": "ml", "name": "esc", "volume_type": "EXTERNAL"}
        table = {"catalog_name": "main", "schema_name": "ml", "name": "esc", "table_type": "EXTERNAL", "columns": []}
        for path, body in (("volumes", volume), ("tables", table)):
            answer = call(carol, "POST", path, {**body, "storage_location": url})
            assert answer.status in (400, 403, 404), (path, url, answer)
    assert snapshot(served) == before
    assert sorted(outside.rglob("*")) == outside_files
    inside_ok = call(carol, "POST", "volumes", {**volume, "storage_location": f"file://{inside}/ok/../fine"})
    assert inside_ok.status == 200 and inside_ok.body["storage_location"].endswith("/loc/fine"), inside_ok
    with as_principal(ADMIN):
        served.catalog.drop_volume("main.ml.esc")


def client(*args: str, stdin: bool = False) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(CLIENTS), *args],
        stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def result(process: subprocess.Popen[str]) -> Any:
    out, err = process.communicate(timeout=240)
    assert process.returncode == 0, err
    return json.loads(out)


def release(processes: list[subprocess.Popen[str]]) -> None:
    """Let processes waiting for their start signal go, as nearly at once as pipes allow."""
    for process in processes:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[Served]:
    server = start_server(tmp_path / "home")
    yield server
    assert server.stop() == (0, "")


def test_a_token_revoked_by_the_cli_is_refused_on_every_call_sent_after(own_server: Served, tmp_path: Path) -> None:
    token = own_server.token("grace")
    marker = tmp_path / "revoked"
    clients = [client("until-revoked", own_server.url, token, str(marker)) for _ in range(2)]
    for process in clients:  # each has had a call answered 200 and goes on calling
        assert process.stdout is not None and process.stdout.readline() == "ready\n"
    env = {**os.environ, "UC_JUPYTER_HOME": str(own_server.catalog.root), "UC_JUPYTER_PRINCIPAL": ADMIN}
    revoke = subprocess.run(
        [sys.executable, "-m", "uc_jupyter.cli", "token", "revoke", token.split("_")[1]],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert revoke.returncode == 0, revoke.stderr
    marker.touch()  # after the revocation committed: every call that sees it was sent after
    for done in map(result, clients):
        after = [status for seen, status in done["calls"] if seen]
        assert after == [401] * 20, done["calls"]
        assert done["calls"][0] == [False, 200]
        assert done["connections"] == 1  # one keep-alive connection throughout: nothing cached on it
    assert own_server.client(token).call("GET", "catalogs").status == 401


def test_principals_writing_from_four_processes_each_see_and_own_only_their_own(own_server: Served) -> None:
    with as_principal(ADMIN):
        own_server.catalog.create_catalog("main")
        own_server.catalog.create_schema("main.shared")
    for who in ("hana", "ivan"):
        own_server.principal(who)
        with as_principal(ADMIN):
            own_server.catalog.grant("main", "USE CATALOG", who)
            for privilege in ("USE SCHEMA", "CREATE VOLUME"):
                own_server.catalog.grant("main.shared", privilege, who)
    count = 15
    runs = {
        (who, tag): client("own-volumes", own_server.url, own_server.token(who), who, tag, str(count), stdin=True)
        for who in ("hana", "ivan")
        for tag in ("a", "b")
    }
    release(list(runs.values()))
    for (who, _), process in runs.items():
        done = result(process)
        assert {(s["status"], s["owner"]) for s in done["steps"]} == {(200, who)}, done["steps"]
        for listed in done["listed"]:
            assert listed and all(entry.endswith(f":{who}") and entry.startswith(f"{who}_") for entry in listed)
        assert len(done["listed"][-1]) >= count  # at least its own, perhaps some of its sibling's
        assert done["connections"] == 1
    with as_principal(ADMIN):
        volumes = own_server.catalog.list_volumes("main.shared")
    assert Counter(v.owner for v in volumes) == {"hana": 2 * count, "ivan": 2 * count}
    assert all(v.name.startswith(f"{v.owner}_") for v in volumes)


def test_eight_writer_processes_lose_no_acknowledged_write_and_leave_nothing_refused(
    own_server: Served, tmp_path: Path
) -> None:
    writers, rounds = [f"w{i}" for i in range(8)], 4
    lake = tmp_path / "lake"
    with as_principal(ADMIN):
        cat = own_server.catalog
        cat.create_catalog("arena")
        cat.create_catalog("forbidden")
        location = external_location(cat, str(lake.parent / "lake"))
    plans = []
    for who in writers:
        own_server.principal(who)
        with as_principal(ADMIN):
            for privilege in ("USE CATALOG", "CREATE SCHEMA"):
                cat.grant("arena", privilege, who)
            cat.grant(location.name, "CREATE EXTERNAL TABLE", who, kind="external_location")
        own = []
        for r in range(rounds):
            write_deltalake(str(lake / who / str(r)), ROWS)
            own.append(f"file://{lake / who / str(r)}")
        plans.append(
            {"own_tables": own, "contested_tables": [f"file://{lake / 'shared' / str(r)}" for r in range(rounds)]}
        )
    for r in range(rounds):
        write_deltalake(str(lake / "shared" / str(r)), ROWS)
    own_server.principal("reader")
    runs = [
        client(
            "writer",
            own_server.url,
            own_server.token(who),
            str(i),
            str(rounds),
            json.dumps({**plan, "reader": "reader"}),
            stdin=True,
        )
        for i, (who, plan) in enumerate(zip(writers, plans, strict=True))
    ]
    release(runs)
    steps = [(who, step) for who, process in zip(writers, runs, strict=True) for step in result(process)["steps"]]
    statuses = Counter((s["op"], s["status"], s["code"]) for _, s in steps)
    assert all(status < 500 for _, status, _ in statuses), statuses  # no lost race surfaced as a 500
    for op in ("schema", "volume", "table", "grant"):
        assert statuses[(op, 200, None)] == len(writers) * rounds, statuses
    assert statuses[("forbidden schema", 403, "PERMISSION_DENIED")] == len(writers) * rounds, statuses
    with as_principal(ADMIN):
        for who, step in steps:
            key, acked = step["key"], step["status"] == 200
            if step["op"] in ("schema", "contested schema", "forbidden schema"):
                exists = _exists(cat.get_schema, key)
            elif step["op"] == "volume":
                exists = _exists(cat.get_volume, key)
            elif step["op"] in ("table", "contested table"):
                exists = _exists(cat.get_table, key)
            else:
                exists = any(g.principal == "reader" and str(g.privilege) == "USE SCHEMA" for g in cat.show_grants(key))
            assert exists == acked or step["op"] == "contested schema", (who, step)
            if acked and step["op"] != "grant":
                assert step["owner"] == who, (who, step)
    contested_schemas = Counter(s["key"] for _, s in steps if s["op"] == "contested schema" and s["status"] == 200)
    assert contested_schemas == {f"arena.contested_{r}": 1 for r in range(rounds)}, contested_schemas
    refused_schemas = {s["code"] for _, s in steps if s["op"] == "contested schema" and s["status"] != 200}
    assert refused_schemas == {"SCHEMA_ALREADY_EXISTS"}
    # One registration per shared location, whoever won it: the overlap check held under the race.
    claims = Counter(
        s["key"].split(".")[1].rsplit("_", 1)[1]
        for _, s in steps
        if s["op"] == "contested table" and s["status"] == 200
    )
    assert claims == {str(r): 1 for r in range(rounds)}, claims


def _exists(get: Any, name: str) -> bool:
    try:
        get(name)
        return True
    except NotFound:
        return False
