"""uc_jupyter.data.table.predicate: a filter wrapped so that an engine parses all of it, and the
parentheses and quotes that would let text escape the wrapper refused in one line."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from uc_jupyter.data.table.predicate import whole


@pytest.mark.parametrize(
    "text",
    [
        "label = 1",
        "(a = 1 OR b = 2) AND c IN (1, 2)",
        "note = 'a)b'",
        "note = 'it''s (fine'",
        '"odd)name" > 3',
        "`x)` = 1",
    ],
)
def test_a_balanced_filter_is_wrapped_whole(text: str) -> None:
    assert whole(text) == f"({text})"


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("x > 1)", "filter 'x > 1)' has a ')' at character 6 that closes nothing: balance its parentheses"),
        (
            "x > 1) OR (y = 2",
            "filter 'x > 1) OR (y = 2' has a ')' at character 6 that closes nothing: balance its parentheses",
        ),
        ("(x > 1", "filter '(x > 1' leaves 1 '(' open: balance its parentheses"),
        ("note = 'open", "filter \"note = 'open\" leaves a ' open: close the quote"),
    ],
)
def test_what_would_close_the_wrapper_early_is_refused_in_one_line(text: str, said: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(said)}$"):
        whole(text)


@given(st.text(alphabet="ab =()'", max_size=30))
def test_whatever_is_accepted_comes_back_whole_inside_one_pair(text: str) -> None:
    try:
        wrapped = whole(text)
    except ValueError as refused:
        said = str(refused)
        wrapped = ""
    else:
        said = ""
    if not wrapped:
        assert said.startswith(f"filter {text!r} ") and "\n" not in said
        return
    assert wrapped == f"({text})"
    depth = 0
    quoted = False
    for char in wrapped[1:-1]:  # outside quotes, the wrapper's own pair is never closed early
        if char == "'":
            quoted = not quoted
        elif not quoted:
            depth += {"(": 1, ")": -1}.get(char, 0)
            assert depth >= 0
    assert depth == 0 and not quoted
