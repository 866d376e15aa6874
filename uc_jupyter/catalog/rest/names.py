"""Our names as the Unity Catalog REST API spells them: parts, path segments, bodies. Pure: no I/O.

Our grammar (:mod:`~uc_jupyter.catalog.rules.names`) validates a name first (letters, digits, ``_``, ``-``);
each part is checked once more for what would let it reach another route (``.`` separates parts in
``{full_name}``, ``/`` path segments), should the grammar ever widen, and segments are percent-encoded.

Example:
    >>> parts("main.`feature-store`", 2)
    ('main', 'feature-store')
    >>> name_path("Main.ml.iris", 3)
    'main.ml.iris'
    >>> compact(name="main", comment=None)
    {'name': 'main'}
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from uc_jupyter.catalog.rules.names import SecurableName, parse_name

__all__ = ["compact", "name_path", "parts", "quoted", "wire_parts"]


def wire_parts(parsed: SecurableName, text: str) -> tuple[str, ...]:
    """The parts of ``parsed``; ValueError (one line) for a part a UC server cannot name."""
    for part in parsed.parts:
        if "." in part or "/" in part:
            raise ValueError(
                f"invalid name {text[:300]!r}: a Unity Catalog server cannot name the part {part[:64]!r} ('.' or '/')"
            )
    return parsed.parts


def parts(name: str, levels: int) -> tuple[str, ...]:
    """The wire parts of ``name``, which must have ``levels`` parts (case kept as parse_name gives it)."""
    return wire_parts(parse_name(name, levels=(levels,)), name)


def quoted(text: str) -> str:
    """``text`` as one path segment (dots kept: they separate a full name's parts)."""
    return quote(text, safe=".")


def name_path(name: str, levels: int) -> str:
    """The ``{full_name}`` path segment of ``name``."""
    return quoted(".".join(parts(name, levels)))


def compact(**fields: Any) -> dict[str, Any]:
    """A request body without the fields that are None (UC's clients leave unset fields out)."""
    return {k: v for k, v in fields.items() if v is not None}
