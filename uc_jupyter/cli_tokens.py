"""``uc-jupyter token create|list|revoke``: the bearer tokens of ``uc-jupyter serve``, made on its home.

``create`` prints a confirmation line, then the token alone on the last line of standard output (so
``TOKEN=$(uc-jupyter token create alice | tail -1)`` works); ``--json`` prints
``{"id", "token", "principal", "expires_at"}``. The token is never shown again: ``list`` prints ids,
principals, creation and expiry times, and ``expired`` where it applies; ``revoke`` takes an id.
The commands run on the embedded catalog of ``$UC_JUPYTER_HOME`` (:mod:`uc_jupyter.catalog.embedded.tokens`).

The parser and the handlers live here, apart from :mod:`uc_jupyter.cli`, which adds :data:`COMMANDS`
under ``token`` and prints what :func:`run` returns; this module does not import it.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import datetime
from typing import Any

from uc_jupyter.catalog import Catalog
from uc_jupyter.catalog.embedded.tokens import TokenInfo, TokenStore

__all__ = ["COMMANDS", "run"]


_MOST_TTL = 100 * 365 * 86400  # a hundred years: past it an expiry date overflows long before it is useful


def _ttl(text: str) -> int:
    try:
        seconds = int(text)
    except ValueError:
        seconds = 0
    if not 0 < seconds <= _MOST_TTL:
        raise argparse.ArgumentTypeError(
            f"{text[:40]!r}: give a whole number of seconds above 0 and at most {_MOST_TTL:,} (100 years), e.g. 86400"
        )
    return seconds


def _create_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("principal", metavar="PRINCIPAL", help="who the token authenticates as (registered)")
    parser.add_argument(
        "--ttl", type=_ttl, metavar="SECONDS", help="the token expires this many seconds from now (default: never)"
    )


def _list_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "principal", nargs="?", metavar="PRINCIPAL", help="only this principal's tokens (default: all you may see)"
    )


def _revoke_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("id", metavar="ID", help="the token's id, as `uc-jupyter token list` shows it")


# (command, help, adds its arguments): cli.py makes one subcommand of `token` from each.
COMMANDS: tuple[tuple[str, str, Callable[[argparse.ArgumentParser], None]], ...] = (
    (
        "create",
        "make a token for PRINCIPAL (admins: for anyone); prints it once, alone on the last line",
        _create_arguments,
    ),
    ("list", "list tokens (admins: everyone's): id, principal, created, expires, expired", _list_arguments),
    ("revoke", "end a token at once, also for a running server", _revoke_arguments),
)


def run(cat: Catalog, args: argparse.Namespace) -> tuple[list[str], Any]:
    """Run ``token <args.action>``; returns the lines to print and the ``--json`` document."""
    from uc_jupyter.catalog.embedded.local import LocalCatalog

    if not isinstance(cat, LocalCatalog):
        raise ValueError("token commands manage the embedded catalog's tokens: run them on the server's home")
    store = TokenStore(cat)
    if args.action == "create":
        info, token = store.create(args.principal, ttl_seconds=args.ttl)
        expiry = f"expires {_time(info.expires_at)}" if info.expires_at else "never expires"
        lines = [f"created token {info.id} for {info.principal} ({expiry}); it is shown only once:", token]
        document = {"id": info.id, "token": token, "principal": info.principal, "expires_at": info.expires_at}
        return lines, document
    if args.action == "list":
        tokens = store.list(args.principal)
        now = datetime.now().astimezone()
        return [_row(t, now) for t in tokens], [_plain(t, now) for t in tokens]
    store.revoke(args.id)
    return [f"revoked token {args.id}"], {"action": "revoked", "kind": "token", "id": args.id}


def _row(info: TokenInfo, now: datetime) -> str:
    expires = _time(info.expires_at) if info.expires_at else "never"
    return "\t".join((info.id, info.principal, _time(info.created_at), expires, "expired" if info.expired(now) else ""))


def _plain(info: TokenInfo, now: datetime) -> dict[str, Any]:
    return {
        "id": info.id,
        "principal": info.principal,
        "created_at": info.created_at,
        "expires_at": info.expires_at,
        "expired": info.expired(now),
    }


def _time(at: datetime | None) -> str:
    return "" if at is None else at.isoformat(timespec="seconds")
