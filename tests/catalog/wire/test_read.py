"""uc_jupyter.catalog.wire.read and vended parsing: what UC servers send, read back, and what is refused in one line."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from uc_jupyter.catalog import CatalogError, ColumnInfo, TableInfo, VolumeInfo
from uc_jupyter.catalog.rest.vended import parse_vended
from uc_jupyter.catalog.wire.read import catalog_info, column_info, from_ms, table_info, volume_info
from uc_jupyter.catalog.wire.shapes import table_json, volume_json

AT = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=timezone.utc)


def test_what_the_server_writes_reads_back_equal() -> None:
    table = TableInfo("c", "s", "t", "alice", "EXTERNAL", "s3://b/t", (ColumnInfo("x", "long", False),), AT)
    volume = VolumeInfo("c", "s", "v", "alice", "MANAGED", "file:///v", AT, "files")
    assert table_info(table_json(table)) == table
    assert volume_info(volume_json(volume)) == volume


def test_other_servers_shapes_are_tolerated() -> None:
    bare = catalog_info({"name": "main", "unknown_future_field": 1})
    assert (bare.owner, bare.created_at, bare.comment, bare.id) == ("", from_ms(None), None, None)
    assert column_info({"name": "n", "type_name": "LONG"}) == ColumnInfo("n", "long", True)
    columns = [{"name": "b", "type_text": "int", "position": 1}, {"name": "a", "type_text": "int", "position": 0}]
    body = {"name": "t", "catalog_name": "c", "schema_name": "s", "table_type": "MANAGED", "columns": columns}
    assert [c.name for c in table_info(body).columns] == ["a", "b"]


def test_what_we_cannot_read_is_one_line() -> None:
    with pytest.raises(CatalogError, match="^c.s.v is a VIEW table; uc_jupyter reads MANAGED and EXTERNAL ones only$"):
        table_info({"name": "v", "catalog_name": "c", "schema_name": "s", "table_type": "VIEW"})
    with pytest.raises(CatalogError, match="has no catalog_name"):
        volume_info({"name": "v", "schema_name": "s", "volume_type": "MANAGED"})
    with pytest.raises(CatalogError, match="name no url"):
        parse_vended({"expiration_time": 1})
    with pytest.raises(
        CatalogError, match="^the server vended azure_user_delegation_sas for abfss://x without its sas_token$"
    ):
        parse_vended({"url": "abfss://x", "azure_user_delegation_sas": {"sas": "t"}})
    with pytest.raises(CatalogError, match="gcp_oauth_token for s3://b/p, which is not that kind of storage"):
        parse_vended({"url": "s3://b/p", "gcp_oauth_token": {"oauth_token": "ya29"}})


def test_azure_and_google_tokens_become_the_options_object_store_signs_with() -> None:
    sas = parse_vended(
        {
            "url": "abfss://raw@lake.dfs.core.windows.net/v",
            "expiration_time": 2_000_000,
            "azure_user_delegation_sas": {"sas_token": "sv=1&sig=secret"},
        }
    )
    assert sas.fsspec_options() == {"sas_token": "sv=1&sig=secret"} and "secret" not in repr(sas)
    google = parse_vended({"url": "gs://lake/v", "gcp_oauth_token": {"oauth_token": "ya29.secret"}})
    assert google.fsspec_options() == {"bearer_token": "ya29.secret"} and "secret" not in repr(google)


def test_vended_secrets_stay_out_of_reprs() -> None:
    vended = parse_vended(
        {"url": "s3://b/p", "aws_temp_credentials": {"access_key_id": "AKID", "secret_access_key": "SECRET"}}
    )
    assert "SECRET" not in repr(vended) and "AKID" not in repr(vended)
    assert vended.fsspec_options() == {"key": "AKID", "secret": "SECRET"}
    assert parse_vended({"url": "file:///v", "expiration_time": 5000}).fsspec_options() == {}
