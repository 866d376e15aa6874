"""A row filter as one whole predicate. Pure, no I/O.

The engines parse a filter as an expression and stop where the first complete one ends: deltalake
(DataFusion's parser) then drops the rest without a word, so ``"x > 1 s = 'b'"`` read every row with
``x > 1``, a silent wrong result. Wrapped in parentheses of its own, a filter must end where they
close: any text after a complete condition becomes a parse error naming it (``Expected: ), found:
s``). That holds only if the filter's own parentheses are balanced, which is checked here (outside
string literals and quoted names), since a stray ``)`` would close the wrapper early.

Example:
    >>> whole("label = 1 AND note = 'a)'")
    "(label = 1 AND note = 'a)')"
    >>> whole("x > 1)")
    Traceback (most recent call last):
    ...
    ValueError: filter 'x > 1)' has a ')' at character 6 that closes nothing: balance its parentheses
"""

from __future__ import annotations

__all__ = ["whole"]

_QUOTES = ("'", '"', "`")  # a string literal, a quoted name (SQL, Spark)


def whole(text: str) -> str:
    """``text`` wrapped so that an engine must parse all of it (see the module docstring); a
    one-line ValueError when its parentheses do not balance or a quote is left open."""
    depth = 0
    quote = ""
    for at, char in enumerate(text, start=1):
        if quote:
            if char == quote:
                quote = ""  # a doubled quote ('it''s') closes and reopens: the same as going on
            continue
        if char in _QUOTES:
            quote = char
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                raise ValueError(
                    f"filter {text!r} has a ')' at character {at} that closes nothing: balance its parentheses"
                )
    if quote:
        raise ValueError(f"filter {text!r} leaves a {quote} open: close the quote")
    if depth:
        raise ValueError(f"filter {text!r} leaves {depth} '(' open: balance its parentheses")
    return f"({text})"
