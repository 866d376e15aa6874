"""Managed tables created through a real ``uc-jupyter serve`` the UC OSS way: POST /staging-tables,
credentials for the staging id, the Delta files written by the client, POST /tables MANAGED; and the
attacks: another principal's staging id or location, a location that is no staging table's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from tests.ucserver.conftest import ADMIN, Client, Served
from tests.ucserver.test_catalogs import ok, refused
from uc_jupyter.catalog import as_principal
from uc_jupyter.storage import urls as st

ROWS = pa.table({"id": pa.array([1, 2], pa.int64()), "label": pa.array(["a", "b"])})
COLUMNS = [
    {"name": "id", "type_name": "LONG", "type_text": "bigint", "position": 0},
    {"name": "label", "type_name": "STRING", "type_text": "string", "position": 1},
]


@pytest.fixture(scope="module")
def schema(server: Served) -> str:
    """stg.s, where alice and bob may create tables."""
    admin = server.admin()
    ok(admin.call("POST", "catalogs", json_body={"name": "stg"}))
    ok(admin.call("POST", "schemas", json_body={"name": "s", "catalog_name": "stg"}))
    with as_principal(ADMIN):
        for who in ("alice", "bob"):
            server.principal(who)
            server.catalog.grant("stg", "USE CATALOG", who)
            server.catalog.grant("stg.s", "USE SCHEMA", who)
            server.catalog.grant("stg.s", "CREATE TABLE", who)
    return "stg.s"


def _stage(client: Client, name: str) -> dict[str, Any]:
    return ok(
        client.call("POST", "staging-tables", json_body={"catalog_name": "stg", "schema_name": "s", "name": name})
    )


def _managed(name: str, location: str, staging_id: str | None = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "catalog_name": "stg",
        "schema_name": "s",
        "name": name,
        "table_type": "MANAGED",
        "data_source_format": "DELTA",
        "storage_location": location,
        "columns": COLUMNS,
        **extra,
    }
    if staging_id is not None:
        body["properties"] = {"io.unitycatalog.tableId": staging_id}
    return body


def test_stage_vend_write_register_read(server: Served, schema: str) -> None:
    alice = server.client(server.token("alice"))
    staged = _stage(alice, "t")
    assert set(staged) == {"name", "catalog_name", "schema_name", "id", "staging_location"}
    assert (staged["name"], staged["catalog_name"], staged["schema_name"]) == ("t", "stg", "s")
    vended = ok(
        alice.call(
            "POST", "temporary-table-credentials", json_body={"table_id": staged["id"], "operation": "READ_WRITE"}
        )
    )
    assert vended["url"] == staged["staging_location"]
    write_deltalake(st.delta_uri(vended["url"]), ROWS)
    table = ok(alice.call("POST", "tables", json_body=_managed("t", staged["staging_location"], staged["id"])))
    assert (table["table_type"], table["table_id"], table["owner"]) == ("MANAGED", staged["id"], "alice")
    assert [c["name"] for c in table["columns"]] == ["id", "label"]
    assert ok(alice.call("GET", "tables/stg.s.t")) == table
    read = ok(
        alice.call(
            "POST", "temporary-table-credentials", json_body={"table_id": table["table_id"], "operation": "READ"}
        )
    )
    assert read["url"] == table["storage_location"] == staged["staging_location"]
    ok(alice.call("DELETE", "tables/stg.s.t"))  # managed: the files go with it
    assert not Path(st.local_path(staged["staging_location"])).exists()


def test_another_principal_can_neither_vend_for_nor_register_a_staging_table(server: Served, schema: str) -> None:
    alice, bob = server.client(server.token("alice")), server.client(server.token("bob"))
    staged = _stage(alice, "alices")
    write_deltalake(st.delta_uri(staged["staging_location"]), ROWS)
    unknown = "00000000-0000-4000-8000-000000000000"
    answers = [
        bob.call("POST", "temporary-table-credentials", json_body={"table_id": i, "operation": "READ_WRITE"})
        for i in (staged["id"], unknown)
    ]
    # The same answer for alice's staging id as for an id that names nothing: no oracle.
    shown = [
        (a.status, a.error_code, a.body["message"].replace(i, "ID"))
        for a, i in zip(answers, (staged["id"], unknown), strict=True)
    ]
    assert shown[0] == shown[1] and shown[0][:2] == (403, "PERMISSION_DENIED")  # as Unity Catalog answers
    for body in (_managed("alices", staged["staging_location"]), _managed("bobs", staged["staging_location"])):
        message = refused(bob.call("POST", "tables", json_body=body), 400, "INVALID_ARGUMENT")
        assert "is not a staging location of yours" in message
    assert (
        ok(alice.call("POST", "tables", json_body=_managed("alices", staged["staging_location"])))["owner"] == "alice"
    )


def test_a_managed_table_cannot_be_registered_over_storage_that_is_not_a_staging_table(
    server: Served, schema: str
) -> None:
    alice = server.client(server.token("alice"))
    with as_principal(ADMIN):
        existing = server.catalog.create_table("stg.s.existing", ROWS)
    root = st.normalise_location(str(server.catalog.root))
    for location in (
        existing.storage_location,  # another table's files
        root,  # the home itself
        root + "/storage/tables",
        _stage(alice, "x")["staging_location"] + "/../" + existing.storage_location.rsplit("/", 1)[1],
    ):
        message = refused(alice.call("POST", "tables", json_body=_managed("x", location)), 400, "INVALID_ARGUMENT")
        assert "x" in message
    got = ok(alice.call("GET", "tables", query={"catalog_name": "stg", "schema_name": "s"}))
    assert "x" not in [t["name"] for t in got["tables"]]
    # Nor as an EXTERNAL table: the home is no external location's.
    staged = _stage(alice, "y")
    external = {**_managed("y", staged["staging_location"]), "table_type": "EXTERNAL"}
    assert alice.call("POST", "tables", json_body=external).status in (400, 403)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"columns": COLUMNS[::-1]}, "the columns must be the Delta log's, in order (id, label), got label, id"),
        (
            {"columns": [{**COLUMNS[0], "type_name": "INT"}, COLUMNS[1]]},
            "column 'id' is LONG in the Delta log, not INT",
        ),
        ({"columns": [{"name": "id", "type_name": 3}]}, "a column's type_name in CreateTable must be a string"),
        ({"properties": {"io.unitycatalog.tableId": "00000000-0000-4000-8000-000000000000"}}, "the table id"),
        ({"properties": {"io.unitycatalog.tableId": 7}}, "the property io.unitycatalog.tableId must be a string"),
        ({"properties": {"other": "1"}}, "properties is not supported by this server"),
        ({"data_source_format": "PARQUET"}, "data_source_format must be DELTA"),
        ({"storage_location": None}, "a MANAGED table needs the staging_location of its staging table"),
        ({"name": "other"}, "table stg.s.other: that staging location was staged for stg.s.bad"),
    ],
)
def test_bad_managed_registrations_register_nothing(
    server: Served, schema: str, change: dict[str, Any], message: str
) -> None:
    alice = server.client(server.token("alice"))
    staged = _stage(alice, "bad")
    write_deltalake(st.delta_uri(staged["staging_location"]), ROWS)
    body = {**_managed("bad", staged["staging_location"]), **change}
    assert message in refused(alice.call("POST", "tables", json_body=body), 400, "INVALID_ARGUMENT")
    listed = ok(alice.call("GET", "tables", query={"catalog_name": "stg", "schema_name": "s"}))
    assert not {"bad", "other"} & {t["name"] for t in listed["tables"]}


def test_registering_before_writing_says_to_write_first(server: Served, schema: str) -> None:
    alice = server.client(server.token("alice"))
    staged = _stage(alice, "empty")
    message = refused(
        alice.call("POST", "tables", json_body=_managed("empty", staged["staging_location"])), 400, "INVALID_ARGUMENT"
    )
    assert "no Delta table at its staging location yet; write the table's first commit there" in message


@pytest.mark.parametrize(
    ("body", "status", "code", "message"),
    [
        (
            {"catalog_name": "stg", "schema_name": "s"},
            400,
            "INVALID_ARGUMENT",
            "CreateStagingTable needs the field 'name'",
        ),
        (
            {"catalog_name": "stg", "schema_name": "s", "name": "t", "x": 1},
            400,
            "INVALID_ARGUMENT",
            "unknown field 'x'",
        ),
        ({"catalog_name": "stg", "schema_name": "nope", "name": "t"}, 404, "SCHEMA_NOT_FOUND", "schema stg.nope"),
        ({"catalog_name": "stg", "schema_name": "s", "name": "a/b"}, 400, "INVALID_ARGUMENT", "invalid"),
        (
            {"catalog_name": "stg", "schema_name": "s", "name": "taken"},
            400,
            "TABLE_ALREADY_EXISTS",
            "table stg.s.taken",
        ),
    ],
)
def test_bad_staging_requests(
    server: Served, schema: str, body: dict[str, Any], status: int, code: str, message: str
) -> None:
    if body.get("name") == "taken":
        with as_principal(ADMIN):
            server.catalog.create_table("stg.s.taken", ROWS, mode="overwrite")
    answer = server.client(server.token("alice")).call("POST", "staging-tables", json_body=body)
    assert message in refused(answer, status, code)


def test_staging_needs_create_table(server: Served, schema: str) -> None:
    server.principal("carol")
    with as_principal(ADMIN):
        server.catalog.grant("stg", "USE CATALOG", "carol")
        server.catalog.grant("stg.s", "USE SCHEMA", "carol")
    carol = server.client(server.token("carol"))
    answer = carol.call("POST", "staging-tables", json_body={"catalog_name": "stg", "schema_name": "s", "name": "c"})
    assert "carol lacks CREATE TABLE on stg.s" in refused(answer, 403, "PERMISSION_DENIED")


def test_an_abandoned_staging_table_is_gone_for_its_stager_only(server: Served, schema: str) -> None:
    alice, bob = server.client(server.token("alice")), server.client(server.token("bob"))
    staged = _stage(alice, "abandoned")
    write_deltalake(st.delta_uri(staged["staging_location"]), ROWS)
    path = f"uc-jupyter/staging-tables/{staged['id']}"
    assert refused(bob.call("DELETE", path), 404, "NOT_FOUND") == f"no staging table with id '{staged['id']}'"
    assert ok(alice.call("DELETE", path)) == {}
    assert not Path(st.local_path(staged["staging_location"])).exists()
    registered = alice.call("POST", "tables", json_body=_managed("abandoned", staged["staging_location"]))
    assert "is not a staging location of yours" in refused(registered, 400, "INVALID_ARGUMENT")
