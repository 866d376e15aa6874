"""Spark's analysis errors as one line: a column or expression Spark cannot resolve, a type mismatch.

Spark Connect answers a query it cannot analyse with an ``AnalysisException`` whose text runs to the
JVM's stack (kilobytes in a notebook). :func:`one_line` keeps what the user needs: the condition's
own sentence, and for a column that does not exist its name, the closest of the frame's columns
and the columns it has. The frames :func:`~uc_jupyter.tables.table` returns raise these at the call
that names the column (``select``, ``filter`` ...), so ``table()``, ``load()`` and ``%uc_load`` say
the same line.

Example:
    >>> from types import SimpleNamespace
    >>> refused = SimpleNamespace(getCondition=lambda: "UNRESOLVED_COLUMN.WITH_SUGGESTION",
    ...                           getMessageParameters=lambda: {"objectName": "`sepal_lenght`"})
    >>> str(one_line(refused, "table main.ml.iris", ["sepal_length", "label"]))
    "table main.ml.iris has no column 'sepal_lenght'; did you mean 'sepal_length'? Its columns are sepal_length, label"
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from uc_jupyter import options as opt
from uc_jupyter.errors import OneLine

__all__ = ["QueryError", "one_line"]

# Spark's state code, and the position that follows it on the line ("; line 1 pos 0;", "(line 1, pos 8)").
_SQLSTATE = re.compile(r"\s*SQLSTATE: \w+.*$")


class QueryError(OneLine, ValueError):
    """A query Spark could not analyse (a column that does not exist, a filter of the wrong type);
    one line saying what to change."""

    __module__ = "uc_jupyter.tables"


def one_line(error: Any, owner: str, columns: Sequence[str]) -> QueryError:
    """``error`` (pyspark's ``AnalysisException``) as one line; ``owner`` and ``columns``: what the
    frame the failing call was made on is ("table main.ml.t", "this DataFrame") and its columns."""
    condition = error.getCondition() or ""
    parameters = error.getMessageParameters() or {}
    if condition.startswith("UNRESOLVED_COLUMN") and "objectName" in parameters:
        return QueryError(opt.unknown_column(owner, _unquoted(parameters["objectName"]), columns))
    message = (error.getMessage() or str(error)).strip().splitlines()
    first = _SQLSTATE.sub("", message[0]).rstrip(" .") if message else condition
    if condition:
        first = first.replace(f"[{condition}] ", "", 1)
    sql = _sql_of(message)
    return QueryError(f"{first} in {sql!r}" if sql else first)


def _sql_of(message: Sequence[str]) -> str:
    """The text a parse error is about (the line under Spark's ``== SQL ==``), else ""."""
    for index, line in enumerate(message[:-1]):
        if line.strip() == "== SQL ==":
            return message[index + 1].strip()
    return ""


def _unquoted(identifier: str) -> str:
    """``a`` for Spark's ``\\`a\\``` (a nested field keeps its dots: ``\\`a\\`.\\`b\\``` is ``a.b``)."""
    return ".".join(part.strip("`") for part in identifier.split("`.`"))
