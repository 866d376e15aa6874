"""Catalogs and schemas through a real ``uc-jupyter serve``: bodies as the official client's models
have them, UC's error codes and statuses, pages, principals with and without grants, bad input that
changes nothing, and a clean stop."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from tests.ucserver.conftest import ADMIN, Answer, Served
from uc_jupyter.catalog import as_principal

CATALOG_FIELDS = {
    "name",
    "comment",
    "properties",
    "id",
    *(f"{w}_{x}" for w in ("created", "updated") for x in ("at", "by")),
}
CATALOG_FIELDS.add("owner")


def ok(answer: Answer) -> dict:
    assert answer.status == 200, answer
    assert isinstance(answer.body, dict)
    return answer.body


def refused(answer: Answer, status: int, code: str, message: str | None = None) -> str:
    """The one-line message of an error answer with ``status`` and ``code`` (and, when given, ``message``)."""
    assert (answer.status, answer.error_code) == (status, code), answer
    text = answer.body["message"]
    assert "\n" not in text and text
    assert answer.body["details"][0]["reason"] == code
    if message is not None:
        assert text == message
    return text


def test_admin_creates_gets_lists_and_deletes_a_catalog(server: Served) -> None:
    admin = server.admin()
    before_ms = int(time.time() * 1000)
    made = ok(admin.call("POST", "catalogs", json_body={"name": "Crud", "comment": "team data", "properties": {}}))
    assert set(made) == CATALOG_FIELDS
    assert (made["name"], made["comment"], made["owner"], made["created_by"], made["properties"]) == (
        "crud",
        "team data",
        ADMIN,
        ADMIN,
        {},
    )
    assert isinstance(made["created_at"], int) and before_ms - 1000 <= made["created_at"] <= time.time() * 1000
    assert made["updated_at"] == made["created_at"]
    assert ok(admin.call("GET", "catalogs/crud")) == made
    assert ok(admin.call("GET", "catalogs/CRUD")) == made  # names are case-insensitive, as in UC
    assert made in ok(admin.call("GET", "catalogs"))["catalogs"]
    assert ok(admin.call("DELETE", "catalogs/crud")) == {}
    refused(admin.call("GET", "catalogs/crud"), 404, "CATALOG_NOT_FOUND", "catalog crud does not exist")
    again = ok(admin.call("POST", "catalogs", json_body={"name": "crud"}))
    assert again["id"] != made["id"] and "comment" not in again  # a new object of the same name: a new id


def test_schemas_are_created_listed_got_and_deleted(server: Served) -> None:
    admin = server.admin()
    ok(admin.call("POST", "catalogs", json_body={"name": "sch"}))
    made = ok(admin.call("POST", "schemas", json_body={"name": "ML", "catalog_name": "sch", "comment": "models"}))
    assert {k: made[k] for k in ("name", "catalog_name", "full_name", "owner", "comment")} == {
        "name": "ml",
        "catalog_name": "sch",
        "full_name": "sch.ml",
        "owner": ADMIN,
        "comment": "models",
    }
    assert isinstance(made["schema_id"], str) and isinstance(made["created_at"], int)
    assert ok(admin.call("GET", "schemas/sch.ml")) == made
    assert ok(admin.call("GET", "schemas", query={"catalog_name": "sch"})) == {"schemas": [made]}
    refused(admin.call("DELETE", "catalogs/sch"), 400, "FAILED_PRECONDITION")
    assert ok(admin.call("DELETE", "schemas/sch.ml")) == {}
    assert ok(admin.call("GET", "schemas", query={"catalog_name": "sch"})) == {"schemas": []}
    ok(admin.call("POST", "schemas", json_body={"name": "kept", "catalog_name": "sch"}))
    assert ok(admin.call("DELETE", "catalogs/sch", query={"force": "true"})) == {}
    refused(admin.call("GET", "schemas/sch.kept"), 404, "CATALOG_NOT_FOUND")


def test_a_principal_sees_and_does_only_what_is_granted(server: Served) -> None:
    admin, alice = server.admin(), server.client(server.token("alice"))
    ok(admin.call("POST", "catalogs", json_body={"name": "granted"}))
    ok(admin.call("POST", "schemas", json_body={"name": "s", "catalog_name": "granted"}))
    assert "granted" not in {c["name"] for c in ok(alice.call("GET", "catalogs"))["catalogs"]}
    denied = alice.call("GET", "catalogs/granted")
    refused(denied, 403, "PERMISSION_DENIED", "alice lacks USE CATALOG on granted")
    assert denied.body["details"][0]["metadata"] == {
        "principal": "alice",
        "privilege": "USE CATALOG",
        "securable": "granted",
    }
    refused(alice.call("POST", "catalogs", json_body={"name": "hers"}), 403, "PERMISSION_DENIED")
    refused(alice.call("GET", "schemas", query={"catalog_name": "granted"}), 403, "PERMISSION_DENIED")
    refused(alice.call("DELETE", "catalogs/granted"), 403, "PERMISSION_DENIED")
    with as_principal(ADMIN):
        server.catalog.grant("granted", "USE CATALOG", "alice")
    assert "granted" in {c["name"] for c in ok(alice.call("GET", "catalogs"))["catalogs"]}
    assert ok(alice.call("GET", "schemas", query={"catalog_name": "granted"})) == {"schemas": []}  # s: no USE SCHEMA
    create = {"name": "own", "catalog_name": "granted"}
    refused(
        alice.call("POST", "schemas", json_body=create),
        403,
        "PERMISSION_DENIED",
        "alice lacks CREATE SCHEMA on granted",
    )
    with as_principal(ADMIN):
        server.catalog.grant("granted", "CREATE SCHEMA", "alice")
    assert ok(alice.call("POST", "schemas", json_body=create))["owner"] == "alice"
    assert [s["name"] for s in ok(alice.call("GET", "schemas", query={"catalog_name": "granted"}))["schemas"]] == [
        "own"
    ]
    assert ok(alice.call("DELETE", "schemas/granted.own")) == {}  # her own
    refused(alice.call("DELETE", "schemas/granted.s"), 403, "PERMISSION_DENIED")


def test_pages_of_250_catalogs_hold_each_once_in_name_order(fresh_server: Served) -> None:
    with as_principal(ADMIN):
        for i in range(250):
            fresh_server.catalog.create_catalog(f"c{i:03d}")
    admin = fresh_server.admin()
    names: list[str] = []
    token: str | None = None
    sizes = []
    while True:
        query = {"max_results": 100, **({"page_token": token} if token else {})}
        body = ok(admin.call("GET", "catalogs", query=query))
        sizes.append(len(body["catalogs"]))
        names += [c["name"] for c in body["catalogs"]]
        token = body.get("next_page_token")
        if token is None:
            break
    assert sizes == [100, 100, 50]
    assert names == [f"c{i:03d}" for i in range(250)]
    everything = ok(admin.call("GET", "catalogs"))  # no max_results: the server's page (1000)
    assert len(everything["catalogs"]) == 250 and "next_page_token" not in everything
    assert len(ok(admin.call("GET", "catalogs", query={"max_results": 0}))["catalogs"]) == 250
    refused(admin.call("GET", "catalogs", query={"max_results": -1}), 400, "INVALID_ARGUMENT")
    refused(admin.call("GET", "catalogs", query={"max_results": "ten"}), 400, "INVALID_ARGUMENT")
    refused(admin.call("GET", "catalogs", query={"page_token": "not-a-token"}), 400, "INVALID_ARGUMENT")
    ok(admin.call("POST", "schemas", json_body={"name": "a", "catalog_name": "c000"}))
    ok(admin.call("POST", "schemas", json_body={"name": "b", "catalog_name": "c000"}))
    schema_page = ok(admin.call("GET", "schemas", query={"catalog_name": "c000", "max_results": 1}))
    assert [s["name"] for s in schema_page["schemas"]] == ["a"]
    refused(  # a token of another listing is refused, not misread
        admin.call("GET", "catalogs", query={"page_token": schema_page["next_page_token"]}), 400, "INVALID_ARGUMENT"
    )
    rest = ok(
        admin.call(
            "GET",
            "schemas",
            query={"catalog_name": "c000", "max_results": 1, "page_token": schema_page["next_page_token"]},
        )
    )
    assert [s["name"] for s in rest["schemas"]] == ["b"]


def test_errors_have_uc_codes_statuses_and_one_line_messages(server: Served) -> None:
    admin = server.admin()
    ok(admin.call("POST", "catalogs", json_body={"name": "errs"}))
    ok(admin.call("POST", "schemas", json_body={"name": "s", "catalog_name": "errs"}))
    refused(admin.call("POST", "catalogs", json_body={"name": "errs"}), 400, "CATALOG_ALREADY_EXISTS")
    refused(
        admin.call("POST", "schemas", json_body={"name": "s", "catalog_name": "errs"}), 400, "SCHEMA_ALREADY_EXISTS"
    )
    refused(admin.call("GET", "schemas/errs.nope"), 404, "SCHEMA_NOT_FOUND", "schema errs.nope does not exist")
    refused(admin.call("GET", "schemas/nope.s"), 404, "CATALOG_NOT_FOUND")
    refused(admin.call("GET", "schemas", query={"catalog_name": "nope"}), 404, "CATALOG_NOT_FOUND")
    refused(admin.call("GET", "schemas"), 400, "INVALID_ARGUMENT")
    assert "suggest" not in refused(admin.call("GET", "catalogs/err"), 404, "CATALOG_NOT_FOUND")
    for bad in ("errs.s.x", "errs..s", "errs.", "errs.a b"):
        refused(admin.call("GET", f"schemas/{bad.replace(' ', '%20')}"), 400, "INVALID_ARGUMENT")
    refused(admin.call("GET", "catalogs/a%20b"), 400, "INVALID_ARGUMENT")
    refused(admin.call("DELETE", "catalogs/errs", query={"force": "maybe"}), 400, "INVALID_ARGUMENT")
    refused(admin.call("GET", "no-such-route"), 404, "NOT_FOUND")
    refused(admin.call("GET", "/elsewhere"), 404, "NOT_FOUND")
    wrong = admin.call("PUT", "catalogs")
    refused(wrong, 405, "METHOD_NOT_ALLOWED")
    assert set(wrong.headers["allow"].replace(" ", "").split(",")) == {"GET", "HEAD", "POST"}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b'{"name": "bad1"', "malformed JSON body for CreateCatalog: "),
        (b"\xff\xfe", "malformed JSON body for CreateCatalog: "),
        (b'["bad2"]', "the body of CreateCatalog must be a JSON object, got an array"),
        (b'{"name": "bad3", "colour": "red"}', "unknown field 'colour' in CreateCatalog; known fields: "),
        (b'{"name": 3}', "field 'name' of CreateCatalog must be a string, got a number"),
        (b'{"name": "bad4", "comment": true}', "field 'comment' of CreateCatalog must be a string, got a boolean"),
        (b'{"comment": "no name"}', "CreateCatalog needs the field 'name'"),
        (b'{"name": null}', "CreateCatalog needs the field 'name'"),
        (b'{"name": "bad5", "properties": {"a": "b"}}', "properties are not supported by this server"),
        (b'{"name": "bad6", "storage_root": "file:///tmp/x"}', "storage_root is not supported by this server"),
        (b'{"name": "bad..7"}', "invalid name"),
        (b'{"name": "' + b"x" * (1 << 20) + b'"}', "request body too large: over 1048576 bytes"),
    ],
    ids=lambda v: v[:24] if isinstance(v, bytes) else None,
)
def test_bad_bodies_are_400s_and_change_nothing(server: Served, raw: bytes, message: str) -> None:
    admin = server.admin()
    before = ok(admin.call("GET", "catalogs"))
    assert refused(admin.call("POST", "catalogs", raw=raw), 400, "INVALID_ARGUMENT").startswith(message)
    assert ok(admin.call("GET", "catalogs")) == before


def test_a_body_without_content_length_is_still_capped(server: Served) -> None:
    import http.client
    import json

    host, port = server.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    chunks = iter([b'{"name": "', *([b"y" * 65536] * 17), b'"}'])  # an iterable: sent chunked, no length
    headers = {"Authorization": f"Bearer {server.admin_token}", "Content-Type": "application/json"}
    conn.request("POST", "/api/2.1/unity-catalog/catalogs", body=chunks, headers=headers, encode_chunked=True)
    response = conn.getresponse()
    assert (response.status, json.loads(response.read())["message"]) == (
        400,
        "request body too large: over 1048576 bytes",
    )
    conn.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_the_server_stops_cleanly_with_exit_status_0(fresh_server: Served, sig: int) -> None:
    admin = fresh_server.admin()
    ok(admin.call("GET", "catalogs"))  # a keep-alive connection is open while it stops
    code, err = fresh_server.stop(sig)
    assert (code, err) == (0, "")


def test_a_port_in_use_is_a_one_line_error(server: Served, tmp_path: Path) -> None:
    import subprocess
    import sys

    port = server.url.rsplit(":", 1)[1]
    done = subprocess.run(
        [sys.executable, "-m", "uc_jupyter.cli", "serve", "--port", port],
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "UC_JUPYTER_HOME": str(tmp_path / "other")},
        timeout=60,
        check=False,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith(f"uc-jupyter: error: cannot listen on 127.0.0.1:{port}: ")
    assert done.stderr.count("\n") == 1


def test_serve_refuses_a_server_wide_principal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from uc_jupyter.cli import main

    monkeypatch.setenv("UC_JUPYTER_HOME", str(tmp_path / "home"))
    assert main(["--as", "admin", "serve", "--port", "0"]) == 1  # returns at once: nothing is served
    assert capsys.readouterr().err == (
        "uc-jupyter: error: uc-jupyter serve acts as each request's token principal; leave out --as\n"
    )


def test_created_at_of_a_get_matches_the_catalog_s_own(server: Served) -> None:
    made = ok(server.admin().call("POST", "catalogs", json_body={"name": "times"}))
    with as_principal(ADMIN):
        info = server.catalog.get_catalog_info("times")
    assert made["created_at"] == int(info.created_at.timestamp() * 1000)
