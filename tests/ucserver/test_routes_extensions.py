"""uc_jupyter.ucserver.routes_extensions: whoami and the principals routes, called as the app calls them
(as the request's principal) on an embedded catalog; over HTTP through RestCatalog: tests/catalog/rest."""

from __future__ import annotations

from pathlib import Path

import pytest

from uc_jupyter.catalog import NotFound, PermissionDenied, Unauthenticated
from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.catalog.embedded.tokens import TokenStore
from uc_jupyter.catalog.wire.errors import WireError
from uc_jupyter.ucserver.routes_data import Call
from uc_jupyter.ucserver.routes_extensions import (
    EXTENSION_PREFIX,
    ROUTES,
    create_principal,
    drop_principal,
    get_principal,
    list_principals,
    principal_json,
    whoami,
)

ADMIN = "admin"


@pytest.fixture
def cat(tmp_path: Path) -> LocalCatalog:
    """A fresh home whose metastore admin is ``admin`` (the suite's principal), with user ``bob``."""
    made = LocalCatalog(tmp_path / "home")
    made.create_principal("bob")
    return made


def test_whoami_is_the_requests_principal_and_whether_it_administers_the_metastore(cat: LocalCatalog) -> None:
    assert whoami(cat, Call()) == {"principal": ADMIN, "metastore_admin": True}
    with cat.as_principal("bob"):
        assert whoami(cat, Call()) == {"principal": "bob", "metastore_admin": False}


def test_whoami_of_a_principal_dropped_after_its_token_was_checked_is_no_admin(cat: LocalCatalog) -> None:
    cat.create_principal("ops")
    cat.drop_principal("ops")  # dropped while its request was already under way
    with cat.as_principal("ops"):
        assert whoami(cat, Call()) == {"principal": "ops", "metastore_admin": False}


def test_a_principal_on_the_wire_has_its_kind_creation_in_epoch_ms_and_admin_flag(cat: LocalCatalog) -> None:
    info = cat.get_principal("bob")
    assert principal_json(info) == {
        "name": "bob",
        "kind": "user",
        "created_at": int(info.created_at.timestamp() * 1000),
        "metastore_admin": False,
    }
    assert get_principal(cat, Call(path={"name": "bob"})) == principal_json(info)
    assert get_principal(cat, Call(path={"name": ADMIN}))["metastore_admin"] is True


def test_principals_are_listed_by_name(cat: LocalCatalog) -> None:
    cat.create_principal("alice")
    listed = list_principals(cat, Call())["principals"]
    assert [(p["name"], p["metastore_admin"]) for p in listed] == [(ADMIN, True), ("alice", False), ("bob", False)]


def test_an_admin_creates_users_by_default_and_service_principals_when_asked(cat: LocalCatalog) -> None:
    made = create_principal(cat, Call(body={"name": "carol"}))
    assert (made["name"], made["kind"], made["metastore_admin"]) == ("carol", "user", False)
    robot = create_principal(cat, Call(body={"name": "etl", "kind": "service_principal"}))
    assert robot["kind"] == "service_principal"
    assert cat.get_principal("etl").kind == "service_principal"


@pytest.mark.parametrize("kind", ["admin", "USER", "", "x" * 500])
def test_any_other_kind_is_an_invalid_argument_that_creates_nothing(cat: LocalCatalog, kind: str) -> None:
    with pytest.raises(WireError) as refused:
        create_principal(cat, Call(body={"name": "mallory", "kind": kind}))
    assert refused.value.error_code == "INVALID_ARGUMENT"
    assert refused.value.message == f"kind must be user or service_principal, got {kind[:32]!r}"  # never echoed whole
    with pytest.raises(NotFound):
        cat.get_principal("mallory")


def test_only_a_metastore_admin_creates_or_drops_principals(cat: LocalCatalog) -> None:
    with cat.as_principal("bob"):
        with pytest.raises(PermissionDenied):
            create_principal(cat, Call(body={"name": "bobs_friend"}))
        with pytest.raises(PermissionDenied):
            drop_principal(cat, Call(path={"name": ADMIN}))
    assert [p.name for p in cat.list_principals()] == [ADMIN, "bob"]


def test_dropping_a_principal_ends_its_tokens(cat: LocalCatalog) -> None:
    store = TokenStore(cat)
    token = store.create("bob")[1]
    assert store.authenticate(token) == "bob"
    assert drop_principal(cat, Call(path={"name": "bob"})) == {}
    with pytest.raises(Unauthenticated):
        store.authenticate(token)
    create_principal(cat, Call(body={"name": "bob"}))  # the same name registered again is someone new
    with pytest.raises(Unauthenticated):
        store.authenticate(token)


def test_the_routes_live_under_a_prefix_no_unity_catalog_route_uses() -> None:
    assert {(r.method, r.path) for r in ROUTES} == {
        ("GET", f"{EXTENSION_PREFIX}/whoami"),
        ("GET", f"{EXTENSION_PREFIX}/principals"),
        ("POST", f"{EXTENSION_PREFIX}/principals"),
        ("GET", f"{EXTENSION_PREFIX}/principals/{{name}}"),
        ("DELETE", f"{EXTENSION_PREFIX}/principals/{{name}}"),
    }
    assert EXTENSION_PREFIX == "/uc-jupyter"
    assert [r.model.name for r in ROUTES if r.model is not None] == ["CreatePrincipal"]
