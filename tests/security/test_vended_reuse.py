"""Attacks with vended credentials that must fail: one principal reusing another's, through the client's
cache or the server's routes, and vended keys presented where they do not belong.

The server (an in-process ``uc-jupyter serve``, :mod:`uc_jupyter.testing.served`) vends a role per vend
on moto with IAM enforcement (:mod:`uc_jupyter.testing.moto_iam`), so what the keys reach is enforced
by moto, not by us. What one set of vended keys reaches at all (its prefix only, read or write, until
the reaper) is tests/ucserver/test_routes_vending.py's; this file is about who gets keys and who may reuse them.
Keys handed to a person are bearer secrets: whoever holds them reads what they reach until they
expire. What the catalog controls, and is tested here, is that keys are only ever handed to a
principal who holds the privilege at that moment.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.ucserver.conftest import Client
from uc_jupyter.catalog import NotFound, PermissionDenied, as_principal
from uc_jupyter.catalog.rest.client import RestCatalog
from uc_jupyter.testing.moto_iam import MotoIam, moto_iam
from uc_jupyter.testing.served import ADMIN, Served, serving

BUCKET = "reuse-lake"


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoIam]:
    with moto_iam([BUCKET]) as running:
        s3 = running.admin_client("s3")
        for key in ("vols/a/x", "vols/b/x"):
            s3.put_object(Bucket=BUCKET, Key=key, Body=b"payload")
        yield running


@pytest.fixture(scope="module")
def served(moto: MotoIam, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """Volumes ``v.s.a`` and ``v.s.b`` on prefixes of one bucket; alice reads a, mallory may use the
    catalog and schema (and list what she may see) but read neither."""
    with serving(tmp_path_factory.mktemp("reuse_home")) as running:
        cat = running.catalog
        with as_principal(ADMIN):
            cat.create_storage_credential("moto_role", moto.options(vending="iam-role-per-vend"))
            cat.create_external_location("lake", f"s3://{BUCKET}/vols", "moto_role")
            cat.create_catalog("v")
            cat.create_schema("v.s")
            for volume in ("a", "b"):
                cat.create_volume(f"v.s.{volume}", f"s3://{BUCKET}/vols/{volume}")
            for who in ("alice", "mallory"):
                cat.create_principal(who)
                cat.grant("v", "USE CATALOG", who)
                cat.grant("v.s", "USE SCHEMA", who)
                cat.grant("v.s", "CREATE TABLE", who)
            cat.grant("v.s.a", "READ VOLUME", "alice")
        yield running


@pytest.fixture
def rest(served: Served) -> Iterator[RestCatalog]:
    """One client process's catalog, acting for whichever principal an ``as_principal`` block names."""
    catalog = RestCatalog(served.url, served.admin_token, token_for=served.token_for)
    yield catalog
    catalog.close()


def _read(resolved: Any) -> bytes:
    return bytes(resolved.fs.cat_file(f"{resolved.path}/x"))


def test_keys_cached_for_one_principal_are_never_handed_to_another(served: Served, rest: RestCatalog) -> None:
    with as_principal("alice"):
        assert _read(rest.resolve_volume_path("/Volumes/v/s/a")) == b"payload"  # keys now cached for alice
    with as_principal("mallory"), pytest.raises(PermissionDenied, match="^mallory lacks READ VOLUME on v.s.a$"):
        rest.resolve_volume_path("/Volumes/v/s/a")  # the same process, the same cache: mallory's own check
    with as_principal(ADMIN):
        served.catalog.grant("v.s.b", "READ VOLUME", "mallory")
    try:
        with as_principal("mallory"):
            resolved = rest.resolve_volume_path("/Volumes/v/s/b")
            assert _read(resolved) == b"payload"
            with pytest.raises(PermissionError):  # mallory's keys for b reach b's prefix only
                resolved.fs.cat_file(f"{resolved.path.rsplit('/', 1)[0]}/a/x")
    finally:
        with as_principal(ADMIN):
            served.catalog.revoke("v.s.b", "READ VOLUME", "mallory")


def test_a_revoked_grant_stops_the_next_resolve_though_keys_are_cached(served: Served, rest: RestCatalog) -> None:
    with as_principal(ADMIN):
        served.catalog.create_principal("carol")
        for securable, privilege in (("v", "USE CATALOG"), ("v.s", "USE SCHEMA"), ("v.s.a", "READ VOLUME")):
            served.catalog.grant(securable, privilege, "carol")
    with as_principal("carol"):
        assert _read(rest.resolve_volume_path("/Volumes/v/s/a")) == b"payload"
    with as_principal(ADMIN):
        served.catalog.revoke("v.s.a", "READ VOLUME", "carol")
    with as_principal("carol"), pytest.raises(PermissionDenied, match="^carol lacks READ VOLUME on v.s.a$"):
        rest.resolve_volume_path("/Volumes/v/s/a")


def test_vended_keys_are_not_catalog_tokens(served: Served, rest: RestCatalog) -> None:
    with as_principal("alice"):
        volume_id = rest.get_volume("v.s.a").id
        assert volume_id
        vended = rest.vended(f"volume:{volume_id}", "READ_VOLUME")
    keys = vended.aws
    assert keys is not None and keys.session_token
    presented = [keys.access_key_id, keys.secret_access_key, keys.session_token, f"ucj_{keys.access_key_id}_x"]
    for secret in presented:
        client = Client(served.url, secret)
        try:
            answer = client.call("GET", "catalogs")
        finally:
            client.close()
        assert (answer.status, answer.error_code) == (401, "UNAUTHENTICATED")


def test_another_principal_s_staging_table_gets_no_keys_and_cannot_be_registered(served: Served) -> None:
    alice, mallory = (Client(served.url, served.token_for(who)) for who in ("alice", "mallory"))
    try:
        staged = alice.call("POST", "staging-tables", json_body={"name": "t", "catalog_name": "v", "schema_name": "s"})
        assert staged.status == 200, staged
        stolen = mallory.call(
            "POST", "temporary-table-credentials", json_body={"table_id": staged.body["id"], "operation": "READ_WRITE"}
        )
        assert (stolen.status, stolen.error_code) == (403, "PERMISSION_DENIED"), stolen  # as for any id, as UC
        claim = {
            "name": "claimed",
            "catalog_name": "v",
            "schema_name": "s",
            "table_type": "MANAGED",
            "data_source_format": "DELTA",
            "columns": [],
            "storage_location": staged.body["staging_location"],
            "properties": {"io.unitycatalog.tableId": staged.body["id"]},
        }
        registered = mallory.call("POST", "tables", json_body=claim)
        assert registered.status in (400, 403, 404), registered
    finally:
        alice.close()
        mallory.close()
    with as_principal(ADMIN), pytest.raises(NotFound):
        served.catalog.get_table("v.s.claimed")


def test_path_keys_inside_a_volume_need_the_volume_s_privilege_not_the_location_s(served: Served) -> None:
    """READ FILES on the external location around volume a must not be a way around READ VOLUME on a:
    a URL inside a volume gets path keys only as the volume's own check allows (UC does the same)."""
    mallory = Client(served.url, served.token_for("mallory"))
    inside = (f"s3://{BUCKET}/vols/a", f"s3://{BUCKET}/vols/a/x", f"s3://{BUCKET}/vols/a/../a")
    try:
        for granted in (False, True):
            if granted:
                with as_principal(ADMIN):
                    served.catalog.grant("lake", "READ FILES", "mallory", kind="external_location")
            for url in inside:
                body = {"url": url, "operation": "PATH_READ"}
                answer = mallory.call("POST", "temporary-path-credentials", json_body=body)
                assert answer.status in (400, 403, 404), (granted, url, answer)
                assert "aws_temp_credentials" not in (answer.body or {}), url
    finally:
        mallory.close()
        with as_principal(ADMIN):
            served.catalog.revoke("lake", "READ FILES", "mallory", kind="external_location")
