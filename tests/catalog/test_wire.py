"""The wire forms of catalog objects and errors: pure, so checked directly and with hypothesis."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from uc_jupyter.catalog import AlreadyExists, CatalogInfo, NotFound, PermissionDenied, SchemaInfo, Unauthenticated
from uc_jupyter.catalog.external import NotEmpty
from uc_jupyter.catalog.names import InvalidName, parse_name
from uc_jupyter.catalog.wire import CREATE_SCHEMA, catalog_json, dotted_name, page, parse_request, schema_json
from uc_jupyter.catalog.wire_errors import RemotePermissionDenied, WireError, from_error, to_error

T0 = datetime(2026, 5, 1, 12, 0, 0, 123456, tzinfo=timezone.utc)
UC_PART = st.text(
    alphabet=st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters="./ \x7f"), min_size=1, max_size=20
)


def test_catalog_and_schema_bodies_have_uc_s_fields_and_types() -> None:
    body = catalog_json(CatalogInfo("main", "alice", T0))
    assert body["created_at"] == body["updated_at"] == 1777636800123 and "comment" not in body
    assert (body["created_by"], body["updated_by"], body["properties"]) == ("alice", "alice", {})
    schema = schema_json(SchemaInfo("main", "ml", "bob", T0, "c"))
    assert (schema["full_name"], schema["catalog_name"], schema["comment"]) == ("main.ml", "main", "c")
    assert schema["schema_id"] != body["id"]
    later = catalog_json(CatalogInfo("main", "alice", T0 + timedelta(microseconds=1)))
    assert later["id"] != body["id"]  # made again: another object, another id
    json.dumps(body, allow_nan=False)


@given(st.lists(UC_PART, min_size=1, max_size=3))
def test_wire_names_become_our_names_part_for_part(parts: list[str]) -> None:
    parsed = parse_name(dotted_name(*parts))  # backquotes, dashes, any letters: quoted as needed
    assert parsed.parts == tuple(p.lower() for p in parts)


@given(st.lists(st.text(min_size=1, max_size=3), unique=True, max_size=30), st.integers(1, 7))
def test_pages_cover_a_listing_once_in_order(names: list[str], size: int) -> None:
    names = sorted(names)
    seen: list[str] = []
    token = None
    while True:
        chosen = page(names, names, "l", str(size), token)
        assert len(chosen.items) <= size
        seen += chosen.items
        token = chosen.next_page_token
        if token is None:
            break
    assert seen == names


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        (b"{", "malformed JSON"),
        (b'{"name": "s"}', "needs the field 'catalog_name'"),
        (b'{"name": "s", "catalog_name": ["m"]}', "must be a string, got an array"),
        (b'{"name": "s", "catalog_name": "m", "x": 1}', "unknown field 'x' in CreateSchema"),
    ],
)
def test_requests_are_refused_in_one_line(raw: bytes, fragment: str) -> None:
    with pytest.raises(WireError) as caught:
        parse_request(raw, CREATE_SCHEMA)
    assert fragment in str(caught.value) and "\n" not in str(caught.value)
    assert to_error(caught.value)[0] == 400


@pytest.mark.parametrize(
    ("exc", "status", "code"),
    [
        (NotFound("catalog a does not exist"), 404, "CATALOG_NOT_FOUND"),
        (NotFound("schema a.b does not exist"), 404, "SCHEMA_NOT_FOUND"),
        (NotFound("volume a.b.c does not exist"), 404, "NOT_FOUND"),
        (NotFound("table or volume a.b.c does not exist"), 404, "NOT_FOUND"),
        (AlreadyExists("catalog a already exists"), 400, "CATALOG_ALREADY_EXISTS"),
        (AlreadyExists("volume a.b.c already exists"), 400, "RESOURCE_ALREADY_EXISTS"),
        (NotEmpty("catalog a is not empty (1 schema); drop those first"), 400, "FAILED_PRECONDITION"),
        (PermissionDenied("alice", "USE CATALOG", "a"), 403, "PERMISSION_DENIED"),
        (Unauthenticated(), 401, "UNAUTHENTICATED"),
        (InvalidName("invalid name 'a..b': part 2 is empty"), 400, "INVALID_ARGUMENT"),
        (RuntimeError("/secret/path leaked\nsecond line"), 500, "INTERNAL"),
    ],
)
def test_errors_go_to_uc_codes_and_come_back(exc: Exception, status: int, code: str) -> None:
    got_status, body = to_error(exc)
    assert (got_status, body["error_code"], body["details"][0]["reason"]) == (status, code, code)
    assert "\n" not in body["message"]
    back = from_error(got_status, json.loads(json.dumps(body)))
    if code == "INTERNAL":
        assert "secret" not in body["message"]
        return
    assert str(back) == str(exc)
    expected = ValueError if isinstance(exc, NotEmpty | InvalidName) else type(exc)
    assert isinstance(back, expected)
    if isinstance(exc, PermissionDenied):
        assert (back.principal, back.privilege, back.securable) == ("alice", "USE CATALOG", "a")  # type: ignore[attr-defined]


def test_foreign_error_bodies_map_by_code_then_status() -> None:
    assert isinstance(from_error(404, {"error_code": "RESOURCE_DOES_NOT_EXIST", "message": "m"}), NotFound)
    assert isinstance(from_error(409, {"error_code": "RESOURCE_ALREADY_EXISTS", "message": "m"}), AlreadyExists)
    denied = from_error(403, {"error_code": "PERMISSION_DENIED", "message": "Access denied."})
    assert isinstance(denied, RemotePermissionDenied) and str(denied) == "Access denied."
    assert isinstance(from_error(401, "<html>"), Unauthenticated)
    assert isinstance(from_error(400, {"error_code": "INVALID_PARAMETER_VALUE", "message": "m"}), ValueError)
    assert "HTTP 503" in str(from_error(503, None))
