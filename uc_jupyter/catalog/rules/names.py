"""The grammar of Unity Catalog names and volume paths: pure functions, no I/O.

Securable names have one to three dot-separated parts (``catalog``, ``catalog.schema``,
``catalog.schema.object``). A part is either a plain identifier (letters, digits, ``_``) or a
backquoted one (```my-catalog```, a doubled backquote stands for one). Like Unity Catalog, names
are case-insensitive and stored lower-case, and a part may not contain a period, a space, a
forward slash, a control character or an invisible or direction-changing one (a zero-width joiner,
a right-to-left override, a no-break space), and may not exceed 255 characters.

Volume paths look like ``/Volumes/<catalog>/<schema>/<volume>[/<relative path>]``; the three name
parts follow the rules above, the relative part keeps its case and may not climb out of the volume.

Example:
    >>> parse_name("Main.`ML-data`.Iris")
    SecurableName(parts=('main', 'ml-data', 'iris'))
    >>> parse_volume_path("/Volumes/main/ml/images/cats/1.png").relative
    'cats/1.png'
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

__all__ = [
    "INVISIBLE_CATEGORIES",
    "MAX_PART_LENGTH",
    "SHOWN_CHARACTERS",
    "InvalidName",
    "SecurableName",
    "VolumePath",
    "parse_name",
    "parse_volume_path",
    "quote_part",
]

MAX_PART_LENGTH = 255
VOLUMES_ROOT = "/Volumes"
_PLAIN_PART = re.compile(r"[A-Za-z0-9_]+")
_LEVEL_NAMES = ("catalog", "schema", "object")


class InvalidName(ValueError):
    """A malformed securable name or volume path; the message names the bad part."""


@dataclass(frozen=True)
class SecurableName:
    """A validated, lower-cased one- to three-part name.

    Example:
        >>> n = parse_name("main.ml.iris")
        >>> (n.catalog, n.schema, n.object, str(n))
        ('main', 'ml', 'iris', 'main.ml.iris')
    """

    parts: tuple[str, ...]

    @property
    def catalog(self) -> str:
        return self.parts[0]

    @property
    def schema(self) -> str | None:
        return self.parts[1] if len(self.parts) > 1 else None

    @property
    def object(self) -> str | None:
        return self.parts[2] if len(self.parts) > 2 else None

    @property
    def parent(self) -> SecurableName | None:
        """The enclosing name (``main.ml`` for ``main.ml.iris``), None for a catalog."""
        return SecurableName(self.parts[:-1]) if len(self.parts) > 1 else None

    def lineage(self) -> tuple[SecurableName, ...]:
        """This name and its ancestors, outermost first (catalog, schema, object)."""
        return tuple(SecurableName(self.parts[: i + 1]) for i in range(len(self.parts)))

    def child(self, part: str) -> SecurableName:
        """The name one level down, validated; an object (three parts) has none."""
        if len(self.parts) >= 3:
            raise InvalidName(f"invalid name {self}.{quote_part(part)}: {self} is an object and has no children")
        return parse_name(f"{self}.{quote_part(part)}", levels=(len(self.parts) + 1,))

    def __str__(self) -> str:
        return ".".join(quote_part(p) for p in self.parts)


@dataclass(frozen=True)
class VolumePath:
    """A validated ``/Volumes/<catalog>/<schema>/<volume>[/<relative>]`` path.

    ``relative`` is the POSIX path inside the volume without leading or trailing slashes ('' for
    the volume root); ``.`` segments are dropped and ``..`` is refused.

    Example:
        >>> p = parse_volume_path("/Volumes/Main/ml/images/cats/")
        >>> (str(p.volume), p.relative, str(p))
        ('main.ml.images', 'cats', '/Volumes/main/ml/images/cats')
    """

    volume: SecurableName
    relative: str = ""

    def join(self, relative: str) -> VolumePath:
        """The path ``relative`` below this one, validated like any volume path."""
        joined = f"{self}/{relative}" if relative else str(self)
        return parse_volume_path(joined)

    def __str__(self) -> str:
        base = f"{VOLUMES_ROOT}/" + "/".join(self.volume.parts)
        return f"{base}/{self.relative}" if self.relative else base


def quote_part(part: str) -> str:
    """Render one name part, backquoting it when it is not a plain identifier."""
    if _PLAIN_PART.fullmatch(part):
        return part
    return "`" + part.replace("`", "``") + "`"


def parse_name(text: str, *, levels: tuple[int, ...] = (1, 2, 3)) -> SecurableName:
    """Parse and validate a securable name with one of the allowed numbers of parts.

    Raises:
        InvalidName: naming the text and the bad part, e.g. ``invalid name 'a..b': part 2 is empty``.

    Example:
        >>> parse_name("main.ml", levels=(2,)).schema
        'ml'
        >>> parse_name("main..t")
        Traceback (most recent call last):
        uc_jupyter.catalog.rules.names.InvalidName: invalid name 'main..t': part 2 is empty
    """
    if not set(levels) <= {1, 2, 3}:
        raise ValueError(f"levels must be among 1, 2 and 3, got {levels!r}")
    if not isinstance(text, str):
        raise InvalidName(f"invalid name {_shown(text)}: expected a string like 'catalog.schema.table'")
    if text.startswith("/"):
        raise InvalidName(
            f"invalid name {_shown(text)}: that is a path; tables and schemas are named like 'catalog.schema.table'"
        )
    parts = _split_parts(text)
    for index, part in enumerate(parts):
        _check_part(text, index, part)
    if len(parts) not in levels:
        raise InvalidName(f"invalid name {_shown(text)}: expected {_describe_levels(levels)}, got {len(parts)} part(s)")
    return SecurableName(tuple(p.lower() for p in parts))


def parse_volume_path(text: str) -> VolumePath:
    """Parse and validate ``/Volumes/<catalog>/<schema>/<volume>[/<relative path>]``.

    Raises:
        InvalidName: when the path is outside /Volumes, lacks a part, or has an empty, ``..``
            or NUL-containing segment (which also refuses an absolute relative part like ``//etc``).
    """
    if not isinstance(text, str):
        raise InvalidName(f"invalid volume path {_shown(text)}: expected a string like '/Volumes/c/s/v/dir'")
    if not text.startswith(VOLUMES_ROOT + "/"):
        dotted = "/" not in text and text.count(".") == 2 and len(text) <= SHOWN_CHARACTERS
        hint = f" (the volume {text} is at /Volumes/{text.replace('.', '/')})" if dotted else ""
        raise InvalidName(
            f"invalid volume path {_shown(text)}: must start with '/Volumes/<catalog>/<schema>/<volume>'{hint}"
        )
    if "\x00" in text:
        raise InvalidName(f"invalid volume path {_shown(text)}: contains a NUL character")
    segments = text[len(VOLUMES_ROOT) + 1 :].split("/")
    if segments and segments[-1] == "":
        segments.pop()  # one trailing slash names the same folder
    if len(segments) < 3:
        raise InvalidName(
            f"invalid volume path {_shown(text)}: expected '/Volumes/<catalog>/<schema>/<volume>', "
            f"got {len(segments)} name part(s)"
        )
    for index, segment in enumerate(segments[:3]):
        _check_part(text, index, segment, what="volume path", levels=("catalog", "schema", "volume"))
    relative: list[str] = []
    for segment in segments[3:]:
        if segment == "":
            raise InvalidName(f"invalid volume path {_shown(text)}: empty segment (double slash) in the relative path")
        if segment == "..":
            raise InvalidName(f"invalid volume path {_shown(text)}: '..' may not climb out of the volume")
        if segment == ".":
            continue
        if len(segment) > MAX_PART_LENGTH:
            raise InvalidName(
                f"invalid volume path {_shown(text)}: segment {segment[:20]!r}... is longer than "
                f"{MAX_PART_LENGTH} characters"
            )
        relative.append(segment)
    volume = SecurableName(tuple(s.lower() for s in segments[:3]))
    return VolumePath(volume, "/".join(relative))


def _split_parts(text: str) -> list[str]:
    """Split on dots outside backquotes; a doubled backquote inside quotes is a literal one."""
    parts: list[str] = []
    i = 0
    while True:
        if text.startswith("`", i):
            i, part = _read_quoted(text, i)
            if i < len(text) and text[i] != ".":
                raise InvalidName(
                    f"invalid name {_shown(text)}: unexpected {text[i]!r} after the backquoted part {_shown(part)}"
                )
        else:
            end = text.find(".", i)
            end = len(text) if end == -1 else end
            part = text[i:end]
            if "`" in part:
                raise InvalidName(
                    f"invalid name {_shown(text)}: part {_shown(part)} has a stray backquote; "
                    "quote whole parts like `my-part`"
                )
            i = end
        parts.append(part)
        if i >= len(text):
            return parts
        i += 1  # the dot


def _read_quoted(text: str, start: int) -> tuple[int, str]:
    """Read a backquoted part starting at ``start``; return (index after it, its value)."""
    value: list[str] = []
    i = start + 1
    while i < len(text):
        if text[i] == "`":
            if i + 1 < len(text) and text[i + 1] == "`":
                value.append("`")
                i += 2
                continue
            return i + 1, "".join(value)
        value.append(text[i])
        i += 1
    raise InvalidName(f"invalid name {_shown(text)}: unclosed backquote")


def _check_part(
    text: str,
    index: int,
    part: str,
    *,
    what: str = "name",
    levels: tuple[str, ...] = _LEVEL_NAMES,
) -> None:
    label = f"invalid {what} {_shown(text)}: {levels[min(index, len(levels) - 1)]} part"
    if part == "":
        raise InvalidName(f"invalid {what} {_shown(text)}: part {index + 1} is empty")
    # Checked on the stored (lower-case) form: lower-casing may lengthen a part ('İ' -> 'i̇').
    if len(part.lower()) > MAX_PART_LENGTH:
        raise InvalidName(f"{label} {part[:20]!r}... is longer than {MAX_PART_LENGTH} characters")
    problem = _forbidden_character(part.lower())
    if problem:
        raise InvalidName(f"{label} {_shown(part)} contains {problem}; use letters, digits, '_' or '-'")


# Unicode categories a name may not hold: controls (C1 too), format characters (U+200B-U+200F,
# U+202A-U+202E, U+2066-U+2069, U+FEFF ...), separators other than the space, unassigned and private use.
INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Zs", "Zl", "Zp", "Cn", "Co", "Cs"})

SHOWN_CHARACTERS = 300  # of a refused name an error repeats: enough to recognise it, never a flood


def _shown(text: object) -> str:
    """``text`` as an error quotes it: its repr, cut after :data:`SHOWN_CHARACTERS` characters."""
    if isinstance(text, str) and len(text) > SHOWN_CHARACTERS:
        return f"{text[:SHOWN_CHARACTERS]!r}..."
    return repr(text)


def _forbidden_character(part: str) -> str | None:
    for ch in part:
        if ch == "\x00":
            return "a NUL character"
        if ord(ch) < 0x20 or ord(ch) == 0x7F:
            return f"the control character {ch!r}"
        if ch == " ":
            return "a space"
        if ch == ".":
            return "a period"
        if ch == "/":
            return "a forward slash"
        if unicodedata.category(ch) in INVISIBLE_CATEGORIES:
            # Zero-width joiners, direction overrides, no-break spaces: a name that looks like another
            # ("main" and "ma\u200din") would be a second catalog a reader takes for the first.
            return f"the invisible or direction-changing character U+{ord(ch):04X}"
    return None


def _describe_levels(levels: tuple[int, ...]) -> str:
    shapes = {1: "'catalog'", 2: "'catalog.schema'", 3: "'catalog.schema.object'"}
    return " or ".join(shapes[n] for n in levels)
