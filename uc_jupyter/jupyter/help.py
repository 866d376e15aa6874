"""A magic's help, made from the function it calls: options from the magic's spec, their meaning
from the function's docstring ("Args:"), defaults from its signature, examples from "Notebook:".

The help cannot drift from the code: an option without a line in the docstring shows as
"(undocumented)", which the tests refuse, and a keyword of the function that no option carries is
listed by :func:`missing_options`.

Example:
    >>> from uc_jupyter.jupyter.args import Flag, Option
    >>> def f(name: str, *, limit: int | None = None, fast: bool = False) -> None:
    ...     '''Do it.
    ...
    ...     Args:
    ...         limit: at most this many (default: all).
    ...         fast: skip the checks.
    ...
    ...     Notebook:
    ...         %f x --limit 3
    ...     '''
    >>> print(magic_help("%f NAME [options]", [Option("--limit", type=int), Flag("--fast")], docs_of(f)))
    %f NAME [options]
    <BLANKLINE>
    Options:
      --limit INT
          at most this many (default: all)
      --fast
          skip the checks (default: off)
      --help
          show this help
    <BLANKLINE>
    Examples:
      %f x --limit 3
    >>> missing_options(f, [Flag("--fast")], positional=("name",))
    ['limit']
"""

from __future__ import annotations

import inspect
import re
import textwrap
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from uc_jupyter.jupyter.args import Flag, Option

__all__ = ["Docs", "docs_of", "magic_help", "missing_options"]

_WIDTH = 100  # notebook width: the help reads without horizontal scrolling
_SECTION = re.compile(r"^(\w[\w ]*):$")
_ENTRY = re.compile(r"^([\w, ]+?):\s*(.*)$")


@dataclass(frozen=True)
class Docs:
    """What a magic's help says about a function: a line per keyword, defaults, examples."""

    meanings: Mapping[str, str] = field(default_factory=dict)  # keyword -> one line
    defaults: Mapping[str, str] = field(default_factory=dict)  # keyword -> the default, as shown
    examples: tuple[str, ...] = ()

    def __or__(self, other: Docs) -> Docs:
        """Both, ``other`` winning where both say something (e.g. a magic's own defaults)."""
        return Docs(
            {**self.meanings, **other.meanings},
            {**self.defaults, **other.defaults},
            self.examples + other.examples,
        )


def docs_of(function: Callable[..., Any], section: str = "Args") -> Docs:
    """The meanings in ``function``'s docstring ``section`` (``name: text`` entries, continued on
    deeper-indented lines; ``a, b: text`` documents both), the defaults of its signature and the
    lines of its "Notebook:" section."""
    sections = _sections(inspect.getdoc(function) or "")
    meanings: dict[str, str] = {}
    entry: list[str] = []
    for line in sections.get(section, []):
        if not line.startswith(" ") and _ENTRY.match(line):
            names, line = _ENTRY.match(line).groups()  # type: ignore[union-attr]  # matched just above
            entry = [name.strip() for name in names.split(",")]
            meanings.update(dict.fromkeys(entry, ""))
        for name in entry:
            meanings[name] = f"{meanings[name]} {_plain(line.strip())}".strip()
    defaults = {
        name: _shown_default(parameter.default)
        for name, parameter in inspect.signature(function).parameters.items()
        if parameter.default is not inspect.Parameter.empty and parameter.default is not None
    }
    examples = tuple(line.strip() for line in sections.get("Notebook", []) if line.strip())
    return Docs({k: v.removesuffix(".") for k, v in meanings.items()}, defaults, examples)


def magic_help(usage: str, spec: Sequence[Option], docs: Docs, *, intro: Iterable[str] = ()) -> str:
    """The help of a magic whose options are ``spec``: usage, ``intro`` lines, each option with its
    value's type, meaning and default, ``--help`` itself, and the examples."""
    lines = [usage, *intro, "", "Options:"]
    for option in spec:
        lines.append(f"  {_signature(option)}")
        meaning = docs.meanings.get(option.keyword, "(undocumented)")
        default = docs.defaults.get(option.keyword)
        if default is not None and "(default" not in meaning:  # the docstring's own words win
            meaning += f" (default: {default})"
        lines += textwrap.wrap(meaning, _WIDTH, initial_indent=" " * 6, subsequent_indent=" " * 6)
    lines += ["  --help", "      show this help"]
    if docs.examples:
        lines += ["", "Examples:", *(f"  {example}" for example in docs.examples)]
    return "\n".join(lines)


def missing_options(function: Callable[..., Any], spec: Sequence[Option], *, positional: Iterable[str]) -> list[str]:
    """Keywords of ``function`` that no option of ``spec`` sets (``positional``: the ones the magic
    fills otherwise: its argument, the cell, configuration)."""
    given = {option.keyword for option in spec} | set(positional)
    return [name for name in inspect.signature(function).parameters if name not in given]


def _sections(doc: str) -> dict[str, list[str]]:
    """``{"Args": [lines, dedented], ...}`` of a Google-style docstring."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in doc.splitlines():
        header = _SECTION.match(line)
        if header:
            current = found.setdefault(header.group(1), [])
        elif current is not None and (line.startswith(" ") or not line):
            current.append(line[4:] if line.startswith("    ") else line.strip())
        else:
            current = None
    return found


def _signature(option: Option) -> str:
    names = ", ".join((*option.aliases, option.name))
    if isinstance(option, Flag):
        return f"{names} / --no-{option.name.removeprefix('--')}" if option.negatable else names
    if option.metavar:
        value = option.metavar
    elif option.choices:
        value = "{" + ",".join(option.choices) + "}"
    else:
        value = {int: "INT", float: "NUMBER"}.get(option.type, "TEXT")  # type: ignore[call-overload]
    return f"{names} {value}"


def _shown_default(value: object) -> str:
    if value is True or value is False:
        return "on" if value else "off"
    return str(value)


def _plain(text: str) -> str:
    """reStructuredText markup out: ``x`` and :func:`~a.b` read as x and b."""
    text = re.sub(r":\w+:`~?(?:[\w.]+\.)?([\w]+)`", r"\1", text)
    return text.replace("``", "")
