"""The embedded catalog on s3:// storage whose credential also says how ``uc-jupyter serve`` vends it
(``vending``, ``role_arn``): those options are the vendor's, so fsspec and deltalake never see them,
and a table's storage options come back in deltalake's form, as RestCatalog gives them. Against
moto in server mode with IAM enforced (uc_jupyter.testing.moto_iam): every request must be signed
with the credential's keys. Read through pyarrow, UCTableDataset and Spark (``table()``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.data import UCTableDataset
from uc_jupyter.tables import table
from uc_jupyter.tables.delta import read_arrow
from uc_jupyter.testing.moto_iam import MotoIam, moto_iam

BUCKET = "lake"
VENDOR_ONLY = {"vending": "static", "role_arn": "arn:aws:iam::123456789012:role/uc", "external_id": "x"}


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoIam]:
    with moto_iam([BUCKET]) as running:
        yield running


@pytest.fixture
def prefix(tmp_path: Path) -> str:
    """This test's key prefix in the module's bucket."""
    return tmp_path.name


@pytest.fixture
def cat(tmp_path: Path, moto: MotoIam, prefix: str) -> LocalCatalog:
    catalog = LocalCatalog(tmp_path / "home")
    catalog.create_storage_credential("lake", moto.options(**VENDOR_ONLY))
    catalog.create_external_location("lake", f"s3://{BUCKET}/{prefix}", "lake")
    catalog.create_catalog("main")
    catalog.create_schema("main.ml")
    return catalog


def test_an_s3_table_is_written_appended_and_read_through_the_catalog(cat: LocalCatalog, prefix: str) -> None:
    cat.create_table("main.ml.t", pa.table({"x": [1, 2]}), storage_location=f"s3://{BUCKET}/{prefix}/t")
    cat.create_table("main.ml.t", pa.table({"x": [3]}), mode="append")
    assert sorted(read_arrow("main.ml.t", catalog=cat)["x"].to_pylist()) == [1, 2, 3]
    rows = [x for batch in UCTableDataset("main.ml.t", batch_size=2, catalog=cat) for x in batch["x"].tolist()]
    assert sorted(rows) == [1, 2, 3]


def test_a_resolved_tables_options_are_deltalakes_without_the_vendors(
    cat: LocalCatalog, moto: MotoIam, prefix: str
) -> None:
    from deltalake import DeltaTable

    cat.create_table("main.ml.t", pa.table({"x": [1]}), storage_location=f"s3://{BUCKET}/{prefix}/t")
    resolved = cat.resolve_table("main.ml.t")
    assert resolved.storage_options == {
        "AWS_ACCESS_KEY_ID": moto.admin_keys[0],
        "AWS_SECRET_ACCESS_KEY": moto.admin_keys[1],
        "AWS_ENDPOINT_URL": moto.endpoint,
        "AWS_ALLOW_HTTP": "true",
        "AWS_REGION": "us-east-1",
    }
    table = DeltaTable(resolved.storage_location, storage_options=resolved.storage_options)
    assert table.to_pyarrow_table()["x"].to_pylist() == [1]


def test_an_s3_volume_reads_and_writes_with_fsspec(cat: LocalCatalog, moto: MotoIam, prefix: str) -> None:
    cat.create_volume("main.ml.v", f"s3://{BUCKET}/{prefix}/v")
    written = cat.resolve_volume_path("/Volumes/main/ml/v/a.txt", write=True)
    assert not set(written.storage_options) & set(VENDOR_ONLY)
    written.fs.pipe_file(written.path, b"hello")
    read = cat.resolve_volume_path("/Volumes/main/ml/v/a.txt")
    assert read.fs.cat_file(read.path) == b"hello"
    s3 = moto.admin_client("s3")
    assert s3.get_object(Bucket=BUCKET, Key=f"{prefix}/v/a.txt")["Body"].read() == b"hello"


def test_the_vendor_reads_the_credentials_own_options_raw(cat: LocalCatalog, moto: MotoIam, prefix: str) -> None:
    assert cat.storage_credential_options("lake") == moto.options(**VENDOR_ONLY)
    path = cat.resolve_storage_path(f"s3://{BUCKET}/{prefix}/loose.txt", write=True)
    assert not set(path.storage_options) & set(VENDOR_ONLY)
    path.fs.pipe_file(path.path, b"1")
    assert path.fs.cat_file(path.path) == b"1"


def test_an_s3_table_reads_through_spark(cat: LocalCatalog, prefix: str, spark_remote: str) -> None:
    cat.create_table("main.ml.t", pa.table({"x": [1, 2, 3]}), storage_location=f"s3://{BUCKET}/{prefix}/t")
    frame = table("main.ml.t", catalog=cat)
    assert sorted(r["x"] for r in frame.collect()) == [1, 2, 3]
