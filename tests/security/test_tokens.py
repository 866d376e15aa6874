"""Attacks on the tokens of ``uc-jupyter serve`` that must fail, tried with public API only.

Whoever reads the tokens file, holds an old, expired or other home's token, edits a token by hand,
or is a registered principal without the admin flag must not get a working token for anyone else.
Every refusal of a presented token is the same one-line Unauthenticated, so nothing tells an
attacker which part was wrong.
"""

from __future__ import annotations

import os
import stat
import string
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from uc_jupyter.catalog import PermissionDenied, Unauthenticated, as_principal
from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.catalog.embedded.tokens import TokenStore

T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)
URLSAFE = string.ascii_letters + string.digits + "-_"


@pytest.fixture
def cat(isolated_home: Path) -> LocalCatalog:
    catalog = LocalCatalog(isolated_home)
    for name in ("alice", "mallory"):
        catalog.create_principal(name)
    return catalog


@pytest.fixture
def store(cat: LocalCatalog) -> TokenStore:
    return TokenStore(cat)


def refused(store: TokenStore, presented: object, *, now: datetime | None = None) -> str:
    """The message of the refusal of ``presented``; fails the test when it is accepted."""
    with pytest.raises(Unauthenticated) as caught:
        store.authenticate(presented, now=now)  # type: ignore[arg-type]
    return str(caught.value)


def test_no_file_under_the_home_holds_a_token_or_its_secret(cat: LocalCatalog, store: TokenStore) -> None:
    made = [store.create(p, ttl_seconds=600) for p in ("alice", "mallory", "admin")]
    store.revoke(made[2][0].id)
    # While the store is open, WAL and shared-memory files hold the newest pages: read them all.
    everything = b"".join(path.read_bytes() for path in cat.root.rglob("*") if path.is_file())
    assert (cat.root / "tokens.db").exists()
    for info, token in made:
        secret = token[len(f"ucj_{info.id}_") :]
        for needle in (token, secret, secret[:16], secret[-16:]):
            assert needle.encode() not in everything, f"{needle} found in the home"
    assert made[0][0].id.encode() in everything  # ids are not secret: the search did read the file


def test_a_non_admin_cannot_make_list_or_revoke_for_another(store: TokenStore) -> None:
    info, token = store.create("alice")
    before = store.list()
    with as_principal("mallory"):
        for attempt, what in (
            (lambda: store.create("alice"), "the tokens of alice"),
            (lambda: store.create("admin", ttl_seconds=60), "the tokens of admin"),
            (lambda: store.list("alice"), "the tokens of alice"),
            (lambda: store.revoke(info.id), f"token {info.id}"),
        ):
            with pytest.raises(PermissionDenied, match=f"^mallory lacks METASTORE ADMIN on {what}"):
                attempt()
        assert store.list() == []  # her own: none; never alice's
    assert store.list() == before
    assert store.authenticate(token) == "alice"


def test_an_unregistered_caller_cannot_make_tokens_at_all(store: TokenStore) -> None:
    with as_principal("eve"):
        with pytest.raises(PermissionDenied, match="eve lacks METASTORE ADMIN on the tokens of alice"):
            store.create("alice")
        with pytest.raises(LookupError, match="principal eve does not exist"):
            store.create("eve")
    assert store.list() == []


def test_revoked_and_expired_tokens_are_refused_alike(store: TokenStore) -> None:
    revoked_info, revoked = store.create("alice")
    _, expiring = store.create("alice", ttl_seconds=1, now=T0)
    store.revoke(revoked_info.id)
    messages = {
        refused(store, revoked),
        refused(store, expiring, now=T0 + timedelta(seconds=1)),
        refused(store, expiring, now=T0 + timedelta(days=1)),
        refused(store, expiring),  # the real clock: long past 2026-03-01
    }
    assert messages == {Unauthenticated.MESSAGE}


def test_a_token_of_a_dropped_principal_is_refused_even_after_the_name_returns(
    cat: LocalCatalog, store: TokenStore
) -> None:
    _, token = store.create("alice")
    cat.drop_principal("alice")
    assert refused(store, token) == Unauthenticated.MESSAGE
    cat.create_principal("alice")  # someone new under the old name gets none of the old tokens
    assert refused(store, token) == Unauthenticated.MESSAGE
    _, fresh = store.create("alice")
    assert store.authenticate(fresh) == "alice"


def test_a_token_of_another_home_is_refused(tmp_path: Path, store: TokenStore) -> None:
    elsewhere = LocalCatalog(tmp_path / "other_home")
    elsewhere.create_principal("alice")
    _, foreign = TokenStore(elsewhere).create("alice")
    assert refused(store, foreign) == Unauthenticated.MESSAGE


def test_malformed_and_spliced_tokens_are_refused_with_one_message(store: TokenStore) -> None:
    alice_info, alice = store.create("alice")
    mallory_info, mallory = store.create("mallory")
    alice_secret = alice[len(f"ucj_{alice_info.id}_") :]
    candidates: list[object] = [
        "",
        "ucj_",
        alice[:-1],
        alice + "A",
        alice + "\n",
        " " + alice,
        alice.upper(),
        "UCJ_" + alice[4:],
        "ghp_" + alice[4:],
        "ucj-" + alice[4:],
        f"ucj_{mallory_info.id}_{alice_secret}",  # mallory's id with alice's secret
        f"ucj_{alice_info.id}_" + "A" * 43,
        f"ucj_{alice_info.id}",
        alice_secret,
        alice_info.id,
        "ucj_' OR 1=1 --_" + "A" * 43,
        "Bearer " + alice,
        alice.encode(),
        None,
        "ucj_" + "0" * 16 + "_" + "A" * 43,
        "x" * 100_000,
    ]
    assert {refused(store, c) for c in candidates} == {Unauthenticated.MESSAGE}
    assert store.authenticate(alice) == "alice" and store.authenticate(mallory) == "mallory"


def test_every_truncation_and_one_character_change_is_refused(store: TokenStore) -> None:
    _, token = store.create("alice")
    assert {refused(store, token[:n]) for n in range(len(token))} == {Unauthenticated.MESSAGE}

    @settings(max_examples=150, deadline=None)
    @given(position=st.integers(0, len(token) - 1), replacement=st.sampled_from(URLSAFE))
    def one_change(position: int, replacement: str) -> None:
        tampered = token[:position] + replacement + token[position + 1 :]
        if tampered != token:
            assert refused(store, tampered) == Unauthenticated.MESSAGE

    one_change()
    assert store.authenticate(token) == "alice"


def test_the_tokens_file_is_private_whatever_the_umask(cat: LocalCatalog) -> None:
    previous = os.umask(0)
    try:
        store = TokenStore(cat)
        store.create("alice")
        files = sorted(path.name for path in cat.root.glob("tokens.db*"))
        assert files == ["tokens.db", "tokens.db-shm", "tokens.db-wal"]  # the -wal and -shm while open
        for name in files:
            assert stat.S_IMODE((cat.root / name).stat().st_mode) == 0o600, name
    finally:
        os.umask(previous)
    os.chmod(cat.root / "tokens.db", 0o644)  # e.g. restored from a backup carelessly
    TokenStore(cat)
    assert stat.S_IMODE((cat.root / "tokens.db").stat().st_mode) == 0o600
    assert stat.S_IMODE(cat.root.stat().st_mode) == 0o700
