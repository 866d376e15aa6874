"""Magic lines parsed into keyword arguments: shlex splitting, typed options, one-line errors.

Every option maps to one keyword of a public function (``--batch-size 64`` -> ``batch_size=64``), so
a magic is only ``parse`` then a call. Mistakes raise :class:`ArgumentError` with one line that names
the option and suggests the closest existing one.

Example:
    >>> spec = [Option("--to", choices=("spark", "pandas")), Option("--limit", type=int), Flag("--shuffle")]
    >>> parse("main.ml.iris --to pandas --limit 5 --shuffle", spec)
    (['main.ml.iris'], {'to': 'pandas', 'limit': 5, 'shuffle': True})
    >>> parse("main.ml.iris --limt 5", spec)
    Traceback (most recent call last):
    ...
    uc_jupyter.jupyter.args.ArgumentError: unknown option --limt; did you mean --limit?
"""

from __future__ import annotations

import difflib
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ArgumentError", "Flag", "HelpRequested", "Option", "names_list", "parse"]


class ArgumentError(ValueError):
    """A magic line that cannot be understood; the message is one line."""


class HelpRequested(Exception):  # not an error: the line asks for the help
    """The line holds ``--help`` (or ``-h``) where an option may stand: show the help, run nothing."""


@dataclass(frozen=True)
class Option:
    """``--name VALUE``; ``aliases`` such as ``-n``; the keyword is ``dest`` (default: the name);
    ``metavar`` names the value in the help (default: from ``type`` or ``choices``)."""

    name: str
    type: Callable[[str], Any] = str
    choices: Sequence[str] = ()
    aliases: Sequence[str] = ()
    dest: str = ""
    help: str = ""
    metavar: str = ""
    takes_value: bool = field(default=True, init=False)

    @property
    def keyword(self) -> str:
        return self.dest or self.name.lstrip("-").replace("-", "_")

    def convert(self, raw: str) -> Any:
        if self.choices and raw not in self.choices:
            raise ArgumentError(f"{self.name} must be one of {', '.join(self.choices)}; got {raw!r}")
        try:
            return self.type(raw)
        except (TypeError, ValueError) as exc:
            wanted = {int: "a whole number", float: "a number"}.get(self.type, "a valid value")  # type: ignore[call-overload]
            detail = f": {exc}" if self.type not in (int, float) else ""
            raise ArgumentError(f"{self.name} needs {wanted}, got {raw!r}{detail}") from None


@dataclass(frozen=True)
class Flag(Option):
    """``--name`` sets True; with ``negatable``, ``--no-name`` sets False."""

    negatable: bool = False
    takes_value: bool = field(default=False, init=False)


def names_list(raw: str) -> list[str]:
    """``"a,b, c"`` -> ``["a", "b", "c"]``; empty items are refused."""
    items = [item.strip() for item in raw.split(",")]
    if not all(items):
        raise ValueError("give names separated by commas, e.g. a,b")
    return items


def parse(line: str, spec: Sequence[Option]) -> tuple[list[str], dict[str, Any]]:
    """(positional arguments, {keyword: value}) of ``line``; only options given appear.

    Raises:
        ArgumentError: the line cannot be understood (one line saying why).
        HelpRequested: ``--help`` or ``-h`` stands where an option may.
    """
    try:
        tokens = shlex.split(line, posix=True)
    except ValueError as exc:  # an unclosed quote
        raise ArgumentError(f"cannot split the line: {exc}; close the quotes") from None
    by_name: dict[str, tuple[Option, bool]] = {}
    for option in spec:
        for name in (option.name, *option.aliases):
            by_name[name] = (option, True)
        if isinstance(option, Flag) and option.negatable:
            by_name["--no-" + option.name.removeprefix("--")] = (option, False)
    positional: list[str] = []
    options: dict[str, Any] = {}
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if not token.startswith("-") or token == "-" or _is_number(token):
            positional.append(token)
            continue
        name, _, inline = token.partition("=")
        if name in _HELP and name not in by_name:
            raise HelpRequested(name)
        if name not in by_name:
            close = difflib.get_close_matches(name, [*by_name, "--help"], n=1)
            hint = f"; did you mean {close[0]}?" if close else f"; options are {', '.join(o.name for o in spec)}"
            raise ArgumentError(f"unknown option {name}{hint}")
        option, positive = by_name[name]
        if not option.takes_value:
            if inline:
                raise ArgumentError(f"{name} takes no value")
            options[option.keyword] = positive
            continue
        if inline:
            raw = inline
        elif i < len(tokens):
            raw = tokens[i]
            i += 1
        else:
            choices = f" (one of {', '.join(option.choices)})" if option.choices else ""
            raise ArgumentError(f"{name} needs a value{choices}")
        if option.keyword in options:
            raise ArgumentError(f"{option.name} is given twice")
        options[option.keyword] = option.convert(raw)
    return positional, options


_HELP = ("--help", "-h")


def _is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True
