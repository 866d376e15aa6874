"""The magic-line parser: shlex quoting, typed options, flags, one-line errors with suggestions."""

from __future__ import annotations

import pytest

from uc_jupyter.jupyter.args import ArgumentError, Flag, HelpRequested, Option, names_list, parse

SPEC = (
    Option("--to", choices=("spark", "pandas")),
    Option("--columns", type=names_list),
    Option("--limit", type=int),
    Option("--timeout", type=float),
    Option("-n", type=int),
    Flag("--shuffle"),
    Flag("--monitor", negatable=True),
)


def test_values_flags_and_quoting() -> None:
    positional, options = parse("main.ml.t --to pandas --columns a,b --limit=3 -n 2 --shuffle --no-monitor", SPEC)
    assert positional == ["main.ml.t"]
    assert options == {"to": "pandas", "columns": ["a", "b"], "limit": 3, "n": 2, "shuffle": True, "monitor": False}
    assert parse("'/Volumes/c/s/v/with space' --monitor", SPEC) == (["/Volumes/c/s/v/with space"], {"monitor": True})
    assert parse("x --timeout -1.5", SPEC)[1] == {"timeout": -1.5}  # a negative number is a value
    assert parse("", SPEC) == ([], {})


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("t --limt 3", "unknown option --limt; did you mean --limit?"),
        ("t --zzz", "unknown option --zzz; options are --to, --columns, --limit, --timeout, -n, --shuffle, --monitor"),
        ("t --to", "--to needs a value (one of spark, pandas)"),
        ("t --to csv", "--to must be one of spark, pandas; got 'csv'"),
        ("t --limit many", "--limit needs a whole number, got 'many'"),
        ("t --timeout soon", "--timeout needs a number, got 'soon'"),
        ("t --columns a,,b", "--columns needs a valid value, got 'a,,b': give names separated by commas, e.g. a,b"),
        ("t --limit 1 --limit 2", "--limit is given twice"),
        ("t --shuffle=yes", "--shuffle takes no value"),
        ("t --where 'open", "cannot split the line: No closing quotation; close the quotes"),
    ],
)
def test_mistakes_are_one_line(line: str, message: str) -> None:
    with pytest.raises(ArgumentError) as caught:
        parse(line, SPEC)
    assert str(caught.value) == message


@pytest.mark.parametrize("line", ["--help", "-h", "main.ml.t --to pandas --help", "t --limit 3 -h --zzz"])
def test_help_where_an_option_may_stand_asks_for_the_help(line: str) -> None:
    with pytest.raises(HelpRequested):
        parse(line, SPEC)


def test_help_as_a_value_or_an_option_of_the_spec_is_not_a_help_request() -> None:
    assert parse('t --to pandas --columns "-h"', SPEC)[1] == {"to": "pandas", "columns": ["-h"]}
    with_h = (*SPEC, Option("-h", type=int, dest="height"))
    assert parse("t -h 3", with_h)[1] == {"height": 3}
    with pytest.raises(ArgumentError, match=r"unknown option --hepl; did you mean --help\?"):
        parse("t --hepl", SPEC)
