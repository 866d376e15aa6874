"""Credentials, external locations and temporary credentials for local storage, through a real
``uc-jupyter serve``: UC's body shapes, option values never sent back, who may create and see what,
an external volume made through the API inside a location made through the API, the id lookups of
the temporary-credential routes (no oracle), and bad bodies that create nothing."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pyarrow as pa
import pytest

from tests.ucserver.conftest import ADMIN, Served
from tests.ucserver.test_catalogs import ok, refused
from uc_jupyter.catalog import as_principal
from uc_jupyter.storage.urls import resolve_location

SECRET = "s3cr3t-never-shown"
CREDENTIAL_FIELDS = {
    "name",
    "full_name",
    "id",
    "owner",
    "purpose",
    "uc_jupyter_option_names",
    *(f"{w}_{x}" for w in ("created", "updated") for x in ("at", "by")),
}


def _credential(name: str, **more: object) -> dict[str, object]:
    return {"name": name, "uc_jupyter_storage_options": {"key": "AKIAEXAMPLE", "secret": SECRET}, **more}


def test_admin_creates_gets_lists_and_deletes_credentials(server: Served) -> None:
    admin = server.admin()
    before = int(time.time() * 1000)
    made = ok(admin.call("POST", "credentials", json_body=_credential("Lake", comment="the lake")))
    assert set(made) == CREDENTIAL_FIELDS | {"comment"}
    assert (made["name"], made["full_name"], made["owner"], made["purpose"]) == ("lake", "lake", ADMIN, "STORAGE")
    assert made["uc_jupyter_option_names"] == ["key", "secret"] and made["comment"] == "the lake"
    assert before - 1000 <= made["created_at"] <= time.time() * 1000 and made["updated_at"] == made["created_at"]
    role = "arn:aws:iam::123456789012:role/uc"
    with_role = ok(admin.call("POST", "credentials", json_body={"name": "roled", "aws_iam_role": {"role_arn": role}}))
    assert with_role["aws_iam_role"] == {"role_arn": role} and with_role["uc_jupyter_option_names"] == ["role_arn"]
    assert ok(admin.call("GET", "credentials/lake")) == made
    listed = ok(admin.call("GET", "credentials"))["credentials"]
    assert [c["name"] for c in listed if c["name"] in ("lake", "roled")] == ["lake", "roled"]
    first = ok(admin.call("GET", "credentials", query={"max_results": 1}))
    assert len(first["credentials"]) == 1 and first["next_page_token"]
    assert ok(admin.call("GET", "credentials", query={"purpose": "SERVICE"})) == {"credentials": []}
    for answer in (admin.call("GET", "credentials/lake"), admin.call("GET", "credentials")):
        assert SECRET not in str(answer.body) and "AKIAEXAMPLE" not in str(answer.body)
    refused(admin.call("POST", "credentials", json_body=_credential("lake")), 400, "STORAGE_CREDENTIAL_ALREADY_EXISTS")
    assert ok(admin.call("DELETE", "credentials/lake")) == {}
    refused(admin.call("GET", "credentials/lake"), 404, "NOT_FOUND", "storage credential lake does not exist")
    refused(admin.call("DELETE", "credentials/lake"), 404, "NOT_FOUND")


def test_credentials_are_an_admins_and_invisible_to_others(server: Served) -> None:
    admin, dora = server.admin(), server.client(server.token("dora"))
    ok(admin.call("POST", "credentials", json_body=_credential("admins_only")))
    denied = dora.call("POST", "credentials", json_body=_credential("doras"))
    assert refused(denied, 403, "PERMISSION_DENIED").startswith("dora lacks CREATE STORAGE CREDENTIAL")
    # Another's credential is as absent as a missing one, in gets, lists and deletes.
    missing = refused(dora.call("GET", "credentials/admins_only"), 404, "NOT_FOUND")
    assert missing == "storage credential admins_only does not exist"
    assert "admins_only" not in {c["name"] for c in ok(dora.call("GET", "credentials")).get("credentials", [])}
    refused(dora.call("DELETE", "credentials/admins_only"), 404, "NOT_FOUND")
    with as_principal(ADMIN):
        server.catalog.grant("admins_only", "CREATE EXTERNAL LOCATION", "dora", kind="storage_credential")
    seen = ok(dora.call("GET", "credentials/admins_only"))
    assert seen["name"] == "admins_only" and SECRET not in str(seen)
    refused(dora.call("DELETE", "credentials/admins_only"), 403, "PERMISSION_DENIED")  # seeing is not owning


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"name": "bad", "purpose": "SERVICE"}, "purpose 'SERVICE'"),
        ({"name": "bad", "aws_iam_role": {"role_arn": "arn:x", "external_id": "e"}}, "aws_iam_role"),
        ({"name": "bad", "aws_iam_role": {"role_arn": ""}}, "aws_iam_role"),
        ({"name": "bad", "colour": "red"}, "unknown field 'colour'"),
        ({"name": "bad", "uc_jupyter_storage_options": {"vending": "sts"}}, "unknown vending mode 'sts'"),
        ({"name": "bad", "uc_jupyter_storage_options": {"vending": "sts-session-policy"}}, "role_arn"),
        ({"name": "bad", "uc_jupyter_storage_options": {"vending": "iam-role-per-vend"}}, "key and secret"),
        ({"name": "a.b"}, "without dots"),
        ({"comment": "no name"}, "'name'"),
    ],
)
def test_bad_credential_bodies_are_one_line_400s_that_create_nothing(
    server: Served, body: dict[str, object], named: str
) -> None:
    admin = server.admin()
    assert named in refused(admin.call("POST", "credentials", json_body=body), 400, "INVALID_ARGUMENT")
    refused(admin.call("GET", "credentials/bad"), 404, "NOT_FOUND")


def test_external_locations_through_the_api_hold_external_volumes_made_through_the_api(
    server: Served, tmp_path: Path
) -> None:
    admin, erin = server.admin(), server.client(server.token("erin"))
    (tmp_path / "lake" / "v").mkdir(parents=True)
    credential = ok(admin.call("POST", "credentials", json_body=_credential("loc_cred")))
    url = (tmp_path / "lake").as_uri()
    body = {"name": "Lake_Loc", "url": url, "credential_name": "loc_cred", "comment": "raw files"}
    made = ok(admin.call("POST", "external-locations", json_body=body))
    assert {k: made[k] for k in ("name", "url", "credential_name", "credential_id", "owner", "comment")} == {
        "name": "lake_loc",
        "url": resolve_location(url),
        "credential_name": "loc_cred",
        "credential_id": credential["id"],
        "owner": ADMIN,
        "comment": "raw files",
    }
    assert made["id"] and made["updated_at"] == made["created_at"] and made["created_by"] == ADMIN
    assert ok(admin.call("GET", "external-locations/lake_loc")) == made
    assert made in ok(admin.call("GET", "external-locations"))["external_locations"]
    bare = ok(admin.call("POST", "external-locations", json_body={"name": "bare", "url": (tmp_path / "b").as_uri()}))
    assert "credential_name" not in bare and "credential_id" not in bare  # our server: its own environment
    overlap = {"name": "inner", "url": (tmp_path / "lake" / "v").as_uri()}
    assert "overlaps external location lake_loc" in refused(
        admin.call("POST", "external-locations", json_body=overlap), 400, "EXTERNAL_LOCATION_ALREADY_EXISTS"
    )
    refused(erin.call("POST", "external-locations", json_body={"name": "hers", "url": url}), 403, "PERMISSION_DENIED")
    refused(erin.call("GET", "external-locations/lake_loc"), 404, "NOT_FOUND")

    # Erin, with the privileges, makes an external volume inside it through the API.
    ok(admin.call("POST", "catalogs", json_body={"name": "stor"}))
    ok(admin.call("POST", "schemas", json_body={"name": "s", "catalog_name": "stor"}))
    with as_principal(ADMIN):
        for securable, privilege in (("stor", "USE CATALOG"), ("stor.s", "USE SCHEMA"), ("stor.s", "CREATE VOLUME")):
            server.catalog.grant(securable, privilege, "erin")
    volume = {"catalog_name": "stor", "schema_name": "s", "name": "v", "volume_type": "EXTERNAL"}
    volume["storage_location"] = (tmp_path / "lake" / "v").as_uri()
    lacking = erin.call("POST", "volumes", json_body=volume)
    assert lacking.body["details"][0]["metadata"]["securable"] == "external location lake_loc", lacking
    with as_principal(ADMIN):
        server.catalog.grant("lake_loc", "CREATE EXTERNAL VOLUME", "erin", kind="external_location")
    assert ok(erin.call("POST", "volumes", json_body=volume))["owner"] == "erin"
    # Nothing that is used can be dropped; force is not offered.
    used = refused(admin.call("DELETE", "external-locations/lake_loc"), 400, "INVALID_ARGUMENT")
    assert "holds volume stor.s.v" in used
    assert "used by external location lake_loc" in refused(
        admin.call("DELETE", "credentials/loc_cred"), 400, "INVALID_ARGUMENT"
    )
    forced = admin.call("DELETE", "external-locations/lake_loc", query={"force": "true"})
    assert "force=true is not supported" in refused(forced, 400, "INVALID_ARGUMENT")
    ok(admin.call("DELETE", "volumes/stor.s.v"))
    assert ok(admin.call("DELETE", "external-locations/lake_loc")) == {}
    assert ok(admin.call("DELETE", "credentials/loc_cred")) == {}


def _local_volume(server: Served, tmp_path: Path, catalog: str) -> dict[str, object]:
    admin = server.admin()
    ok(admin.call("POST", "catalogs", json_body={"name": catalog}))
    ok(admin.call("POST", "schemas", json_body={"name": "s", "catalog_name": catalog}))
    body = {"catalog_name": catalog, "schema_name": "s", "name": "v", "volume_type": "MANAGED"}
    return ok(admin.call("POST", "volumes", json_body=body))


def test_local_storage_vends_its_url_and_an_expiry_and_no_secret(server: Served, tmp_path: Path) -> None:
    volume = _local_volume(server, tmp_path, "vendlocal")
    admin = server.admin()
    before = time.time() * 1000
    body = {"volume_id": volume["volume_id"], "operation": "WRITE_VOLUME"}
    vended = ok(admin.call("POST", "temporary-volume-credentials", json_body=body))
    assert set(vended) == {"url", "expiration_time"} and vended["url"] == volume["storage_location"]
    assert type(vended["expiration_time"]) is int and vended["expiration_time"] > before
    with as_principal(ADMIN):
        server.catalog.create_table("vendlocal.s.t", pa.table({"x": [1]}))
        table = server.catalog.get_table("vendlocal.s.t")
    for operation in ("READ", "READ_WRITE"):
        got = ok(
            admin.call("POST", "temporary-table-credentials", json_body={"table_id": table.id, "operation": operation})
        )
        assert set(got) == {"url", "expiration_time"} and got["url"] == table.storage_location
    # MODIFY alone writes (READ_WRITE), as the embedded catalog's resolve_table(write=True) allows; it
    # does not read.
    jay = server.client(server.token("jay"))
    with as_principal(ADMIN):
        for securable, privilege in (
            ("vendlocal", "USE CATALOG"),
            ("vendlocal.s", "USE SCHEMA"),
            ("vendlocal.s.t", "MODIFY"),
        ):
            server.catalog.grant(securable, privilege, "jay")
    writes = {"table_id": table.id, "operation": "READ_WRITE"}
    assert ok(jay.call("POST", "temporary-table-credentials", json_body=writes))["url"] == table.storage_location
    reads = jay.call("POST", "temporary-table-credentials", json_body={**writes, "operation": "READ"})
    assert refused(reads, 403, "PERMISSION_DENIED") == "jay lacks SELECT on vendlocal.s.t"
    (tmp_path / "files" / "raw").mkdir(parents=True)
    ok(admin.call("POST", "external-locations", json_body={"name": "files", "url": (tmp_path / "files").as_uri()}))
    raw = (tmp_path / "files" / "raw").as_uri()
    got = ok(admin.call("POST", "temporary-path-credentials", json_body={"url": raw, "operation": "PATH_READ"}))
    assert got["url"] == resolve_location(raw) and "aws_temp_credentials" not in got
    new_table = {"url": (tmp_path / "files" / "new").as_uri(), "operation": "PATH_CREATE_TABLE"}
    assert ok(admin.call("POST", "temporary-path-credentials", json_body=new_table))["url"].endswith("/files/new")


def test_ids_are_no_oracle_and_a_visible_volume_without_the_privilege_is_403(server: Served, tmp_path: Path) -> None:
    volume = _local_volume(server, tmp_path, "vendids")
    frank, gina = server.client(server.token("frank")), server.client(server.token("gina"))
    with as_principal(ADMIN):
        for securable, privilege in (("vendids", "USE CATALOG"), ("vendids.s", "USE SCHEMA")):
            server.catalog.grant(securable, privilege, "gina")
        server.catalog.grant("vendids.s.v", "READ VOLUME", "gina")
        schema_id = server.catalog.get_schema("vendids.s").id
    own = volume["volume_id"]
    invented = str(uuid.uuid4())
    # Frank holds nothing: the real id, an invented one, and a schema's id answer word for word alike.
    answers = {
        asked: frank.call(
            "POST", "temporary-volume-credentials", json_body={"volume_id": asked, "operation": "READ_VOLUME"}
        )
        for asked in (own, invented, schema_id)
    }
    for asked, answer in answers.items():
        assert (
            refused(answer, 403, "PERMISSION_DENIED")
            == f"no credentials for volume id {asked!r}: it is not one you may use, or there is none"
        )
        said = f"no credentials for volume id {asked!r}: it is not one you may use, or there is none"
        assert answer.body == {**answers[invented].body, "message": said}
    # Gina sees it and may read, not write: the 403 names what she lacks, and nothing is vended.
    read = {"volume_id": own, "operation": "READ_VOLUME"}
    assert ok(gina.call("POST", "temporary-volume-credentials", json_body=read))["url"] == volume["storage_location"]
    write = gina.call("POST", "temporary-volume-credentials", json_body={**read, "operation": "WRITE_VOLUME"})
    assert refused(write, 403, "PERMISSION_DENIED") == "gina lacks WRITE VOLUME on vendids.s.v"
    table_creds = gina.call("POST", "temporary-table-credentials", json_body={"table_id": own, "operation": "READ"})
    assert (
        refused(table_creds, 403, "PERMISSION_DENIED")
        == f"no credentials for table id {own!r}: it is not one you may use, or there is none"
    )  # a volume's id is no table's
    # Ivy holds WRITE VOLUME only, which lets her see the volume and write it (as embedded), not read it.
    ivy = server.client(server.token("ivy"))
    with as_principal(ADMIN):
        for securable, privilege in (("vendids", "USE CATALOG"), ("vendids.s", "USE SCHEMA")):
            server.catalog.grant(securable, privilege, "ivy")
        server.catalog.grant("vendids.s.v", "WRITE VOLUME", "ivy")
    written = ok(ivy.call("POST", "temporary-volume-credentials", json_body={**read, "operation": "WRITE_VOLUME"}))
    assert written["url"] == volume["storage_location"]
    read_back = ivy.call("POST", "temporary-volume-credentials", json_body=read)
    assert refused(read_back, 403, "PERMISSION_DENIED") == "ivy lacks READ VOLUME on vendids.s.v"


@pytest.mark.parametrize(
    ("route", "body", "named"),
    [
        ("temporary-volume-credentials", {"volume_id": "x", "operation": "READ_VOLUME"}, "volume_id must be an id"),
        ("temporary-volume-credentials", {"volume_id": str(uuid.UUID(int=1)), "operation": "READ"}, "operation 'READ'"),
        (
            "temporary-volume-credentials",
            {"volume_id": str(uuid.UUID(int=1)), "operation": "UNKNOWN_VOLUME_OPERATION"},
            "is not one of READ_VOLUME, WRITE_VOLUME",
        ),
        ("temporary-volume-credentials", {"volume_id": str(uuid.UUID(int=1))}, "'operation'"),
        ("temporary-table-credentials", {"table_id": "1", "operation": "READ", "x": 1}, "unknown field 'x'"),
        ("temporary-table-credentials", {"table_id": 7, "operation": "READ"}, "must be a string"),
        ("temporary-path-credentials", {"url": "s3://lake", "operation": "PATH_READ"}, "bucket root"),
        ("temporary-path-credentials", {"url": "ftp://host/x", "operation": "PATH_READ"}, "unknown scheme"),
        ("temporary-path-credentials", {"url": "s3://lake/x", "operation": "READ"}, "operation 'READ'"),
    ],
)
def test_bad_temporary_credential_requests_are_one_line_400s(
    server: Served, route: str, body: dict[str, object], named: str
) -> None:
    assert named in refused(server.admin().call("POST", route, json_body=body), 400, "INVALID_ARGUMENT")


def test_path_credentials_need_read_files_and_refuse_registered_storage(server: Served, tmp_path: Path) -> None:
    admin, hana = server.admin(), server.client(server.token("hana"))
    (tmp_path / "p" / "v").mkdir(parents=True)
    ok(admin.call("POST", "external-locations", json_body={"name": "paths", "url": (tmp_path / "p").as_uri()}))
    inside = {"url": (tmp_path / "p" / "a.csv").as_uri(), "operation": "PATH_READ"}
    denied = hana.call("POST", "temporary-path-credentials", json_body=inside)
    assert denied.body["details"][0]["metadata"]["privilege"] == "READ FILES", denied
    refused(denied, 403, "PERMISSION_DENIED")
    with as_principal(ADMIN):
        server.catalog.grant("paths", "READ FILES", "hana", kind="external_location")
    assert ok(hana.call("POST", "temporary-path-credentials", json_body=inside))["url"].endswith("/p/a.csv")
    write = hana.call("POST", "temporary-path-credentials", json_body={**inside, "operation": "PATH_READ_WRITE"})
    assert refused(write, 403, "PERMISSION_DENIED").startswith("hana lacks WRITE FILES")
    create = hana.call("POST", "temporary-path-credentials", json_body={**inside, "operation": "PATH_CREATE_TABLE"})
    assert refused(create, 403, "PERMISSION_DENIED").startswith("hana lacks CREATE EXTERNAL TABLE")
    outside = {"url": (tmp_path / "elsewhere").as_uri(), "operation": "PATH_READ"}
    assert "no external location contains it" in refused(
        hana.call("POST", "temporary-path-credentials", json_body=outside), 403, "PERMISSION_DENIED"
    )
    ok(admin.call("POST", "catalogs", json_body={"name": "pathvol"}))
    ok(admin.call("POST", "schemas", json_body={"name": "s", "catalog_name": "pathvol"}))
    volume = {"catalog_name": "pathvol", "schema_name": "s", "name": "v", "volume_type": "EXTERNAL"}
    ok(admin.call("POST", "volumes", json_body={**volume, "storage_location": (tmp_path / "p" / "v").as_uri()}))
    into_volume = {"url": (tmp_path / "p" / "v" / "x").as_uri(), "operation": "PATH_READ"}
    assert "use its own privileges" in refused(
        hana.call("POST", "temporary-path-credentials", json_body=into_volume), 403, "PERMISSION_DENIED"
    )
    over_volume = {"url": (tmp_path / "p" / "v").as_uri(), "operation": "PATH_CREATE_TABLE"}
    assert "overlaps volume pathvol.s.v" in refused(
        admin.call("POST", "temporary-path-credentials", json_body=over_volume), 400, "RESOURCE_ALREADY_EXISTS"
    )
