"""A checkpoint's folder in a volume, reached through the catalog: the privilege check and the storage.

:func:`open_folder` checks READ VOLUME (or WRITE VOLUME) as the caller's principal before anything
is read or written, and opens the volume's write seam (:func:`~uc_jupyter.storage.writes.open_writes`)
at the volume's own root, so a checkpoint and its siblings (``keep_last``, :func:`~uc_jupyter.checkpoint.latest`)
are keys of one store. On a ``file://`` volume the walk starts at the volume's root and follows no
symlink below it.

Example:
    >>> folder = open_folder("/Volumes/main/ml/runs/a/step-100", write=True)   # doctest: +SKIP
    >>> folder.key, folder.parent_key                                             # doctest: +SKIP
    ('a/step-100', 'a')
"""

from __future__ import annotations

from dataclasses import dataclass

from uc_jupyter.catalog import Catalog, PermissionDenied, get_catalog
from uc_jupyter.catalog.rules.names import parse_volume_path
from uc_jupyter.storage.writes import VolumeWrites, open_writes

__all__ = ["CheckpointFolder", "open_folder"]


@dataclass(frozen=True)
class CheckpointFolder:
    """The folder ``path`` (``/Volumes/...``), ``key`` its path below the volume's root,
    ``writes`` the volume's storage and ``volume`` its /Volumes root."""

    path: str
    volume: str
    key: str
    writes: VolumeWrites

    @property
    def parent_key(self) -> str:
        """The key of the folder that holds this one ("": the volume's root)."""
        return self.key.rpartition("/")[0]

    def path_of(self, key: str) -> str:
        """The /Volumes path of the volume's ``key``."""
        return f"{self.volume}/{key}" if key else self.volume

    def file(self, name: str) -> str:
        """The key of the file ``name`` in this folder."""
        return f"{self.key}/{name}"


def open_folder(
    path: str, *, write: bool, catalog: Catalog | None = None, what: str = "checkpoint", whole_volume: bool = False
) -> CheckpointFolder:
    """The folder ``path`` of a volume, after WRITE VOLUME (``write``) or READ VOLUME is checked;
    ``whole_volume``: the volume's root is a folder too (``what`` names the folder in errors).

    Raises:
        PermissionError: the principal lacks the privilege (one line naming the path and principal);
            EscapesVolume: the path leads outside its volume (through a symlink).
        InvalidName: ``path`` is not a folder inside a volume.
    """
    parsed = parse_volume_path(path)
    volume = "/Volumes/" + "/".join(parsed.volume.parts)
    if not parsed.relative and not whole_volume:
        raise ValueError(
            f"cannot use {volume} itself as a {what} folder: give a folder inside it, e.g. {volume}/run/step-100"
        )
    where = str(parsed)
    given = catalog or get_catalog()
    try:
        resolved = given.resolve_volume_path(where, write=write)
    except PermissionDenied as exc:  # its one line names the principal and the privilege
        raise PermissionError(f"cannot {'save' if write else 'load'} the {what} {where}: {exc}") from None
    root = resolved.volume.storage_location
    # stay_clean=False: a rank that saves or loads a checkpoint is about to write or read much; its
    # reads need no forked child each (a rank has gloo's threads running).
    writes = open_writes(root, resolved.storage_options, where=volume, root=root, stay_clean=False)
    return CheckpointFolder(where, volume, parsed.relative, writes)
