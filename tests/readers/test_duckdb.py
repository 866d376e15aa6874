"""DuckDB's ``unity_catalog`` extension over a real ``uc-jupyter serve``, loaded offline from the PyPI wheels
(``duckdb-extension-unity-catalog``, ``-delta``, ``-httpfs``, the same version as ``duckdb``): it attaches
a catalog of the server, lists what its token's principal may see, queries a table, and a principal
without SELECT gets the server's refusal when DuckDB asks for the table's credentials.

What it cannot do here: read a table on this S3 (moto on 127.0.0.1). The extension turns the vended keys
into a DuckDB secret of key, secret, session token and region only, and the delta extension takes the S3
endpoint from that secret alone, so every read goes to AWS's endpoint. The table it reads is on local
storage (file://), for which no credential is vended.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest

from tests.readers.conftest import REGION, ROWS, Lake, in_a_process_of_its_own

duckdb = pytest.importorskip("duckdb")

EXTENSIONS = ("httpfs", "delta", "unity_catalog")


def _connect(lake: Lake, who: str) -> Any:
    """A DuckDB connection with the three extensions loaded from their wheels (none downloaded: installing
    one is switched off, so a missing one fails here instead of reaching the network) and the server's
    catalog ``main`` attached as ``uc`` ("main" is DuckDB's own name) with ``who``'s token."""
    con = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    for name in EXTENSIONS:
        wheel = Path(importlib.import_module(f"duckdb_extension_{name}").__file__ or "").parent
        con.execute(f"LOAD '{wheel}/extensions/v{duckdb.__version__}/{name}.duckdb_extension'")
    token = lake.tokens[who]
    con.execute(f"CREATE SECRET (TYPE unity_catalog, TOKEN '{token}', ENDPOINT '{lake.url}', AWS_REGION '{REGION}')")
    con.execute("ATTACH 'main' AS uc (TYPE unity_catalog, READ_ONLY)")
    return con


@in_a_process_of_its_own
def test_duckdb_lists_the_tables_its_principal_may_see(lake: Lake) -> None:
    con = _connect(lake, "alice")
    listed = con.execute("SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = 'uc'").fetchall()
    assert sorted(listed) == [("ml", "a"), ("ml", "loc")]  # not b: alice holds nothing on it


@in_a_process_of_its_own
def test_duckdb_queries_a_table_of_the_server(lake: Lake) -> None:
    rows = _connect(lake, "alice").execute("SELECT x FROM uc.ml.loc ORDER BY x").fetchall()
    assert [x for (x,) in rows] == ROWS["loc"]


@in_a_process_of_its_own
def test_a_principal_without_select_is_refused_when_duckdb_asks_for_credentials(lake: Lake) -> None:
    with pytest.raises(duckdb.IOException) as raised:
        _connect(lake, "nosy").execute("SELECT x FROM uc.ml.a").fetchall()
    message = str(raised.value)
    assert "temporary-table-credentials' failed (HTTP 403)" in message
    assert '"error_code":"PERMISSION_DENIED","message":"nosy lacks SELECT on main.ml.a"' in message


@in_a_process_of_its_own
def test_a_table_that_does_not_exist_is_duckdbs_catalog_error(lake: Lake) -> None:
    with pytest.raises(duckdb.CatalogException, match="Table with name nope does not exist"):
        _connect(lake, "alice").execute("SELECT x FROM uc.ml.nope")
