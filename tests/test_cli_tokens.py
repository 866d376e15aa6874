"""uc_jupyter.cli_tokens: ``token create|list|revoke`` on a parser of its own (the whole command line: test_cli.py)."""

from __future__ import annotations

import argparse
from datetime import datetime, timedelta, timezone

import pytest

from uc_jupyter.catalog import Catalog
from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.catalog.embedded.tokens import TokenStore
from uc_jupyter.catalog.rest.client import RestCatalog
from uc_jupyter.cli_tokens import COMMANDS, run


def parser() -> argparse.ArgumentParser:
    """``token`` with the subcommands of COMMANDS, made the way uc_jupyter.cli makes them."""
    top = argparse.ArgumentParser(prog="t")
    actions = top.add_subparsers(dest="action", required=True)
    for name, help_text, add_arguments in COMMANDS:
        add_arguments(actions.add_parser(name, help=help_text))
    return top


@pytest.fixture
def embedded(home_catalog: Catalog) -> LocalCatalog:
    """The test home's embedded catalog, as admin: where the token commands run."""
    assert isinstance(home_catalog, LocalCatalog)
    return home_catalog


def token_command(cat: Catalog, *argv: str) -> tuple[list[str], object]:
    return run(cat, parser().parse_args(list(argv)))


def test_create_prints_the_expiry_then_the_token_alone_on_the_last_line(embedded: LocalCatalog) -> None:
    before = datetime.now(timezone.utc)
    lines, document = token_command(embedded, "create", "admin", "--ttl", "3600")
    after = datetime.now(timezone.utc)
    assert isinstance(document, dict) and set(document) == {"id", "token", "principal", "expires_at"}
    token, token_id = document["token"], document["id"]
    assert lines[-1] == token and token.startswith(f"ucj_{token_id}_")
    head = f"created token {token_id} for admin (expires "
    assert len(lines) == 2 and lines[0].startswith(head) and lines[0].endswith("); it is shown only once:")
    shown = datetime.fromisoformat(lines[0].removeprefix(head).split(")")[0])
    assert before + timedelta(hours=1) - timedelta(seconds=1) <= shown <= after + timedelta(hours=1)
    assert document["expires_at"] is not None and abs(document["expires_at"] - shown) < timedelta(seconds=1)
    assert TokenStore(embedded).authenticate(token) == "admin"


def test_list_marks_expired_tokens_and_never_shows_a_token(embedded: LocalCatalog) -> None:
    store = TokenStore(embedded)
    made_at = datetime(2025, 1, 1, 12, 0, 0, tzinfo=timezone.utc)
    old, old_token = store.create("admin", ttl_seconds=60, now=made_at)  # expired at 12:01 that day
    _, document = token_command(embedded, "create", "admin")
    assert isinstance(document, dict)
    lines, listed = token_command(embedded, "list")
    assert lines[0].split("\t") == [
        old.id,
        "admin",
        "2025-01-01T12:00:00+00:00",
        "2025-01-01T12:01:00+00:00",
        "expired",
    ]
    live = lines[1].split("\t")
    assert (live[0], live[1], live[3], live[4]) == (document["id"], "admin", "never", "")
    assert isinstance(listed, list) and [(t["id"], t["expired"]) for t in listed] == [
        (old.id, True),
        (document["id"], False),
    ]
    assert listed[0]["created_at"] == made_at and listed[0]["expires_at"] == made_at + timedelta(seconds=60)
    shown = repr((lines, listed))
    assert old_token not in shown and document["token"] not in shown


def test_token_commands_refuse_a_catalog_server() -> None:
    remote = RestCatalog("http://127.0.0.1:9", "ucj_not_a_real_token")  # never contacted
    try:
        for argv in (("create", "admin"), ("list",), ("revoke", "0123456789abcdef")):
            with pytest.raises(ValueError, match="run them on the server's home"):
                token_command(remote, *argv)
    finally:
        remote.close()


@pytest.mark.parametrize("ttl", ["0", "-60", "1.5", "1e3", "", "soon", "1e300", "99999999999999999999", "3153600001"])
def test_ttl_must_be_whole_seconds_above_zero_and_within_a_century(
    ttl: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        parser().parse_args(["create", "admin", "--ttl", ttl])
    assert exited.value.code == 2
    said = f"argument --ttl: {ttl!r}: give a whole number of seconds above 0 and at most 3,153,600,000 (100 years)"
    assert said in capsys.readouterr().err
    assert parser().parse_args(["create", "admin", "--ttl", "3153600000"]).ttl == 3153600000  # the century itself


def test_the_subcommands_take_their_documented_arguments() -> None:
    assert [name for name, _, _ in COMMANDS] == ["create", "list", "revoke"]
    assert vars(parser().parse_args(["create", "bob", "--ttl", "86400"])) == {
        "action": "create",
        "principal": "bob",
        "ttl": 86400,
    }
    assert vars(parser().parse_args(["list"])) == {"action": "list", "principal": None}
    assert vars(parser().parse_args(["revoke", "0123456789abcdef"])) == {"action": "revoke", "id": "0123456789abcdef"}
