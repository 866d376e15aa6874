"""Attacks on the temporary-credential routes by a principal who wants data it lacks, through a real
``uc-jupyter serve`` (local storage, and s3 behind a ``static`` credential: the refusals come before
any key is made, so no S3 server is needed; what vended keys reach on S3 is test_routes_vending.py's).

- an id of a volume or table dropped and made again under the same name (its storage moved) never
  vends the new one: ids are the object's, not the name's;
- a staging table's id vends for its creator only: not for a metastore admin, not once abandoned; its
  staging location is no path anyone gets path credentials for;
- path credentials for a registered table's or volume's storage, spelled another way (trailing
  slash, ``//``, ``.``/``..``, percent-encoding, ``localhost``, ``s3a://``, a symlink, the bucket's
  case, the location above it), are refused however the caller's location privileges stand.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests.ucserver.conftest import ADMIN, Answer, Client, Served
from tests.ucserver.test_catalogs import ok, refused
from uc_jupyter.catalog import AlreadyExists, NoExternalLocation, PermissionDenied, as_principal
from uc_jupyter.storage import urls as st

BUCKET = "atk-lake"
PATH_OPERATIONS = ("PATH_READ", "PATH_READ_WRITE", "PATH_CREATE_TABLE")


@pytest.fixture(scope="module")
def world(server: Served, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """External table ``atk.s.t`` and volume ``atk.s.v`` in a local location, volume ``atk.s.s3v`` in an
    s3 location; mallory holds every path privilege on both locations and nothing on the objects."""
    lake = tmp_path_factory.mktemp("atk") / "lake"
    (lake / "v").mkdir(parents=True)
    (lake / "link_to_t").symlink_to(lake / "t", target_is_directory=True)
    outside = lake.parent / "outside"
    outside.mkdir()
    (lake / "escape").symlink_to(outside, target_is_directory=True)
    cat = server.catalog
    with as_principal(ADMIN):
        cat.create_storage_credential("atk_static", {"vending": "static", "key": "AKIASTATIC", "secret": "static"})
        cat.create_external_location("atk_files", lake.as_uri())
        cat.create_external_location("atk_s3", f"s3://{BUCKET}/raw", "atk_static")
        cat.create_catalog("atk")
        cat.create_schema("atk.s")
        cat.create_table("atk.s.t", pa.table({"x": [1]}), storage_location=(lake / "t").as_uri())
        cat.create_volume("atk.s.v", (lake / "v").as_uri())
        cat.create_volume("atk.s.s3v", f"s3://{BUCKET}/raw/v")
    server.principal("mallory")
    with as_principal(ADMIN):
        cat.grant("atk", "USE CATALOG", "mallory")
        cat.grant("atk.s", "USE SCHEMA", "mallory")
        for location in ("atk_files", "atk_s3"):
            for privilege in ("READ FILES", "WRITE FILES", "CREATE EXTERNAL TABLE"):
                cat.grant(location, privilege, "mallory", kind="external_location")
    return {"lake": lake, "outside": outside, "mallory": server.client(server.token("mallory"))}


def _path(client: Client, url: str, operation: str) -> Answer:
    return client.call("POST", "temporary-path-credentials", json_body={"url": url, "operation": operation})


def _vend(client: Client, kind: str, object_id: str, operation: str) -> Answer:
    return client.call(
        "POST", f"temporary-{kind}-credentials", json_body={f"{kind}_id": object_id, "operation": operation}
    )


# ----------------------------------------------------------------- spellings of registered storage
def _local_spellings(lake: Path) -> list[str]:
    base = lake.as_uri()
    return [
        f"{base}/t",
        f"{base}/t/",
        f"{base}//t",
        f"{base}/./t",
        f"{base}/v/../t",
        f"{base}/%74",  # 't'
        f"file://localhost{lake}/t",
        f"file:{lake}/t",
        f"{lake}/t",  # a bare path
        f"{base}/t/_delta_log",  # inside the table
        f"{base}/link_to_t",  # a symlink to it
        f"{base}/link_to_t/_delta_log",
        f"{base}/v",
        f"{base}/v/sub/../",
        base,  # the location itself holds both: its keys would reach them
    ]


@pytest.mark.parametrize("operation", PATH_OPERATIONS)
def test_no_spelling_of_a_local_table_or_volume_gets_path_credentials(world: dict[str, Any], operation: str) -> None:
    mallory, lake = world["mallory"], world["lake"]
    for url in _local_spellings(lake):
        answer = _path(mallory, url, operation)
        if operation == "PATH_CREATE_TABLE":
            assert "overlaps" in refused(answer, 400, "RESOURCE_ALREADY_EXISTS"), url
        else:
            assert "use its own privileges" in refused(answer, 403, "PERMISSION_DENIED"), url
    # The same privileges do reach storage that belongs to no table or volume, and say where.
    free = ok(_path(mallory, f"{lake.as_uri()}/free/", operation))
    assert free["url"] == f"{st.resolve_location(lake.as_uri())}/free"
    # A symlink inside the location to a folder outside it is the folder outside: no location holds it.
    escaped = refused(_path(mallory, f"{lake.as_uri()}/escape/x", operation), 403, "PERMISSION_DENIED")
    assert "no external location contains it" in escaped and str(world["outside"].resolve()) in escaped


@pytest.mark.parametrize("operation", PATH_OPERATIONS)
@pytest.mark.parametrize(
    ("url", "status", "said"),
    [
        (f"s3://{BUCKET}/raw/v", 403, "use its own privileges"),
        (f"s3://{BUCKET}/raw/v/", 403, "use its own privileges"),
        (f"s3a://{BUCKET}/raw/v", 403, "use its own privileges"),
        (f"s3n://{BUCKET}/raw/v/x", 403, "use its own privileges"),
        (f"s3://{BUCKET}/raw/%76", 403, "use its own privileges"),  # 'v'
        (f"  s3://{BUCKET}/raw/v  ", 403, "use its own privileges"),
        (f"s3://{BUCKET}/raw", 403, "use its own privileges"),  # above the volume
        (f"s3://{BUCKET}/raw//v", 400, "empty segment"),
        (f"s3://{BUCKET}/raw/./v", 400, "'.' segment"),
        (f"s3://{BUCKET}/raw/x/../v", 400, "'..' segment"),
        (f"s3://{BUCKET.upper()}/raw/v", 400, "lower-case"),
        (f"s3://{BUCKET}/raw/v%2Fx", 400, "encoded '/'"),
        (f"s3://{BUCKET}/raw/v?versionId=1", 400, "query strings"),
        (f"s3://{BUCKET}/raw/v#x", 400, "fragments"),
        (f"s3://{BUCKET}%2Fraw/v", 400, "not a valid bucket name"),
    ],
)
def test_no_spelling_of_an_s3_volume_gets_path_credentials(
    world: dict[str, Any], url: str, status: int, said: str, operation: str
) -> None:
    answer = _path(world["mallory"], url, operation)
    if status == 403 and operation == "PATH_CREATE_TABLE":
        status, said = 400, "overlaps volume atk.s.s3v"
    assert said in refused(answer, status, answer.error_code or "")
    assert answer.error_code in ("PERMISSION_DENIED", "INVALID_ARGUMENT", "RESOURCE_ALREADY_EXISTS")
    assert "AKIASTATIC" not in str(answer.body)


def test_s3_storage_beside_the_volume_is_vended_under_its_canonical_name(world: dict[str, Any]) -> None:
    """A name that only looks like the volume's (a longer segment, another case of the key) is other
    storage: vended, for the canonical URL the policy of a scoping mode would be made from."""
    for asked, canonical in (
        (f"s3a://{BUCKET}/raw/vv/", f"s3://{BUCKET}/raw/vv"),
        (f"s3://{BUCKET}/raw/V", f"s3://{BUCKET}/raw/V"),  # keys are case-sensitive: another prefix
        (f"s3://{BUCKET}/raw/%77", f"s3://{BUCKET}/raw/w"),
    ):
        vended = ok(_path(world["mallory"], asked, "PATH_READ"))
        assert vended["url"] == canonical and vended["aws_temp_credentials"]["access_key_id"] == "AKIASTATIC"


# ----------------------------------------------------------------- ids of objects made again
def test_the_id_of_a_dropped_volume_never_vends_its_successor(server: Served, world: dict[str, Any]) -> None:
    admin, lake = server.admin(), world["lake"]
    for folder in ("first", "second"):
        (lake / "moved" / folder).mkdir(parents=True)
    body = {"catalog_name": "atk", "schema_name": "s", "name": "moved", "volume_type": "EXTERNAL"}
    first = ok(admin.call("POST", "volumes", json_body={**body, "storage_location": (lake / "moved/first").as_uri()}))
    ok(admin.call("DELETE", "volumes/atk.s.moved"))
    second = ok(admin.call("POST", "volumes", json_body={**body, "storage_location": (lake / "moved/second").as_uri()}))
    assert first["volume_id"] != second["volume_id"]
    for operation in ("READ_VOLUME", "WRITE_VOLUME"):
        stale = _vend(admin, "volume", first["volume_id"], operation)
        assert (
            refused(stale, 403, "PERMISSION_DENIED")
            == f"no credentials for volume id {first['volume_id']!r}: it is not one you may use, or there is none"
        )
        assert ok(_vend(admin, "volume", second["volume_id"], operation))["url"] == second["storage_location"]
    ok(admin.call("DELETE", "volumes/atk.s.moved"))


def test_the_id_of_a_dropped_table_never_vends_its_successor(server: Served, world: dict[str, Any]) -> None:
    admin, lake = server.admin(), world["lake"]
    with as_principal(ADMIN):
        server.catalog.create_table("atk.s.again", pa.table({"x": [1]}), storage_location=(lake / "again1").as_uri())
        first = server.catalog.get_table("atk.s.again")
        server.catalog.drop_table("atk.s.again")
        server.catalog.create_table("atk.s.again", pa.table({"y": [2]}), storage_location=(lake / "again2").as_uri())
        second = server.catalog.get_table("atk.s.again")
    assert first.id and second.id and first.id != second.id
    for operation in ("READ", "READ_WRITE"):
        stale = _vend(admin, "table", first.id, operation)
        assert (
            refused(stale, 403, "PERMISSION_DENIED")
            == f"no credentials for table id {first.id!r}: it is not one you may use, or there is none"
        )
        assert ok(_vend(admin, "table", second.id, operation))["url"] == second.storage_location
    # The volume id namespace is not the table one's: neither id vends as the other kind.
    volume_id = ok(admin.call("GET", "volumes/atk.s.v"))["volume_id"]
    assert (
        refused(_vend(admin, "table", volume_id, "READ"), 403, "PERMISSION_DENIED")
        == f"no credentials for table id {volume_id!r}: it is not one you may use, or there is none"
    )
    assert refused(_vend(admin, "volume", second.id, "READ_VOLUME"), 403, "PERMISSION_DENIED").startswith(
        "no credentials for volume id"
    )


# ----------------------------------------------------------------- staging tables of others
def test_a_staging_id_vends_for_its_creator_only_and_its_location_for_nobody(server: Served) -> None:
    with as_principal(ADMIN):
        server.principal("stager")
        for securable, privilege in (("atk", "USE CATALOG"), ("atk.s", "USE SCHEMA"), ("atk.s", "CREATE TABLE")):
            server.catalog.grant(securable, privilege, "stager")
    stager, admin = server.client(server.token("stager")), server.admin()
    staged = ok(stager.call("POST", "staging-tables", json_body=_staging("staged")))
    invented = str(uuid.uuid4())
    for operation in ("READ", "READ_WRITE"):
        assert ok(_vend(stager, "table", staged["id"], operation))["url"] == staged["staging_location"]
        # A metastore admin holds every privilege, but a staging table is its creator's until registered.
        taken = _vend(admin, "table", staged["id"], operation)
        missing = _vend(admin, "table", invented, operation)
        assert (taken.status, taken.error_code) == (missing.status, missing.error_code) == (403, "PERMISSION_DENIED")
        assert taken.body["message"].replace(staged["id"], "ID") == missing.body["message"].replace(invented, "ID")
        # Its storage lies in the catalog's managed storage, inside no external location, for anyone.
        for who in (admin, stager):
            for path_operation in PATH_OPERATIONS:
                answer = _path(who, staged["staging_location"], path_operation)
                assert "no external location contains it" in refused(answer, 403, "PERMISSION_DENIED")
    ok(stager.call("DELETE", f"uc-jupyter/staging-tables/{staged['id']}"))
    abandoned = _vend(stager, "table", staged["id"], "READ_WRITE")
    assert (
        refused(abandoned, 403, "PERMISSION_DENIED")
        == f"no credentials for table id {staged['id']!r}: it is not one you may use, or there is none"
    )


def _staging(name: str) -> dict[str, str]:
    return {"name": name, "catalog_name": "atk", "schema_name": "s"}


# ----------------------------------------------------------------- a securable's own options
def test_an_objects_own_storage_options_cannot_change_how_its_locations_credential_vends(
    server: Served, world: dict[str, Any]
) -> None:
    """Mallory may create external volumes in a location whose credential has no vending mode (so it
    vends nothing). Her volume's own storage options say ``vending: static``: were they merged over
    the credential's, the server would hand her the credential's own, unscoped keys."""
    with as_principal(ADMIN):
        server.catalog.create_storage_credential("atk_plain", {"key": "AKIAPLAINADMIN", "secret": "plain-secret"})
        server.catalog.create_external_location("atk_plain", f"s3://{BUCKET}-plain/raw", "atk_plain")
        server.catalog.grant("atk_plain", "CREATE EXTERNAL VOLUME", "mallory", kind="external_location")
        server.catalog.grant("atk.s", "CREATE VOLUME", "mallory")
    with as_principal("mallory"):
        server.catalog.create_volume(
            "atk.s.mallorys", f"s3://{BUCKET}-plain/raw/m", storage_options={"vending": "static"}
        )
        volume_id = server.catalog.get_volume("atk.s.mallorys").id
    assert volume_id
    mallory = world["mallory"]
    for operation in ("READ_VOLUME", "WRITE_VOLUME"):
        answer = _vend(mallory, "volume", volume_id, operation)
        assert "has no vending mode" in refused(answer, 400, "INVALID_ARGUMENT")
        assert "AKIAPLAINADMIN" not in str(answer.body) and "plain-secret" not in str(answer.body)


def test_external_table_storage_is_the_check_create_table_makes(server: Served, world: dict[str, Any]) -> None:
    """The catalog's public check behind PATH_CREATE_TABLE, called as the principals themselves."""
    lake = world["lake"]
    with as_principal("mallory"):
        free = server.catalog.external_table_storage(f"{lake.as_uri()}/new_table/")
        s3 = server.catalog.external_table_storage(f"s3a://{BUCKET}/raw/new_table")
        with pytest.raises(AlreadyExists, match="overlaps table atk.s.t"):
            server.catalog.external_table_storage(f"{lake.as_uri()}/link_to_t")
        with pytest.raises(NoExternalLocation, match="no external location contains it"):
            server.catalog.external_table_storage(world["outside"].as_uri())
    assert (free.url, free.location.name, free.storage_options) == (
        f"{st.resolve_location(lake.as_uri())}/new_table",
        "atk_files",
        {},
    )
    assert (s3.url, s3.location.credential_name) == (f"s3://{BUCKET}/raw/new_table", "atk_static")
    assert s3.storage_options["key"] == "AKIASTATIC" and "AKIASTATIC" not in repr(s3)
    server.principal("nobody")
    with as_principal("nobody"), pytest.raises(PermissionDenied, match="^nobody lacks CREATE EXTERNAL TABLE on"):
        server.catalog.external_table_storage(f"{lake.as_uri()}/new_table")
