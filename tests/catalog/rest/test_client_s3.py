"""RestCatalog reads and writes s3:// storage only with the credentials the server vends, against an
S3 that enforces them (moto in server mode with IAM: uc_jupyter.testing.moto_iam), through a real
in-process ``uc-jupyter serve`` whose credential vends one role per request, scoped to the prefix."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pytest

from uc_jupyter.catalog import PermissionDenied, as_principal
from uc_jupyter.catalog.rest.client import RestCatalog
from uc_jupyter.testing.moto_iam import MotoIam, moto_iam
from uc_jupyter.testing.served import ADMIN, Served, serving

BUCKET = "lake"


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoIam]:
    with moto_iam([BUCKET]) as running:
        s3 = running.admin_client("s3")
        for key in ("vols/a/x.txt", "vols/b/x.txt"):
            s3.put_object(Bucket=BUCKET, Key=key, Body=key.encode())
        yield running


@pytest.fixture(scope="module")
def served(moto: MotoIam, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving(tmp_path_factory.mktemp("rest_s3_home")) as running:
        with as_principal(ADMIN):
            cat = running.catalog
            cat.create_storage_credential("moto_role", moto.options(vending="iam-role-per-vend"))
            cat.create_external_location("vols", f"s3://{BUCKET}/vols", "moto_role")
            cat.create_catalog("v")
            cat.create_schema("v.s")
            for volume in ("a", "b"):
                cat.create_volume(f"v.s.{volume}", f"s3://{BUCKET}/vols/{volume}")
            cat.create_principal("alice")
            cat.grant("v", "USE CATALOG", "alice")
            cat.grant("v.s", "USE SCHEMA", "alice")
            cat.grant("v.s.a", "READ VOLUME", "alice")
        yield running


def test_volume_a_credentials_read_a_and_nothing_of_b(served: Served) -> None:
    rest = RestCatalog(served.url, served.admin_token, token_for=served.token_for)
    with rest.as_principal("alice"):
        resolved = rest.resolve_volume_path("/Volumes/v/s/a/x.txt")
        with pytest.raises(PermissionDenied, match="alice lacks READ VOLUME on v.s.b"):
            rest.resolve_volume_path("/Volumes/v/s/b/x.txt")
    assert set(resolved.storage_options) >= {"key", "secret", "token", "endpoint_url"}
    assert resolved.fs.cat_file(resolved.path) == b"vols/a/x.txt"
    # The same vended keys, pointed at volume b's prefix: refused by S3 itself.
    with pytest.raises(PermissionError):
        resolved.fs.cat_file(f"{BUCKET}/vols/b/x.txt")
    with pytest.raises(PermissionError):  # read credentials do not write
        resolved.fs.pipe_file(f"{BUCKET}/vols/a/new.txt", b"x")


def test_an_external_table_written_and_read_with_vended_credentials(served: Served) -> None:
    from deltalake import DeltaTable

    rest = RestCatalog(served.url, served.admin_token)
    rest.create_table("v.s.t", pa.table({"x": [1, 2]}), storage_location=f"s3://{BUCKET}/vols/t")
    rest.create_table("v.s.t", pa.table({"x": [3]}), mode="append")
    resolved = rest.resolve_table("v.s.t")
    assert "AWS_SESSION_TOKEN" in resolved.storage_options
    table = DeltaTable(resolved.storage_location, storage_options=resolved.storage_options)
    assert sorted(table.to_pyarrow_table()["x"].to_pylist()) == [1, 2, 3]
