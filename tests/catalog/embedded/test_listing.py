"""Listings a page at a time (LocalCatalog.list_page): the pages of any size, followed to the end, are
the whole listing, for every principal; and a crafted start name never leaves the parent."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from uc_jupyter.catalog import NotFound, PermissionDenied, SecurableKind, as_principal
from uc_jupyter.catalog.embedded.local import LocalCatalog

NAMES = [f"v{i:02d}" for i in range(12)]


@pytest.fixture(scope="module")
def cat(tmp_path_factory: pytest.TempPathFactory) -> LocalCatalog:
    """main.ml with 12 volumes (alice may read v01, v04, v07, v10), main.other with one, and catalogs a..e."""
    with as_principal("admin"):
        catalog = LocalCatalog(tmp_path_factory.mktemp("listing"))
        catalog.create_principal("alice")
        catalog.create_catalog("main")
        for schema in ("main.ml", "main.other", "main.zz"):
            catalog.create_schema(schema)
        for name in NAMES:
            catalog.create_volume(f"main.ml.{name}")
        catalog.create_volume("main.other.v99")
        catalog.create_volume("main.zz.v00")
        for name in "abcde":
            catalog.create_catalog(name)
        catalog.grant("main", "USE CATALOG", "alice")
        catalog.grant("main.ml", "USE SCHEMA", "alice")
        for name in NAMES[1::3]:
            catalog.grant(f"main.ml.{name}", "READ VOLUME", "alice")
        catalog.grant("c", "USE CATALOG", "alice")
    return catalog


def _all_pages(cat: LocalCatalog, kind: SecurableKind, parent: str | None, limit: int) -> list[str]:
    names: list[str] = []
    after = None
    for _ in range(100):
        page = cat.list_page(kind, parent, after=after, limit=limit)
        assert len(page.items) <= limit and (not page.more or len(page.items) == limit)
        names += [i.name for i in page.items]
        if not page.more:
            return names
        after = page.items[-1].name
    raise AssertionError("pages never ended")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(limit=st.integers(1, 15), who=st.sampled_from(["admin", "alice"]))
def test_pages_followed_to_the_end_are_the_whole_listing(cat: LocalCatalog, limit: int, who: str) -> None:
    with as_principal(who):
        assert _all_pages(cat, SecurableKind.VOLUME, "main.ml", limit) == [v.name for v in cat.list_volumes("main.ml")]
        assert _all_pages(cat, SecurableKind.CATALOG, None, limit) == [c.name for c in cat.list_catalogs()]
        assert _all_pages(cat, SecurableKind.SCHEMA, "main", limit) == [s.name for s in cat.list_schemas("main")]
    if who == "alice":
        with as_principal(who):
            assert _all_pages(cat, SecurableKind.VOLUME, "main.ml", limit) == NAMES[1::3]


@pytest.mark.parametrize("after", ["", "v05", "v05/", "zzzz", "v99", ".", "/", "\uffff", "v0%", "'"])
def test_a_crafted_start_name_never_leaves_the_parent(cat: LocalCatalog, after: str) -> None:
    page = cat.list_page(SecurableKind.VOLUME, "main.ml", after=after, limit=100)
    assert [v.name for v in page.items] == [n for n in NAMES if n > after] and not page.more
    assert all((v.catalog_name, v.schema_name) == ("main", "ml") for v in page.items)


def test_the_parent_is_checked_as_in_the_whole_listings(cat: LocalCatalog) -> None:
    with as_principal("alice"):
        with pytest.raises(PermissionDenied, match="alice lacks USE SCHEMA on main.other"):
            cat.list_page(SecurableKind.VOLUME, "main.other")
        with pytest.raises(NotFound, match="schema main.nope does not exist"):
            cat.list_page(SecurableKind.VOLUME, "main.nope")
    with pytest.raises(ValueError, match="limit must be at least 1"):
        cat.list_page(SecurableKind.VOLUME, "main.ml", limit=0)
    with pytest.raises(ValueError, match="no kind of the catalog tree"):
        cat.list_page(SecurableKind.METASTORE, None)


@pytest.mark.parametrize("batch", [1, 2, 5, 1000])
def test_whole_listings_read_in_batches_are_whole(
    cat: LocalCatalog, batch: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A whole listing reads the metastore a batch at a time (1000 rows); any batch size lists the same."""
    monkeypatch.setattr("uc_jupyter.catalog.embedded.listing._BATCH", batch)
    assert [v.name for v in cat.list_volumes("main.ml")] == NAMES
    assert [c.name for c in cat.list_catalogs()] == ["a", "b", "c", "d", "e", "main"]
    assert [s.name for s in cat.list_schemas("main")] == ["ml", "other", "zz"]
    with as_principal("alice"):
        assert [v.name for v in cat.list_volumes("main.ml")] == NAMES[1::3]
        assert [c.name for c in cat.list_catalogs()] == ["c", "main"]
        assert [s.name for s in cat.list_schemas("main")] == ["ml"]
