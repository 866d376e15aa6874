"""The cache's folder: where objects live, its format and marker, its modes, and what is not a cache.

``FileCache(root)`` empties a cache of an older format, so it must never take someone else's folder
for one: a folder is a cache only when it is new or empty, when it carries the cache marker
(:func:`uc_jupyter.catalog.rules.reserved.mark`, kind ``"cache"``), or when it is a cache of an older
format of ours (a ``FORMAT`` file and nothing but the names our caches use). Anything else is
refused with :class:`~uc_jupyter.data.cache.errors.NotACacheFolder`, and even in a cache only those
names are ever removed. Everything in the folder is private to the OS user: folders 0700, files
0600; a cache found with wider modes is tightened when opened. Where one of our folders or the index
is found to be a symbolic link (or a file), it is replaced, never followed.

Every opening runs under :func:`locked` (an exclusive ``flock`` on the folder itself, so no lock
file has to be made before the folder is known to be a cache).

Example:
    >>> import tempfile, os, pathlib
    >>> root = pathlib.Path(tempfile.mkdtemp()) / "cache"
    >>> with locked(root):
    ...     prepare(root)
    >>> sorted(os.listdir(root))
    ['.uc_jupyter', 'FORMAT', 'objects', 'stream', 'tmp']
    >>> oct(root.stat().st_mode & 0o777)
    '0o700'
    >>> object_path(str(root), "ab" * 32, "x.png") == f"{root}/objects/ab/{'ab' * 32}.png"
    True
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

from uc_jupyter.catalog.rules.reserved import MARKER, inside_marked_folder, mark
from uc_jupyter.data.cache.errors import NotACacheFolder

__all__ = [
    "FILE_MODE",
    "FOLDERS",
    "FOLDER_MODE",
    "FORMAT",
    "INDEX",
    "KIND",
    "locked",
    "object_path",
    "prepare",
    "relative",
    "remove",
    "remove_index",
    "scan_objects",
    "suffix",
    "write_private",
]

FORMAT = "7"  # bump when the layout or index changes: an older cache is emptied, not misread
KIND = "cache"  # the marker's content
FOLDERS = ("objects", "tmp", "stream")
INDEX = "index.db"
FOLDER_MODE = 0o700
FILE_MODE = 0o600
_INDEX_FILES = (INDEX, f"{INDEX}-wal", f"{INDEX}-shm", f"{INDEX}-journal")
_OLD_FOLDERS = ("pins", "locks")  # of earlier formats
# Every name a cache of ours has held at its top level, in any format; temporary files of an
# interrupted write are FORMAT.<pid> and .uc_jupyter.<pid>.
_OURS = frozenset({"FORMAT", "format.lock", MARKER, *_INDEX_FILES, *FOLDERS, *_OLD_FOLDERS})
_SHOWN = 3  # names quoted when a folder is refused
_HEX = frozenset("0123456789abcdef")
_SUFFIXES: dict[str, str] = {}  # extension seen -> the suffix kept (see suffix)
_SUFFIXES_KEPT = 4096
_PRIVATE_FILE = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC


# ------------------------------------------------------------------------------------ object paths
def object_path(base: str, key: str, name: str) -> str:
    """Where the object of ``key`` lies (``name``, the remote file's base name, gives its extension).
    String paths: on the hit path pathlib costs more than the system calls."""
    return f"{base}/objects/{key[:2]}/{key}{suffix(name)}"


def relative(base: str, path: str) -> str:
    """An object's path below ``objects/``, as the index records it."""
    return path[len(base) + len("/objects/") :]


def suffix(name: str) -> str:
    """The extension of ``name`` (``.png``), kept on cached files for tools that look at it; like
    ``os.path.splitext`` (leading dots start no extension). It runs per hit: the verdict on each
    distinct extension is remembered."""
    dot = name.rfind(".")
    if dot <= 0 or name[dot - 1] == ".":  # no extension, or dots before it: the rare, careful path
        return _checked_suffix(name, dot)
    tail = name[dot:]
    found = _SUFFIXES.get(tail)
    if found is None:
        found = _checked_suffix(name, dot)
        if len(_SUFFIXES) < _SUFFIXES_KEPT:
            _SUFFIXES[tail] = found
    return found


def _checked_suffix(name: str, dot: int) -> str:
    if dot <= 0 or len(name) - dot > 16 or not name[:dot].strip("."):
        return ""
    found = name[dot:]
    return found if len(found) > 1 and found[1:].isalnum() else ""


# ------------------------------------------------------------------------------------ the folder
@contextlib.contextmanager
def locked(root: Path) -> Iterator[None]:
    """Hold an exclusive lock on the folder ``root`` (made 0700 when missing) while opening it."""
    try:
        root.mkdir(mode=FOLDER_MODE, parents=True, exist_ok=True)
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except (FileExistsError, NotADirectoryError):
        if not os.path.lexists(root):
            raise
        raise NotACacheFolder(f"cache_dir {root} is a file, not a folder; give a folder for the cache") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def prepare(root: Path) -> None:
    """Make ``root`` a cache folder of this format (under :func:`locked`): refuse a folder that is
    not a cache, empty a cache of another format, mark it, make its folders, tighten its modes.

    Raises:
        NotACacheFolder: ``root`` holds files that are not a cache's, is uc_jupyter's folder of
            another kind, or lies inside another cache.
    """
    kind = _read(root / MARKER)
    if kind is None:
        _refuse_unless_ours(root)
        mark(root, KIND)
    elif kind != KIND:
        raise NotACacheFolder(
            f"cache_dir {root} is uc_jupyter's {kind or 'own'} folder, not a cache; give another folder "
            "(or none: the default is the cache folder of UC_JUPYTER_HOME)"
        )
    if _read(root / "FORMAT") != FORMAT:
        _empty(root)
        write_private(root / "FORMAT", FORMAT)
    for sub in FOLDERS:
        _folder(root / sub)
    _tighten(root)


def remove(path: str) -> None:
    """Remove a file, link or folder tree; a symlink is removed, never followed."""
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    except FileNotFoundError:
        pass


def remove_index(root: Path) -> None:
    """Delete the index with its journal files (a ``-wal`` left beside a new index would be replayed
    into it)."""
    for name in _INDEX_FILES:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(root / name)


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` (0600) through a temporary file and a rename."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}")
    fd = os.open(tmp, _PRIVATE_FILE, FILE_MODE)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)
    os.replace(tmp, path)


def scan_objects(base: str) -> Iterator[tuple[str, str, os.stat_result]]:
    """Every object under ``objects/`` as ``(key, path below objects/, lstat)``. Anything else there
    (a symlink, a stray file, a name that is not a key) is removed: ``objects/`` holds only what the
    cache put there, and nothing the index does not know may linger on disk."""
    for prefix in os.scandir(f"{base}/objects"):
        if not prefix.is_dir(follow_symlinks=False) or len(prefix.name) != 2 or not _hex(prefix.name):
            remove(prefix.path)
            continue
        for entry in os.scandir(prefix.path):
            key, tail = entry.name[:64], entry.name[64:]
            found = entry.stat(follow_symlinks=False)
            if (
                stat.S_ISREG(found.st_mode)
                and len(key) == 64
                and _hex(key)
                and key.startswith(prefix.name)
                and (not tail or suffix("x" + tail) == tail)
            ):
                yield key, f"{prefix.name}/{entry.name}", found
            else:
                remove(entry.path)


# ------------------------------------------------------------------------------------ internals
def _refuse_unless_ours(root: Path) -> None:
    """A folder without the marker: new, empty, or an older cache of ours; else refused."""
    names = sorted(os.listdir(root))
    if not names:
        inside = inside_marked_folder(os.path.realpath(root.parent))
        if inside is not None and inside[0] == KIND:
            raise NotACacheFolder(f"cache_dir {root} lies inside the cache {inside[1]}; give a folder outside it")
        return
    if all(_ours(name) for name in names):
        old_format = _read(root / "FORMAT")
        if old_format is not None and old_format.isdigit():
            return  # a cache of ours, of any format
        if all(_transient(name) for name in names):
            return  # one whose making was interrupted
    shown = ", ".join(names[:_SHOWN]) + (f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else "")
    raise NotACacheFolder(
        f"cache_dir {root} is not a cache: it holds {shown} and no {MARKER} marker, and a cache empties "
        "what it finds; give a new or empty folder (or none: the default is UC_JUPYTER_HOME's cache)"
    )


def _ours(name: str) -> bool:
    return name in _OURS or _transient(name)


def _transient(name: str) -> bool:
    """What making a cache leaves for a moment: a temporary marker or format file, a lock file."""
    return name == "format.lock" or name.startswith(("FORMAT.", f"{MARKER}."))


def _empty(root: Path) -> None:
    """Remove a cache of another format: only the names our caches use (the marker stays)."""
    for name in os.listdir(root):
        if _ours(name) and name != MARKER:
            remove(str(root / name))


def _folder(path: Path) -> None:
    """Our folder at ``path``: a real folder, 0700 (a symlink or file in its place is replaced)."""
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        os.mkdir(path, FOLDER_MODE)
        return
    if not stat.S_ISDIR(found.st_mode):
        os.unlink(path)
        os.mkdir(path, FOLDER_MODE)


def _tighten(root: Path) -> None:
    """Folders 0700 and files 0600. The folder and its top-level entries are checked on every
    opening (a few ``lstat``); the whole tree only when one of them was wider (a cache made by an
    earlier version, or opened up by hand): below a 0700 folder nobody else can reach a file."""
    wide = _tighten_one(str(root))
    with os.scandir(root) as entries:
        for entry in entries:
            wide |= _tighten_one(entry.path)
    if not wide:
        return
    for sub in FOLDERS:
        for folder, dirs, files in os.walk(root / sub):
            for name in (*dirs, *files):
                _tighten_one(os.path.join(folder, name))


def _tighten_one(path: str) -> bool:
    """Narrow the mode of the folder or regular file at ``path`` (never through a symlink); True
    when it was wider."""
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return False
    if stat.S_ISDIR(found.st_mode):
        wanted = FOLDER_MODE
    elif stat.S_ISREG(found.st_mode):
        wanted = FILE_MODE
    else:
        return False
    if stat.S_IMODE(found.st_mode) == wanted:
        return False
    # Through a descriptor opened without following links: a symlink swapped in meanwhile is refused.
    with contextlib.suppress(FileNotFoundError, OSError):
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            os.fchmod(fd, wanted)
        finally:
            os.close(fd)
    return bool(stat.S_IMODE(found.st_mode) & 0o077)


def _read(path: Path) -> str | None:
    """A small marker file's text, or None when it is missing (or not a regular file)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, 256).decode("utf-8", "replace").strip()
    finally:
        os.close(fd)


def _hex(text: str) -> bool:
    return _HEX.issuperset(text)
