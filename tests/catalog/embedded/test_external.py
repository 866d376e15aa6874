"""uc_jupyter.catalog.embedded.external: storage credentials, external locations, and what may be storage."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from tests.catalog.conftest import with_principals
from uc_jupyter.catalog import (
    AlreadyExists,
    CatalogError,
    NoExternalLocation,
    NotEmpty,
    NotFound,
    PermissionDenied,
    as_principal,
)
from uc_jupyter.catalog.embedded.external import ReservedStorage
from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.catalog.rules.reserved import reserve

SECRET = {"key": "AKIA-external", "secret": "external-secret", "vending": "static", "role_arn": "arn:aws:iam::1:role/r"}


@pytest.fixture
def cat(main_ml: LocalCatalog, lake: Path) -> LocalCatalog:
    """main.ml, principals alice and bob, credential "cred" and location "raw" over ``lake`` bound to it."""
    catalog = with_principals(main_ml, "alice", "bob")
    catalog.create_storage_credential("cred", SECRET)
    catalog.create_external_location("raw", str(lake), "cred")
    return catalog


def use_schema(cat: LocalCatalog, principal: str) -> None:
    cat.grant("main", "USE CATALOG", principal)
    cat.grant("main.ml", "USE SCHEMA", principal)
    cat.grant("main.ml", "CREATE TABLE", principal)


# ----------------------------------------------------------------- storage credentials


def test_a_credential_names_its_options_and_never_returns_them(cat: LocalCatalog) -> None:
    info = cat.create_storage_credential("Lake2", {"secret": "s-value-42", "key": "k-value-42"}, comment="for the lake")
    assert (info.name, info.owner, info.comment) == ("lake2", "admin", "for the lake")
    assert info.option_names == ("key", "secret")  # sorted names, no values
    assert cat.get_storage_credential("LAKE2") == info
    assert "value-42" not in repr(info) and "value-42" not in repr(cat.list_storage_credentials())
    assert [c.name for c in cat.list_storage_credentials()] == ["cred", "lake2"]


@pytest.mark.parametrize(
    ("options", "refused"),
    [
        ({"kee": "AKIA", "secret": "s"}, "storage option 'kee'; no store takes these options"),
        ({"key": "AKIA", "endpoint": "http://127.0.0.1:9000"}, "storage option 'endpoint'"),
        ({"connection_string": "AccountKey-without-equals"}, "storage option 'connection_string'; no store takes"),
    ],
)
def test_options_no_store_takes_are_refused_at_once_without_their_values(
    cat: LocalCatalog, options: dict[str, str], refused: str
) -> None:
    with pytest.raises(ValueError, match=f"^storage credential odd: {refused}") as raised:
        cat.create_storage_credential("odd", options)
    assert "AKIA" not in str(raised.value) and "AccountKey" not in str(raised.value)
    assert "odd" not in [c.name for c in cat.list_storage_credentials()]


def test_a_location_whose_store_refuses_its_credentials_options_is_refused(cat: LocalCatalog) -> None:
    cat.create_storage_credential("azure", {"account_name": "lake", "account_key": "a2V5"})  # an Azure credential
    with pytest.raises(ValueError, match="^external location s3_lake with credential azure: storage option 'account_"):
        cat.create_external_location("s3_lake", "s3://lake/raw", "azure")
    assert cat.create_external_location("az_lake", "az://lake/raw", "azure").credential_name == "azure"


def test_a_volumes_own_options_that_its_store_refuses_are_refused_as_it_is_made(cat: LocalCatalog) -> None:
    cat.create_storage_credential("s3_keys", {"key": "AKIA", "secret": "s"})
    cat.create_external_location("raw_lake", "s3://lake/raw", "s3_keys")
    with pytest.raises(ValueError, match="^volume main.ml.odd: storage option 'kee'") as raised:
        cat.create_volume("main.ml.odd", "s3://lake/raw/odd", storage_options={"kee": "AKIA-VALUE"})
    assert "AKIA-VALUE" not in str(raised.value)
    assert "odd" not in [v.name for v in cat.list_volumes("main.ml")]
    made = cat.create_volume("main.ml.good", "s3://lake/raw/good", storage_options={"endpoint_url": "http://h:1"})
    assert made.name == "good"


def test_a_credential_without_options_holds_none(cat: LocalCatalog) -> None:
    assert cat.create_storage_credential("env").option_names == ()
    assert cat.storage_credential_options("env") == {}


def test_a_second_credential_of_a_name_is_refused_and_the_first_keeps_its_options(cat: LocalCatalog) -> None:
    with pytest.raises(AlreadyExists, match="storage credential cred already exists"):
        cat.create_storage_credential("CRED", {"key": "other"})
    assert cat.storage_credential_options("cred") == SECRET


def test_options_that_are_not_plain_values_are_refused_before_anything_is_stored(cat: LocalCatalog) -> None:
    with pytest.raises(TypeError, match="storage_options of credential bad must be a dict"):
        cat.create_storage_credential("bad", [("key", "k")])  # type: ignore[arg-type]
    with pytest.raises(NotFound, match="storage credential bad does not exist"):
        cat.get_storage_credential("bad")


def test_a_credential_is_seen_by_admins_its_owner_and_grantees_only(cat: LocalCatalog) -> None:
    with as_principal("alice"):
        assert cat.list_storage_credentials() == []
        with pytest.raises(NotFound, match="storage credential cred does not exist"):
            cat.get_storage_credential("cred")
    cat.grant("cred", "CREATE EXTERNAL LOCATION", "alice", kind="credential")
    with as_principal("alice"):
        assert [c.name for c in cat.list_storage_credentials()] == ["cred"]
        with pytest.raises(PermissionDenied, match="alice lacks OWNERSHIP on storage credential cred"):
            cat.drop_storage_credential("cred")


def test_a_credential_in_use_is_not_dropped_and_one_free_is(cat: LocalCatalog) -> None:
    with pytest.raises(NotEmpty, match="storage credential cred is used by external location raw; drop those first"):
        cat.drop_storage_credential("cred")
    cat.drop_external_location("raw")
    cat.drop_storage_credential("cred")
    with pytest.raises(NotFound):
        cat.get_storage_credential("cred")
    assert cat._secrets.get("credential", "cred") == {}  # its secret went with it


# ----------------------------------------------------------------- external locations


def test_a_location_is_stored_resolved_and_bound_to_its_credential(
    cat: LocalCatalog, lake: Path, tmp_path: Path
) -> None:
    alias = tmp_path / "alias"
    (lake / "sub").mkdir()
    alias.symlink_to(lake / "sub")
    other = cat.create_external_location("Other", f"file://{tmp_path}//other/", comment="c")
    assert (other.name, other.url, other.credential_name, other.comment) == (
        "other",
        f"file://{tmp_path}/other",
        None,
        "c",
    )
    raw = cat.get_external_location("raw")
    assert (raw.url, raw.credential_name) == (f"file://{lake}", "cred")
    with pytest.raises(AlreadyExists, match="overlaps external location raw"):
        cat.create_external_location("inner", str(alias))  # a symlink into raw is raw's
    assert [loc.name for loc in cat.list_external_locations()] == ["other", "raw"]


def test_a_location_named_again_is_refused(cat: LocalCatalog, tmp_path: Path) -> None:
    with pytest.raises(AlreadyExists, match="external location raw already exists"):
        cat.create_external_location("RAW", str(tmp_path / "elsewhere"))


def test_a_location_needs_the_privilege_on_the_metastore_and_on_its_credential(
    cat: LocalCatalog, tmp_path: Path
) -> None:
    cat.grant("metastore", "CREATE EXTERNAL LOCATION", "alice", kind="metastore")
    with as_principal("alice"):
        with pytest.raises(NotFound, match="storage credential cred does not exist"):
            cat.create_external_location("hers", str(tmp_path / "hers"), "cred")
        assert cat.create_external_location("hers", str(tmp_path / "hers")).owner == "alice"
    cat.grant("cred", "CREATE EXTERNAL LOCATION", "alice", kind="credential")
    with as_principal("alice"):
        assert cat.create_external_location("hers2", str(tmp_path / "hers2"), "cred").credential_name == "cred"
    with (
        as_principal("bob"),
        pytest.raises(PermissionDenied, match="bob lacks CREATE EXTERNAL LOCATION on the metastore"),
    ):
        cat.create_external_location("his", str(tmp_path / "his"))


def test_the_catalog_home_another_home_a_cache_and_the_code_are_never_storage(
    cat: LocalCatalog, tmp_path: Path
) -> None:
    cat.drop_external_location("raw")  # it lies in tmp_path, which one case below is about
    other_home = LocalCatalog(tmp_path / "other_home").root
    cache = tmp_path / "cache"
    reserve(cat.root, cache, "cache")
    import uc_jupyter

    package = Path(uc_jupyter.__file__).parent
    for url, why in (
        (cat.root / "storage" / "tables", "overlaps the catalog home"),
        (tmp_path, "overlaps the catalog home"),  # a location holding the home holds the metastore too
        (other_home / "storage", "lies inside uc_jupyter's home folder"),
        (cache / "objects", "overlaps the cache folder"),
        (package / "catalog", "overlaps uc_jupyter's own code"),
    ):
        with pytest.raises(ReservedStorage, match=why) as refused:
            cat.create_external_location("bad", str(url))
        assert isinstance(refused.value, CatalogError) and isinstance(refused.value, ValueError)
    with pytest.raises(NotFound):
        cat.get_external_location("bad")


def test_a_location_holding_a_table_or_volume_is_not_dropped(cat: LocalCatalog, lake: Path) -> None:
    cat.create_volume("main.ml.files", str(lake / "files"))
    with pytest.raises(NotEmpty, match="external location raw holds volume main.ml.files; drop those first"):
        cat.drop_external_location("raw")
    cat.drop_volume("main.ml.files")
    cat.drop_external_location("raw")
    assert cat.list_external_locations() == []


# ----------------------------------------------------------------- path access


def test_path_access_needs_read_files_or_write_files_and_reads_with_the_credential(
    cat: LocalCatalog, lake: Path
) -> None:
    (lake / "a.csv").write_text("x\n1\n")
    with (
        as_principal("alice"),
        pytest.raises(PermissionDenied, match="alice lacks READ FILES on external location raw"),
    ):
        cat.resolve_storage_path(f"{lake}/a.csv")
    cat.grant("raw", "READ FILES", "alice", kind="location")
    with as_principal("alice"):
        resolved = cat.resolve_storage_path(f"file://{lake}/a.csv")
        assert (resolved.url, resolved.path, resolved.location.name) == (f"file://{lake}/a.csv", f"{lake}/a.csv", "raw")
        assert resolved.storage_options == {"key": "AKIA-external", "secret": "external-secret"}  # no vendor's options
        with pytest.raises(PermissionDenied, match="alice lacks WRITE FILES on external location raw"):
            cat.resolve_storage_path(f"{lake}/a.csv", write=True)


@pytest.mark.parametrize("escape", ["lake2/a.csv", "lake/../lake2/a.csv", "lak", "lake-x"])
def test_a_path_that_only_looks_inside_a_location_is_in_none(cat: LocalCatalog, lake: Path, escape: str) -> None:
    (lake.parent / "lake2").mkdir()
    with pytest.raises(NoExternalLocation, match="no external location contains it"):
        cat.resolve_storage_path(f"{lake.parent}/{escape}")


def test_a_symlink_inside_a_location_out_of_it_is_judged_where_it_leads(cat: LocalCatalog, lake: Path) -> None:
    outside = lake.parent / "outside"
    outside.mkdir()
    (lake / "door").symlink_to(outside)
    with pytest.raises(NoExternalLocation):
        cat.resolve_storage_path(f"{lake}/door/secret.txt")


def test_path_access_stops_at_a_registered_table_or_volume(cat: LocalCatalog, lake: Path) -> None:
    cat.create_volume("main.ml.files", str(lake / "files"))
    cat.grant("raw", "ALL PRIVILEGES", "alice", kind="location")
    with as_principal("alice"):
        for url in (f"{lake}/files", f"{lake}/files/a.png", str(lake)):  # the location's root holds the volume
            with pytest.raises(PermissionDenied, match="it is volume main.ml.files, use its own privileges"):
                cat.resolve_storage_path(url)
        assert cat.resolve_storage_path(f"{lake}/free.csv").path == f"{lake}/free.csv"


# ----------------------------------------------------------------- external tables


def test_external_table_storage_gives_where_which_location_and_its_options(cat: LocalCatalog, lake: Path) -> None:
    use_schema(cat, "alice")
    cat.grant("raw", "CREATE EXTERNAL TABLE", "alice", kind="location")
    with as_principal("alice"):
        storage = cat.external_table_storage(f"{lake}/t")
    assert (storage.url, storage.location.name) == (f"file://{lake}/t", "raw")
    assert storage.storage_options == {"key": "AKIA-external", "secret": "external-secret"}
    assert "external-secret" not in repr(storage)


def test_external_table_storage_refuses_what_create_table_would(cat: LocalCatalog, lake: Path, tmp_path: Path) -> None:
    cat.create_table("main.ml.t", pa.table({"x": [1]}), storage_location=str(lake / "t"))
    with pytest.raises(AlreadyExists, match="overlaps table main.ml.t"):
        cat.external_table_storage(f"{lake}/t/inner")
    with pytest.raises(AlreadyExists, match="overlaps table main.ml.t"):
        cat.external_table_storage(str(lake))  # a table over the location would hold main.ml.t
    with pytest.raises(NoExternalLocation):
        cat.external_table_storage(str(tmp_path / "outside"))
    with (
        as_principal("bob"),
        pytest.raises(PermissionDenied, match="bob lacks CREATE EXTERNAL TABLE on external location raw"),
    ):
        cat.external_table_storage(f"{lake}/u")


def test_the_credential_of_stored_storage_is_its_locations(cat: LocalCatalog, lake: Path, tmp_path: Path) -> None:
    cat.create_external_location("plain", str(tmp_path / "plain"))
    volume = cat.create_volume("main.ml.files", str(lake / "files"))
    assert cat.credential_of_storage(volume.storage_location) == "cred"
    assert cat.credential_of_storage(f"file://{tmp_path}/plain/x") is None  # a location bound to no credential
    assert cat.credential_of_storage(f"file://{tmp_path}/nowhere") is None
    assert cat.credential_of_storage(f"file://{lake}2/x") is None  # a prefix is not a location
