"""Vended s3 credentials against moto in server mode with IAM enforcement (a real ``moto_server``
process, :mod:`uc_jupyter.testing.moto_iam`), through a real ``uc-jupyter serve``.

What these tests prove moto enforces on the vended (role-per-vend) credentials: GET and PUT outside
the volume's prefix are AccessDenied, a READ_VOLUME credential cannot PUT, listing another bucket is
AccessDenied, and once the reaper deletes the role's policy the session stops working at once; each S3
call is authorised by its IAM action as S3 documents it (HeadObject by s3:GetObject; moto 5.2.6 broke that). What
they prove it does not: an ``s3:prefix`` condition on ListBucket (another prefix of the same bucket
lists), a session policy (sts-session-policy mode narrows nothing in moto), and the session's own
expiry. The policy document that mode sends is checked as a pure function instead (escaping and
containment, with hypothesis).
"""

from __future__ import annotations

import functools
import json
import os
import re
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from tests.ucserver.conftest import ADMIN, Served, start_server
from tests.ucserver.test_catalogs import ok, refused
from uc_jupyter.catalog import as_principal
from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.storage.locations import canonical_location
from uc_jupyter.testing.moto_iam import MotoIam, moto_iam
from uc_jupyter.testing.served import serving
from uc_jupyter.testing.waits import wait_until
from uc_jupyter.ucserver.vendor import LIFETIME_ENV, Vendor, escape_iam, s3_policy

SHARED, ISOLATED_A, ISOLATED_B = "lake", "lake-a", "lake-b"


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoIam]:
    with moto_iam([SHARED, ISOLATED_A, ISOLATED_B]) as running:
        s3 = running.admin_client("s3")
        for bucket, key in ((SHARED, "vols/a/x"), (SHARED, "vols/b/x"), (ISOLATED_A, "data/x"), (ISOLATED_B, "data/x")):
            s3.put_object(Bucket=bucket, Key=key, Body=b"payload")
        yield running


def _serve(home: Path, lifetime_s: float) -> Served:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(LIFETIME_ENV, str(lifetime_s))  # the server process's environment only
        return start_server(home)


@pytest.fixture(scope="module")
def served(moto: MotoIam, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A server whose credential ``moto_role`` vends a role per vend, with locations over a prefix of
    the shared bucket and over the two isolated buckets, and a volume in each."""
    served = _serve(tmp_path_factory.mktemp("vending_home"), 600)
    catalog = served.catalog
    with as_principal(ADMIN):
        catalog.create_storage_credential("moto_role", moto.options(vending="iam-role-per-vend"))
        for name, url in (
            ("shared", f"s3://{SHARED}/vols"),
            ("iso_a", f"s3://{ISOLATED_A}"),
            ("iso_b", f"s3://{ISOLATED_B}"),
        ):
            catalog.create_external_location(name, url, "moto_role")
        catalog.create_catalog("v")
        catalog.create_schema("v.s")
        for volume, url in (
            ("a", f"s3://{SHARED}/vols/a"),
            ("b", f"s3://{SHARED}/vols/b"),
            ("iso", f"s3://{ISOLATED_A}/data"),
        ):
            catalog.create_volume(f"v.s.{volume}", url)
    yield served
    code, err = served.stop()
    assert code == 0, err


def _reader(served: Served, name: str, *volumes: str, write: bool = False) -> str:
    """A token for ``name`` holding USE CATALOG, USE SCHEMA and READ VOLUME (and WRITE) on ``volumes``."""
    token = served.token(name)
    with as_principal(ADMIN):
        served.catalog.grant("v", "USE CATALOG", name)
        served.catalog.grant("v.s", "USE SCHEMA", name)
        for volume in volumes:
            for privilege in ("READ VOLUME", "WRITE VOLUME") if write else ("READ VOLUME",):
                served.catalog.grant(f"v.s.{volume}", privilege, name)
    return token


def _vend(served: Served, token: str, volume: str, operation: str) -> dict[str, Any]:
    with as_principal(ADMIN):
        volume_id = served.catalog.get_volume(f"v.s.{volume}").id
    client = served.client(token)
    return client.call(
        "POST", "temporary-volume-credentials", json_body={"volume_id": volume_id, "operation": operation}
    ).body


def _s3(moto: MotoIam, vended: dict[str, Any]) -> Any:
    aws = vended["aws_temp_credentials"]
    return moto.client("s3", (aws["access_key_id"], aws["secret_access_key"], aws["session_token"]))


def _outcome(call: Any) -> str:
    try:
        call()
    except Exception as exc:
        return getattr(exc, "response", {}).get("Error", {}).get("Code") or type(exc).__name__
    return "ok"


def test_a_volumes_read_credentials_reach_its_prefix_only(served: Served, moto: MotoIam) -> None:
    vended = _vend(served, _reader(served, "ann", "a"), "a", "READ_VOLUME")
    assert vended["url"] == f"s3://{SHARED}/vols/a"
    assert vended["uc_jupyter_storage_options"] == {"endpoint_url": moto.endpoint, "region": "us-east-1"}
    assert set(vended["aws_temp_credentials"]) == {"access_key_id", "secret_access_key", "session_token"}
    assert vended["aws_temp_credentials"]["access_key_id"] != moto.admin_keys[0]  # a session, not the server's key
    s3 = _s3(moto, vended)
    assert s3.get_object(Bucket=SHARED, Key="vols/a/x")["Body"].read() == b"payload"
    assert _outcome(lambda: s3.get_object(Bucket=SHARED, Key="vols/b/x")) == "AccessDenied"  # volume b's prefix
    assert _outcome(lambda: s3.put_object(Bucket=SHARED, Key="vols/a/new", Body=b"1")) == "AccessDenied"  # read only
    assert _outcome(lambda: s3.put_object(Bucket=SHARED, Key="vols/b/new", Body=b"1")) == "AccessDenied"
    assert _outcome(lambda: s3.list_objects_v2(Bucket=ISOLATED_B)) == "AccessDenied"  # another bucket


def test_write_credentials_write_their_own_prefix_and_no_other(served: Served, moto: MotoIam) -> None:
    vended = _vend(served, _reader(served, "ben", "a", write=True), "a", "WRITE_VOLUME")
    s3 = _s3(moto, vended)
    assert _outcome(lambda: s3.put_object(Bucket=SHARED, Key="vols/a/ben", Body=b"1")) == "ok"
    assert _outcome(lambda: s3.delete_object(Bucket=SHARED, Key="vols/a/ben")) == "ok"
    assert _outcome(lambda: s3.put_object(Bucket=SHARED, Key="vols/b/ben", Body=b"1")) == "AccessDenied"
    assert _outcome(lambda: s3.put_object(Bucket=SHARED, Key="vols/ab", Body=b"1")) == "AccessDenied"  # not a/*


def test_vended_keys_head_and_list_their_own_prefix(served: Served, moto: MotoIam) -> None:
    """HeadObject (s3:GetObject) and ListObjectsV2 (s3:ListBucket) on the volume's own prefix: what fsspec,
    object_store and deltalake send before reading; HeadObject on volume b's prefix stays refused."""
    read = _s3(moto, _vend(served, _reader(served, "uma", "a"), "a", "READ_VOLUME"))
    assert read.head_object(Bucket=SHARED, Key="vols/a/x")["ContentLength"] == len(b"payload")
    assert [o["Key"] for o in read.list_objects_v2(Bucket=SHARED, Prefix="vols/a/")["Contents"]] == ["vols/a/x"]
    assert _outcome(lambda: read.head_object(Bucket=SHARED, Key="vols/b/x")) == "403"  # HEAD answers carry no code


@pytest.fixture(scope="module")
def uploads() -> Iterator[MotoIam]:
    """An enforcing moto of its own for multipart uploads: once a part exists, moto's /moto-api/data.json
    (which test_sts_session_policy_mode_sends_the_scoped_policy reads) answers 500 for the rest of its life."""
    with moto_iam([SHARED]) as running:
        running.admin_client("s3").put_object(Bucket=SHARED, Key="vols/a/x", Body=b"payload")
        yield running


def test_vended_write_keys_make_a_whole_multipart_upload_on_their_own_prefix(uploads: MotoIam, tmp_path: Path) -> None:
    """CreateMultipartUpload, UploadPart, CompleteMultipartUpload (s3:PutObject), ListParts
    (s3:ListMultipartUploadParts), AbortMultipartUpload: what object_store sends for a large write."""
    vendor = Vendor(tmp_path, lifetime_s=600, reaper=False)
    vended = vendor.vend(
        f"s3://{SHARED}/vols/a", uploads.options(vending="iam-role-per-vend"), write=True, credential="moto_role"
    )
    assert vended.aws is not None
    write = uploads.client(
        "s3", (vended.aws.access_key_id, vended.aws.secret_access_key, vended.aws.session_token or "")
    )
    key = "vols/a/val"
    upload = write.create_multipart_upload(Bucket=SHARED, Key=key)["UploadId"]
    part = write.upload_part(Bucket=SHARED, Key=key, UploadId=upload, PartNumber=1, Body=b"m" * 10)
    assert [p["PartNumber"] for p in write.list_parts(Bucket=SHARED, Key=key, UploadId=upload)["Parts"]] == [1]
    parts = {"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]}
    write.complete_multipart_upload(Bucket=SHARED, Key=key, UploadId=upload, MultipartUpload=parts)
    assert write.get_object(Bucket=SHARED, Key=key)["Body"].read() == b"m" * 10
    dropped = write.create_multipart_upload(Bucket=SHARED, Key=key)["UploadId"]
    write.abort_multipart_upload(Bucket=SHARED, Key=key, UploadId=dropped)
    assert _outcome(lambda: write.create_multipart_upload(Bucket=SHARED, Key="vols/b/val")) == "AccessDenied"
    assert (
        _outcome(lambda: write.upload_part(Bucket=SHARED, Key="vols/b/val", UploadId=upload, PartNumber=2, Body=b""))
        == "AccessDenied"
    )


def _assumed(moto: MotoIam, role: str, statements: list[dict[str, Any]]) -> Any:
    """An s3 client signing as a session of a new role ``role`` whose inline policy is ``statements``."""
    iam, sts = moto.admin_client("iam"), moto.admin_client("sts")
    caller = sts.get_caller_identity()["Arn"]
    trust = {"Effect": "Allow", "Principal": {"AWS": caller}, "Action": "sts:AssumeRole"}
    made = iam.create_role(
        RoleName=role, AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [trust]})
    )
    policy = json.dumps({"Version": "2012-10-17", "Statement": statements})
    iam.put_role_policy(RoleName=role, PolicyName="probe", PolicyDocument=policy)
    got = sts.assume_role(RoleArn=made["Role"]["Arn"], RoleSessionName=role)["Credentials"]
    return moto.client("s3", (got["AccessKeyId"], got["SecretAccessKey"], got["SessionToken"]))


def test_moto_authorises_s3_calls_by_their_iam_action_not_their_api_name(uploads: MotoIam) -> None:
    """S3's documented mapping, which real S3 applies and the vended policy relies on: HeadObject needs
    s3:GetObject, ListObjectsV2 s3:ListBucket on the bucket, UploadPart s3:PutObject. moto 5.2.6 checks the
    API's own name instead (s3:HeadObject, s3:ListObjectsV2, s3:UploadPart: no such IAM actions), so every
    vended key got 403 on its own prefix; the dev extra keeps moto below it, and this test fails on such a moto."""
    objects, bucket = f"arn:aws:s3:::{SHARED}/vols/a/*", f"arn:aws:s3:::{SHARED}"
    by_action = _assumed(
        uploads,
        "probe-iam-actions",
        [
            {"Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject"], "Resource": objects},
            {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": bucket},
        ],
    )
    by_api_name = _assumed(
        uploads,
        "probe-api-names",
        [
            {"Effect": "Allow", "Action": ["s3:HeadObject", "s3:UploadPart"], "Resource": objects},
            {"Effect": "Allow", "Action": "s3:ListObjectsV2", "Resource": bucket},
        ],
    )
    admin = uploads.admin_client("s3")
    upload = admin.create_multipart_upload(Bucket=SHARED, Key="vols/a/probe")["UploadId"]
    calls = {
        "HeadObject": lambda s3: s3.head_object(Bucket=SHARED, Key="vols/a/x"),
        "ListObjectsV2": lambda s3: s3.list_objects_v2(Bucket=SHARED, Prefix="vols/a/"),
        "UploadPart": lambda s3: s3.upload_part(
            Bucket=SHARED, Key="vols/a/probe", UploadId=upload, PartNumber=1, Body=b"1"
        ),
    }
    try:
        allowed = {name: _outcome(functools.partial(call, by_action)) for name, call in calls.items()}
        assert allowed == dict.fromkeys(calls, "ok")
        refused = {name: _outcome(functools.partial(call, by_api_name)) for name, call in calls.items()}
        assert refused == {"HeadObject": "403", "ListObjectsV2": "AccessDenied", "UploadPart": "AccessDenied"}
    finally:
        admin.abort_multipart_upload(Bucket=SHARED, Key="vols/a/probe", UploadId=upload)


def test_a_volume_in_its_own_bucket_is_isolated_in_listings_too(served: Served, moto: MotoIam) -> None:
    s3 = _s3(moto, _vend(served, _reader(served, "cai", "iso"), "iso", "READ_VOLUME"))
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=ISOLATED_A, Prefix="data/")["Contents"]] == ["data/x"]
    assert _outcome(lambda: s3.list_objects_v2(Bucket=ISOLATED_B, Prefix="data/")) == "AccessDenied"
    assert _outcome(lambda: s3.list_objects_v2(Bucket=SHARED, Prefix="vols/a/")) == "AccessDenied"


def test_what_moto_does_not_enforce_listing_another_prefix_of_the_same_bucket(served: Served, moto: MotoIam) -> None:
    """The vended policy allows ListBucket only with ``s3:prefix`` under the volume's; moto evaluates
    no condition on S3 requests, so names (not bytes) of a sibling prefix can be listed. Real S3 refuses."""
    s3 = _s3(moto, _vend(served, _reader(served, "dee", "a"), "a", "READ_VOLUME"))
    listed = s3.list_objects_v2(Bucket=SHARED, Prefix="vols/b/")
    assert [o["Key"] for o in listed["Contents"]] == ["vols/b/x"]
    assert _outcome(lambda: s3.get_object(Bucket=SHARED, Key="vols/b/x")) == "AccessDenied"


def test_no_credentials_without_the_privilege_and_no_role_is_left(served: Served, moto: MotoIam) -> None:
    iam = moto.admin_client("iam")
    roles_before = {r["RoleName"] for r in iam.list_roles()["Roles"]}
    reader = _reader(served, "eve", "a")
    denied = served.client(reader)
    with as_principal(ADMIN):
        volume_id = served.catalog.get_volume("v.s.a").id
        hidden_id = served.catalog.get_volume("v.s.b").id
    write = denied.call(
        "POST", "temporary-volume-credentials", json_body={"volume_id": volume_id, "operation": "WRITE_VOLUME"}
    )
    assert refused(write, 403, "PERMISSION_DENIED") == "eve lacks WRITE VOLUME on v.s.a"
    hidden = denied.call(
        "POST", "temporary-volume-credentials", json_body={"volume_id": hidden_id, "operation": "READ_VOLUME"}
    )
    assert (
        refused(hidden, 403, "PERMISSION_DENIED")
        == f"no credentials for volume id {hidden_id!r}: it is not one you may use, or there is none"
    )
    assert "aws_temp_credentials" not in str(write.body) + str(hidden.body)
    assert {r["RoleName"] for r in iam.list_roles()["Roles"]} == roles_before


def test_credentials_stop_working_once_the_reaper_runs_at_expiry(moto: MotoIam, tmp_path: Path) -> None:
    """In process, with the vendor's clock in the test's hand: before expiry the session reads; the
    reaper at expiry deletes the role (and so the session's permissions); a second vendor opened on the
    same home (a restarted server) reaps what a stopped one left."""
    now = [1_000_000.0]
    vendor = Vendor(tmp_path, lifetime_s=30, clock=lambda: now[0], reaper=False)
    with as_principal(ADMIN):
        catalog = LocalCatalog(tmp_path)
        catalog.create_storage_credential("moto_role", moto.options(vending="iam-role-per-vend"))
    options = moto.options(vending="iam-role-per-vend")
    vended = vendor.vend(f"s3://{SHARED}/vols/a", options, write=False, credential="moto_role")
    assert vended.expires_at == now[0] + 30 and [e for _, e in vendor.pending()] == [now[0] + 30]
    assert vended.aws is not None
    s3 = moto.client("s3", (vended.aws.access_key_id, vended.aws.secret_access_key, vended.aws.session_token or ""))
    assert _outcome(lambda: s3.get_object(Bucket=SHARED, Key="vols/a/x")) == "ok"
    now[0] += 29
    assert vendor.reap() == 0 and _outcome(lambda: s3.get_object(Bucket=SHARED, Key="vols/a/x")) == "ok"
    now[0] += 1
    assert vendor.reap() == 1 and vendor.pending() == []
    assert _outcome(lambda: s3.get_object(Bucket=SHARED, Key="vols/a/x")) == "AccessDenied"
    # A stopped server's leftovers: reaped by the next one's startup (its reaper thread).
    left = vendor.vend(f"s3://{SHARED}/vols/a", options, write=False, credential="moto_role")
    assert left.aws is not None and len(vendor.pending()) == 1
    (role, _), iam = vendor.pending()[0], moto.admin_client("iam")
    assert iam.get_role(RoleName=role)["Role"]["RoleName"] == role
    Vendor(tmp_path, lifetime_s=30, clock=lambda: now[0] + 60)
    wait_until(lambda: not vendor.pending(), "the next server's reaper to end the leftover vend", 60)
    assert vendor.pending() == [] and iam.list_role_policies(RoleName=role)["PolicyNames"] == []
    # An ended vend's role is deleted once its STS session (>= 900 s) would have lapsed anyway.
    now[0] += 60 + 899
    assert vendor.reap() == 0 and role in {r["RoleName"] for r in iam.list_roles()["Roles"]}
    now[0] += 2
    vendor.reap()
    assert vendor.pending(ended=True) == [] and role not in {r["RoleName"] for r in iam.list_roles()["Roles"]}


def test_s3_write_keys_also_read_so_they_need_the_read_privilege_too(served: Served, moto: MotoIam) -> None:
    """The write policy holds s3:GetO* (a Delta writer reads the log), so write keys for s3 would be a
    way around SELECT / READ VOLUME / READ FILES: each write vend needs the read privilege as well,
    as UC asks SELECT + MODIFY. Nothing is made for a refused vend (no role)."""
    iam = moto.admin_client("iam")
    roles_before = {r["RoleName"] for r in iam.list_roles()["Roles"]}
    with as_principal(ADMIN):
        served.catalog.create_table("v.s.t", pa.table({"x": [1]}), storage_location=f"s3://{SHARED}/vols/t")
        table_id, volume_id = served.catalog.get_table("v.s.t").id, served.catalog.get_volume("v.s.a").id
        for name in ("tia", "ivo", "pat"):
            served.principal(name)
            served.catalog.grant("v", "USE CATALOG", name)
            served.catalog.grant("v.s", "USE SCHEMA", name)
        served.catalog.grant("v.s.t", "MODIFY", "tia")
        served.catalog.grant("v.s.a", "WRITE VOLUME", "ivo")
        served.catalog.grant("iso_b", "WRITE FILES", "pat", kind="external_location")
    asks = {
        "tia": ("temporary-table-credentials", {"table_id": table_id, "operation": "READ_WRITE"}),
        "ivo": ("temporary-volume-credentials", {"volume_id": volume_id, "operation": "WRITE_VOLUME"}),
        "pat": ("temporary-path-credentials", {"url": f"s3://{ISOLATED_B}/data", "operation": "PATH_READ_WRITE"}),
    }
    lacking = {"tia": "SELECT on v.s.t", "ivo": "READ VOLUME on v.s.a", "pat": "READ FILES on external location iso_b"}
    clients = {name: served.client(served.token(name)) for name in asks}
    for name, (route, body) in asks.items():
        answer = clients[name].call("POST", route, json_body=body)
        assert refused(answer, 403, "PERMISSION_DENIED") == f"{name} lacks {lacking[name]}"
    assert {r["RoleName"] for r in iam.list_roles()["Roles"]} == roles_before
    with as_principal(ADMIN):
        served.catalog.grant("v.s.t", "SELECT", "tia")
        served.catalog.grant("v.s.a", "READ VOLUME", "ivo")
        served.catalog.grant("iso_b", "READ FILES", "pat", kind="external_location")
    for name, (route, body) in asks.items():
        assert ok(clients[name].call("POST", route, json_body=body))["aws_temp_credentials"]["session_token"]


def test_keys_vended_before_a_revoke_keep_working_until_they_expire(served: Served, moto: MotoIam) -> None:
    """What is true, and what the README says: vended keys are bearer secrets for one lifetime. A
    revoke stops the next vend at once, but keys handed out before it read until their expiry (the
    reaper then ends them: test_a_served_vend_expires_by_the_servers_lifetime), whoever holds them;
    UC_JUPYTER_VEND_SECONDS bounds that window, and dropping the credential closes it at once."""
    token = _reader(served, "hal", "a")
    s3 = _s3(moto, _vend(served, token, "a", "READ_VOLUME"))
    with as_principal(ADMIN):
        served.catalog.revoke("v.s.a", "READ VOLUME", "hal")
        volume_id = served.catalog.get_volume("v.s.a").id
    again = served.client(token).call(
        "POST", "temporary-volume-credentials", json_body={"volume_id": volume_id, "operation": "READ_VOLUME"}
    )
    assert (
        refused(again, 403, "PERMISSION_DENIED")
        == f"no credentials for volume id {volume_id!r}: it is not one you may use, or there is none"
    )  # no new keys, no name either
    # The old keys, in hal's hands or passed to anyone: S3 sees keys, not principals.
    assert _outcome(lambda: s3.get_object(Bucket=SHARED, Key="vols/a/x")) == "ok"
    assert _outcome(lambda: s3.get_object(Bucket=SHARED, Key="vols/b/x")) == "AccessDenied"  # still only a's


def test_dropping_a_credential_through_the_server_ends_its_vends_at_once(served: Served, moto: MotoIam) -> None:
    """An admin drops a credential (and first what uses it) while a reader holds keys vended with it:
    the keys stop working at the drop, not an hour later, and no live vend of it stays recorded."""
    moto.admin_client("s3").put_object(Bucket=SHARED, Key="dropped/v/x", Body=b"payload")
    with as_principal(ADMIN):
        served.catalog.create_storage_credential("short_lived", moto.options(vending="iam-role-per-vend"))
        served.catalog.create_external_location("dropped", f"s3://{SHARED}/dropped", "short_lived")
        served.catalog.create_volume("v.s.dropped", f"s3://{SHARED}/dropped/v")
    s3 = _s3(moto, _vend(served, _reader(served, "gus", "dropped"), "dropped", "READ_VOLUME"))
    assert _outcome(lambda: s3.get_object(Bucket=SHARED, Key="dropped/v/x")) == "ok"
    admin = served.admin()
    for path in ("volumes/v.s.dropped", "external-locations/dropped"):
        ok(admin.call("DELETE", path))
    assert _outcome(lambda: s3.get_object(Bucket=SHARED, Key="dropped/v/x")) == "ok"  # the credential still exists
    assert ok(admin.call("DELETE", "credentials/short_lived")) == {}
    assert _outcome(lambda: s3.get_object(Bucket=SHARED, Key="dropped/v/x")) == "AccessDenied"
    with sqlite3.connect(Path(served.catalog.root) / "vends.db") as records:
        live = records.execute("SELECT role FROM vends WHERE credential = 'short_lived' AND ended = 0").fetchall()
    assert live == []


def test_dropping_a_credential_with_the_cli_ends_its_vends_at_once(moto: MotoIam, tmp_path: Path) -> None:
    """``uc-jupyter catalog drop credential`` on a server's home (a real process, embedded catalog) ends
    what that server vended with the credential, as the server's own DELETE does."""
    home = tmp_path / "home"
    options = moto.options(vending="iam-role-per-vend")
    with as_principal(ADMIN):
        LocalCatalog(home).create_storage_credential("by_cli", options)
    vendor = Vendor(home, lifetime_s=600, reaper=False)  # the server's vendor, in this process
    vended = vendor.vend(f"s3://{SHARED}/vols/a", options, write=False, credential="by_cli")
    assert vended.aws is not None
    s3 = moto.client("s3", (vended.aws.access_key_id, vended.aws.secret_access_key, vended.aws.session_token or ""))
    assert _outcome(lambda: s3.get_object(Bucket=SHARED, Key="vols/a/x")) == "ok"
    env = {**os.environ, "UC_JUPYTER_HOME": str(home), "UC_JUPYTER_PRINCIPAL": ADMIN}
    dropped = subprocess.run(
        [sys.executable, "-m", "uc_jupyter.cli", "catalog", "drop", "credential", "by_cli"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (dropped.returncode, dropped.stdout.strip()) == (0, "dropped storage credential by_cli"), dropped.stderr
    assert _outcome(lambda: s3.get_object(Bucket=SHARED, Key="vols/a/x")) == "AccessDenied"
    assert vendor.pending() == [] and len(vendor.pending(ended=True)) == 1


def test_a_credential_dropped_behind_the_servers_back_cannot_keep_its_vends_alive(
    moto: MotoIam, tmp_path: Path
) -> None:
    """The credential dropped embedded (the CLI, no server involved) and made again under the same
    name with other keys: the reaper still ends the vend at its expiry, with the keys the role was
    made with, and deletes the role a session later."""
    now = [2_000_000.0]
    vendor = Vendor(tmp_path, lifetime_s=30, clock=lambda: now[0], reaper=False)
    options = moto.options(vending="iam-role-per-vend")
    with as_principal(ADMIN):
        catalog = LocalCatalog(tmp_path)
        catalog.create_storage_credential("gone", options)
    vended = vendor.vend(f"s3://{SHARED}/vols/a", options, write=False, credential="gone")
    assert vended.aws is not None
    s3 = moto.client("s3", (vended.aws.access_key_id, vended.aws.secret_access_key, vended.aws.session_token or ""))
    with as_principal(ADMIN):
        catalog.drop_storage_credential("gone")
        catalog.create_storage_credential("gone", {**options, "key": "AKIAOTHERKEYS", "secret": "other"})
    assert _outcome(lambda: s3.get_object(Bucket=SHARED, Key="vols/a/x")) == "ok"  # not yet expired
    now[0] += 30
    assert vendor.reap() == 1 and vendor.pending() == []
    assert _outcome(lambda: s3.get_object(Bucket=SHARED, Key="vols/a/x")) == "AccessDenied"
    (role, _), iam = vendor.pending(ended=True)[0], moto.admin_client("iam")
    now[0] += 901
    vendor.reap()
    assert vendor.pending(ended=True) == [] and role not in {r["RoleName"] for r in iam.list_roles()["Roles"]}
    with sqlite3.connect(tmp_path / "vends.db") as records:  # the kept keys went with the role
        assert records.execute("SELECT COUNT(*) FROM reaper_keys").fetchone() == (0,)


def test_a_failed_vend_leaves_no_role_and_no_record(moto: MotoIam, tmp_path: Path) -> None:
    """The server's IAM user may manage roles but not assume them: AssumeRole fails after the role was
    made, and the vend undoes it (no role, no record), answering the error."""
    iam = moto.admin_client("iam")
    iam.create_user(UserName="no-assume")
    only_iam = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "iam:*", "Resource": "*"}]}
    iam.put_user_policy(UserName="no-assume", PolicyName="iam", PolicyDocument=json.dumps(only_iam))
    keys = iam.create_access_key(UserName="no-assume")["AccessKey"]
    options = {
        **moto.options(vending="iam-role-per-vend"),
        "key": keys["AccessKeyId"],
        "secret": keys["SecretAccessKey"],
    }
    roles_before = {r["RoleName"] for r in iam.list_roles()["Roles"]}
    vendor = Vendor(tmp_path, lifetime_s=30, reaper=False)
    with pytest.raises(Exception, match="AccessDenied"):
        vendor.vend(f"s3://{SHARED}/vols/a", options, write=False, credential="limited")
    assert vendor.pending(ended=True) == [] and {r["RoleName"] for r in iam.list_roles()["Roles"]} == roles_before


def test_a_served_vend_expires_by_the_servers_lifetime(moto: MotoIam, tmp_path: Path) -> None:
    served = _serve(tmp_path / "home", 2)
    try:
        with as_principal(ADMIN):
            served.catalog.create_storage_credential("moto_role", moto.options(vending="iam-role-per-vend"))
            served.catalog.create_external_location("iso", f"s3://{ISOLATED_B}", "moto_role")
            served.catalog.create_catalog("v")
            served.catalog.create_schema("v.s")
            served.catalog.create_volume("v.s.b", f"s3://{ISOLATED_B}/data")
            volume_id = served.catalog.get_volume("v.s.b").id
        before = time.time() * 1000
        body = {"volume_id": volume_id, "operation": "READ_VOLUME"}
        vended = ok(served.admin().call("POST", "temporary-volume-credentials", json_body=body))
        assert before + 2000 <= vended["expiration_time"] <= time.time() * 1000 + 2000
        s3 = _s3(moto, vended)
        # The server's reaper deletes the role at expiry: wait for that state.
        wait_until(
            lambda: _outcome(lambda: s3.get_object(Bucket=ISOLATED_B, Key="data/x")) != "ok",
            "the server's reaper to end the vend at its expiry",
            60,
            interval_s=0.2,
        )
        assert _outcome(lambda: s3.get_object(Bucket=ISOLATED_B, Key="data/x")) == "AccessDenied"
        assert Vendor(tmp_path / "home", reaper=False).pending() == []
    finally:
        served.stop()


def test_s3_without_a_vending_mode_vends_nothing_and_static_says_so(served: Served, moto: MotoIam) -> None:
    with as_principal(ADMIN):
        served.catalog.create_storage_credential("plain", moto.options())
        served.catalog.create_storage_credential("static", moto.options(vending="static"))
        served.catalog.create_external_location("plain", f"s3://{SHARED}/plain", "plain")
        served.catalog.create_external_location("static", f"s3://{SHARED}/static", "static")
        served.catalog.create_volume("v.s.plain", f"s3://{SHARED}/plain/v")
        served.catalog.create_volume("v.s.static", f"s3://{SHARED}/static/v")
    refusal = refused(_answer(served, "plain"), 400, "INVALID_ARGUMENT")
    assert "has no vending mode" in refusal and moto.admin_keys[1] not in refusal
    static = ok(_answer(served, "static"))
    assert static["aws_temp_credentials"]["access_key_id"] == moto.admin_keys[0]  # unscoped, as asked for


def _answer(served: Served, volume: str) -> Any:
    with as_principal(ADMIN):
        volume_id = served.catalog.get_volume(f"v.s.{volume}").id
    return served.admin().call(
        "POST", "temporary-volume-credentials", json_body={"volume_id": volume_id, "operation": "READ_VOLUME"}
    )


def test_path_credentials_are_scoped_to_the_path(served: Served, moto: MotoIam) -> None:
    with as_principal(ADMIN):
        served.principal("fay")
        served.catalog.grant("iso_b", "READ FILES", "fay", kind="external_location")
    fay = served.client(served.token("fay"))
    body = {"url": f"s3://{ISOLATED_B}/data", "operation": "PATH_READ"}
    s3 = _s3(moto, ok(fay.call("POST", "temporary-path-credentials", json_body=body)))
    assert _outcome(lambda: s3.get_object(Bucket=ISOLATED_B, Key="data/x")) == "ok"
    assert _outcome(lambda: s3.put_object(Bucket=ISOLATED_B, Key="data/y", Body=b"1")) == "AccessDenied"
    assert _outcome(lambda: s3.get_object(Bucket=ISOLATED_A, Key="data/x")) == "AccessDenied"


def test_sts_session_policy_mode_sends_the_scoped_policy(moto: MotoIam, tmp_path: Path) -> None:
    """moto does not enforce the session policy (nor check that the role exists): what can be checked
    is the policy it was sent, and AWS's rules: DurationSeconds >= 900, the session's own expiry told."""
    vendor = Vendor(tmp_path, lifetime_s=60, reaper=False)
    options = moto.options(vending="sts-session-policy", role_arn="arn:aws:iam::123456789012:role/uc-reader")
    before = time.time()
    vended = vendor.vend(f"s3://{SHARED}/vols/a", options, write=True)
    assert vended.aws is not None and vended.expires_at >= before + 900 - 5
    assert vendor.pending() == []  # nothing for the reaper: AWS ends the session
    # moto keeps the session policy it was sent (and ignores it): it is the scoped one, for writing.
    with urllib.request.urlopen(f"{moto.endpoint}/moto-api/data.json", timeout=10) as answer:
        sessions = json.load(answer)["sts"]["AssumedRole"]
    sent = next(s["policy"] for s in sessions if s["access_key_id"] == vended.aws.access_key_id)
    assert json.loads(sent) == s3_policy(f"s3://{SHARED}/vols/a", write=True)


# ----------------------------------------------------------------- the policy document, pure
def _iam_match(pattern: str, text: str) -> bool:
    """IAM's ARN matching: ``*`` any run, ``?`` one character, ``${*}``/``${?}``/``${$}`` the literal."""
    parts = re.split(r"(\$\{[*?$]\}|\*|\?)", pattern)
    regex = "".join(
        re.escape(p[2]) if p.startswith("${") else ".*" if p == "*" else "." if p == "?" else re.escape(p)
        for p in parts
    )
    return re.fullmatch(regex, text, flags=re.DOTALL) is not None


# Storage URLs hold no '?' (canonical_location refuses query strings); keys may, so `rest` and `sibling` do.
_segment = st.text(alphabet=st.sampled_from("ab*$.{}-_ "), min_size=1, max_size=6).filter(
    lambda s: s.strip() not in ("", ".", "..")
)


@given(
    st.lists(_segment, min_size=1, max_size=3),
    st.text(alphabet="ab*?$/", max_size=6),
    st.text(alphabet="ab*?$", max_size=4),
)
def test_the_policy_allows_keys_under_the_prefix_and_nothing_beside_it(
    segments: list[str], rest: str, sibling: str
) -> None:
    url = canonical_location(f"s3://lake/{'/'.join(segments)}")  # what the catalog stores (stripped, folded)
    prefix = url.removeprefix("s3://lake/")
    assume(prefix and url != "s3://lake")
    policy = s3_policy(url, write=False)
    objects = policy["Statement"][0]["Resource"]
    inside = f"lake/{prefix}/{rest}"
    assert any(_iam_match(p, inside) for p in (r.removeprefix("arn:aws:s3:::") for r in objects))
    # A sibling that shares the prefix's text but is not below it: never allowed.
    beside = f"lake/{prefix}{sibling}x/{rest}"
    assert not any(_iam_match(r.removeprefix("arn:aws:s3:::"), beside) for r in objects)
    assert not any(_iam_match(r.removeprefix("arn:aws:s3:::"), f"other/{prefix}/{rest}") for r in objects)
    listed = policy["Statement"][1]["Condition"]["StringLike"]["s3:prefix"]
    assert any(_iam_match(p, f"{prefix}/{rest}") for p in listed)
    assert not any(_iam_match(p, f"{prefix}{sibling}x/") for p in listed)


@given(st.text(max_size=20))
def test_escaping_leaves_no_bare_wildcard(text: str) -> None:
    escaped = escape_iam(text)
    assert not re.search(r"(?<!\$\{)[*?]", escaped.replace("${$}", "")) and _iam_match(escaped, text)


def test_write_policies_add_put_delete_and_multipart_only() -> None:
    read, write = (s3_policy("s3://lake/p", write=w)["Statement"][0]["Action"] for w in (False, True))
    assert read == ["s3:GetO*"] and write == ["s3:GetO*", "s3:PutO*", "s3:DeleteO*", "s3:*Multipart*"]
    assert json.loads(json.dumps(s3_policy("s3://lake", write=True)))["Statement"][0]["Resource"] == [
        "arn:aws:s3:::lake/*"
    ]


# S3's documented table (each API's page, the Service Authorization Reference): the IAM action that authorises
# each call the readers and writers make. API names such as s3:HeadObject or s3:ListObjectsV2 are no IAM actions.
_READ_CALLS = {"GetObject": "s3:GetObject", "HeadObject": "s3:GetObject", "ListObjectsV2": "s3:ListBucket"}
_WRITE_CALLS = {
    "PutObject": "s3:PutObject",
    "CreateMultipartUpload": "s3:PutObject",
    "UploadPart": "s3:PutObject",
    "CompleteMultipartUpload": "s3:PutObject",
    "ListParts": "s3:ListMultipartUploadParts",
    "AbortMultipartUpload": "s3:AbortMultipartUpload",
    "DeleteObject": "s3:DeleteObject",
}


def _allows(statement: dict[str, Any], action: str, resource: str) -> bool:
    """Whether an Allow ``statement`` names ``action`` (IAM actions ignore case) on ``resource``."""
    actions = [statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"]
    resources = [statement["Resource"]] if isinstance(statement["Resource"], str) else statement["Resource"]
    return (
        statement["Effect"] == "Allow"
        and any(_iam_match(a.lower(), action.lower()) for a in actions)
        and any(_iam_match(r, resource) for r in resources)
    )


def test_the_policy_grants_the_iam_action_of_every_call_readers_and_writers_make() -> None:
    for write, calls in ((False, _READ_CALLS), (True, {**_READ_CALLS, **_WRITE_CALLS})):
        statements = s3_policy("s3://lake/p", write=write)["Statement"]
        for call, action in calls.items():
            resource = "arn:aws:s3:::lake" if action == "s3:ListBucket" else "arn:aws:s3:::lake/p/k"
            assert any(_allows(s, action, resource) for s in statements), (call, write)
    read = s3_policy("s3://lake/p", write=False)["Statement"]
    assert not [a for a in set(_WRITE_CALLS.values()) if any(_allows(s, a, "arn:aws:s3:::lake/p/k") for s in read)]
    assert not any(_allows(s, "s3:GetObject", "arn:aws:s3:::lake/q/k") for s in read)


def _reapers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "uc-vend-reaper" and t.is_alive()]


def test_a_stopped_server_leaves_no_reaper_and_the_next_one_reaps_what_is_left(moto: MotoIam, tmp_path: Path) -> None:
    """Stopping a server stops its reaper thread (no thread reaping against storage that may be gone);
    the live vend's record stays in vends.db, and the next vendor over the home still ends it."""
    home = tmp_path / "home"
    others = set(_reapers())  # other tests' vendors in this process may have reapers of their own
    with serving(home) as running:
        with as_principal(ADMIN):
            running.catalog.create_storage_credential("moto_role", moto.options(vending="iam-role-per-vend"))
            running.catalog.create_external_location("iso", f"s3://{ISOLATED_B}", "moto_role")
            running.catalog.create_catalog("v")
            running.catalog.create_schema("v.s")
            running.catalog.create_volume("v.s.b", f"s3://{ISOLATED_B}/data")
            volume_id = running.catalog.get_volume("v.s.b").id
        request = urllib.request.Request(
            f"{running.url}/api/2.1/unity-catalog/temporary-volume-credentials",
            data=json.dumps({"volume_id": volume_id, "operation": "READ_VOLUME"}).encode(),
            headers={"Authorization": f"Bearer {running.admin_token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request) as answer:
            vended = json.loads(answer.read())
        assert set(_reapers()) - others, "a live vend has a reaper while the server runs"
    assert set(_reapers()) - others == set()
    assert len(Vendor(home, reaper=False).pending()) == 1  # left for the next server, not forgotten
    s3 = _s3(moto, vended)
    assert _outcome(lambda: s3.get_object(Bucket=ISOLATED_B, Key="data/x")) == "ok"
    later = Vendor(home, reaper=False, clock=lambda: time.time() + 7200)  # the next server, after expiry
    later.reap()
    assert _outcome(lambda: s3.get_object(Bucket=ISOLATED_B, Key="data/x")) == "AccessDenied"
