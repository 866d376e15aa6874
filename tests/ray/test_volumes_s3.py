"""``read_volume`` and ``write_volume`` over ``uc-jupyter serve`` on the enforcing S3 lake
(tests/readers/conftest.py; here two external volumes on it, ``main.ml.va`` and ``main.ml.vb``, alice
reading and writing va only): the tasks on the 2-node cluster read and write with the keys the server
vends for the one volume, and those keys, handed to a task on the other node, open that volume's
prefix and not the other's."""

from __future__ import annotations

from typing import Any

import pytest

from tests.readers.conftest import BUCKET, Lake
from tests.readers.conftest import _no_aws_keys_but_vended_ones as _no_aws_keys_but_vended_ones
from tests.readers.conftest import lake as lake
from tests.readers.conftest import moto as moto
from tests.readers.conftest import served as served
from uc_jupyter.catalog import as_principal
from uc_jupyter.catalog.rest.client import RestCatalog
from uc_jupyter.testing.ray_cluster import RayTestCluster
from uc_jupyter.testing.scripts import run_python
from uc_jupyter.testing.served import ADMIN, Served

ray_data = pytest.importorskip("ray.data")


@pytest.fixture(scope="module")
def volumes(lake: Lake, served: Served) -> Lake:
    """va holds docs/a.txt and vb docs/b.txt, written with the admin's keys; alice may read and write va."""
    with as_principal(ADMIN):
        for name in ("va", "vb"):
            served.catalog.create_volume(f"main.ml.{name}", f"s3://{BUCKET}/tables/{name}")
        served.catalog.grant("main.ml.va", "READ VOLUME", "alice")
        served.catalog.grant("main.ml.va", "WRITE VOLUME", "alice")
    s3 = lake.moto.admin_client("s3")
    s3.put_object(Bucket=BUCKET, Key="tables/va/docs/a.txt", Body=b"alpha\nbeta\n")
    s3.put_object(Bucket=BUCKET, Key="tables/vb/docs/b.txt", Body=b"secret\n")
    return lake


def alice(lake: Lake) -> RestCatalog:
    return RestCatalog(lake.url, lake.tokens["alice"])


# The driver in a process of its own: listing and writing a volume on S3 is object_store's work, which this
# test process must not do (tests/conftest.py), and a Ray driver cannot run in a forked child either.
_DRIVER = """
import json, sys
import ray
import uc_jupyter.ray as ucray
from uc_jupyter.catalog.rest.client import RestCatalog

address, url, token = sys.argv[1:4]
ray.init(address=address, log_to_driver=False)
cat = RestCatalog(url, token)
lines = sorted(r["text"] for r in ucray.read_volume("/Volumes/main/ml/va/docs", files="text", catalog=cat).take_all())
try:
    ucray.read_volume("/Volumes/main/ml/vb/docs", files="text", catalog=cat)
    refused = None
except Exception as exc:
    refused = f"{type(exc).__name__}: {exc}"
ucray.write_volume(ray.data.from_items([{"x": i} for i in range(5)]), "/Volumes/main/ml/va/out", catalog=cat)
written = ucray.read_volume("/Volumes/main/ml/va/out", files="parquet", catalog=cat).take_all()
ray.shutdown()
print(json.dumps({"lines": lines, "refused": refused, "xs": sorted(r["x"] for r in written)}))
"""


def test_a_volume_on_s3_is_read_and_written_with_its_own_vended_keys(
    volumes: Lake, ray_cluster: RayTestCluster
) -> None:
    answer, _ = run_python(_DRIVER, ray_cluster.address, volumes.url, volumes.tokens["alice"], timeout=240)
    assert answer == {
        "lines": ["alpha", "beta"],
        "refused": "PermissionDenied: alice lacks READ VOLUME on main.ml.vb",
        "xs": [0, 1, 2, 3, 4],
    }
    keys = [
        o["Key"]
        for o in volumes.moto.admin_client("s3").list_objects_v2(Bucket=BUCKET, Prefix="tables/va/out/")["Contents"]
    ]
    assert "tables/va/out/_uc_export.json" in keys  # committed by its manifest, on S3


def _what_these_keys_open(options: dict[str, Any]) -> dict[str, str]:
    """In a task on another node: which objects a volume's vended fsspec options open."""
    import boto3

    def outcome(call: Any) -> str:
        try:
            call()
        except Exception as exc:
            return str(getattr(exc, "response", {}).get("Error", {}).get("Code") or type(exc).__name__)
        return "ok"

    s3 = boto3.client(
        "s3",
        endpoint_url=options["endpoint_url"],
        region_name=options["client_kwargs"]["region_name"],
        aws_access_key_id=options["key"],
        aws_secret_access_key=options["secret"],
        aws_session_token=options["token"],
    )
    return {
        "get va": outcome(lambda: s3.get_object(Bucket=BUCKET, Key="tables/va/docs/a.txt")),
        "get vb": outcome(lambda: s3.get_object(Bucket=BUCKET, Key="tables/vb/docs/b.txt")),
        "put vb": outcome(lambda: s3.put_object(Bucket=BUCKET, Key="tables/vb/docs/c.txt", Body=b"x")),
        "get table a": outcome(
            lambda: s3.get_object(Bucket=BUCKET, Key="tables/a/_delta_log/00000000000000000000.json")
        ),
    }


def test_a_task_given_one_volumes_keys_cannot_read_another(volumes: Lake, ray_driver: RayTestCluster) -> None:
    import ray

    options = dict(alice(volumes).resolve_volume_path("/Volumes/main/ml/va/docs").storage_options)
    assert options["key"] != volumes.moto.admin_keys[0] and options.get("token")  # vended, not the credential's
    other_node = {ray_driver.nodes[1].resource: 1}
    seen = ray.get(ray.remote(_what_these_keys_open).options(resources=other_node).remote(options))
    assert seen == {"get va": "ok", "get vb": "AccessDenied", "put vb": "AccessDenied", "get table a": "AccessDenied"}
