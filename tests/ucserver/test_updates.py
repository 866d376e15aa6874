"""PATCH of catalogs, schemas and volumes through a real ``uc-jupyter serve``: what changes, who may,
and bad bodies (unknown fields, renames, properties, unknown owners, empty bodies) that change nothing."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from tests.ucserver.conftest import ADMIN, Served
from tests.ucserver.test_catalogs import ok, refused
from uc_jupyter.catalog import as_principal
from uc_jupyter.storage import urls as st


def _tree(server: Served, catalog: str) -> None:
    admin = server.admin()
    ok(admin.call("POST", "catalogs", json_body={"name": catalog, "comment": "first"}))
    ok(admin.call("POST", "schemas", json_body={"name": "s", "catalog_name": catalog}))
    body = {"catalog_name": catalog, "schema_name": "s", "name": "v", "volume_type": "MANAGED"}
    ok(admin.call("POST", "volumes", json_body=body))


def test_patch_changes_comment_and_owner_and_stamps_the_update(server: Served) -> None:
    _tree(server, "upd")
    server.principal("alice")
    admin = server.admin()
    before = ok(admin.call("GET", "catalogs/upd"))
    after = ok(admin.call("PATCH", "catalogs/upd", json_body={"comment": "team data"}))
    assert after["comment"] == "team data" and after["id"] == before["id"]
    assert after["created_at"] == before["created_at"] and after["updated_at"] >= before["updated_at"]
    assert ok(admin.call("GET", "catalogs/upd")) == after
    schema = ok(admin.call("PATCH", "schemas/upd.s", json_body={"owner": "alice", "comment": "x"}))
    assert (schema["owner"], schema["comment"], schema["updated_by"], schema["created_by"]) == (
        "alice",
        "x",
        ADMIN,
        ADMIN,
    )
    volume = ok(admin.call("PATCH", "volumes/upd.s.v", json_body={"comment": "images"}))
    assert (volume["comment"], volume["full_name"]) == ("images", "upd.s.v")
    cleared = ok(admin.call("PATCH", "catalogs/upd", json_body={"comment": ""}))
    assert "comment" not in cleared  # "" clears it; UC leaves absent fields out


def test_only_owners_and_admins_may_patch_and_an_attacker_cannot_take_ownership(server: Served) -> None:
    _tree(server, "updauth")
    with as_principal(ADMIN):
        server.catalog.grant("updauth", "USE CATALOG", server.principal("mallory"))
    mallory = server.client(server.token("mallory"))
    for path, body in (
        ("catalogs/updauth", {"owner": "mallory"}),
        ("catalogs/updauth", {"comment": "pwned"}),
        ("schemas/updauth.s", {"owner": "mallory"}),
    ):
        assert "mallory lacks OWNERSHIP" in refused(
            mallory.call("PATCH", path, json_body=body), 403, "PERMISSION_DENIED"
        )
    got = ok(server.admin().call("GET", "catalogs/updauth"))
    assert (got["owner"], got["comment"]) == (ADMIN, "first")
    # Made the owner by an admin, a principal may change it.
    ok(server.admin().call("PATCH", "schemas/updauth.s", json_body={"owner": "mallory"}))
    changed = ok(mallory.call("PATCH", "schemas/updauth.s", json_body={"comment": "mine now"}))
    assert (changed["owner"], changed["updated_by"]) == ("mallory", "mallory")


@pytest.fixture(scope="module")
def bad_tree(server: Served) -> None:
    """updbad.s.v for the bad patches, and updtaken, a name a rename could land on."""
    _tree(server, "updbad")
    ok(server.admin().call("POST", "catalogs", json_body={"name": "updtaken"}))


@pytest.mark.parametrize(
    ("path", "body", "status", "code", "message"),
    [
        ("catalogs/updbad", {}, 400, "INVALID_ARGUMENT", "UpdateCatalog changes nothing: give a comment or an owner"),
        ("catalogs/updbad", {"comment": None}, 400, "INVALID_ARGUMENT", "UpdateCatalog changes nothing"),
        ("catalogs/updbad", {"colour": "red"}, 400, "INVALID_ARGUMENT", "unknown field 'colour' in UpdateCatalog"),
        (
            "catalogs/updbad",
            {"comment": 5},
            400,
            "INVALID_ARGUMENT",
            "field 'comment' of UpdateCatalog must be a string",
        ),
        (
            "catalogs/updbad",
            {"new_name": "other", "comment": "x"},
            400,
            "INVALID_ARGUMENT",
            "renaming a catalog is not",
        ),
        ("catalogs/updbad", {"new_name": "updtaken"}, 400, "INVALID_ARGUMENT", "renaming a catalog is not supported"),
        ("schemas/updbad.s", {"new_name": "s2"}, 400, "INVALID_ARGUMENT", "renaming a schema is not supported"),
        ("volumes/updbad.s.v", {"new_name": "w"}, 400, "INVALID_ARGUMENT", "renaming a volume is not supported"),
        ("catalogs/updbad", {"properties": {"a": "b"}}, 400, "INVALID_ARGUMENT", "properties are not supported"),
        ("schemas/updbad.s", {"owner": "ghost"}, 400, "INVALID_ARGUMENT", "cannot make ghost the owner of schema"),
        ("schemas/updbad.s", {"owner": "admin "}, 400, "INVALID_ARGUMENT", "invalid principal 'admin '"),
        ("volumes/updbad.s.v", {"comment": "x" * 65537}, 400, "INVALID_ARGUMENT", "comment must be at most 65536"),
        (
            "volumes/updbad.s.v",
            {"properties": {}},
            400,
            "INVALID_ARGUMENT",
            "unknown field 'properties' in UpdateVolume",
        ),
        ("schemas/updbad.nope", {"comment": "x"}, 404, "SCHEMA_NOT_FOUND", "schema updbad.nope does not exist"),
        ("schemas/updbad", {"comment": "x"}, 400, "INVALID_ARGUMENT", "invalid schema name 'updbad'"),
        ("catalogs/updbad.s", {"comment": "x"}, 400, "INVALID_ARGUMENT", "invalid catalog name 'updbad.s'"),
    ],
)
def test_bad_patches_are_one_line_errors_that_change_nothing(
    server: Served, bad_tree: None, path: str, body: dict[str, Any], status: int, code: str, message: str
) -> None:
    admin = server.admin()
    before = [ok(admin.call("GET", p)) for p in ("catalogs/updbad", "schemas/updbad.s", "volumes/updbad.s.v")]
    assert refused(admin.call("PATCH", path, json_body=body), status, code).startswith(message)
    after = [ok(admin.call("GET", p)) for p in ("catalogs/updbad", "schemas/updbad.s", "volumes/updbad.s.v")]
    assert after == before


def test_refresh_reads_the_columns_again_for_a_writer_only(server: Served) -> None:
    _tree(server, "updrefresh")
    with as_principal(ADMIN):
        table = server.catalog.create_table("updrefresh.s.t", pa.table({"a": [1]}))
        server.catalog.grant("updrefresh", "USE CATALOG", server.principal("reader"))
        server.catalog.grant("updrefresh.s", "USE SCHEMA", "reader")
        server.catalog.grant("updrefresh.s.t", "SELECT", "reader")
    wider = pa.table({"a": [1], "b": ["x"]})
    write_deltalake(st.delta_uri(table.storage_location), wider, mode="overwrite", schema_mode="overwrite")
    reader = server.client(server.token("reader"))
    path = "uc-jupyter/tables/updrefresh.s.t/refresh"
    assert "reader lacks MODIFY" in refused(reader.call("POST", path), 403, "PERMISSION_DENIED")
    assert [c["name"] for c in ok(reader.call("GET", "tables/updrefresh.s.t"))["columns"]] == ["a"]
    refreshed = ok(server.admin().call("POST", path))
    assert [c["name"] for c in refreshed["columns"]] == ["a", "b"] and refreshed["table_id"] == table.id
    assert ok(reader.call("GET", "tables/updrefresh.s.t")) == refreshed
    missing = server.admin().call("POST", "uc-jupyter/tables/updrefresh.s.nope/refresh")
    assert "updrefresh.s.nope" in refused(missing, 404, "TABLE_NOT_FOUND")


def test_comments_are_bounded_when_created_too(server: Served) -> None:
    admin = server.admin()
    for path, body in (
        ("catalogs", {"name": "updlong", "comment": "x" * 65537}),
        ("schemas", {"name": "s", "catalog_name": "updlong", "comment": "x" * 65537}),
    ):
        assert refused(admin.call("POST", path, json_body=body), 400, "INVALID_ARGUMENT").startswith(
            "comment must be at most 65536"
        )
    assert (
        ok(admin.call("POST", "catalogs", json_body={"name": "updlong", "comment": "x" * 65536}))["name"] == "updlong"
    )
