"""What gets shipped to the ranks: cloudpickled payloads, with a size guard that names the culprit.

A function defined in a notebook is pickled by value together with everything it captures (closure
cells, the notebook globals it names, default arguments) and its call arguments. Capturing a dataset
or a model this way can make the payload enormous; above ``limit`` bytes :func:`pack` refuses with an
error naming the largest captured objects, and says to build them inside the function instead.

Example:
    >>> data = b"x" * 2_000
    >>> def train():
    ...     return len(data)
    >>> len(pack((train, (), {}), limit=10_000, what=train)) > 2_000
    True
    >>> try:
    ...     pack((train, (), {}), limit=1_000, what=train)
    ... except PayloadError as exc:
    ...     print(str(exc).split("; ")[1])
    the largest: data (a global, 2.0 kB)
"""

from __future__ import annotations

import linecache
import types
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import cloudpickle

from uc_jupyter.distributed.errors import PayloadError
from uc_jupyter.errors import first_line

__all__ = ["DEFAULT_LIMIT", "SourceMap", "human_bytes", "pack", "restore_sources", "source_map", "unpack"]

DEFAULT_LIMIT = 100 * 1000 * 1000  # 100 MB


def pack(obj: object, *, limit: int | None = DEFAULT_LIMIT, what: object = None) -> bytes:
    """``obj`` cloudpickled; a clear :class:`PayloadError` if it cannot be pickled or exceeds ``limit``.

    ``what`` (the function being shipped) is what the error names and looks inside for captures.
    """
    try:
        data: bytes = cloudpickle.dumps(obj)
    except Exception as exc:
        raise PayloadError(
            f"cannot send {_name(what, obj)} to the ranks: it captures something pickle cannot copy "
            f"({type(exc).__name__}: {first_line(exc)}); create that object inside the function instead"
        ) from None
    if limit is not None and len(data) > limit:
        raise PayloadError(_too_big(what, obj, len(data), limit))
    return data


def unpack(data: bytes) -> Any:
    return cloudpickle.loads(data)


def human_bytes(n: float) -> str:
    """``2.1 kB``, ``412.3 MB``: decimal units, as the limit is given."""
    for unit in ("B", "kB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    raise AssertionError("unreachable")


def _too_big(what: object, obj: object, size: int, limit: int) -> str:
    sized = []
    for label, value in _captured(what, obj):
        try:
            sized.append((len(cloudpickle.dumps(value)), label))
        except Exception:
            continue
    sized.sort(reverse=True)
    top = ", ".join(f"{label}, {human_bytes(n)})" for n, label in sized[:3])
    culprit = sized[0][1].split(" (", 1)[0] if sized else "large objects"
    return (
        f"{_name(what, obj)} and what it captures pickle to {human_bytes(size)}, over the {human_bytes(limit)} limit; "
        f"the largest: {top or 'unknown'}; build {culprit} inside the function (read the dataset or load the model "
        "there) instead of capturing it, or raise the limit"
    )


def _captured(what: object, obj: object) -> Iterator[tuple[str, object]]:
    """(label, object) for what a shipped function captures and for the call's arguments."""
    fn = what if isinstance(what, types.FunctionType) else None
    if fn is not None:
        code = fn.__code__
        for name, cell in zip(code.co_freevars, fn.__closure__ or (), strict=False):
            try:
                yield f"{name} (a closure variable", cell.cell_contents
            except ValueError:  # an empty cell
                continue
        for name in _global_names(code):
            if name in fn.__globals__ and not isinstance(fn.__globals__[name], types.ModuleType):
                yield f"{name} (a global", fn.__globals__[name]
        for i, default in enumerate(fn.__defaults__ or ()):
            yield f"default argument {i} (a default", default
        for name, default in (fn.__kwdefaults__ or {}).items():
            yield f"{name} (a default", default
    if isinstance(obj, tuple) and len(obj) >= 3 and isinstance(obj[1], tuple) and isinstance(obj[2], dict):
        for i, arg in enumerate(obj[1]):
            yield f"argument {i} (an argument", arg
        for name, arg in obj[2].items():
            yield f"{name} (a keyword argument", arg


def _global_names(code: types.CodeType) -> Iterator[str]:
    yield from code.co_names
    for const in code.co_consts:  # nested functions and comprehensions
        if isinstance(const, types.CodeType):
            yield from _global_names(const)


def _name(what: object, obj: object) -> str:
    target = what if what is not None else obj
    name = getattr(target, "__name__", None)
    return str(name) if name else f"the {type(target).__name__}"


# ---------------------------------------------------------------- tracebacks that show the user's code
@dataclass(frozen=True)
class SourceMap:
    """Where shipped code came from. cloudpickle renames every file of code it pickles by value to
    ``<dynamic-code>``; with this the rank puts the names back and knows the source lines (a notebook
    cell's are only in the kernel's linecache), so remote tracebacks show the user's code."""

    files: dict[tuple[str, int], str]  # (code name, first line) -> file name
    lines: dict[str, list[str]]  # file name -> its source lines


def source_map(fn: object) -> SourceMap:
    """The files and source lines of ``fn``'s code, of code nested in it, and of the functions of its
    own module that it calls by name (those are pickled by value with it)."""
    files: dict[tuple[str, int], str] = {}
    for code in _codes(fn):
        files[(code.co_name, code.co_firstlineno)] = code.co_filename
    lines = {name: linecache.getlines(name) for name in set(files.values())}
    return SourceMap(files, {name: text for name, text in lines.items() if text})


def restore_sources(fn: object, sources: SourceMap) -> None:
    """On the rank: give ``fn`` (and what :func:`source_map` walked) its file names back."""
    for name, text in sources.lines.items():
        linecache.cache[name] = (sum(map(len, text)), None, text, name)
    for function in _functions(fn):
        function.__code__ = _renamed(function.__code__, sources.files)


def _renamed(code: types.CodeType, files: dict[tuple[str, int], str]) -> types.CodeType:
    consts = tuple(_renamed(c, files) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    filename = files.get((code.co_name, code.co_firstlineno), code.co_filename)
    return code.replace(co_filename=filename, co_consts=consts)


def _codes(fn: object) -> Iterator[types.CodeType]:
    def nested(code: types.CodeType) -> Iterator[types.CodeType]:
        yield code
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                yield from nested(const)

    for function in _functions(fn):
        yield from nested(function.__code__)


def _functions(fn: object, depth: int = 2) -> Iterator[types.FunctionType]:
    """``fn`` and, ``depth`` levels down, the same-module functions it names or closes over."""
    seen: set[int] = set()
    todo = [(fn, 0)]
    while todo:
        current, level = todo.pop()
        if not isinstance(current, types.FunctionType) or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        if level == depth:
            continue
        cells = [c.cell_contents for c in current.__closure__ or () if _filled(c)]
        named = [current.__globals__.get(n) for n in _global_names(current.__code__)]
        for other in (*cells, *named):
            if isinstance(other, types.FunctionType) and other.__module__ == current.__module__:
                todo.append((other, level + 1))


def _filled(cell: types.CellType) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True
