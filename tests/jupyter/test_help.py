"""The magics' help: made from load() and run_cell(), complete, and shown by --help and `?`."""

from __future__ import annotations

import doctest
import inspect
import re
import typing

import pytest
from IPython.core.interactiveshell import InteractiveShell

from uc_jupyter.data.loader.defaults import DEFAULT_PREFETCH, DEFAULT_WORKERS
from uc_jupyter.distributed.cell import manage_pool, run_cell
from uc_jupyter.jupyter import help as help_module
from uc_jupyter.jupyter.args import Flag, Option, parse
from uc_jupyter.jupyter.help import Docs, docs_of, magic_help, missing_options
from uc_jupyter.jupyter.magics import DISTRIBUTED_HELP, DISTRIBUTED_OPTIONS, LOAD_HELP, LOAD_OPTIONS
from uc_jupyter.loading import load

# Keywords the magics fill themselves: the source, the cell, the notebook, configuration.
LOAD_FILLED = ("source", "default_catalog", "catalog")
CELL_FILLED = ("source", "namespace")
POOL_ACTIONS = ("status", "restart", "shutdown")  # manage_pool's actions: flags of the line magic


def option_blocks(text: str) -> dict[str, str]:
    """{option name: its lines in the help}."""
    options = text.split("\nOptions:\n", 1)[1].split("\n\nExamples:", 1)[0]
    blocks = re.split(r"\n(?=  -)", options)
    return {block.split()[0].rstrip(","): block for block in blocks}


def test_every_keyword_of_load_is_an_option_of_the_magic() -> None:
    assert missing_options(load, LOAD_OPTIONS, positional=LOAD_FILLED) == []
    keywords = set(inspect.signature(load).parameters) - set(LOAD_FILLED)
    assert {option.keyword for option in LOAD_OPTIONS} == keywords  # and no option load() lacks


def test_every_keyword_of_run_cell_is_an_option_of_the_magic() -> None:
    assert missing_options(run_cell, DISTRIBUTED_OPTIONS, positional=CELL_FILLED) == []
    keywords = set(inspect.signature(run_cell).parameters) - set(CELL_FILLED) | set(POOL_ACTIONS)
    assert {option.keyword for option in DISTRIBUTED_OPTIONS} == keywords
    assert set(POOL_ACTIONS) == set(typing.get_args(typing.get_type_hints(manage_pool)["action"]))
    assert set(docs_of(manage_pool, "Actions").meanings) == set(POOL_ACTIONS)


@pytest.mark.parametrize(
    ("text", "spec", "function"),
    [(LOAD_HELP, LOAD_OPTIONS, load), (DISTRIBUTED_HELP, DISTRIBUTED_OPTIONS, run_cell)],
    ids=["uc_load", "uc_distributed"],
)
def test_the_help_shows_every_option_with_its_type_meaning_and_default(
    text: str, spec: tuple[Option, ...], function: object
) -> None:
    blocks = option_blocks(text)
    assert list(blocks) == [option.name for option in spec] + ["--help"]
    for option in spec:
        block = blocks[option.name]
        head, meaning = block.split("\n", 1)
        assert "(undocumented)" not in block and len(meaning.split()) >= 3, block
        if not isinstance(option, Flag):
            assert len(head.split()) == 2, block  # the value's type: INT, {a,b}, NAME,...
        if option.keyword not in POOL_ACTIONS:
            assert "(default" in block, block
        assert all(len(line) <= 100 for line in block.splitlines()), block
    documented = docs_of(function)  # type: ignore[arg-type]
    for option in spec:  # the words come from the docstring, not from the magic
        if option.keyword in documented.meanings:
            first_words = " ".join(documented.meanings[option.keyword].split()[:4])
            assert first_words in " ".join(blocks[option.name].split()), option.name


def test_typed_values_and_defaults_come_from_the_spec_and_the_signature() -> None:
    blocks = option_blocks(LOAD_HELP)
    assert blocks["--batch-size"].startswith("  --batch-size INT\n")
    assert blocks["--to"].startswith("  --to {spark,pandas,numpy,arrow,hf,torch,loader,dataset,paths}\n")
    assert blocks["--labels"].startswith("  --labels {folder}\n")
    assert blocks["--include"].startswith("  --include GLOB,...\n")
    assert "(default: 0)" in blocks["--seed"]  # the signature's default
    # The loader's tuned defaults, as numbers (they were "the DataLoader's").
    assert f"(default: {DEFAULT_WORKERS}," in " ".join(blocks["--num-workers"].split())
    assert f"(default: {DEFAULT_PREFETCH} with workers)" in " ".join(blocks["--prefetch-factor"].split())
    assert "(default: off)" in blocks["--shuffle"]
    assert blocks["--monitor"].startswith("  --monitor / --no-monitor\n")
    assert "on for volume loaders" in blocks["--monitor"]  # the magic's own default wins over load()'s
    distributed = option_blocks(DISTRIBUTED_HELP)
    assert "(default: 2, %config UCMagics.nprocs)" in distributed["-n"]
    assert distributed["--timeout"].startswith("  --timeout SECONDS\n")


@pytest.mark.parametrize(
    ("text", "spec", "magic"),
    [(LOAD_HELP, LOAD_OPTIONS, "%uc_load"), (DISTRIBUTED_HELP, DISTRIBUTED_OPTIONS, "%uc_distributed")],
    ids=["uc_load", "uc_distributed"],
)
def test_three_examples_that_parse(text: str, spec: tuple[Option, ...], magic: str) -> None:
    examples = text.split("\nExamples:\n", 1)[1].splitlines()
    assert len(examples) == 3
    for example in examples:
        line = re.sub(r"^\s*(\w+ = )?%%?uc_\w+", "", example)
        assert magic.strip("%") in example
        parse(line, spec)


def test_an_undocumented_option_shows_as_such() -> None:
    def f(*, fast: bool = False, size: int | None = None) -> None:
        """Nothing about the options."""

    text = magic_help("%f", [Flag("--fast"), Option("--size", type=int)], docs_of(f))
    assert "  --fast\n      (undocumented) (default: off)" in text
    assert "  --size INT\n      (undocumented)" in text
    assert missing_options(f, [Flag("--fast")], positional=()) == ["size"]


def test_docs_read_google_style_entries_with_continuations_and_shared_names() -> None:
    def f(*, a: int = 1, b: int = 2, c: str = "x") -> None:
        """Summary.

        Args:
            a, b: two numbers that
                go together.
            c: the ``letter``, see :func:`~uc_jupyter.load`.

        Raises:
            ValueError: never.
        """

    docs = docs_of(f)
    assert docs.meanings == {
        "a": "two numbers that go together",
        "b": "two numbers that go together",
        "c": ("the letter, see load"),
    }
    assert docs.defaults == {"a": "1", "b": "2", "c": "x"} and docs.examples == ()
    assert (docs | Docs(defaults={"a": "one"})).defaults["a"] == "one"


def test_the_documented_example_holds() -> None:
    result = doctest.testmod(help_module)
    assert result.attempted > 0 and result.failed == 0


# ---------------------------------------------------------------- in a real shell


def test_question_mark_shows_the_help(shell: InteractiveShell) -> None:
    assert shell.object_inspect("%uc_load")["docstring"] == LOAD_HELP
    assert shell.object_inspect("%uc_distributed")["docstring"] == DISTRIBUTED_HELP


@pytest.mark.parametrize("line", ["--help", "-h", "main.ml.iris --to pandas --help", "/Volumes/main/ml/x --help"])
def test_dash_dash_help_prints_the_help_and_loads_nothing(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str], line: str
) -> None:
    assert shell.run_line_magic("uc_load", line) is None
    assert capsys.readouterr().out == LOAD_HELP + "\n"


def test_help_of_the_cell_magic_runs_nothing(shell: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    assert shell.run_cell_magic("uc_distributed", "-n 2 --help", "raise SystemExit('ran')") is None
    assert shell.run_line_magic("uc_distributed", "--help") is None
    assert capsys.readouterr().out == (DISTRIBUTED_HELP + "\n") * 2
