"""Attacks on the catalog's storage model, tried with public API only, as issue 13 found them.

A principal holding no grant reached the admin's table, its secret keys and the metastore itself by
registering storage anywhere: over the catalog's home (spelled ``//home``, ``/proc/self/root/...``,
through a symlink, a ``simplecache::`` chain, ``s3a://`` over ``s3://``...), then reading and
overwriting what lay there. Each attack below failed on the code before issue 13 and holds now;
the spellings are a hypothesis strategy, so every run tries new combinations.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from uc_jupyter.catalog import (
    AlreadyExists,
    CatalogError,
    NotFound,
    PermissionDenied,
    as_principal,
)
from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.storage.locations import InvalidLocation
from uc_jupyter.tables.delta import read_arrow
from uc_jupyter.testing.catalogs import external_location

SECRET = {"key": "AKIA-ADMIN-ONLY", "secret": "admin-secret-value-0123456789"}
SECRET_ROWS = pa.table({"ssn": ["111-22-3333"]})
REFUSED = (CatalogError, ValueError, PermissionError)  # what a refusal may raise (all one line)


@pytest.fixture
def world(isolated_home: Path, tmp_path: Path) -> dict[str, object]:
    """The admin's catalog: a secret managed table, an S3 credential with keys, a location for alice
    (her own area on disk) and one for bob's external volume. Alice holds no grant in main."""
    cat = LocalCatalog(isolated_home)
    cat.create_catalog("main")
    cat.create_schema("main.ml")
    cat.create_table("main.ml.secret", SECRET_ROWS)
    cat.create_storage_credential("lake", SECRET)
    cat.create_external_location("lake_raw", "s3://lake/raw", "lake")
    for principal in ("alice", "bob"):
        cat.create_principal(principal)
    alice_area = tmp_path / "alice_area"
    alice_area.mkdir()
    cat.create_external_location("alice_area", str(alice_area))
    for privilege in ("CREATE EXTERNAL VOLUME", "CREATE EXTERNAL TABLE", "READ FILES", "WRITE FILES"):
        cat.grant("alice_area", privilege, "alice", kind="location")
        cat.grant("lake_raw", privilege, "alice", kind="location")
    cat.grant("metastore", "CREATE CATALOG", "alice", kind="metastore")
    with as_principal("alice"):
        cat.create_catalog("alices")
        cat.create_schema("alices.s")
    cat.create_volume("main.ml.bobs", "s3://lake/raw/bob")
    return {"cat": cat, "home": isolated_home, "alice_area": alice_area, "tmp": tmp_path}


# ------------------------------------------------------------------ spellings of one place
def _percent_encode_some(path: str, draw: st.DrawFn) -> str:
    """Some characters (never the slashes) as %XX escapes, which URLs decode and paths do not."""
    return "".join(c if c == "/" or not draw(st.booleans()) else f"%{ord(c):02X}" for c in path if ord(c) < 128)


@st.composite
def spellings(draw: st.DrawFn, real_path: str, symlink_to: Callable[[str], str]) -> str:
    """A way of writing ``real_path`` (a local folder) that the filesystem reads as that folder."""
    parts = [p for p in real_path.split("/") if p]
    cut = draw(st.integers(0, len(parts)))
    head, tail = "/" + "/".join(parts[:cut]), "/".join(parts[cut:])
    # A symlink elsewhere that points at a prefix of the folder.
    base = symlink_to(head) if draw(st.booleans()) else head
    path = base.rstrip("/") + ("/" + tail if tail else "")
    if draw(st.booleans()):  # a harmless detour somewhere along the path
        segments = path.split("/")
        at = draw(st.integers(1, len(segments)))
        detour = draw(st.sampled_from([".", "x/..", "", "./."]))
        path = "/".join([*segments[:at], *detour.split("/"), *segments[at:]])
    if draw(st.booleans()):
        path = _percent_encode_some(path, draw)
    prefix = draw(
        st.sampled_from(["", "/", "//", "file://", "file:", "file://localhost", "FILE://LocalHost", "local://"])
    )
    if draw(st.booleans()) and prefix in ("", "/", "//"):
        prefix = draw(st.sampled_from(["/proc/self/root", "/proc/thread-self/root", "/proc/1/root"]))
    chain = draw(st.sampled_from(["", "", "simplecache::", "filecache::", "blockcache::"]))
    suffix = draw(st.sampled_from(["", "/", "/.", "//"]))
    return f"{chain}{prefix}{path}{suffix}"


def _symlinker(folder: Path) -> Callable[[str], str]:
    """Make (once per target) a symlink in ``folder`` to a given path; return the link's path."""

    def link(target: str) -> str:
        path = folder / f"link-{hashlib.sha256(target.encode()).hexdigest()[:12]}"
        if not path.is_symlink():
            os.symlink(target, path)
        return str(path)

    return link


def _protected(home: Path) -> list[Path]:
    """What must never become storage: the home, and what is inside it."""
    return [home, home / "storage", home / "storage" / "tables", home / "metastore.db", home / "cache"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_no_spelling_of_the_home_becomes_a_location_even_for_the_admin(
    world: dict[str, object], data: st.DataObject
) -> None:
    cat, home, tmp = world["cat"], world["home"], world["tmp"]
    assert isinstance(cat, LocalCatalog) and isinstance(home, Path) and isinstance(tmp, Path)
    links = tmp / "links"
    links.mkdir(exist_ok=True)
    target = data.draw(st.sampled_from(_protected(home)))
    spelling = data.draw(spellings(str(target), _symlinker(links)))
    with pytest.raises(REFUSED) as refused:
        cat.create_external_location(f"x{abs(hash(spelling)) % 10**8}", spelling)
    assert "\n" not in str(refused.value)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_no_spelling_of_the_home_becomes_alices_volume_or_table(world: dict[str, object], data: st.DataObject) -> None:
    """Alice holds CREATE EXTERNAL VOLUME/TABLE on her own area; a symlink *inside* her area that points
    into the home does not carry her there."""
    cat, home, area = world["cat"], world["home"], world["alice_area"]
    assert isinstance(cat, LocalCatalog) and isinstance(home, Path) and isinstance(area, Path)
    target = data.draw(st.sampled_from(_protected(home)))
    spelling = data.draw(spellings(str(target), _symlinker(area)))
    before = sorted(p.name for p in (home / "storage" / "tables").iterdir())
    with as_principal("alice"):
        with pytest.raises(REFUSED):
            cat.create_volume("alices.s.v", spelling)
        with pytest.raises(REFUSED):
            cat.create_table("alices.s.t", storage_location=spelling)
        with pytest.raises(REFUSED):
            cat.resolve_storage_path(spelling)
    assert sorted(p.name for p in (home / "storage" / "tables").iterdir()) == before


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    scheme=st.sampled_from(["s3", "s3a", "s3n", "S3", "S3A"]),
    bucket=st.sampled_from(["lake", "LAKE", "la%6be"]),
    middle=st.sampled_from(["/raw/bob", "/raw/bob/", "/raw/bob/inner", "/raw", "/raw/", "/raw//bob", "/raw/./bob"]),
    encode=st.booleans(),
)
def test_no_spelling_of_bobs_volume_becomes_alices(
    world: dict[str, object], scheme: str, bucket: str, middle: str, encode: bool
) -> None:
    cat = world["cat"]
    assert isinstance(cat, LocalCatalog)
    path = middle.replace("bob", "%62ob") if encode else middle
    url = f"{scheme}://{bucket}{path}"
    with as_principal("alice"), pytest.raises(REFUSED):
        cat.create_volume("alices.s.v", url)


# ------------------------------------------------------------------ the attacks of the issue, one by one
def test_a_principal_without_grants_cannot_create_a_catalog(world: dict[str, object]) -> None:
    cat = world["cat"]
    assert isinstance(cat, LocalCatalog)
    with as_principal("bob"), pytest.raises(PermissionDenied, match="bob lacks CREATE CATALOG on the metastore"):
        cat.create_catalog("bobs")


def test_alice_cannot_register_the_admins_managed_table_as_her_own(world: dict[str, object]) -> None:
    cat = world["cat"]
    assert isinstance(cat, LocalCatalog)
    secret = cat.get_table("main.ml.secret").storage_location
    with as_principal("alice"):
        for spelling in (secret, secret.replace("file://", "file://localhost"), "/" + secret.removeprefix("file://")):
            with pytest.raises(REFUSED):
                cat.create_table("alices.s.stolen", storage_location=spelling)
            with pytest.raises(REFUSED):
                cat.create_table("alices.s.stolen", pa.table({"ssn": ["overwritten"]}), storage_location=spelling)
    assert read_arrow("main.ml.secret", catalog=cat).to_pylist() == [{"ssn": "111-22-3333"}]


def test_a_volume_over_the_home_cannot_be_made_so_the_metastore_stays_out_of_reach(world: dict[str, object]) -> None:
    cat, home, area = world["cat"], world["home"], world["alice_area"]
    assert isinstance(cat, LocalCatalog) and isinstance(home, Path) and isinstance(area, Path)
    os.symlink(home, area / "home")
    with as_principal("alice"):
        for url in (str(home), str(area / "home"), f"file://{area}/home/storage", f"/proc/self/root{home}"):
            with pytest.raises(REFUSED):
                cat.create_volume("alices.s.home", url)
        with pytest.raises(REFUSED):
            cat.resolve_storage_path(str(area / "home" / "metastore.db"))
    with pytest.raises(REFUSED):  # not even its own owner registers it
        external_location(cat, str(home.parent))


def test_storage_secrets_are_never_returned_nor_kept_in_the_metastore(world: dict[str, object]) -> None:
    cat, home = world["cat"], world["home"]
    assert isinstance(cat, LocalCatalog) and isinstance(home, Path)
    seen = [
        repr(cat.get_storage_credential("lake")),
        repr(cat.list_storage_credentials()),
        repr(cat.get_external_location("lake_raw")),
        repr(cat.get_volume("main.ml.bobs")),
        repr(cat.list_volumes("main.ml")),
        repr(cat.show_grants("lake_raw", kind="location")),
        repr(cat),
        repr(cat.resolve_volume_path("/Volumes/main/ml/bobs")),  # the admin reads the volume: options not in repr
    ]
    for text in seen:
        assert SECRET["secret"] not in text and SECRET["key"] not in text
    for leftover in home.glob("metastore.db*"):
        assert SECRET["secret"].encode() not in leftover.read_bytes()
    with sqlite3.connect(home / "metastore.db") as conn:
        dumped = "\n".join(conn.iterdump())
    assert SECRET["secret"] not in dumped
    with as_principal("alice"):
        with pytest.raises(NotFound, match="storage credential lake does not exist"):
            cat.get_storage_credential("lake")
        assert cat.list_storage_credentials() == []


def test_the_home_and_every_catalog_file_are_private_to_the_os_user(world: dict[str, object]) -> None:
    home = world["home"]
    assert isinstance(home, Path)
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert stat.S_IMODE((home / "storage").stat().st_mode) == 0o700
    for name in ("metastore.db", "secrets.db"):
        assert stat.S_IMODE((home / name).stat().st_mode) == 0o600, name


def test_older_homes_are_tightened_and_their_secrets_moved_out_of_the_metastore(tmp_path: Path) -> None:
    home = tmp_path / "old"
    home.mkdir(mode=0o755)
    os.chmod(home, 0o755)
    with sqlite3.connect(home / "metastore.db") as conn:  # the layout before issue 13
        conn.executescript(
            "CREATE TABLE securables (key TEXT PRIMARY KEY, kind TEXT NOT NULL, parent TEXT, owner TEXT NOT NULL,"
            " storage_location TEXT, managed INTEGER NOT NULL DEFAULT 0, storage_options TEXT, columns TEXT,"
            " comment TEXT, created_at TEXT NOT NULL);"
            "INSERT INTO securables VALUES ('old', 'catalog', NULL, 'admin', NULL, 0, '{\"secret\": \"leak\"}',"
            " NULL, NULL, '2026-01-01T00:00:00+00:00');"
        )
    os.chmod(home / "metastore.db", 0o644)
    LocalCatalog(home)
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert stat.S_IMODE((home / "metastore.db").stat().st_mode) == 0o600
    with sqlite3.connect(home / "metastore.db") as conn:
        assert conn.execute("SELECT storage_options FROM securables").fetchall() == [(None,)]


def test_locations_never_overlap_and_path_access_stops_at_registered_objects(world: dict[str, object]) -> None:
    cat = world["cat"]
    assert isinstance(cat, LocalCatalog)
    for url in ("s3://lake", "s3a://lake/raw/sub", "s3://lake/raw/"):
        with pytest.raises(AlreadyExists, match="overlaps external location lake_raw"):
            cat.create_external_location("other", url, "lake")
    with as_principal("alice"):
        assert cat.resolve_storage_path("s3://lake/raw/free/a.csv").path == "lake/raw/free/a.csv"
        with pytest.raises(PermissionDenied, match="it is volume main.ml.bobs"):
            cat.resolve_storage_path("s3n://lake/raw/bob/a.csv")
    with as_principal("bob"), pytest.raises(PermissionDenied, match="bob lacks READ FILES on external location"):
        cat.resolve_storage_path("s3://lake/raw/free/a.csv")


def test_protocol_chains_home_dirs_and_alias_folders_are_refused_with_one_line(world: dict[str, object]) -> None:
    cat = world["cat"]
    assert isinstance(cat, LocalCatalog)
    for url, why in (
        ("simplecache::file:///tmp/x", "protocol chains"),
        ("~/data", "'~' is not expanded"),
        ("$UC_JUPYTER_HOME/cache", "must be an absolute path"),
        ("file://~/data", "file URLs name no host"),
        ("/proc/self/root/tmp", "aliases of other places"),
        ("/dev/fd/3", "aliases of other places"),
        ("/", "the whole filesystem"),
        ("hdfs://nn/data", "unknown scheme 'hdfs'"),
        ("s3://lake/raw/../../other", "object stores take it literally"),
    ):
        with pytest.raises(InvalidLocation, match=why) as refused:
            cat.create_external_location("bad", url)
        assert "\n" not in str(refused.value)


def test_not_found_suggests_only_names_the_principal_may_see(world: dict[str, object]) -> None:
    cat = world["cat"]
    assert isinstance(cat, LocalCatalog)
    cat.grant("main", "USE CATALOG", "alice")
    cat.grant("main.ml", "USE SCHEMA", "alice")
    with pytest.raises(NotFound, match="did you mean main.ml.secret"):
        cat.get_table("main.ml.secrte")  # the admin may see it
    with as_principal("alice"), pytest.raises(NotFound) as hidden:
        cat.get_table("main.ml.secrte")
    assert "secret" not in str(hidden.value).replace("secrte", "")


def test_a_corrupt_metastore_is_one_line_naming_the_file(tmp_path: Path) -> None:
    home = tmp_path / "broken"
    home.mkdir()
    (home / "metastore.db").write_bytes(b"this is not a database, it was overwritten" * 100)
    with pytest.raises(OSError, match=r"metastore.db is damaged .*restore it from a backup") as caught:
        LocalCatalog(home)
    assert "\n" not in str(caught.value)
    cli = subprocess.run(
        [sys.executable, "-m", "uc_jupyter.cli", "catalog", "list", "catalogs"],
        env={**os.environ, "UC_JUPYTER_HOME": str(home)},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert cli.returncode == 1
    assert cli.stderr.count("\n") == 1 and "metastore.db is damaged" in cli.stderr


def test_an_external_volume_on_an_unreachable_endpoint_is_registered_without_touching_storage(
    world: dict[str, object],
) -> None:
    """Before: create_volume tried to create the bucket at the endpoint and failed (or hung)."""
    from uc_jupyter.processes import free_port

    cat = world["cat"]
    assert isinstance(cat, LocalCatalog)
    closed = f"http://127.0.0.1:{free_port()}"
    options = {"key": "k", "secret": "s", "endpoint_url": closed, "config_kwargs": {"retries": {"max_attempts": 1}}}
    external_location(cat, "s3://offline", options)
    info = cat.create_volume("main.ml.offline", "s3://offline/data")
    assert info.storage_location == "s3://offline/data"


def test_credentials_and_locations_are_governed(world: dict[str, object]) -> None:
    """The privilege matrix of the storage securables: who may create, use, grant and drop."""
    cat, area = world["cat"], world["alice_area"]
    assert isinstance(cat, LocalCatalog) and isinstance(area, Path)
    with as_principal("bob"):
        with pytest.raises(PermissionDenied, match="bob lacks CREATE STORAGE CREDENTIAL on the metastore"):
            cat.create_storage_credential("mine", {"key": "k"})
        with pytest.raises(PermissionDenied, match="bob lacks CREATE EXTERNAL LOCATION on the metastore"):
            cat.create_external_location("mine", "s3://elsewhere")
        with pytest.raises(NotFound, match="external location alice_area does not exist"):
            cat.grant("alice_area", "READ FILES", "bob", kind="location")  # not his to see, let alone grant
    cat.grant("metastore", "CREATE EXTERNAL LOCATION", "bob", kind="metastore")
    cat.create_storage_credential("shared", {"token": "t"})
    cat.grant("shared", "ALL PRIVILEGES", "alice", kind="credential")
    with as_principal("bob"), pytest.raises(NotFound, match="storage credential shared does not exist"):
        cat.create_external_location("via", "s3://via", "shared")
    cat.grant("shared", "CREATE EXTERNAL LOCATION", "bob", kind="credential")
    with as_principal("bob"):
        assert cat.create_external_location("via", "s3://via", "shared").credential_name == "shared"
        with pytest.raises(NotFound, match="storage credential lake does not exist"):  # hidden from him
            cat.create_external_location("mine", "s3://elsewhere", "lake")
        mine = cat.create_external_location("mine", "s3://elsewhere")  # no credential: his own environment
        assert mine.owner == "bob"
        cat.grant("mine", "READ FILES", "alice", kind="location")  # owners grant
        with pytest.raises(PermissionDenied, match="bob lacks METASTORE ADMIN"):
            cat.grant("metastore", "CREATE CATALOG", "alice", kind="metastore")
    with pytest.raises(ValueError, match="SELECT cannot be granted on external location mine"):
        cat.grant("mine", "SELECT", "alice", kind="location")
    with pytest.raises(ValueError, match="READ FILES cannot be granted on catalog main"):
        cat.grant("main", "READ FILES", "alice")
    with as_principal("alice"):  # a grantee sees the location, not the right to drop it
        assert [loc.name for loc in cat.list_external_locations()] == ["alice_area", "lake_raw", "mine"]
        assert [c.name for c in cat.list_storage_credentials()] == ["shared"]
        with pytest.raises(PermissionDenied, match="alice lacks CREATE EXTERNAL LOCATION on the metastore"):
            cat.create_external_location("hers", "s3://hers", "shared")  # the credential alone is not enough
        with pytest.raises(PermissionDenied, match="alice lacks OWNERSHIP on external location mine"):
            cat.drop_external_location("mine")
    cat.revoke("mine", "READ FILES", "alice", kind="location")
    with (
        as_principal("alice"),
        pytest.raises(PermissionDenied, match="alice lacks READ FILES on external location mine"),
    ):
        cat.resolve_storage_path("s3://elsewhere/x")
    with pytest.raises(CatalogError, match="external location lake_raw holds volume main.ml.bobs"):
        cat.drop_external_location("lake_raw")


def test_an_external_volume_reads_with_its_locations_credential(world: dict[str, object]) -> None:
    cat = world["cat"]
    assert isinstance(cat, LocalCatalog)
    resolved = cat.resolve_volume_path("/Volumes/main/ml/bobs/a.png")
    assert resolved.storage_options == SECRET
    assert (resolved.path, resolved.url) == ("lake/raw/bob/a.png", "s3://lake/raw/bob/a.png")
