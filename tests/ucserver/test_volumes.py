"""Volumes through a real ``uc-jupyter serve``: VolumeInfo bodies as the official client's model has
them, managed and external volumes (the external location's privilege checked by the embedded
catalog), principals with and without grants, pages, UC's codes, and bad bodies that create nothing."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.ucserver.conftest import ADMIN, Served
from tests.ucserver.test_catalogs import ok, refused
from uc_jupyter.catalog import as_principal
from uc_jupyter.storage.urls import resolve_location
from uc_jupyter.testing.catalogs import external_location

VOLUME_FIELDS = {
    "catalog_name",
    "schema_name",
    "name",
    "owner",
    "volume_id",
    "volume_type",
    "storage_location",
    "full_name",
    *(f"{w}_{x}" for w in ("created", "updated") for x in ("at", "by")),
}


def _schema(server: Served, catalog: str, schema: str = "s") -> None:
    admin = server.admin()
    ok(admin.call("POST", "catalogs", json_body={"name": catalog}))
    ok(admin.call("POST", "schemas", json_body={"name": schema, "catalog_name": catalog}))


def _volume(catalog: str, name: str, **more: str) -> dict[str, str]:
    return {"catalog_name": catalog, "schema_name": "s", "name": name, "volume_type": "MANAGED", **more}


def _names(server: Served, catalog: str) -> list[str]:
    listed = ok(server.admin().call("GET", "volumes", query={"catalog_name": catalog, "schema_name": "s"}))
    return [v["name"] for v in listed["volumes"]]


def test_admin_creates_gets_lists_and_deletes_a_managed_volume(server: Served) -> None:
    _schema(server, "vcrud")
    admin = server.admin()
    before_ms = int(time.time() * 1000)
    made = ok(admin.call("POST", "volumes", json_body=_volume("vcrud", "Raw")))
    assert set(made) == VOLUME_FIELDS  # no comment: the client's VolumeInfo refuses an empty one
    assert {k: made[k] for k in ("catalog_name", "schema_name", "name", "full_name", "volume_type", "owner")} == {
        "catalog_name": "vcrud",
        "schema_name": "s",
        "name": "raw",
        "full_name": "vcrud.s.raw",
        "volume_type": "MANAGED",
        "owner": ADMIN,
    }
    assert before_ms - 1000 <= made["created_at"] <= time.time() * 1000 and made["updated_at"] == made["created_at"]
    with as_principal(ADMIN):
        info = server.catalog.get_volume("vcrud.s.raw")
    assert made["storage_location"] == info.storage_location  # shown for managed volumes too, as UC OSS does
    assert Path(resolve_location(info.storage_location).removeprefix("file://")).is_dir()
    assert ok(admin.call("GET", "volumes/vcrud.s.raw")) == made
    assert ok(admin.call("GET", "volumes/VCRUD.S.RAW")) == made
    listed = ok(admin.call("GET", "volumes", query={"catalog_name": "vcrud", "schema_name": "s"}))
    assert listed == {"volumes": [made]}
    with_comment = ok(admin.call("POST", "volumes", json_body=_volume("vcrud", "notes", comment="free text")))
    assert with_comment["comment"] == "free text"
    assert ok(admin.call("DELETE", "volumes/vcrud.s.raw")) == {}
    refused(admin.call("GET", "volumes/vcrud.s.raw"), 404, "NOT_FOUND", "volume vcrud.s.raw does not exist")
    refused(admin.call("DELETE", "volumes/vcrud.s.raw"), 404, "NOT_FOUND")
    again = ok(admin.call("POST", "volumes", json_body=_volume("vcrud", "raw")))
    assert again["volume_id"] != made["volume_id"]  # a new object of the same name: a new id


def test_an_external_volume_must_lie_in_an_external_location(server: Served, tmp_path: Path) -> None:
    _schema(server, "vext")
    admin = server.admin()
    inside, outside = tmp_path / "loc" / "raw", tmp_path / "elsewhere"
    inside.mkdir(parents=True)
    outside.mkdir()
    with as_principal(ADMIN):
        external_location(server.catalog, str(tmp_path / "loc"))
    body = _volume("vext", "raw", volume_type="EXTERNAL", storage_location=inside.as_uri())
    made = ok(admin.call("POST", "volumes", json_body=body))
    assert (made["volume_type"], made["storage_location"]) == ("EXTERNAL", resolve_location(inside.as_uri()))
    stray = _volume("vext", "stray", volume_type="EXTERNAL", storage_location=outside.as_uri())
    no_location = admin.call("POST", "volumes", json_body=stray)
    assert "no external location contains it" in refused(no_location, 403, "PERMISSION_DENIED")
    assert no_location.body["details"][0]["metadata"]["privilege"] == "CREATE EXTERNAL VOLUME"
    carol = server.client(server.token("carol"))
    with as_principal(ADMIN):
        location = external_location(server.catalog, str(tmp_path / "carols"))
        for securable, privilege in (("vext", "USE CATALOG"), ("vext.s", "USE SCHEMA"), ("vext.s", "CREATE VOLUME")):
            server.catalog.grant(securable, privilege, "carol")
    (tmp_path / "carols" / "v").mkdir(parents=True)
    hers = _volume("vext", "hers", volume_type="EXTERNAL", storage_location=(tmp_path / "carols" / "v").as_uri())
    lacking = carol.call("POST", "volumes", json_body=hers)
    refused(lacking, 403, "PERMISSION_DENIED")
    assert lacking.body["details"][0]["metadata"] == {
        "principal": "carol",
        "privilege": "CREATE EXTERNAL VOLUME",
        "securable": f"external location {location.name}",
    }
    with as_principal(ADMIN):
        server.catalog.grant(location.name, "CREATE EXTERNAL VOLUME", "carol", kind="external_location")
    assert ok(carol.call("POST", "volumes", json_body=hers))["owner"] == "carol"
    overlap = _volume("vext", "twin", volume_type="EXTERNAL", storage_location=inside.as_uri())
    text = refused(admin.call("POST", "volumes", json_body=overlap), 400, "RESOURCE_ALREADY_EXISTS")
    assert "overlaps volume vext.s.raw" in text
    assert ok(admin.call("DELETE", "volumes/vext.s.raw")) == {}
    assert inside.is_dir()  # an external volume's files stay
    assert _names(server, "vext") == ["hers"]


def test_a_principal_without_grants_is_refused_naming_the_privilege(server: Served) -> None:
    _schema(server, "vgrant")
    admin, bob = server.admin(), server.client(server.token("bob"))
    ok(admin.call("POST", "volumes", json_body=_volume("vgrant", "theirs")))
    query = {"catalog_name": "vgrant", "schema_name": "s"}
    denied = bob.call("GET", "volumes", query=query)
    refused(denied, 403, "PERMISSION_DENIED", "bob lacks USE CATALOG on vgrant")
    assert denied.body["details"][0]["metadata"]["privilege"] == "USE CATALOG"
    refused(bob.call("POST", "volumes", json_body=_volume("vgrant", "mine")), 403, "PERMISSION_DENIED")
    refused(bob.call("DELETE", "volumes/vgrant.s.theirs"), 403, "PERMISSION_DENIED")
    with as_principal(ADMIN):
        server.catalog.grant("vgrant", "USE CATALOG", "bob")
        server.catalog.grant("vgrant.s", "USE SCHEMA", "bob")
    assert ok(bob.call("GET", "volumes", query=query)) == {"volumes": []}  # theirs: nothing granted on it
    refused(
        bob.call("POST", "volumes", json_body=_volume("vgrant", "mine")),
        403,
        "PERMISSION_DENIED",
        "bob lacks CREATE VOLUME on vgrant.s",
    )
    with as_principal(ADMIN):
        server.catalog.grant("vgrant.s", "CREATE VOLUME", "bob")
    assert ok(bob.call("POST", "volumes", json_body=_volume("vgrant", "mine")))["owner"] == "bob"
    assert [v["name"] for v in ok(bob.call("GET", "volumes", query=query))["volumes"]] == ["mine"]
    refused(bob.call("DELETE", "volumes/vgrant.s.theirs"), 403, "PERMISSION_DENIED")
    assert ok(bob.call("DELETE", "volumes/vgrant.s.mine")) == {}
    assert _names(server, "vgrant") == ["theirs"]


def test_volumes_come_in_pages_of_the_asked_size(server: Served) -> None:
    _schema(server, "vpages")
    _schema(server, "vpages2")
    admin = server.admin()
    for i in range(5):
        ok(admin.call("POST", "volumes", json_body=_volume("vpages", f"v{i}")))
    ok(admin.call("POST", "volumes", json_body=_volume("vpages2", "other")))
    query = {"catalog_name": "vpages", "schema_name": "s", "max_results": 2}
    pages: list[list[str]] = []
    token = None
    while True:
        body = ok(admin.call("GET", "volumes", query={**query, **({"page_token": token} if token else {})}))
        pages.append([v["name"] for v in body["volumes"]])
        token = body.get("next_page_token")
        if token is None:
            break
    assert pages == [["v0", "v1"], ["v2", "v3"], ["v4"]]
    first = ok(admin.call("GET", "volumes", query=query))["next_page_token"]
    elsewhere = {"catalog_name": "vpages2", "schema_name": "s", "page_token": first}
    refused(admin.call("GET", "volumes", query=elsewhere), 400, "INVALID_ARGUMENT")  # another schema's token
    refused(admin.call("GET", "volumes", query={**query, "max_results": -1}), 400, "INVALID_ARGUMENT")


def test_volume_errors_have_uc_codes(server: Served) -> None:
    _schema(server, "verrs")
    admin = server.admin()
    ok(admin.call("POST", "volumes", json_body=_volume("verrs", "v")))
    refused(admin.call("POST", "volumes", json_body=_volume("verrs", "v")), 400, "RESOURCE_ALREADY_EXISTS")
    refused(
        admin.call("POST", "volumes", json_body={**_volume("verrs", "v"), "schema_name": "nope"}),
        404,
        "SCHEMA_NOT_FOUND",
    )
    refused(admin.call("GET", "volumes/nope.s.v"), 404, "CATALOG_NOT_FOUND")
    refused(admin.call("GET", "volumes/verrs.s.w"), 404, "NOT_FOUND")
    refused(admin.call("GET", "volumes", query={"catalog_name": "verrs"}), 400, "INVALID_ARGUMENT")
    refused(
        admin.call("GET", "volumes", query={"catalog_name": "verrs", "schema_name": "nope"}), 404, "SCHEMA_NOT_FOUND"
    )
    for bad in ("verrs.s", "verrs.s.v.x", "verrs..v"):
        refused(admin.call("GET", f"volumes/{bad}"), 400, "INVALID_ARGUMENT")


@pytest.fixture(scope="module")
def bad_schema(server: Served) -> Served:
    """The module's server with the schema ``vbad.s``, made once for every bad-body case."""
    _schema(server, "vbad")
    return server


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"catalog_name": "vbad", "schema_name": "s", "name": "b1"},
            "CreateVolumeRequestContent needs the field 'volume_type'",
        ),
        (_volume("vbad", "b2", colour="red"), "unknown field 'colour' in CreateVolumeRequestContent"),
        (_volume("vbad", "b3", volume_type="SHARED"), "volume_type must be MANAGED or EXTERNAL, got 'SHARED'"),
        (_volume("vbad", "b4", volume_type="EXTERNAL"), "an EXTERNAL volume needs a storage_location"),
        (_volume("vbad", "b5", storage_location="file:///tmp/x"), "a MANAGED volume takes no storage_location"),
        (_volume("vbad", "b6", comment=""), "comment must be 1 to 65536 characters long"),
        ({**_volume("vbad", "b7"), "name": 7}, "field 'name' of CreateVolumeRequestContent must be a string"),
        (_volume("vbad", "b..8"), "invalid name"),
    ],
    ids=lambda v: v["name"] if isinstance(v, dict) and isinstance(v.get("name"), str) else None,
)
def test_bad_volume_bodies_are_400s_and_create_nothing(bad_schema: Served, body: dict, message: str) -> None:
    server = bad_schema
    assert refused(server.admin().call("POST", "volumes", json_body=body), 400, "INVALID_ARGUMENT").startswith(message)
    assert _names(server, "vbad") == []
