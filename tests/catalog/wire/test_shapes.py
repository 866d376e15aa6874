"""The wire forms of catalog objects and errors: pure, so checked directly and with hypothesis."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from uc_jupyter.catalog import (
    AlreadyExists,
    CatalogInfo,
    ColumnInfo,
    NotEmpty,
    NotFound,
    PermissionDenied,
    SchemaInfo,
    TableInfo,
    Unauthenticated,
    VolumeInfo,
)
from uc_jupyter.catalog.rules.names import INVISIBLE_CATEGORIES, InvalidName, parse_name
from uc_jupyter.catalog.wire.errors import RemotePermissionDenied, WireError, from_error, to_error
from uc_jupyter.catalog.wire.shapes import (
    CREATE_SCHEMA,
    CREATE_VOLUME,
    catalog_json,
    column_json,
    dotted_name,
    page,
    parse_request,
    schema_json,
    table_json,
    volume_json,
)

T0 = datetime(2026, 5, 1, 12, 0, 0, 123456, tzinfo=timezone.utc)
UC_PART = st.text(
    alphabet=st.characters(exclude_categories=sorted(INVISIBLE_CATEGORIES), exclude_characters="./ \x7f"),
    min_size=1,
    max_size=20,
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


# The client's ColumnTypeName enum (0.7.0): a type_name outside it makes the whole response unparseable.
COLUMN_TYPE_NAMES = {
    *("BOOLEAN", "BYTE", "SHORT", "INT", "LONG", "FLOAT", "DOUBLE", "DATE", "TIMESTAMP", "TIMESTAMP_NTZ", "STRING"),
    *("BINARY", "DECIMAL", "INTERVAL", "ARRAY", "STRUCT", "MAP", "VARIANT", "CHAR", "NULL", "USER_DEFINED_TYPE"),
    "TABLE_TYPE",
}


def test_volume_bodies_leave_out_empty_comments_and_get_ids_of_their_own() -> None:
    managed = volume_json(VolumeInfo("main", "ml", "raw", "alice", "MANAGED", "file:///home/v/1", T0, ""))
    assert "comment" not in managed  # the client's VolumeInfo.comment has min_length=1
    assert (managed["full_name"], managed["storage_location"], managed["created_at"]) == (
        "main.ml.raw",
        "file:///home/v/1",
        1777636800123,
    )
    external = volume_json(VolumeInfo("main", "ml", "ext", "bob", "EXTERNAL", "s3://b/ext", T0, "kept"))
    assert (external["volume_type"], external["comment"], external["owner"]) == ("EXTERNAL", "kept", "bob")
    assert external["volume_id"] != managed["volume_id"]
    table = table_json(TableInfo("main", "ml", "raw", "alice", "MANAGED", "file:///t", (), T0))
    assert table["table_id"] != managed["volume_id"]  # a table and a volume of one name are two objects
    assert "full_name" not in table and table["columns"] == []


@pytest.mark.parametrize(
    ("type_text", "type_name"),
    [
        ("integer", "INT"),
        ("long", "LONG"),
        ("timestamp_ntz", "TIMESTAMP_NTZ"),
        ("decimal(38,0)", "DECIMAL"),
        ("array", "ARRAY"),
        ("array<string>", "ARRAY"),
        ('MapType(PrimitiveType("string"), PrimitiveType("long"), value_contains_null=True)', "MAP"),
        ("struct", "STRUCT"),
        ("interval day", None),
        ("geometry(4326)", None),
    ],
)
def test_column_type_names_stay_inside_the_client_s_enum(type_text: str, type_name: str | None) -> None:
    body = column_json(ColumnInfo("c", type_text, nullable=False), 2)
    assert body.get("type_name") == type_name and (type_name is None or type_name in COLUMN_TYPE_NAMES)
    assert (body["position"], body["nullable"], body["type_text"]) == (2, False, type_text)
    if type_name in (None, "ARRAY", "MAP", "STRUCT"):
        assert "type_json" not in body  # only a primitive type's StructField JSON is known here
    else:
        assert json.loads(body["type_json"]) == {"name": "c", "type": type_text, "nullable": False, "metadata": {}}


def test_create_volume_requests_need_a_type_and_refuse_unknown_fields() -> None:
    base = {"catalog_name": "main", "schema_name": "ml", "name": "raw"}
    with pytest.raises(WireError, match="needs the field 'volume_type'"):
        parse_request(json.dumps(base).encode(), CREATE_VOLUME)
    with pytest.raises(WireError, match="unknown field 'storage_root'"):
        parse_request(json.dumps({**base, "volume_type": "MANAGED", "storage_root": "x"}).encode(), CREATE_VOLUME)
    assert parse_request(json.dumps({**base, "volume_type": "MANAGED", "comment": None}).encode(), CREATE_VOLUME) == {
        **base,
        "volume_type": "MANAGED",
    }


def test_overlapping_storage_is_resource_already_exists_and_comes_back_as_already_exists() -> None:
    status, body = to_error(AlreadyExists("storage location file:///d overlaps volume main.ml.raw at file:///d"))
    assert (status, body["error_code"]) == (400, "RESOURCE_ALREADY_EXISTS")
    assert isinstance(from_error(status, body), AlreadyExists)
    assert to_error(AlreadyExists("main.ml.raw already exists as a volume"))[1]["error_code"] == (
        "RESOURCE_ALREADY_EXISTS"
    )
    assert to_error(AlreadyExists("storage credential c already exists"))[1]["error_code"] == (
        "STORAGE_CREDENTIAL_ALREADY_EXISTS"
    )
    assert to_error(NotFound("volume main.ml.raw does not exist"))[:1] == (404,)
    assert to_error(NotFound("volume main.ml.raw does not exist"))[1]["error_code"] == "NOT_FOUND"


def test_a_repeated_key_at_any_depth_and_a_flood_of_nesting_are_one_line_refusals() -> None:
    from uc_jupyter.catalog.wire.errors import WireError
    from uc_jupyter.catalog.wire.shapes import CREATE_CATALOG, UPDATE_CATALOG, parse_request

    for raw, message in (
        (b'{"name": "a", "name": "b"}', "the key 'name' appears twice in the body of CreateCatalog; give it once"),
        (b'{"name": "a", "properties": {"k": "1", "k": "2"}}', "the key 'k' appears twice"),
        (b"[" * 100_000 + b"]" * 100_000, "malformed JSON body for CreateCatalog: nested too deeply"),
    ):
        with pytest.raises(WireError) as caught:
            parse_request(raw, CREATE_CATALOG)
        assert caught.value.error_code == "INVALID_ARGUMENT" and str(caught.value.message).startswith(message)
    assert parse_request(b'{"comment": "x", "owner": "alice"}', UPDATE_CATALOG) == {"comment": "x", "owner": "alice"}
