"""uc_jupyter.catalog.rest.names: our names as the Unity Catalog REST API spells them (pure)."""

from __future__ import annotations

import pytest

from uc_jupyter.catalog.rest.names import compact, name_path, parts, quoted, wire_parts
from uc_jupyter.catalog.rules.names import InvalidName, SecurableName, parse_name


def test_parts_are_the_parsed_lower_cased_parts_without_backquotes() -> None:
    assert parts("Main.`Feature-Store`", 2) == ("main", "feature-store")
    assert parts("MAIN", 1) == ("main",)
    assert parts("a.b.c", 3) == ("a", "b", "c")


@pytest.mark.parametrize(("name", "levels"), [("main.ml", 3), ("main.ml.t", 2), ("main", 2), ("main.ml", 1)])
def test_a_name_with_another_number_of_parts_is_refused(name: str, levels: int) -> None:
    with pytest.raises(InvalidName, match=f"got {len(name.split('.'))} part"):
        parts(name, levels)


@pytest.mark.parametrize("name", ["a..b", "a/b", "`a.b`", "../etc", "a b", "/Volumes/a/b/c"])
def test_names_the_grammar_refuses_never_become_parts(name: str) -> None:
    with pytest.raises(InvalidName):
        parts(name, 2)


@pytest.mark.parametrize("bad", ["a.b", "a/b", "..", "/"])
def test_a_part_that_could_reach_another_route_is_refused_even_past_the_grammar(bad: str) -> None:
    # The grammar refuses such parts today; wire_parts must hold on its own should it ever widen.
    with pytest.raises(ValueError, match="a Unity Catalog server cannot name the part"):
        wire_parts(SecurableName(("main", bad)), f"main.{bad}")


def test_the_refusal_is_one_line_and_cuts_a_flood() -> None:
    flood = "x" * 5000 + "/" + "y" * 5000
    with pytest.raises(ValueError, match="cannot name the part") as refused:
        wire_parts(SecurableName(("main", flood)), f"main.{flood}\nsecond line")
    message = str(refused.value)
    assert len(message) < 600
    assert "\n" not in message and "second line" not in message


def test_wire_parts_of_a_parsed_name_are_its_parts() -> None:
    parsed = parse_name("Main.ml.Iris")
    assert wire_parts(parsed, "Main.ml.Iris") == ("main", "ml", "iris")


@pytest.mark.parametrize(
    ("text", "segment"),
    [
        ("main.ml.iris", "main.ml.iris"),  # dots kept: they separate a full name's parts
        ("a/b", "a%2Fb"),  # a slash cannot start another path segment
        ("../../admin", "..%2F..%2Fadmin"),
        ("a?x=1#f", "a%3Fx%3D1%23f"),  # nor a query or a fragment
        ("50%", "50%25"),
        ("a b", "a%20b"),
        ("é", "%C3%A9"),
    ],
)
def test_quoted_keeps_a_segment_one_segment(text: str, segment: str) -> None:
    assert quoted(text) == segment


def test_name_path_is_the_lower_cased_full_name_as_one_segment() -> None:
    assert name_path("Main.ml.iris", 3) == "main.ml.iris"
    assert name_path("main.`feature-store`", 2) == "main.feature-store"
    with pytest.raises(InvalidName):
        name_path("main.ml", 3)


def test_compact_drops_only_the_fields_that_are_none() -> None:
    assert compact(name="main", comment=None) == {"name": "main"}
    falsy = compact(comment="", count=0, flag=False, items=[], options={}, gone=None)
    assert falsy == {"comment": "", "count": 0, "flag": False, "items": [], "options": {}}
    assert compact() == {}
