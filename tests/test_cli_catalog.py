"""The ``catalog`` command family on a parser of its own: each handler returns what it prints, lines and
the --json document, from the catalog it is given (the whole command line: test_cli.py)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from uc_jupyter.catalog import Catalog
from uc_jupyter.cli_catalog import Handler, Printed, add_commands


def parser() -> argparse.ArgumentParser:
    """A parser with only the catalog commands, made the way uc_jupyter.cli makes its own."""
    top = argparse.ArgumentParser(prog="t")
    common = argparse.ArgumentParser(add_help=False)
    commands = top.add_subparsers(dest="command", required=True)

    def group(parent: Any, name: str, help_text: str, dest: str) -> Any:
        return parent.add_parser(name, parents=[common]).add_subparsers(dest=dest, required=True)

    def leaf(parent: Any, name: str, help_text: str, handler: Handler) -> argparse.ArgumentParser:
        sub: argparse.ArgumentParser = parent.add_parser(name, parents=[common])
        sub.set_defaults(handler=handler)
        return sub

    add_commands(group(commands, "catalog", "", "action"), common, group, leaf)
    return top


def run(cat: Catalog, *argv: str) -> Printed:
    args = parser().parse_args(["catalog", *argv])
    printed: Printed = args.handler(cat, args)
    return printed


def test_each_command_returns_its_lines_and_its_document(home_catalog: Catalog, tmp_path: Path) -> None:
    lines, document = run(home_catalog, "create", "catalog", "Main", "--comment", "tab\there")
    assert lines == ["created catalog main"]
    assert (document["action"], document["kind"], document["name"]) == ("created", "catalog", "main")
    assert document["catalog"]["comment"] == "tab\there"  # the document keeps what the line flattens
    run(home_catalog, "create", "principal", "alice")
    lines, document = run(home_catalog, "grant", "use_catalog", "main", "alice")
    assert lines == ["granted USE CATALOG on main to alice"]
    assert document == {"action": "granted", "privilege": "USE CATALOG", "securable": "main", "principal": "alice"}
    lines, document = run(home_catalog, "list")  # the catalogs when no kind is given
    assert lines == [f"main\t{home_catalog.current_principal()}\ttab here"]
    assert [d["name"] for d in document] == ["main"]


def test_storage_options_come_from_a_file_and_pairs_and_a_pair_without_a_key_is_not_echoed(
    home_catalog: Catalog, tmp_path: Path
) -> None:
    keys = tmp_path / "keys.json"
    keys.write_text('{"AWS_REGION": "us-east-1"}')
    lines, document = run(
        home_catalog, "create", "credential", "lake", "--options-file", str(keys), "--option", "key=v"
    )
    assert lines == ["created storage credential lake"]
    assert sorted(document["credential"]["option_names"]) == ["AWS_REGION", "key"]
    with pytest.raises(ValueError, match=r"^storage credential odd: storage option 'k'; no store takes these options"):
        run(home_catalog, "create", "credential", "odd", "--option", "k=v")
    with pytest.raises(ValueError, match=r"^--option: give KEY=VALUE") as raised:
        run(home_catalog, "create", "credential", "other", "--option", "s3cr3t")
    assert "s3cr3t" not in str(raised.value)
