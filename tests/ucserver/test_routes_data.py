"""uc_jupyter.ucserver.routes_data, called as the app calls it: the listing checks the HTTP tests
(test_catalogs.py, test_volumes.py, test_tables.py, test_updates.py, test_staging.py) leave out."""

from __future__ import annotations

from pathlib import Path

import pytest

from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.catalog.wire.errors import WireError
from uc_jupyter.ucserver.routes_data import Call, create_volume, list_tables, list_volumes


@pytest.fixture
def cat(tmp_path: Path) -> LocalCatalog:
    """``main.a`` and ``main.b``, each with managed volumes ``v1`` and ``v2``, as the metastore admin."""
    made = LocalCatalog(tmp_path / "home")
    made.create_catalog("main")
    for schema in ("a", "b"):
        made.create_schema(f"main.{schema}")
        for volume in ("v1", "v2"):
            body = {"catalog_name": "main", "schema_name": schema, "name": volume, "volume_type": "MANAGED"}
            create_volume(made, Call(body=body))
    return made


@pytest.mark.parametrize(
    "query", [{}, {"catalog_name": "main"}, {"schema_name": "a"}, {"catalog_name": "", "schema_name": "a"}]
)
def test_listing_volumes_or_tables_needs_both_the_catalog_and_the_schema(
    cat: LocalCatalog, query: dict[str, str]
) -> None:
    for listing, what in ((list_volumes, "volumes"), (list_tables, "tables")):
        with pytest.raises(WireError) as refused:
            listing(cat, Call(query=query))
        assert refused.value.error_code == "INVALID_ARGUMENT"
        assert refused.value.message == f"listing {what} needs the query parameters catalog_name and schema_name"


def test_a_page_token_is_good_only_for_the_listing_that_gave_it(cat: LocalCatalog) -> None:
    first = list_volumes(cat, Call(query={"catalog_name": "main", "schema_name": "a", "max_results": "1"}))
    assert [v["name"] for v in first["volumes"]] == ["v1"]
    token = first["next_page_token"]
    following = list_volumes(cat, Call(query={"catalog_name": "MAIN", "schema_name": "A", "page_token": token}))
    assert [v["name"] for v in following["volumes"]] == ["v2"] and "next_page_token" not in following
    for listing, schema in ((list_volumes, "b"), (list_tables, "a")):  # another schema's page, or its tables'
        with pytest.raises(WireError, match="invalid page_token: give the next_page_token of this same listing"):
            listing(cat, Call(query={"catalog_name": "main", "schema_name": schema, "page_token": token}))
