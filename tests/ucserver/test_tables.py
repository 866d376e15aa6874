"""Tables through a real ``uc-jupyter serve``: TableInfo bodies with their columns as the official
client's models have them, managed and external Delta tables (written by the admin on the server's
home, or registered over the API), principals with and without grants, pages, UC's codes, and bad
bodies that register nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from tests.ucserver.conftest import ADMIN, Served
from tests.ucserver.test_catalogs import ok, refused
from uc_jupyter.catalog import as_principal
from uc_jupyter.testing.catalogs import external_location

TABLE_FIELDS = {
    "name",
    "catalog_name",
    "schema_name",
    "table_type",
    "data_source_format",
    "columns",
    "storage_location",
    "properties",
    "owner",
    "table_id",
    *(f"{w}_{x}" for w in ("created", "updated") for x in ("at", "by")),
}
ROWS = pa.table(
    {
        "id": pa.array([1, 2], pa.int64()),
        "label": pa.array(["a", "b"]),
        "price": pa.array([1, 2], pa.decimal128(10, 2)),
        "tags": pa.array([["x"], []], pa.list_(pa.string())),
    }
)


def _schema(server: Served, catalog: str) -> None:
    admin = server.admin()
    ok(admin.call("POST", "catalogs", json_body={"name": catalog}))
    ok(admin.call("POST", "schemas", json_body={"name": "s", "catalog_name": catalog}))


def _table(server: Served, name: str, **options: str) -> None:
    with as_principal(ADMIN):
        server.catalog.create_table(name, ROWS, **options)


def test_a_managed_table_is_got_with_its_columns_listed_and_deleted(server: Served) -> None:
    _schema(server, "tcrud")
    _table(server, "tcrud.s.prices")
    admin = server.admin()
    got = ok(admin.call("GET", "tables/tcrud.s.prices"))
    assert set(got) == TABLE_FIELDS  # no comment given: none sent; 0.7.0's TableInfo has no full_name
    assert {k: got[k] for k in ("name", "catalog_name", "schema_name", "table_type", "data_source_format")} == {
        "name": "prices",
        "catalog_name": "tcrud",
        "schema_name": "s",
        "table_type": "MANAGED",
        "data_source_format": "DELTA",
    }
    with as_principal(ADMIN):
        info = server.catalog.get_table("tcrud.s.prices")
    assert (got["owner"], got["storage_location"]) == (ADMIN, info.storage_location)
    assert got["created_at"] == int(info.created_at.timestamp() * 1000) == got["updated_at"]
    ident, label, price, tags = got["columns"]
    assert ident == {
        "name": "id",
        "type_text": "long",
        "type_name": "LONG",
        "type_json": '{"name":"id","type":"long","nullable":true,"metadata":{}}',
        "position": 0,
        "nullable": True,
    }
    assert (label["type_name"], label["position"], json.loads(label["type_json"])["type"]) == ("STRING", 1, "string")
    assert {k: price[k] for k in ("type_name", "type_precision", "type_scale", "type_text")} == {
        "type_name": "DECIMAL",
        "type_precision": 10,
        "type_scale": 2,
        "type_text": "decimal(10,2)",
    }
    assert (tags["type_name"], tags["position"], "type_json" in tags) == ("ARRAY", 3, False)
    assert ok(admin.call("GET", "tables/TCRUD.s.Prices")) == got
    listed = ok(admin.call("GET", "tables", query={"catalog_name": "tcrud", "schema_name": "s"}))
    assert listed == {"tables": [got]}
    assert ok(admin.call("DELETE", "tables/tcrud.s.prices")) == {}
    refused(admin.call("GET", "tables/tcrud.s.prices"), 404, "TABLE_NOT_FOUND", "table tcrud.s.prices does not exist")
    refused(admin.call("DELETE", "tables/tcrud.s.prices"), 404, "TABLE_NOT_FOUND")
    assert ok(admin.call("GET", "tables", query={"catalog_name": "tcrud", "schema_name": "s"})) == {"tables": []}


def test_an_external_table_keeps_its_files_when_deleted(server: Served, tmp_path: Path) -> None:
    _schema(server, "text")
    with as_principal(ADMIN):
        external_location(server.catalog, str(tmp_path))
    _table(server, "text.s.ext", storage_location=(tmp_path / "ext").as_uri())
    admin = server.admin()
    got = ok(admin.call("GET", "tables/text.s.ext"))
    assert got["table_type"] == "EXTERNAL" and got["storage_location"].endswith("/ext")
    assert ok(admin.call("DELETE", "tables/text.s.ext")) == {}
    assert (tmp_path / "ext" / "_delta_log").is_dir()


def test_a_principal_sees_only_granted_tables(server: Served) -> None:
    _schema(server, "tgrant")
    _table(server, "tgrant.s.a")
    _table(server, "tgrant.s.b")
    admin, dan = server.admin(), server.client(server.token("dan"))
    query = {"catalog_name": "tgrant", "schema_name": "s"}
    denied = dan.call("GET", "tables", query=query)
    refused(denied, 403, "PERMISSION_DENIED", "dan lacks USE CATALOG on tgrant")
    assert denied.body["details"][0]["metadata"]["privilege"] == "USE CATALOG"
    refused(dan.call("GET", "tables/tgrant.s.a"), 403, "PERMISSION_DENIED")
    with as_principal(ADMIN):
        server.catalog.grant("tgrant", "USE CATALOG", "dan")
    refused(dan.call("GET", "tables", query=query), 403, "PERMISSION_DENIED", "dan lacks USE SCHEMA on tgrant.s")
    with as_principal(ADMIN):
        server.catalog.grant("tgrant.s", "USE SCHEMA", "dan")
    assert ok(dan.call("GET", "tables", query=query)) == {"tables": []}
    with as_principal(ADMIN):
        server.catalog.grant("tgrant.s.b", "SELECT", "dan")
    assert [t["name"] for t in ok(dan.call("GET", "tables", query=query))["tables"]] == ["b"]
    assert ok(dan.call("GET", "tables/tgrant.s.b")) == ok(admin.call("GET", "tables/tgrant.s.b"))
    refused(dan.call("DELETE", "tables/tgrant.s.b"), 403, "PERMISSION_DENIED")  # not the owner
    assert ok(admin.call("GET", "tables/tgrant.s.b"))["name"] == "b"


def test_tables_come_in_pages_and_errors_have_uc_codes(server: Served) -> None:
    _schema(server, "tpages")
    for name in ("t0", "t1", "t2"):
        _table(server, f"tpages.s.{name}")
    admin = server.admin()
    ok(admin.call("POST", "volumes", json_body={**_volume_body("tpages"), "name": "vol"}))
    query = {"catalog_name": "tpages", "schema_name": "s", "max_results": 2}
    first = ok(admin.call("GET", "tables", query=query))
    assert [t["name"] for t in first["tables"]] == ["t0", "t1"]
    rest = ok(admin.call("GET", "tables", query={**query, "page_token": first["next_page_token"]}))
    assert [t["name"] for t in rest["tables"]] == ["t2"] and "next_page_token" not in rest
    volumes = {"catalog_name": "tpages", "schema_name": "s", "page_token": first["next_page_token"]}
    refused(admin.call("GET", "volumes", query=volumes), 400, "INVALID_ARGUMENT")  # a tables token
    refused(
        admin.call("GET", "tables/tpages.s.vol"),
        404,
        "TABLE_NOT_FOUND",
        "table tpages.s.vol does not exist (tpages.s.vol is a volume)",
    )
    refused(admin.call("GET", "volumes/tpages.s.t0"), 404, "NOT_FOUND")
    refused(admin.call("GET", "tables/tpages.nope.t0"), 404, "SCHEMA_NOT_FOUND")
    refused(admin.call("GET", "tables", query={"schema_name": "s"}), 400, "INVALID_ARGUMENT")
    refused(admin.call("GET", "tables", query={**query, "max_results": -1}), 400, "INVALID_ARGUMENT")
    for bad in ("tpages.s", "tpages.s.t0.x", "tpages.s."):
        refused(admin.call("GET", f"tables/{bad}"), 400, "INVALID_ARGUMENT")


def _volume_body(catalog: str) -> dict[str, str]:
    return {"catalog_name": catalog, "schema_name": "s", "volume_type": "MANAGED"}


def _create_body(catalog: str, name: str, location: Path, **more: object) -> dict[str, object]:
    return {
        "name": name,
        "catalog_name": catalog,
        "schema_name": "s",
        "table_type": "EXTERNAL",
        "data_source_format": "DELTA",
        "columns": [{"name": "id", "type_name": "LONG", "type_text": "bigint", "position": 0}],
        "storage_location": location.as_uri(),
        **more,
    }


def test_an_external_delta_table_is_registered_with_the_delta_log_s_columns(server: Served, tmp_path: Path) -> None:
    _schema(server, "treg")
    write_deltalake(str(tmp_path / "t"), ROWS)
    with as_principal(ADMIN):
        location = external_location(server.catalog, str(tmp_path))
    admin, erin = server.admin(), server.client(server.token("erin"))
    body = _create_body("treg", "Prices", tmp_path / "t", comment="registered")
    with as_principal(ADMIN):
        for securable, privilege in (("treg", "USE CATALOG"), ("treg.s", "USE SCHEMA"), ("treg.s", "CREATE TABLE")):
            server.catalog.grant(securable, privilege, "erin")
    lacking = erin.call("POST", "tables", json_body=body)
    refused(lacking, 403, "PERMISSION_DENIED")
    assert lacking.body["details"][0]["metadata"]["privilege"] == "CREATE EXTERNAL TABLE"
    with as_principal(ADMIN):
        server.catalog.grant(location.name, "CREATE EXTERNAL TABLE", "erin", kind="external_location")
    made = ok(erin.call("POST", "tables", json_body=body))
    assert (made["name"], made["table_type"], made["owner"], made["comment"]) == (
        "prices",
        "EXTERNAL",
        "erin",
        "registered",
    )
    assert [c["name"] for c in made["columns"]] == ROWS.column_names  # the Delta log's, not the request's one
    assert ok(admin.call("GET", "tables/treg.s.prices")) == made
    refused(erin.call("POST", "tables", json_body=body), 400, "TABLE_ALREADY_EXISTS")
    ok(admin.call("POST", "volumes", json_body={**_volume_body("treg"), "name": "taken"}))
    taken = admin.call("POST", "tables", json_body={**body, "name": "taken"})
    assert refused(taken, 400, "RESOURCE_ALREADY_EXISTS") == "treg.s.taken already exists as a volume"
    assert ok(erin.call("DELETE", "tables/treg.s.prices")) == {}  # her own
    assert (tmp_path / "t" / "_delta_log").is_dir()


@pytest.fixture(scope="module")
def bad_location(server: Served, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The schema ``tbad.s`` and a Delta table at ``<location>/t`` inside an external location."""
    root = tmp_path_factory.mktemp("tbad")
    _schema(server, "tbad")
    write_deltalake(str(root / "t"), ROWS)
    (root / "empty").mkdir()
    with as_principal(ADMIN):
        external_location(server.catalog, str(root))
    return root


@pytest.mark.parametrize(
    ("change", "code", "message"),
    [
        ({"table_type": "VIEW"}, "INVALID_ARGUMENT", "table_type 'VIEW' is not supported by this server"),
        ({"table_type": "MANAGED"}, "INVALID_ARGUMENT", "table tbad.s.t: storage_location file://"),
        ({"data_source_format": "PARQUET"}, "INVALID_ARGUMENT", "data_source_format must be DELTA"),
        ({"storage_location": None}, "INVALID_ARGUMENT", "an EXTERNAL table needs a storage_location"),
        ({"columns": None}, "INVALID_ARGUMENT", "CreateTable needs the field 'columns'"),
        ({"columns": ["id"]}, "INVALID_ARGUMENT", "every entry of columns in CreateTable must be an object"),
        ({"properties": {"a": "b"}}, "INVALID_ARGUMENT", "properties is not supported by this server"),
        ({"view_definition": "SELECT 1"}, "INVALID_ARGUMENT", "view_definition is not supported"),
        ({"colour": "red"}, "INVALID_ARGUMENT", "unknown field 'colour' in CreateTable"),
        ({"storage_location": "relative/t"}, "INVALID_ARGUMENT", "invalid storage location 'relative/t'"),
        ({"storage_location": "EMPTY"}, "TABLE_NOT_FOUND", "table tbad.s.t: no Delta table at "),
    ],
    ids=lambda v: next(iter(v)) + "=" + str(next(iter(v.values())))[:12] if isinstance(v, dict) else None,
)
def test_bad_table_bodies_register_nothing(
    server: Served, bad_location: Path, change: dict[str, object], code: str, message: str
) -> None:
    body = {**_create_body("tbad", "t", bad_location / "t"), **change}
    if body["storage_location"] == "EMPTY":
        body["storage_location"] = (bad_location / "empty").as_uri()
    status = 404 if code.endswith("NOT_FOUND") else 400
    assert refused(server.admin().call("POST", "tables", json_body=body), status, code).startswith(message)
    listed = ok(server.admin().call("GET", "tables", query={"catalog_name": "tbad", "schema_name": "s"}))
    assert listed == {"tables": []}
