"""Checks of the options every loading entry point takes: pure functions, one rule per kind of option.

``load()``, ``%uc_load``, the datasets, ``labelled_folder``, ``DataLoader`` and ``table()`` accept
the same kinds of option (a flag, a count, glob patterns, column names); each kind is checked here
once, so the same bad value gets the same one-line error wherever it is given. A wrong *type* is a
``TypeError``, a value of the right type that is out of range a ``ValueError``; both name the
argument and say what is allowed. Nothing is coerced: ``shuffle="no"`` is refused, not truthy;
``batch_size=0`` is refused, not replaced by a default.

The rules:
- Flags (``shuffle``, ``recursive``, ``monitor`` ...) are ``True`` or ``False``.
- Counts (``batch_size``, ``num_workers``, ``seed`` ...) are whole numbers (``int`` or a NumPy
  integer, never ``bool`` or ``float``) at least the option's minimum.
- Glob patterns (``include``, ``exclude``) are one ``str`` or a list (any non-set sequence) of them.
- Column names (``columns``) are one ``str``, which is *one* column (``"ab"`` is the column ``ab``),
  or a non-empty list of distinct names.

Example:
    >>> whole_number("batch_size", 64, minimum=1)
    64
    >>> whole_number("batch_size", 0, minimum=1)
    Traceback (most recent call last):
    ...
    ValueError: invalid batch_size 0: give a whole number >= 1
    >>> flag("shuffle", "no")
    Traceback (most recent call last):
    ...
    TypeError: invalid shuffle 'no': give True or False
    >>> column_names("columns", "ab"), globs("include", ["*.png", "*.jpg"])
    (['ab'], ('*.png', '*.jpg'))
"""

from __future__ import annotations

import difflib
import math
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from typing import Any, TypeVar

__all__ = [
    "check_loader_arguments",
    "check_prefetch_factor",
    "choice",
    "column_names",
    "flag",
    "function",
    "globs",
    "maybe_whole_number",
    "non_negative_number",
    "text",
    "unknown_column",
    "whole_number",
]

T = TypeVar("T")
_SHOWN = 60  # characters of a refused value shown in the message


def flag(name: str, value: object) -> bool:
    """``value`` if it is ``True`` or ``False``; a ``TypeError`` otherwise (no truthiness).

    Example:
        >>> flag("recursive", True)
        True
    """
    if value is True or value is False:
        return value
    raise TypeError(f"invalid {name} {_shown(value)}: give True or False")


def whole_number(name: str, value: object, *, minimum: int = 0) -> int:
    """``value`` as an ``int`` if it is a whole number (not a bool or float) ``>= minimum``.

    Example:
        >>> import numpy as np
        >>> whole_number("seed", np.int64(7))
        7
    """
    if isinstance(value, bool):
        raise TypeError(f"invalid {name} {value!r}: give a whole number >= {minimum}, not a bool")
    try:
        number = operator.index(value)  # type: ignore[arg-type]  # any object with __index__
    except TypeError:
        raise TypeError(f"invalid {name} {_shown(value)}: give a whole number >= {minimum}") from None
    if number < minimum:
        raise ValueError(f"invalid {name} {number!r}: give a whole number >= {minimum}")
    return number


def maybe_whole_number(name: str, value: object, *, minimum: int = 0) -> int | None:
    """:func:`whole_number`, or None for None (the option was left out)."""
    return None if value is None else whole_number(name, value, minimum=minimum)


def non_negative_number(name: str, value: object) -> float:
    """``value`` as a ``float`` if it is a finite number ``>= 0`` (seconds, say); not a bool."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"invalid {name} {_shown(value)}: give a number >= 0")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"invalid {name} {value!r}: give a finite number >= 0")
    return float(value)


def choice(name: str, value: object, choices: Sequence[T]) -> T:
    """``value`` if it is one of ``choices``.

    Example:
        >>> choice("cache", "sometimes", ("auto", "always", "never"))
        Traceback (most recent call last):
        ...
        ValueError: invalid cache 'sometimes': use 'auto', 'always' or 'never'
    """
    for allowed in choices:
        if type(value) is type(allowed) and value == allowed:
            return allowed
    listed = [repr(c) for c in choices]
    options = listed[0] if len(listed) == 1 else f"{', '.join(listed[:-1])} or {listed[-1]}"
    raise ValueError(f"invalid {name} {_shown(value)}: use {options}")


def text(name: str, value: object, *, optional: bool = True) -> str | None:
    """``value`` if it is a ``str`` (or None when ``optional``)."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise TypeError(f"invalid {name} {_shown(value)}: give a str{' or None' if optional else ''}")
    return value


def function(name: str, value: object) -> Callable[..., Any] | None:
    """``value`` if it is callable, or None."""
    if value is not None and not callable(value):
        raise TypeError(f"invalid {name} {_shown(value)}: give a function (a callable) or None")
    return value


def globs(name: str, value: object, *, allow_empty: bool = True) -> tuple[str, ...]:
    """Glob patterns as a tuple: None gives ``()``, one ``str`` one pattern, a list its patterns.

    Example:
        >>> globs("include", 5)
        Traceback (most recent call last):
        ...
        TypeError: invalid include 5: give a glob pattern (a str) or a list of them
    """
    if value is None:
        return ()
    patterns = _strings(name, value, "a glob pattern (a str) or a list of them")
    if "" in patterns:
        raise ValueError(
            f"invalid {name} {_shown(value)}: an empty pattern matches nothing; give a pattern like '*.png'"
        )
    if not patterns and not allow_empty:
        raise ValueError(f"invalid {name} []: it would match nothing; give at least one pattern, or None for all")
    return tuple(patterns)


def column_names(name: str, value: object) -> list[str] | None:
    """Column names as a list: None (every column) stays None, one ``str`` is one column.

    Example:
        >>> column_names("columns", ["a", "a"])
        Traceback (most recent call last):
        ...
        ValueError: invalid columns ['a', 'a']: 'a' is listed twice
    """
    if value is None:
        return None
    names = _strings(name, value, "a column name (a str) or a list of them")
    if not names:
        raise ValueError(f"invalid {name} []: give at least one column name, or None for every column")
    seen: set[str] = set()
    for column in names:
        if not column:
            raise ValueError(f"invalid {name} {_shown(value)}: a column name is empty")
        if column in seen:
            raise ValueError(f"invalid {name} {_shown(value)}: {column!r} is listed twice")
        seen.add(column)
    return names


_SHOWN_COLUMNS = 12  # a wide table's columns are not all listed


def unknown_column(owner: str, column: str, known: Sequence[str]) -> str:
    """The one message for a ``column`` that ``owner`` (``table main.ml.t``, ``this DataFrame``)
    does not have: the closest of its ``known`` columns, and what they are.

    Example:
        >>> unknown_column("table main.ml.t", "lable", ["label", "x"])
        "table main.ml.t has no column 'lable'; did you mean 'label'? Its columns are label, x"
    """
    close = difflib.get_close_matches(column, list(known), n=1)
    listed = ", ".join(known[:_SHOWN_COLUMNS])
    more = f" and {len(known) - _SHOWN_COLUMNS} more" if len(known) > _SHOWN_COLUMNS else ""
    hint = f"did you mean {close[0]!r}? Its columns are" if close else "its columns are"
    return f"{owner} has no column {column!r}; {hint} {listed}{more}"


def check_prefetch_factor(num_workers: int | None, prefetch_factor: int | None) -> None:
    """A DataLoader's ``prefetch_factor`` needs worker processes (``num_workers=None``: the
    loader's default, which has workers).

    Example:
        >>> check_prefetch_factor(2, 4), check_prefetch_factor(None, 4)
        (None, None)
        >>> check_prefetch_factor(0, 2)
        Traceback (most recent call last):
        ...
        ValueError: invalid prefetch_factor with num_workers=0: ...
    """
    if num_workers == 0 and prefetch_factor is not None:
        raise ValueError(
            "invalid prefetch_factor with num_workers=0: it counts batches each worker prepares ahead; "
            "give num_workers > 0 or leave prefetch_factor out"
        )


def check_loader_arguments(given: Mapping[str, Any]) -> None:
    """The counts and flags among a torch DataLoader's arguments, by name (those given only).

    Example:
        >>> check_loader_arguments({"batch_size": None, "shuffle": None, "num_workers": 2})
        >>> check_loader_arguments({"shuffle": "no"})
        Traceback (most recent call last):
        ...
        TypeError: invalid shuffle 'no': give True or False
        >>> check_loader_arguments({"collate_fn": 123})
        Traceback (most recent call last):
        ...
        TypeError: invalid collate_fn 123: give a function (a callable) or None
    """
    if given.get("batch_size") is not None:  # None: no batching
        whole_number("batch_size", given["batch_size"], minimum=1)
    if given.get("shuffle") is not None:  # None: torch's default (no shuffling)
        flag("shuffle", given["shuffle"])
    for name in ("pin_memory", "drop_last", "persistent_workers", "in_order"):
        if name in given:
            flag(name, given[name])
    workers = maybe_whole_number("num_workers", given.get("num_workers"))
    check_prefetch_factor(workers, maybe_whole_number("prefetch_factor", given.get("prefetch_factor"), minimum=1))
    if "timeout" in given:
        non_negative_number("timeout", given["timeout"])
    for name in ("collate_fn", "worker_init_fn"):  # torch calls them only in a pass, deep in a worker
        if name in given:
            function(name, given[name])


def _strings(name: str, value: object, wanted: str) -> list[str]:
    """One str, or the items of a list/tuple/other sequence or iterable that are all str; sets and
    mappings are refused (their order is not the caller's), bytes too (not text)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, (bytes, bytearray, Mapping, Set)) or not isinstance(value, Iterable):
        raise TypeError(f"invalid {name} {_shown(value)}: give {wanted}")
    items = list(value)
    for item in items:
        if not isinstance(item, str):
            raise TypeError(f"invalid {name} {_shown(value)}: {_shown(item)} is not a str; give {wanted}")
    return items


def _shown(value: object) -> str:
    """``repr(value)``, shortened to keep the message on one short line."""
    shown = " ".join(repr(value).split())
    return shown if len(shown) <= _SHOWN else shown[: _SHOWN - 3] + "..."
