"""``ray.data.read_unity_catalog(table, url=..., token=...)`` over a real ``uc-jupyter serve``: Ray asks through
databricks-sdk for the table (``GET /api/2.1/unity-catalog/tables/...``) and for its credentials at the
workspace path (``POST /api/2.0/unity-catalog/temporary-table-credentials``). The exchange is tested
through databricks-sdk itself, and the keys it gets read the table's prefix and no other (moto enforces
the vended role's policy); a principal without SELECT and a table that does not exist are refused by
``read_unity_catalog`` itself, in one line, before any Ray starts.

Not here: Ray reading the rows. Ray's catalog builds its S3 file system from the vended keys and the
region only (``pyarrow.fs.S3FileSystem`` without ``endpoint_override``, and pyarrow does not read
AWS_ENDPOINT_URL) and uses it over any ``filesystem`` given, so it reads from AWS's endpoint and never
from this S3 on 127.0.0.1.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.readers.conftest import REGION, Lake

sdk = pytest.importorskip("databricks.sdk")
# Imported here, not in the tests: importing ray.data installs warning filters of Ray's own, which would
# otherwise come in front of a test's filterwarnings mark.
ray_data = pytest.importorskip("ray.data")

FIRST_COMMIT = "_delta_log/00000000000000000000.json"


def _workspace(lake: Lake, who: str) -> Any:
    return sdk.WorkspaceClient(host=lake.url, token=lake.tokens[who])


def _outcome(call: Any) -> str:
    try:
        call()
    except Exception as exc:
        return getattr(exc, "response", {}).get("Error", {}).get("Code") or type(exc).__name__
    return "ok"


def test_databricks_sdk_gets_credentials_that_read_the_tables_prefix_and_no_other(lake: Lake) -> None:
    from databricks.sdk.service.catalog import TableOperation

    workspace = _workspace(lake, "alice")
    table = workspace.tables.get("main.ml.a")
    assert (table.storage_location, table.data_source_format.value if table.data_source_format else None) == (
        "s3://lake/tables/a",
        "DELTA",
    )
    vended = workspace.temporary_table_credentials.generate_temporary_table_credentials(
        table_id=table.table_id, operation=TableOperation.READ
    )
    assert vended.url == "s3://lake/tables/a" and vended.aws_temp_credentials is not None
    aws = vended.aws_temp_credentials
    s3 = lake.s3_client((aws.access_key_id or "", aws.secret_access_key or "", aws.session_token or ""))
    assert _outcome(lambda: s3.get_object(Bucket="lake", Key=f"tables/a/{FIRST_COMMIT}")) == "ok"
    assert _outcome(lambda: s3.get_object(Bucket="lake", Key=f"tables/b/{FIRST_COMMIT}")) == "AccessDenied"
    assert _outcome(lambda: s3.put_object(Bucket="lake", Key="tables/a/new", Body=b"1")) == "AccessDenied"


def test_databricks_sdk_is_refused_read_write_credentials_without_modify(lake: Lake) -> None:
    from databricks.sdk.errors import PermissionDenied
    from databricks.sdk.service.catalog import TableOperation

    workspace = _workspace(lake, "alice")
    table_id = workspace.tables.get("main.ml.a").table_id
    # databricks-sdk adds the client's config (token masked) to the server's line
    with pytest.raises(PermissionDenied, match=r"^alice lacks MODIFY on main\.ml\.a\. Config: host="):
        workspace.temporary_table_credentials.generate_temporary_table_credentials(
            table_id=table_id, operation=TableOperation.READ_WRITE
        )


def _read_unity_catalog(lake: Lake, table: str, who: str) -> Any:
    return ray_data.read_unity_catalog(table, url=lake.url, token=lake.tokens[who], region=REGION)


def _read_delta_through_the_catalog(lake: Lake, table: str, who: str) -> Any:
    """The form Ray 2.60 recommends over read_unity_catalog (deprecated): the same catalog, the same calls."""
    catalog = ray_data.DatabricksUnityCatalog(url=lake.url, token=lake.tokens[who], region=REGION)
    return ray_data.read_delta(table, catalog=catalog)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # read_unity_catalog is deprecated in Ray 2.60
@pytest.mark.parametrize("read", [_read_unity_catalog, _read_delta_through_the_catalog])
@pytest.mark.parametrize(
    ("table", "who", "error", "line"),
    [
        ("main.ml.a", "nosy", "PermissionDenied", "nosy lacks SELECT on main.ml.a"),  # sees it, may not read it
        ("main.ml.b", "alice", "PermissionDenied", "alice lacks SELECT on main.ml.b"),  # holds nothing on it
        ("main.ml.nope", "alice", "NotFound", "table main.ml.nope does not exist"),
    ],
)
def test_ray_is_refused_a_table_its_principal_may_not_read_in_one_line_before_ray_starts(
    lake: Lake, read: Any, table: str, who: str, error: str, line: str
) -> None:
    import ray
    from databricks.sdk import errors

    with pytest.raises(getattr(errors, error)) as raised:
        read(lake, table, who)
    assert str(raised.value).split(". Config: host=")[0] == line and "\n" not in str(raised.value)
    assert not ray.is_initialized()
