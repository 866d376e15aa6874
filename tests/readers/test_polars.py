"""polars' ``Catalog`` (the Unity Catalog REST client polars ships) over a real ``uc-jupyter serve``: it lists
what its token's principal may see, scans a Delta table on S3 with the keys the server vends for that one
table, and those keys read nothing of another table's prefix (moto enforces the vended role's policy)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from typing import IO

import pytest

from tests.readers.conftest import REGION, ROWS, Lake, in_a_process_of_its_own

pl = pytest.importorskip("polars")
pytestmark = pytest.mark.filterwarnings("ignore::polars.exceptions.UnstableWarning")


def _storage_options(lake: Lake) -> dict[str, str]:
    # Only because the S3 here is moto on 127.0.0.1; against AWS S3 a user passes no storage options.
    return {"aws_endpoint_url": lake.endpoint, "aws_allow_http": "true", "aws_region": REGION}


def _catalog(lake: Lake, who: str) -> object:
    return pl.Catalog(lake.url, bearer_token=lake.tokens[who], require_https=False)


@in_a_process_of_its_own
def test_polars_lists_what_its_principal_may_see(lake: Lake) -> None:
    catalog = _catalog(lake, "alice")
    assert [c.name for c in catalog.list_catalogs()] == ["main"]
    assert [s.name for s in catalog.list_namespaces("main")] == ["ml"]
    tables = {t.name: t for t in catalog.list_tables("main", "ml")}
    assert sorted(tables) == ["a", "loc"]  # not b: alice holds nothing on it
    assert tables["a"].data_source_format == "DELTA"
    assert tables["a"].storage_location == "s3://lake/tables/a"
    assert [(c.name, c.type_name) for c in tables["a"].columns or []] == [("x", "LONG")]


@in_a_process_of_its_own
def test_polars_scans_a_table_with_the_credentials_vended_for_it(lake: Lake) -> None:
    frame = _catalog(lake, "alice").scan_table("main", "ml", "a", storage_options=_storage_options(lake)).collect()
    assert sorted(frame["x"].to_list()) == ROWS["a"]


@in_a_process_of_its_own
def test_the_credentials_vended_for_a_table_read_no_other_tables_prefix(lake: Lake) -> None:
    from polars.catalog.unity.client import CatalogCredentialProvider

    catalog = _catalog(lake, "alice")
    table_a = catalog.get_table_info("main", "ml", "a")
    vended_for_a = CatalogCredentialProvider(catalog, table_a.table_id, write=False)  # what scan_table uses
    options = _storage_options(lake)
    read_a = pl.scan_delta("s3://lake/tables/a", storage_options=options, credential_provider=vended_for_a)
    assert sorted(read_a.collect()["x"].to_list()) == ROWS["a"]
    with pytest.raises(OSError, match="403 Forbidden"):  # S3 itself refuses b's prefix to a's keys
        pl.scan_delta("s3://lake/tables/b", storage_options=options, credential_provider=vended_for_a).collect()


@in_a_process_of_its_own
def test_a_table_that_does_not_exist_is_the_servers_404_in_one_line(lake: Lake) -> None:
    with pytest.raises(pl.exceptions.ComputeError) as raised:
        _catalog(lake, "alice").scan_table("main", "ml", "nope", storage_options=_storage_options(lake))
    assert "404 Not Found" in str(raised.value) and '"error_code":"TABLE_NOT_FOUND"' in str(raised.value)
    assert "table main.ml.nope does not exist" in str(raised.value) and "\n" not in str(raised.value)


@in_a_process_of_its_own
def test_a_table_its_principal_holds_nothing_on_is_refused_naming_the_privilege(lake: Lake) -> None:
    with pytest.raises(pl.exceptions.ComputeError) as raised:  # GET /tables/main.ml.b, before any credential
        _catalog(lake, "alice").scan_table("main", "ml", "b", storage_options=_storage_options(lake))
    assert "403 Forbidden" in str(raised.value) and '"error_code":"PERMISSION_DENIED"' in str(raised.value)
    assert "alice lacks SELECT on main.ml.b" in str(raised.value) and "\n" not in str(raised.value)


@in_a_process_of_its_own
def test_a_principal_without_select_gets_no_credentials_and_reads_nothing(lake: Lake) -> None:
    """polars swallows the server's 403 and falls back to its own credential chain (nothing here: no
    AWS_* variable, no instance role), so the read fails on S3; POLARS_VERBOSE=1 shows the server's line."""
    os.environ["POLARS_VERBOSE"] = "1"  # this test's own process (in_a_process_of_its_own)
    with tempfile.TemporaryFile() as said, _stderr_into(said):
        scan = _catalog(lake, "nosy").scan_table("main", "ml", "a", storage_options=_storage_options(lake))
        said.seek(0)
        assert "nosy lacks SELECT on main.ml.a" in said.read().decode()
    with pytest.raises(OSError, match="Generic S3 error"):  # object_store's words for its credential chain failing
        scan.collect()


@contextlib.contextmanager
def _stderr_into(file: IO[bytes]) -> Iterator[None]:
    """File descriptor 2 (polars' Rust writes there, not to sys.stderr) into ``file`` for the block."""
    saved = os.dup(2)
    try:
        os.dup2(file.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
