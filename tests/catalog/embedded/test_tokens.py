"""Tokens through TokenStore's public interface: made, checked, expired (by an injected clock),
listed and revoked, in one process and across two."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from uc_jupyter.catalog import NotFound, PermissionDenied, Unauthenticated, as_principal
from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.catalog.embedded.tokens import PREFIX, TokenInfo, TokenStore

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)


class FakeClock:
    """The store's clock, moved by hand."""

    def __init__(self, at: datetime = T0) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at


@pytest.fixture
def cat(isolated_home: Path) -> LocalCatalog:
    catalog = LocalCatalog(isolated_home)
    for name in ("alice", "bob"):
        catalog.create_principal(name)
    return catalog


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(cat: LocalCatalog, clock: FakeClock) -> TokenStore:
    return TokenStore(cat, clock=clock)


def test_a_new_token_authenticates_as_its_principal(store: TokenStore) -> None:
    info, token = store.create("alice")
    assert info == TokenInfo(info.id, "alice", T0, None)
    assert token.startswith(f"{PREFIX}{info.id}_") and len(token) == 64
    assert store.authenticate(token) == "alice"
    assert store.authenticate(token, now=T0 + timedelta(days=3650)) == "alice"  # no ttl: never expires


def test_tokens_are_distinct_and_each_names_its_own_principal(store: TokenStore) -> None:
    made = [store.create(p) for p in ("alice", "bob", "alice")]
    assert len({info.id for info, _ in made}) == len({token for _, token in made}) == 3
    assert [store.authenticate(token) for _, token in made] == ["alice", "bob", "alice"]


def test_a_token_expires_at_its_ttl_by_the_injected_clock(store: TokenStore, clock: FakeClock) -> None:
    info, token = store.create("alice", ttl_seconds=60)
    assert info.expires_at == T0 + timedelta(seconds=60)
    clock.at = T0 + timedelta(seconds=59.999)
    assert store.authenticate(token) == "alice"
    assert not info.expired(clock.at)
    clock.at = T0 + timedelta(seconds=60)
    assert info.expired(clock.at)
    with pytest.raises(Unauthenticated):
        store.authenticate(token)
    assert store.authenticate(token, now=T0) == "alice"  # `now` overrides the clock
    assert [t.id for t in store.list()] == [info.id]  # listed until revoked


def test_now_in_another_zone_is_the_same_instant(store: TokenStore) -> None:
    _, token = store.create("alice", ttl_seconds=3600)
    plus_two = timezone(timedelta(hours=2))
    assert store.authenticate(token, now=(T0 + timedelta(minutes=30)).astimezone(plus_two)) == "alice"
    with pytest.raises(Unauthenticated):
        store.authenticate(token, now=(T0 + timedelta(hours=1)).astimezone(plus_two))


@pytest.mark.parametrize("ttl", [0, -5, float("nan"), float("inf"), True, "60"])
def test_bad_ttls_are_refused(store: TokenStore, ttl: object) -> None:
    with pytest.raises(ValueError, match="ttl_seconds must be a positive number of seconds"):
        store.create("alice", ttl_seconds=ttl)  # type: ignore[arg-type]
    assert store.list() == []


def test_a_naive_now_is_refused(store: TokenStore) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        store.create("alice", now=datetime(2026, 1, 1))


def test_revoke_ends_the_token_and_only_it(store: TokenStore) -> None:
    (gone, gone_token), (kept, kept_token) = store.create("alice"), store.create("alice")
    store.revoke(gone.id)
    with pytest.raises(Unauthenticated):
        store.authenticate(gone_token)
    assert store.authenticate(kept_token) == "alice"
    assert [t.id for t in store.list()] == [kept.id]
    with pytest.raises(NotFound, match=f"token {gone.id} does not exist"):
        store.revoke(gone.id)


def test_revoke_refuses_a_malformed_id_without_echoing_it(store: TokenStore) -> None:
    _, token = store.create("alice")
    for bad in (token, "nothex", ""):
        with pytest.raises(ValueError, match="invalid token id") as caught:
            store.revoke(bad)
        assert token not in str(caught.value)
    with pytest.raises(ValueError, match="give its id, not the token itself"):
        store.revoke(token)
    assert store.authenticate(token) == "alice"


def test_list_shows_every_token_to_an_admin_and_own_tokens_to_others(store: TokenStore, clock: FakeClock) -> None:
    infos = []
    for step, principal in enumerate(("alice", "bob", "admin")):
        clock.at = T0 + timedelta(seconds=step)
        infos.append(store.create(principal)[0])
    assert store.list() == infos  # by creation time
    assert store.list("bob") == [infos[1]]
    with as_principal("alice"):
        assert store.list() == [infos[0]]
        assert store.list("alice") == [infos[0]]


def test_principals_make_and_revoke_their_own_tokens(store: TokenStore) -> None:
    with as_principal("alice"):
        info, token = store.create("alice")
        assert store.authenticate(token) == "alice"
        store.revoke(info.id)
    with pytest.raises(Unauthenticated):
        store.authenticate(token)


def test_admins_make_list_and_revoke_for_others(store: TokenStore) -> None:
    info, token = store.create("bob")
    with as_principal("alice"):
        with pytest.raises(PermissionDenied, match="alice lacks METASTORE ADMIN on the tokens of bob"):
            store.list("bob")
        with pytest.raises(PermissionDenied, match=f"alice lacks METASTORE ADMIN on token {info.id}"):
            store.revoke(info.id)
    assert store.authenticate(token) == "bob"
    store.revoke(info.id)
    with pytest.raises(Unauthenticated):
        store.authenticate(token)


def test_a_token_needs_a_registered_principal(store: TokenStore) -> None:
    with pytest.raises(NotFound, match="principal carol does not exist; .* catalog create principal carol"):
        store.create("carol")
    with pytest.raises(ValueError, match="invalid principal ''"):
        store.create("")
    assert store.list() == []


def test_tokens_survive_reopening_the_store(cat: LocalCatalog, store: TokenStore) -> None:
    info, token = store.create("alice")
    again = TokenStore(LocalCatalog(cat.root))
    assert again.authenticate(token) == "alice"
    assert again.list() == [info]


_OTHER_PROCESS = textwrap.dedent(
    """
    import sys
    from uc_jupyter.catalog import Unauthenticated
    from uc_jupyter.catalog.embedded.local import LocalCatalog
    from uc_jupyter.catalog.embedded.tokens import TokenStore

    store = TokenStore(LocalCatalog(sys.argv[1]))
    print("ready", flush=True)
    for line in sys.stdin:
        try:
            print("ok", store.authenticate(line.strip()), flush=True)
        except Unauthenticated as exc:
            print("refused", exc, flush=True)
    """
)


def test_a_token_revoked_in_one_process_is_refused_in_another_at_once(cat: LocalCatalog, store: TokenStore) -> None:
    info, token = store.create("alice")
    _, other = store.create("bob")
    server = subprocess.Popen(
        [sys.executable, "-c", _OTHER_PROCESS, str(cat.root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )
    assert server.stdin is not None and server.stdout is not None

    def ask(presented: str) -> str:
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write(presented + "\n")
        server.stdin.flush()
        return server.stdout.readline().strip()

    try:
        assert server.stdout.readline().strip() == "ready"
        assert ask(token) == "ok alice"  # the other process has the token open and checked
        store.revoke(info.id)
        assert ask(token) == f"refused {Unauthenticated.MESSAGE}"  # no wait, no cache
        assert ask(other) == "ok bob"
    finally:
        server.stdin.close()
        server.wait(timeout=60)
    assert server.returncode == 0
