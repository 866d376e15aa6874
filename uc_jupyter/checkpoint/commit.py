"""Commits of checkpoints in a volume: the marker, :func:`latest`, and ``keep_last``'s pruning.

A checkpoint is committed when its folder holds ``_COMMITTED`` (:mod:`uc_jupyter.checkpoint.layout`),
written by the coordinator after ``.metadata``, which comes after every rank's data files. Checkpoints
are the folders right inside a run folder (``/Volumes/c/s/v/run/step-100``); the newest one is the one
whose marker says it was committed last.

Clean-up runs only after the writer's own commit. Every save removes the leftovers of sibling saves
that were killed (``kill -9`` of their coordinator): folders that hold our writer's in-progress
marker ``_SAVING`` and no commit marker, whose marker's stamp names a process of this machine that
is gone (:func:`uc_jupyter.processes.stamp_alive`), and whose files are all older than the new
checkpoint's save began. Pruning (``UCVolumeWriter(..., keep_last=N)``) also removes the committed
siblings beyond the newest ``N`` (their marker first, so a reader never finds a marker whose files
are going), and unfinished saves whose coordinator cannot be judged (another machine's, or a marker
without a stamp) on the same age rule. A save whose coordinator lives is never touched, however
old its files. A folder torch's own writer filled, or whose marker does not parse, is never
touched; nor is any sibling when the checkpoint lies right inside the volume's root (``keep_last``
is refused there). Only a checkpoint's own files are removed (data files, ``.metadata``, the
markers, and on ``file://`` the temporaries of files a killed save was writing): anything else a
user put in those folders stays. A clean-up that fails after the commit is one warning: the
checkpoint is saved.

Example:
    >>> latest("/Volumes/main/ml/runs/resnet")                                   # doctest: +SKIP
    '/Volumes/main/ml/runs/resnet/step-300'
"""

from __future__ import annotations

import time
import warnings
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

from uc_jupyter.catalog import Catalog
from uc_jupyter.checkpoint.folder import CheckpointFolder, open_folder
from uc_jupyter.checkpoint.layout import (
    MARKER,
    METADATA,
    SAVING,
    Marker,
    Saving,
    commit_marker,
    is_data_file,
    read_marker,
    read_saving,
)
from uc_jupyter.errors import UcJupyterWarning
from uc_jupyter.processes import stamp_alive
from uc_jupyter.storage.keys import TEMPORARY, Listed, is_addressable
from uc_jupyter.version import __version__

__all__ = ["check_keep_last", "commit", "committed", "latest", "resume_point"]


def latest(path: str, *, catalog: Catalog | None = None) -> str | None:
    """The /Volumes path of the newest committed checkpoint right inside the folder ``path`` (newest by
    the commit time its marker records, which the coordinator's clock wrote), or None when there is none.
    Folders whose save did not finish (no marker), and committed ones missing a file their marker names
    (deleted, or cut short, since), are never returned. Needs READ VOLUME.

    Example:
        >>> dcp.load(state, storage_reader=UCVolumeReader(latest("/Volumes/main/ml/runs/a")))  # doctest: +SKIP
    """
    run = open_folder(path, write=False, catalog=catalog, what="checkpoint run", whole_volume=True)
    return _newest(run)


def resume_point(path: str, *, catalog: Catalog | None = None) -> tuple[str | None, bool]:
    """The checkpoint a resume from ``path`` continues from, and whether it is ``path`` itself: ``path``
    when it is a committed checkpoint (``.../run/step-300`` given for its run folder), else
    :func:`latest` of it (None: a run with no checkpoint yet). Needs READ VOLUME.

    Raises:
        ValueError: ``path`` is a checkpoint folder whose save did not finish (one line), or its marker
            is not one.

    Example:
        >>> resume_point("/Volumes/main/ml/runs/a/step-300")                  # doctest: +SKIP
        ('/Volumes/main/ml/runs/a/step-300', True)
    """
    run = open_folder(path, write=False, catalog=catalog, what="checkpoint run", whole_volume=True)
    if not run.key:
        return _newest(run), False
    try:
        read_marker(run.writes.read_bytes(run.file(MARKER)), run.path)
        return run.path, True
    except FileNotFoundError:
        pass
    newest = _newest(run)
    if newest is None:
        own = [e for e in run.writes.listing(run.key) if e.key.count("/") == run.key.count("/") + 1]
        if any(_ours(_name(e.key)) for e in own):
            raise ValueError(
                f"{run.path} is a checkpoint whose save did not finish (no {MARKER}): resume from its run "
                f"folder {run.path_of(run.parent_key)} (its newest committed checkpoint) instead"
            )
    return newest, False


def _newest(run: CheckpointFolder) -> str | None:
    """The newest committed checkpoint in ``run`` whose every file is there as its marker records it
    (a file deleted or cut short since the commit makes it one a load would fail on: skipped)."""
    listed = run.writes.listing(run.key)
    sizes = {entry.key: entry.size for entry in listed}
    found = {
        child: marker
        for child, marker in _markers(run, run.key, listed).items()
        if all(sizes.get(f"{child}/{name}") == size for name, size in marker.files.items())
    }
    if not found:
        return None
    newest = max(found, key=lambda key: (found[key].committed_at, key))
    return run.path_of(newest)


def committed(folder: CheckpointFolder, parent: str) -> dict[str, Marker]:
    """The committed checkpoints right inside ``parent`` (a key of the volume): {folder key: marker}."""
    listed = folder.writes.listing(parent)
    return _markers(folder, parent, listed)


def commit(folder: CheckpointFolder, files: dict[str, int], *, keep_last: int | None, save_began: float) -> list[str]:
    """Write ``folder``'s marker naming ``files`` (name: size); then remove the checkpoint files of an
    earlier attempt in that folder that this one does not name, and its in-progress marker, and with
    ``keep_last`` prune its siblings (see the module's docstring). The /Volumes paths of the sibling
    folders removed from. Once the marker is written the checkpoint is saved: a clean-up that fails
    after it is one warning, never an error of the save. One listing, the sibling markers' reads and
    at most three deletes (doomed markers first) beyond the marker itself."""
    now = time.time()
    folder.writes.put_bytes(folder.file(MARKER), commit_marker(files, committed_at=now, version=__version__))
    try:
        return _clean_up(folder, files, committed_at=now, keep_last=keep_last, save_began=save_began)
    except Exception as exc:  # whatever the storage raised: the checkpoint is committed, its save succeeded
        reason = " ".join(f"{type(exc).__name__}: {exc}".split())
        warnings.warn(
            f"{folder.path} is committed, but removing older checkpoint files failed ({reason}); "
            "they stay until a later save with keep_last removes them, or delete them yourself",
            UcJupyterWarning,
            stacklevel=2,
        )
        return []


def check_keep_last(folder: CheckpointFolder, keep_last: int | None) -> None:
    """ValueError in one line when ``keep_last`` would make every folder of the volume a sibling to prune."""
    if keep_last is not None and not folder.parent_key:
        raise ValueError(
            f"keep_last={keep_last}: {folder.path} lies right inside the volume {folder.volume}, so every folder "
            f"of the volume would be a sibling to prune; save into a run folder, e.g. {folder.path_of('run')}/step-100"
        )


def _clean_up(
    folder: CheckpointFolder, files: dict[str, int], *, committed_at: float, keep_last: int | None, save_began: float
) -> list[str]:
    """What :func:`commit` removes once the marker is written."""
    check_keep_last(folder, keep_last)
    parent = folder.parent_key
    siblings = bool(parent)  # right inside the volume's root, every folder of the volume would be one
    listed = folder.writes.listing(parent if siblings else folder.key, temporaries=True)
    by_folder: dict[str, list[Listed]] = defaultdict(list)
    for entry in listed:
        child = _child_folder(parent, entry.key) if siblings else folder.key
        if (
            child is not None
            and entry.key.count("/") == child.count("/") + 1
            and _ours(_name(entry.key))
            and is_addressable(entry.key)  # a name the storage cannot be asked about (a backslash): not ours
        ):
            by_folder[child].append(entry)
    own = by_folder.pop(folder.key, [])
    stale = [
        e.key
        for e in own
        if _name(e.key) not in files
        and _name(e.key) != MARKER
        and (not _name(e.key).startswith(TEMPORARY) or e.modified < save_began)  # not a write of this save
    ]
    doomed: list[str] = []
    markers: dict[str, Marker] = {}
    if keep_last is not None:
        markers = _markers(folder, parent, [e for entries in by_folder.values() for e in entries])
        markers[folder.key] = Marker(committed_at, __version__, dict(files))
        newest_first = sorted(markers, key=lambda key: (markers[key].committed_at, key), reverse=True)
        doomed = [key for key in newest_first[keep_last:] if key != folder.key]
    # An unfinished save's leftovers: only in a folder our own writer marked in progress (its marker
    # parses), with no commit marker at all (one that does not parse is someone else's: left alone),
    # and last written before this save began; then by who wrote it (see the module's docstring).
    unfinished = [
        key
        for key, entries in by_folder.items()
        if key not in markers
        and not any(_name(e.key) == MARKER for e in entries)
        and any(_name(e.key) == SAVING for e in entries)
        and all(e.modified < save_began for e in entries)
    ]
    leftovers = [key for key in unfinished if _given_up(_in_progress(folder, key), judge_unknown=keep_last is not None)]
    folder.writes.delete([f"{key}/{MARKER}" for key in doomed])  # first: no reader takes them for checkpoints now
    going = [e.key for key in doomed + leftovers for e in by_folder[key] if _name(e.key) not in (MARKER, SAVING)]
    folder.writes.delete(stale + going)
    # Last: a folder whose clean-up stopped half-way keeps the marker that lets a later save finish it.
    folder.writes.delete([e.key for key in doomed + leftovers for e in by_folder[key] if _name(e.key) == SAVING])
    return [folder.path_of(key) for key in sorted(doomed + leftovers)]


def _in_progress(folder: CheckpointFolder, key: str) -> Saving | None:
    """The in-progress marker of our writer in the folder ``key`` (absent or not ours: None)."""
    try:
        return read_saving(folder.writes.read_bytes(f"{key}/{SAVING}"), folder.path_of(key))
    except (FileNotFoundError, ValueError):
        return None


def _given_up(saving: Saving | None, *, judge_unknown: bool) -> bool:
    """Whether the unfinished save that left ``saving`` will never finish: its coordinator is known to
    be gone, or (``judge_unknown``: keep_last's pruning) it cannot be judged from here; never while it lives."""
    if saving is None:
        return False
    alive = stamp_alive(saving.writer)
    return alive is False or (alive is None and judge_unknown)


def _markers(folder: CheckpointFolder, parent: str, listed: list[Listed]) -> dict[str, Marker]:
    """{folder key: its marker} of the folders right inside ``parent`` whose markers ``listed`` holds
    (read at once: one request each)."""
    wanted = {
        child: entry.key
        for entry in listed
        if (child := _child_folder(parent, entry.key)) is not None
        and entry.key == f"{child}/{MARKER}"
        and is_addressable(entry.key)
    }

    def read(child: str) -> Marker | None:
        try:
            return read_marker(folder.writes.read_bytes(wanted[child]), folder.path_of(child))
        except (FileNotFoundError, ValueError):  # removed meanwhile, or not ours: not a checkpoint
            return None

    with ThreadPoolExecutor(max(1, min(16, len(wanted)))) as pool:
        found = dict(zip(wanted, pool.map(read, wanted), strict=True))
    return {child: marker for child, marker in found.items() if marker is not None}


def _child_folder(parent: str, key: str) -> str | None:
    """The folder right inside ``parent`` that holds ``key`` (None: ``key`` is not in one)."""
    below = key[len(parent) + 1 :] if parent else key
    if parent and not key.startswith(parent + "/"):
        return None
    name, slash, _ = below.partition("/")
    if not slash:
        return None
    return f"{parent}/{name}" if parent else name


def _name(key: str) -> str:
    return key.rpartition("/")[2]


def _ours(name: str) -> bool:
    """Whether a file of that name is one a checkpoint consists of (or the temporary of one being written)."""
    if name.startswith(TEMPORARY):  # .uc-writing-<32 hex>-<name>
        name = name[len(TEMPORARY) + 33 :]
    return name in (MARKER, METADATA, SAVING) or is_data_file(name)
