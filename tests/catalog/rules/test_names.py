"""The name grammar: securable names and volume paths, through the public functions only."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from uc_jupyter.catalog.rules.names import (
    INVISIBLE_CATEGORIES,
    MAX_PART_LENGTH,
    SHOWN_CHARACTERS,
    InvalidName,
    SecurableName,
    VolumePath,
    parse_name,
    parse_volume_path,
    quote_part,
)

LEVELS = ("catalog", "schema", "object")
PLAIN = re.compile(r"[A-Za-z0-9_]+")
FORBIDDEN = ". /" + "".join(chr(c) for c in range(0x20)) + "\x7f"
DOTTED_I = "\u0130"  # 'İ': lower-cases to two code points, 'i' + U+0307


def shown(text: str) -> str:
    """How an error quotes a refused name: whole up to SHOWN_CHARACTERS characters, then cut."""
    return repr(text) if len(text) <= SHOWN_CHARACTERS else f"{text[:SHOWN_CHARACTERS]!r}..."


# What a name may hold: nothing invisible or direction-changing (controls, format characters such as
# U+200D and U+202E, separators other than the space, unassigned, private use, surrogates).
_part_char = st.characters(exclude_categories=sorted(INVISIBLE_CATEGORIES), exclude_characters=FORBIDDEN)
valid_parts = st.one_of(
    st.from_regex(r"[A-Za-z0-9_]{1,12}", fullmatch=True),
    st.text(st.sampled_from("`aZ_-9\u00e9"), min_size=1, max_size=8),
    st.text(_part_char, min_size=1, max_size=MAX_PART_LENGTH),
    st.text(st.sampled_from("aB`"), min_size=MAX_PART_LENGTH, max_size=MAX_PART_LENGTH),
)
_bad_char = st.one_of(
    st.sampled_from(". /\x00\x7f"),
    st.characters(max_codepoint=0x1F),
    st.characters(categories=("Cf", "Zs", "Zl", "Zp")),  # look-alikes: "ma\u200din" beside "main"
)
_short_text = st.text(_part_char, max_size=10)
# (bad part, the text of it that the error message must quote)
bad_parts = st.one_of(
    st.builds(lambda a, c, b: a + c + b, _short_text, _bad_char, _short_text).map(lambda p: (p, repr(p))),
    st.text(_part_char, min_size=MAX_PART_LENGTH + 1, max_size=MAX_PART_LENGTH + 40).map(lambda p: (p, repr(p[:20]))),
)
_relative_char = st.characters(exclude_categories=("Cs", "Cc"), exclude_characters="/")
relative_segments = st.one_of(
    st.sampled_from(["cats", "1.png", "My Data", "...", "..a", ".hidden", "a`b"]),
    st.text(_relative_char, min_size=1, max_size=MAX_PART_LENGTH).filter(lambda s: s not in {".", ".."}),
)
volume_names = st.lists(valid_parts, min_size=3, max_size=3)


def render(parts: list[str]) -> str:
    return ".".join(quote_part(p) for p in parts)


def lowered(parts: list[str]) -> tuple[str, ...]:
    low = tuple(p.lower() for p in parts)
    assume(all(len(p) <= MAX_PART_LENGTH for p in low))
    return low


def volume_text(name_parts: list[str], segments: list[str], trailing_slash: bool = False) -> str:
    return "/Volumes/" + "/".join([*name_parts, *segments]) + ("/" if trailing_slash else "")


def assert_one_line_error(error: pytest.ExceptionInfo[InvalidName], *fragments: str) -> None:
    message = str(error.value)
    assert isinstance(error.value, ValueError)
    assert len(message.splitlines()) == 1, message
    for fragment in fragments:
        assert fragment in message


# --- securable names: valid input ---------------------------------------------------------------


@settings(max_examples=200)
@given(st.lists(valid_parts, min_size=1, max_size=3))
def test_rendered_name_parses_back_to_its_parts(parts: list[str]) -> None:
    name = SecurableName(lowered(parts))
    rendered = str(name)
    assert parse_name(rendered) == name
    assert parse_name(rendered, levels=(len(parts),)) == name
    # parts never contain '.', so the rendering splits back into the rendered parts
    for part, shown in zip(name.parts, rendered.split("."), strict=True):
        assert shown == (part if PLAIN.fullmatch(part) else "`" + part.replace("`", "``") + "`")


@settings(max_examples=100)
@given(valid_parts)
def test_backquoting_any_part_parses_to_that_part(part: str) -> None:
    (low,) = lowered([part])
    assert parse_name("`" + part.replace("`", "``") + "`").parts == (low,)


@settings(max_examples=150)
@given(st.lists(valid_parts, min_size=1, max_size=3))
def test_parsing_is_case_insensitive_and_stores_lower_case(parts: list[str]) -> None:
    # str.lower is not a case fold: skip parts like U+00DF sharp s (upper 'SS') or U+0131 dotless i
    # whose upper case lower-cases to something else, and parts that upper-casing makes too long.
    assume(all(p.upper().lower() == p.lower() for p in parts))
    assume(all(len(p.upper()) <= MAX_PART_LENGTH for p in parts))
    expected = SecurableName(lowered(parts))
    for variant in (parts, [p.upper() for p in parts], [p.lower() for p in parts]):
        assert parse_name(render(variant)) == expected
    assert all(p == p.lower() for p in expected.parts)


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("Main.`ML-data`.Iris", ("main", "ml-data", "iris")),
        ("MAIN.ML.IRIS", ("main", "ml", "iris")),
        ("`a``b`", ("a`b",)),
        ("````", ("`",)),
        ("`main`.`ml`", ("main", "ml")),
        ("0.__", ("0", "__")),
        ("`caf\u00e9-\u6570\u636e`", ("caf\u00e9-\u6570\u636e",)),
        ("a" * MAX_PART_LENGTH, ("a" * MAX_PART_LENGTH,)),
    ],
)
def test_parse_name_examples(text: str, parts: tuple[str, ...]) -> None:
    assert parse_name(text).parts == parts


@settings(max_examples=150)
@given(st.lists(valid_parts, min_size=1, max_size=3))
@example([DOTTED_I * 200])
@example(["main", DOTTED_I * (MAX_PART_LENGTH // 2 + 1)])
def test_a_parsed_name_always_renders_to_an_equal_valid_name(parts: list[str]) -> None:
    """Whatever parse_name accepts must survive str() and parse_name again (no part past the limit)."""
    try:
        name = parse_name(render(parts))
    except InvalidName:
        return  # refusing a name whose lower-cased form is too long is fine as well
    assert all(len(p) <= MAX_PART_LENGTH for p in name.parts)
    assert parse_name(str(name)) == name


# --- securable names: invalid input -------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "levels", "fragment"),
    [
        ("", (1, 2, 3), "part 1 is empty"),
        (".a", (1, 2, 3), "part 1 is empty"),
        ("a.", (1, 2, 3), "part 2 is empty"),
        ("a..b", (1, 2, 3), "part 2 is empty"),
        ("``", (1, 2, 3), "part 1 is empty"),
        ("a.``", (1, 2, 3), "part 2 is empty"),
        ("a.b.c.d", (1, 2, 3), "got 4 part(s)"),
        ("a.b", (3,), "expected 'catalog.schema.object', got 2 part(s)"),
        ("a", (2, 3), "got 1 part(s)"),
        ("a.b.c", (1,), "expected 'catalog', got 3 part(s)"),
        ("`a", (1, 2, 3), "unclosed backquote"),
        ("a.`b``", (1, 2, 3), "unclosed backquote"),
        ("a`b", (1, 2, 3), "'a`b' has a stray backquote"),
        ("a.b`", (1, 2, 3), "'b`' has a stray backquote"),
        ("`a`b", (1, 2, 3), "unexpected 'b' after the backquoted part 'a'"),
        ("a b", (1, 2, 3), "catalog part 'a b' contains a space"),
        ("a.b/c", (1, 2, 3), "schema part 'b/c' contains a forward slash"),
        ("a.b.`c.d`", (1, 2, 3), "object part 'c.d' contains a period"),
        ("`a\x00b`", (1, 2, 3), "a NUL character"),
        ("`a\x1fb`", (1, 2, 3), "the control character '\\x1f'"),
        ("`a\tb`", (1, 2, 3), "the control character '\\t'"),
        ("`a\nb`", (1, 2, 3), "the control character '\\n'"),
        ("`a\x7fb`", (1, 2, 3), "the control character '\\x7f'"),
        ("a" * (MAX_PART_LENGTH + 1), (1, 2, 3), f"is longer than {MAX_PART_LENGTH} characters"),
    ],
)
def test_invalid_names_are_refused_with_a_one_line_message(text: str, levels: tuple[int, ...], fragment: str) -> None:
    with pytest.raises(InvalidName) as error:
        parse_name(text, levels=levels)
    assert_one_line_error(error, shown(text), fragment)


@pytest.mark.parametrize("value", [None, 42, b"main", ["main"], ("main",)])
def test_non_string_names_are_refused(value: object) -> None:
    with pytest.raises(InvalidName) as error:
        parse_name(value)  # type: ignore[arg-type]
    assert_one_line_error(error, repr(value), "expected a string")


@settings(max_examples=200)
@given(st.lists(valid_parts, max_size=2), bad_parts, st.data())
def test_the_error_names_the_bad_part_and_its_level(
    parts: list[str], bad: tuple[str, str], data: st.DataObject
) -> None:
    bad_part, quoted = bad
    index = data.draw(st.integers(0, len(parts)), label="bad position")
    parts.insert(index, bad_part)
    with pytest.raises(InvalidName) as error:
        parse_name(render(parts))
    assert_one_line_error(error, f"{LEVELS[index]} part {quoted}")


@settings(max_examples=100)
@given(st.lists(valid_parts, max_size=2), st.booleans(), st.data())
def test_the_error_names_the_empty_part(parts: list[str], backquoted: bool, data: st.DataObject) -> None:
    index = data.draw(st.integers(0, len(parts)), label="empty position")
    rendered = [quote_part(p) for p in parts]
    rendered.insert(index, "``" if backquoted else "")
    text = ".".join(rendered)
    with pytest.raises(InvalidName) as error:
        parse_name(text)
    assert_one_line_error(error, shown(text), f"part {index + 1} is empty")


# --- SecurableName helpers ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "catalog", "schema", "obj", "parent"),
    [
        ("main", "main", None, None, None),
        ("main.ml", "main", "ml", None, "main"),
        ("main.ml.iris", "main", "ml", "iris", "main.ml"),
    ],
)
def test_name_level_properties(
    text: str, catalog: str, schema: str | None, obj: str | None, parent: str | None
) -> None:
    name = parse_name(text)
    assert (name.catalog, name.schema, name.object) == (catalog, schema, obj)
    assert name.parent == (parse_name(parent) if parent else None)


def test_lineage_lists_ancestors_outermost_first() -> None:
    assert parse_name("main.ml.iris").lineage() == (
        parse_name("main"),
        parse_name("main.ml"),
        parse_name("main.ml.iris"),
    )
    assert parse_name("main").lineage() == (parse_name("main"),)


@settings(max_examples=100)
@given(st.lists(valid_parts, min_size=1, max_size=3))
def test_lineage_parent_and_child_agree(parts: list[str]) -> None:
    name = SecurableName(lowered(parts))
    lineage = name.lineage()
    assert len(lineage) == len(name.parts)
    assert lineage[-1] == name
    for outer, inner in itertools.pairwise(lineage):
        assert inner.parent == outer
        assert outer.child(inner.parts[-1]) == inner


@pytest.mark.parametrize(
    ("parent", "part", "child"),
    [
        ("main", "ML", "main.ml"),
        ("main.ml", "Iris", "main.ml.iris"),
        ("main", "my-data", "main.`my-data`"),
        ("main", "`", "main.````"),
    ],
)
def test_child_validates_and_lower_cases(parent: str, part: str, child: str) -> None:
    assert parse_name(parent).child(part) == parse_name(child)


@pytest.mark.parametrize("part", ["", "my data", "a.b", "a/b", "a\x00"])
def test_child_refuses_an_invalid_part(part: str) -> None:
    with pytest.raises(InvalidName):
        parse_name("main").child(part)


def test_child_of_an_object_name_is_refused() -> None:
    """There is no fourth level: a table or volume has no children."""
    with pytest.raises(InvalidName):
        parse_name("main.ml.iris").child("x")


# --- volume paths -------------------------------------------------------------------------------


@settings(max_examples=150)
@given(volume_names, st.lists(st.one_of(relative_segments, st.just(".")), max_size=4), st.booleans())
def test_volume_path_parses_lower_cases_the_name_and_normalises(
    name_parts: list[str], segments: list[str], trailing_slash: bool
) -> None:
    expected = VolumePath(SecurableName(lowered(name_parts)), "/".join(s for s in segments if s != "."))
    path = parse_volume_path(volume_text(name_parts, segments, trailing_slash))
    assert path == expected
    assert parse_volume_path(str(path)) == path


@settings(max_examples=100)
@given(volume_names, st.lists(relative_segments, max_size=3))
def test_rendered_volume_path_parses_back(name_parts: list[str], segments: list[str]) -> None:
    path = VolumePath(SecurableName(lowered(name_parts)), "/".join(segments))
    assert str(path) == volume_text(list(path.volume.parts), segments)
    assert parse_volume_path(str(path)) == path


@pytest.mark.parametrize(
    ("text", "volume", "relative"),
    [
        ("/Volumes/Main/ML/Images", "main.ml.images", ""),
        ("/Volumes/main/ml/images/", "main.ml.images", ""),
        ("/Volumes/main/ml/images/./", "main.ml.images", ""),
        ("/Volumes/main/ml/images/Cats/1.PNG", "main.ml.images", "Cats/1.PNG"),
        ("/Volumes/main/ml/images/./cats/./a/", "main.ml.images", "cats/a"),
        ("/Volumes/main/ml/my-images/...", "main.ml.`my-images`", "..."),
    ],
)
def test_volume_path_examples(text: str, volume: str, relative: str) -> None:
    assert parse_volume_path(text) == VolumePath(parse_name(volume), relative)


@settings(max_examples=100)
@given(volume_names, st.lists(relative_segments, max_size=3), st.booleans(), st.data())
def test_dotdot_anywhere_in_the_relative_part_is_refused(
    name_parts: list[str], segments: list[str], trailing_slash: bool, data: st.DataObject
) -> None:
    segments.insert(data.draw(st.integers(0, len(segments)), label="'..' position"), "..")
    text = volume_text(name_parts, segments, trailing_slash)
    with pytest.raises(InvalidName) as error:
        parse_volume_path(text)
    assert_one_line_error(error, shown(text), "'..'")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("Volumes/main/s/v", "must start with '/Volumes/"),
        ("/volumes/main/s/v", "must start with '/Volumes/"),
        ("/VOLUMES/main/s/v", "must start with '/Volumes/"),
        ("/Volumes", "must start with '/Volumes/"),
        ("/Volumesmain/s/v", "must start with '/Volumes/"),
        ("/Volumes/", "got 0 name part(s)"),
        ("/Volumes/main", "got 1 name part(s)"),
        ("/Volumes/main/s", "got 2 name part(s)"),
        ("/Volumes/main/s/", "got 2 name part(s)"),
        ("/Volumes/main/s/v/../x", "'..' may not climb out"),
        ("/Volumes/main/s/v/x/..", "'..' may not climb out"),
        ("/Volumes/main/s/v//etc/passwd", "empty segment"),
        ("/Volumes/main/s/v/a//b", "empty segment"),
        ("/Volumes/main/s/v//", "empty segment"),
        ("/Volumes/main/s/v/a\x00b", "NUL"),
        ("/Volumes/main/s/v\x00/a", "NUL"),
        ("/Volumes/main/s/v/" + "a" * (MAX_PART_LENGTH + 1), f"longer than {MAX_PART_LENGTH}"),
        ("/Volumes/" + "c" * (MAX_PART_LENGTH + 1) + "/s/v", "catalog part"),
        ("/Volumes/main/s/my vol", "volume part 'my vol' contains a space"),
        ("/Volumes/main/../v", "schema part '..' contains a period"),
        ("/Volumes/main/s/..", "volume part '..' contains a period"),
        ("/Volumes//s/v", "part 1 is empty"),
        ("/Volumes/main/s\x01/v", "the control character"),
    ],
)
def test_invalid_volume_paths_are_refused(text: str, fragment: str) -> None:
    with pytest.raises(InvalidName) as error:
        parse_volume_path(text)
    assert_one_line_error(error, shown(text), fragment)


@pytest.mark.parametrize("value", [None, 42, b"/Volumes/main/s/v"])
def test_non_string_volume_paths_are_refused(value: object) -> None:
    with pytest.raises(InvalidName) as error:
        parse_volume_path(value)  # type: ignore[arg-type]
    assert_one_line_error(error, repr(value))


@pytest.mark.parametrize(
    ("relative", "expected"),
    [("", "cats"), ("1.png", "cats/1.png"), ("Big/Dog/", "cats/Big/Dog"), ("./x", "cats/x")],
)
def test_volume_path_join(relative: str, expected: str) -> None:
    base = parse_volume_path("/Volumes/main/ml/images/cats")
    assert base.join(relative) == VolumePath(base.volume, expected)


@pytest.mark.parametrize("relative", ["..", "../other", "a/../../b", "/etc/passwd", "a//b", "a\x00"])
def test_volume_path_join_refuses_escapes(relative: str) -> None:
    with pytest.raises(InvalidName):
        parse_volume_path("/Volumes/main/ml/images").join(relative)


def test_volume_path_name_is_checked_against_the_length_limit_after_lower_casing() -> None:
    try:
        path = parse_volume_path(f"/Volumes/{DOTTED_I * 200}/s/v")
    except InvalidName:
        return
    assert parse_volume_path(str(path)) == path


@pytest.mark.parametrize(
    "text", ["y" * 10_000, "a." * 5_000, "a.b." + "c" * 10_000, "/Volumes/a/b/c/" + "x/" * 5_000 + "/y"]
)
def test_a_flood_of_a_name_is_quoted_cut(text: str) -> None:
    parse = parse_volume_path if text.startswith("/Volumes/") else parse_name
    with pytest.raises(InvalidName) as error:
        parse(text)
    assert len(str(error.value)) < 1000 and "\n" not in str(error.value)


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("ma\u200din.ml.t", "U+200D"),
        ("main.ml.\u202ets", "U+202E"),
        ("main.\u00a0ml", "U+00A0"),
        ("\ufeffmain", "U+FEFF"),
    ],
)
def test_a_look_alike_of_a_name_made_of_invisible_characters_is_refused(name: str, code: str) -> None:
    with pytest.raises(InvalidName, match=re.escape(f"contains the invisible or direction-changing character {code}")):
        parse_name(name)
    assert parse_name("`café`.`数据`.t").parts == ("café", "数据", "t")  # letters of any script stay names
