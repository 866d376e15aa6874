"""UCCatalog over ``uc-jupyter serve`` on an enforcing S3 (moto with IAM, tests/readers/conftest.py's lake:
``main.ml.a`` and ``main.ml.b`` on s3://lake/tables/, alice reads a only, nosy may change a and read
nothing): Ray's tasks on the 2-node cluster read and write with the keys the server vends for the one
table, and those keys, handed to a task on the other node, read that table's prefix and no other, and
write nothing with read keys."""

from __future__ import annotations

from typing import Any

import pytest

import uc_jupyter.ray as ucray
from tests.readers.conftest import Lake
from tests.readers.conftest import _no_aws_keys_but_vended_ones as _no_aws_keys_but_vended_ones
from tests.readers.conftest import lake as lake
from tests.readers.conftest import moto as moto
from tests.readers.conftest import served as served
from uc_jupyter.catalog import PermissionDenied, as_principal
from uc_jupyter.catalog.rest.client import RestCatalog
from uc_jupyter.testing.ray_cluster import RayTestCluster
from uc_jupyter.testing.served import ADMIN, Served

ray_data = pytest.importorskip("ray.data")

FIRST_COMMIT = "_delta_log/00000000000000000000.json"


def as_user(lake: Lake, who: str) -> ucray.UCCatalog:
    return ucray.catalog(RestCatalog(lake.url, lake.tokens[who]))


def test_ray_reads_a_table_on_s3_with_the_keys_vended_for_it(lake: Lake, ray_driver: RayTestCluster) -> None:
    got = ray_data.read_delta("main.ml.a", catalog=as_user(lake, "alice")).take_all()
    assert sorted(r["x"] for r in got) == [1, 2, 3]
    with pytest.raises(PermissionDenied, match=r"^alice lacks SELECT on main\.ml\.b$"):
        ray_data.read_delta("main.ml.b", catalog=as_user(lake, "alice"))


def _what_these_keys_open(options: dict[str, str]) -> dict[str, str]:
    """In a task on another node: which Delta tables and objects alice's vended options open."""
    import boto3
    import deltalake

    def outcome(call: Any) -> str:
        try:
            call()
        except Exception as exc:
            code = getattr(exc, "response", {}).get("Error", {}).get("Code")
            return str(code or type(exc).__name__)
        return "ok"

    s3 = boto3.client(
        "s3",
        endpoint_url=options["AWS_ENDPOINT_URL"],
        region_name=options["AWS_REGION"],
        aws_access_key_id=options["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=options["AWS_SECRET_ACCESS_KEY"],
        aws_session_token=options["AWS_SESSION_TOKEN"],
    )
    return {
        "delta a": outcome(lambda: deltalake.DeltaTable("s3://lake/tables/a", storage_options=options).version()),
        "delta b": outcome(lambda: deltalake.DeltaTable("s3://lake/tables/b", storage_options=options).version()),
        "get a": outcome(lambda: s3.get_object(Bucket="lake", Key=f"tables/a/{FIRST_COMMIT}")),
        "get b": outcome(lambda: s3.get_object(Bucket="lake", Key=f"tables/b/{FIRST_COMMIT}")),
        "put a": outcome(lambda: s3.put_object(Bucket="lake", Key="tables/a/x.parquet", Body=b"1")),
    }


def test_a_task_given_alices_table_keys_cannot_read_bobs_prefix(lake: Lake, ray_driver: RayTestCluster) -> None:
    import ray
    from ray.data.catalog import ReaderFormat

    source = as_user(lake, "alice").resolve("main.ml.a", reader=ReaderFormat.DELTA)
    options = dict(source.storage_options or {})
    assert options["AWS_ACCESS_KEY_ID"] != lake.moto.admin_keys[0] and options.get("AWS_SESSION_TOKEN")  # vended
    other_node = {ray_driver.nodes[1].resource: 1}
    seen = ray.get(ray.remote(_what_these_keys_open).options(resources=other_node).remote(options))
    assert seen["delta a"] == seen["get a"] == "ok"
    # Not listing: moto does not evaluate ListBucket's s3:prefix condition (docs/design/unity-catalog-server.md).
    assert (seen["get b"], seen["put a"]) == ("AccessDenied", "AccessDenied"), seen
    assert seen["delta b"] != "ok"  # deltalake reports the refused read as its own error


def test_a_writer_appends_with_read_write_keys_for_the_table(
    lake: Lake, served: Served, ray_driver: RayTestCluster
) -> None:
    # READ_WRITE keys read too: the server vends them for SELECT and MODIFY, so nosy (MODIFY only) is refused.
    with pytest.raises(PermissionDenied, match=r"^nosy lacks SELECT on main\.ml\.a$"):
        ucray.write_delta(ray_data.from_items([{"x": 4}]), "main.ml.a", catalog=as_user(lake, "nosy"))
    with as_principal(ADMIN):
        served.catalog.grant("main.ml.a", "MODIFY", "alice")
    info = ucray.write_delta(ray_data.from_items([{"x": 4}, {"x": 5}]), "main.ml.a", catalog=as_user(lake, "alice"))
    assert info.full_name == "main.ml.a"
    got = ray_data.read_delta("main.ml.a", catalog=as_user(lake, "alice")).take_all()
    assert sorted(r["x"] for r in got) == [1, 2, 3, 4, 5]
