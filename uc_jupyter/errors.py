"""Turning third-party exceptions into the one-line messages our errors carry."""

from __future__ import annotations

__all__ = ["first_line"]


def first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message (deltalake's carry Rust backtraces), or its type's name.

    Example:
        >>> first_line(ValueError("bad input\\n   0: <unknown>"))
        'bad input'
    """
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
