"""Bearer tokens at a real ``uc-jupyter serve``: one refusal (401 UNAUTHENTICATED) for every bad
token, nothing done for a refused request, and each request acting as its token's principal only."""

from __future__ import annotations

import time
from datetime import datetime, timezone

import pytest

from tests.ucserver.conftest import ADMIN, SERVER_ENV_PRINCIPAL, Served
from uc_jupyter.catalog import Unauthenticated, as_principal

TOKEN_REFUSED = Unauthenticated.MESSAGE


def test_every_bad_token_gets_the_same_401(server: Served) -> None:
    good = server.token("carol")
    token_id = good.split("_")[1]
    with as_principal(ADMIN):
        short, expired = server.tokens.create("carol", ttl_seconds=0.001)
    assert short.expires_at is not None
    while datetime.now(timezone.utc) < short.expires_at:  # past its expiry by the wall clock, however fast
        time.sleep(0.001)
    revoked = server.token("carol")
    with as_principal(ADMIN):
        server.tokens.revoke(revoked.split("_")[1])
    presented = {
        "tampered": good[:-1] + ("A" if good[-1] != "A" else "B"),
        "other id": good.replace(token_id, "0" * 16),
        "expired": expired,
        "revoked": revoked,
        "garbage": "hello",
        "empty secret": f"ucj_{token_id}_",
    }
    for what, token in presented.items():
        answer = server.client(token).call("GET", "catalogs")
        assert (answer.status, answer.error_code, answer.body["message"]) == (401, "UNAUTHENTICATED", TOKEN_REFUSED), (
            what
        )
        assert answer.headers["www-authenticate"].startswith("Bearer")
    assert server.client(good).call("GET", "catalogs").status == 200


@pytest.mark.parametrize(
    "header",
    [None, "", "Bearer", "Bearer ", "Basic YWRtaW46YWRtaW4=", "Token x", "bearer"],
)
def test_no_usable_authorization_header_is_a_401(server: Served, header: str | None) -> None:
    client = server.client(None)
    answer = client.call("GET", "catalogs", headers={} if header is None else {"Authorization": header})
    assert (answer.status, answer.error_code) == (401, "UNAUTHENTICATED")
    assert answer.body["message"].startswith("no token: send the header 'Authorization: Bearer <token>'")


def test_two_authorization_headers_are_refused(server: Served) -> None:
    import http.client

    host, port = server.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.putrequest("GET", "/api/2.1/unity-catalog/catalogs")
    conn.putheader("Authorization", f"Bearer {server.admin_token}")
    conn.putheader("Authorization", "Bearer ucj_forged")
    conn.endheaders()
    assert conn.getresponse().status == 401
    conn.close()


def test_a_refused_request_does_nothing(server: Served) -> None:
    answer = server.client("ucj_" + "0" * 16 + "_" + "A" * 43).call("POST", "catalogs", json_body={"name": "sneaky"})
    assert answer.status == 401
    with as_principal(ADMIN):
        assert "sneaky" not in {c.name for c in server.catalog.list_catalogs()}


def test_requests_act_as_the_token_s_principal_never_the_server_s_or_a_header(server: Served) -> None:
    dave = server.client(server.token("dave"))
    with as_principal(ADMIN):
        server.catalog.grant("metastore", "CREATE CATALOG", "dave", kind="metastore")
    forged = {"X-Principal": ADMIN, "UC_JUPYTER_PRINCIPAL": ADMIN, "X-Forwarded-User": ADMIN}
    made = dave.call("POST", "catalogs", json_body={"name": "daves"}, headers=forged)
    assert (made.status, made.body["owner"]) == (200, "dave")
    assert dave.call("GET", "catalogs/daves").body["owner"] == "dave"
    denied = server.client(server.token("erin")).call("GET", "catalogs/daves", headers=forged)
    assert denied.body["message"] == "erin lacks USE CATALOG on daves"
    assert SERVER_ENV_PRINCIPAL not in str(denied.body)


def test_a_dropped_principal_s_token_is_refused_at_once(server: Served) -> None:
    frank = server.client(server.token("frank"))
    assert frank.call("GET", "catalogs").status == 200
    with as_principal(ADMIN):
        server.catalog.drop_principal("frank")
    assert frank.call("GET", "catalogs").status == 401
