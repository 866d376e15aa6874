"""The option checks every loading entry point shares: each rule as a property over values."""

from __future__ import annotations

import doctest
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from uc_jupyter import options
from uc_jupyter.options import (
    choice,
    column_names,
    flag,
    function,
    globs,
    maybe_whole_number,
    non_negative_number,
    text,
    whole_number,
)

# Values of every kind a caller might pass by mistake.
ANYTHING = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.binary(max_size=4),
    st.lists(st.one_of(st.text(max_size=4), st.integers()), max_size=3),
    st.tuples(st.text(max_size=4)),
    st.frozensets(st.text(max_size=4), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
)


def one_line_naming(exc: BaseException, name: str) -> bool:
    return f"invalid {name} " in str(exc) and "\n" not in str(exc)


def test_the_documented_examples_hold() -> None:
    result = doctest.testmod(options, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


@given(ANYTHING)
def test_a_flag_is_exactly_true_or_false(value: Any) -> None:
    if value is True or value is False:
        assert flag("shuffle", value) is value
    else:
        with pytest.raises(TypeError) as caught:
            flag("shuffle", value)
        assert one_line_naming(caught.value, "shuffle")


@given(ANYTHING, st.integers(0, 2))
def test_a_whole_number_is_an_int_at_least_the_minimum_never_a_bool_or_float(value: Any, minimum: int) -> None:
    if type(value) is int and value >= minimum:
        assert whole_number("batch_size", value, minimum=minimum) == value
        return
    error = ValueError if type(value) is int else TypeError
    with pytest.raises(error) as caught:
        whole_number("batch_size", value, minimum=minimum)
    assert one_line_naming(caught.value, "batch_size")
    assert f">= {minimum}" in str(caught.value)


@given(st.integers(0, 2**40))
def test_numpy_integers_are_whole_numbers_and_numpy_bools_are_not(value: int) -> None:
    assert whole_number("seed", np.int64(value)) == value
    assert type(whole_number("seed", np.uint32(value % 2**32))) is int
    with pytest.raises(TypeError, match="invalid seed"):
        whole_number("seed", np.bool_(value % 2))


def test_maybe_whole_number_passes_none_through() -> None:
    assert maybe_whole_number("version", None) is None
    assert maybe_whole_number("version", 3) == 3
    with pytest.raises(ValueError, match="invalid version -1: give a whole number >= 0"):
        maybe_whole_number("version", -1)


@given(ANYTHING)
def test_a_non_negative_number_is_finite_and_not_a_bool(value: Any) -> None:
    numeric = type(value) in (int, float)
    if numeric and value == value and abs(value) != float("inf") and value >= 0:
        assert non_negative_number("timeout", value) == float(value)
        return
    with pytest.raises(TypeError if not numeric else ValueError) as caught:
        non_negative_number("timeout", value)
    assert one_line_naming(caught.value, "timeout")


@given(ANYTHING)
def test_globs_are_one_str_or_a_sequence_of_non_empty_str(value: Any) -> None:
    if value is None:
        assert globs("include", value) == ()
        return
    if isinstance(value, str):
        expected: tuple[str, ...] | None = (value,)
    elif type(value) in (list, tuple) and all(isinstance(v, str) for v in value):
        expected = tuple(value)
    else:
        expected = None
    if expected is not None and "" not in expected:
        assert globs("include", value) == expected
        return
    with pytest.raises((TypeError, ValueError)) as caught:
        globs("include", value)
    assert one_line_naming(caught.value, "include")


def test_an_empty_list_of_globs_is_refused_only_where_it_would_match_nothing() -> None:
    assert globs("exclude", []) == ()
    with pytest.raises(ValueError, match=r"invalid include \[\]: it would match nothing"):
        globs("include", [], allow_empty=False)
    with pytest.raises(ValueError, match="an empty pattern matches nothing"):
        globs("exclude", "")


@given(ANYTHING)
def test_column_names_take_one_str_as_one_column(value: Any) -> None:
    if value is None:
        assert column_names("columns", value) is None
        return
    if isinstance(value, str):
        expected: list[str] | None = [value]
    elif type(value) in (list, tuple) and all(isinstance(v, str) for v in value):
        expected = list(value)
    else:
        expected = None
    if expected and all(expected) and len(set(expected)) == len(expected):
        assert column_names("columns", value) == expected
        return
    with pytest.raises((TypeError, ValueError)) as caught:
        column_names("columns", value)
    assert one_line_naming(caught.value, "columns")


def test_column_names_keep_the_callers_order_from_any_sequence() -> None:
    assert column_names("columns", ("b", "a")) == ["b", "a"]
    assert column_names("columns", iter(["x", "y"])) == ["x", "y"]
    with pytest.raises(TypeError, match="give a column name"):
        column_names("columns", {"a", "b"})  # a set has no order


def test_choice_compares_type_and_value() -> None:
    assert choice("cache", "auto", ("auto", "always")) == "auto"
    with pytest.raises(ValueError, match="invalid on_uneven 'wrap': use 'pad', 'drop' or 'allow'"):
        choice("on_uneven", "wrap", ("pad", "drop", "allow"))
    with pytest.raises(ValueError, match=r"invalid label_by \['folder'\]: use 'folder'"):
        choice("label_by", ["folder"], ("folder",))


def test_text_and_function() -> None:
    assert text("filter", None) is None and text("filter", "id > 1") == "id > 1"
    with pytest.raises(TypeError, match="invalid filter 5: give a str or None"):
        text("filter", 5)
    with pytest.raises(TypeError, match="invalid where None: give a str$"):
        text("where", None, optional=False)
    assert function("transform", len) is len and function("transform", None) is None
    with pytest.raises(TypeError, match="invalid transform 'len': give a function"):
        function("transform", "len")


def test_long_values_are_shortened_in_the_message() -> None:
    with pytest.raises(TypeError) as caught:
        flag("shuffle", "x" * 500)
    assert len(str(caught.value)) < 120 and "..." in str(caught.value)
