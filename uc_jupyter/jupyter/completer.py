"""Tab completion for ``%uc_load``: catalog, schema, table and volume names, ``/Volumes`` paths,
option names and option values. Listings go through the catalog, so a principal only sees what it
may use. A line completes where people type it: alone (``%uc_load main.ml.ir``) or assigned (``df =
%uc_load main.ml.ir``, ``x, y = %uc_load ...``), as IPython runs both (:func:`magic_part`).

Example:
    >>> complete_line("%uc_load main.ml.ir", catalog)           # doctest: +SKIP
    ['main.ml.iris']
    >>> complete_line("%uc_load /Volumes/main/ml/im", catalog)  # doctest: +SKIP
    ['/Volumes/main/ml/images/']
    >>> magic_part("df = %uc_load main.ml.ir", "%uc_load")
    '%uc_load main.ml.ir'
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from uc_jupyter.catalog import CatalogError

if TYPE_CHECKING:
    from uc_jupyter.catalog import Catalog, ResolvedVolumePath

__all__ = ["complete_line", "given_source", "magic_part"]


def magic_part(line: str, magic: str) -> str | None:
    """The text of ``line`` from ``magic`` on when the line runs that line magic, alone or as the
    value of an assignment (``x = %magic``, ``x, y = %magic``: IPython runs those too); else None.

    Example:
        >>> lines = ("  %uc_load t", "x, y=%uc_load t", "x == %uc_load t", "print(1)")
        >>> [magic_part(line, "%uc_load") for line in lines]
        ['%uc_load t', '%uc_load t', None, None]
    """
    text = line.lstrip()
    if text.startswith(magic + " "):
        return text
    target, equals, value = text.partition("=")
    value = value.lstrip()
    if not equals or not value.startswith(magic + " ") or not target.strip():
        return None
    # An assignment, not a comparison (==, !=, <=, >=) or an augmented one (+=, ...); its target a name,
    # an attribute, an item or several of those, never a string or a comment.
    if target.rstrip()[-1] in "=!<>+-*/%&|^@:" or any(c in target for c in "#'\""):
        return None
    return value


def given_source(line: str) -> str | None:
    """The source a ``%uc_load`` line already names (its first word that is no option), if any,
    before the word being typed.

    Example:
        >>> given_source("%uc_load /Volumes/main/ml/images --la"), given_source("%uc_load main.ml.ir")
        ('/Volumes/main/ml/images', None)
    """
    words = line.split(" ")[1:-1]
    return next((w for w in words if w and not w.startswith("-")), None)


def complete_line(
    line: str,
    catalog: Catalog,
    *,
    default_catalog: str = "main",
    options: Sequence[str] = (),
    values: Mapping[str, Sequence[str]] | None = None,
) -> list[str]:
    """Completions of the last word of ``line`` (the text before the cursor), each a whole word."""
    words = line.split(" ")
    word = words[-1]
    previous = words[-2] if len(words) >= 2 else ""
    if values and previous in values:
        return sorted(v for v in values[previous] if v.startswith(word))
    if word.startswith("-"):
        return sorted(o for o in options if o.startswith(word))
    if given_source(line) is not None and not previous.startswith("-"):
        return []  # the source is already given
    with contextlib.suppress(CatalogError, OSError, ValueError):
        if word.startswith("/"):
            return _volume_paths(word, catalog)
        return _dotted(word, catalog, default_catalog)
    return []


def _dotted(word: str, catalog: Catalog, default_catalog: str) -> list[str]:
    parts = word.split(".")
    found: list[str] = []
    if len(parts) == 1:
        found += [f"{c.name}." for c in catalog.list_catalogs()]
        found += _quiet(lambda: [f"{s.name}." for s in catalog.list_schemas(default_catalog)])
    elif len(parts) == 2:
        found += _quiet(lambda: [f"{parts[0]}.{s.name}." for s in catalog.list_schemas(parts[0])])
        found += _quiet(lambda: [f"{parts[0]}.{t.name}" for t in catalog.list_tables(f"{default_catalog}.{parts[0]}")])
    elif len(parts) == 3:
        found += [f"{parts[0]}.{parts[1]}.{t.name}" for t in catalog.list_tables(f"{parts[0]}.{parts[1]}")]
    return sorted(name for name in set(found) if name.startswith(word))


def _volume_paths(word: str, catalog: Catalog) -> list[str]:
    root = "/Volumes/"
    if len(word) < len(root):
        return [root] if root.startswith(word) else []
    if not word.startswith(root):
        return []
    parts = word[len(root) :].split("/")
    if len(parts) == 1:
        names: Iterable[str] = (f"{root}{c.name}/" for c in catalog.list_catalogs())
    elif len(parts) == 2:
        names = (f"{root}{parts[0]}/{s.name}/" for s in catalog.list_schemas(parts[0]))
    elif len(parts) == 3:
        names = (f"{root}{parts[0]}/{parts[1]}/{v.name}/" for v in catalog.list_volumes(f"{parts[0]}.{parts[1]}"))
    else:
        folder = word.rsplit("/", 1)[0]
        names = [
            f"{folder}/{name}" + ("/" if is_folder else "")
            for name, is_folder in _entries(catalog.resolve_volume_path(folder))
            if not name.startswith(".")  # hidden files are skipped by the datasets too
        ]
    return sorted(n for n in names if n.startswith(word))


def _entries(resolved: ResolvedVolumePath) -> list[tuple[str, bool]]:
    """``(name, is a folder)`` of each entry of the folder resolved. A local volume's folder is
    walked to from the volume's root following no symlink (:class:`LocalVolume`): one swapped in
    since the resolve checked the path is refused, not listed, and symlinks inside are not offered
    (the datasets do not follow them). Other volumes are listed through fsspec."""
    from uc_jupyter.storage.local_volume import LocalVolume
    from uc_jupyter.storage.urls import is_local

    if is_local(resolved.url):
        volume = LocalVolume.of(resolved)
        files, _ = volume.entries(recursive=False)
        return [(relative, False) for relative, _, _ in files] + [(name, True) for name in volume.sub_folders()]
    return [
        (str(entry["name"]).rstrip("/").rsplit("/", 1)[-1], entry.get("type") == "directory")
        for entry in resolved.fs.ls(resolved.path, detail=True)
    ]


def _quiet(listing: Callable[[], list[str]]) -> list[str]:
    """A listing that may legitimately fail (the prefix is not a catalog, or not visible)."""
    try:
        return listing()
    except (CatalogError, ValueError):
        return []
