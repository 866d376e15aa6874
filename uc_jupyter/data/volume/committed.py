"""Reading an export folder: only the files its committed manifest names.

A folder that holds ``_uc_export.json`` at its top is a table export
(:mod:`uc_jupyter.storage.export_manifest`): its files are those the manifest names, under the
export's hidden prefix, and nothing else in the folder (an upload in progress or killed, files put
beside it). Each named file must be there with the size the manifest gives, or the listing fails
in one line: a manifest naming a missing file is not read as a smaller dataset. A folder without
a manifest (an export made before manifests, any other folder) is listed as always.

Names come from the manifest's own checks (one file name each, under the export's own prefix), and
the prefix is listed like the rest of the volume, through its storage: a local one without following
a symlink from the volume's root (a prefix or a file swapped for one is refused, or missing), an
object store's in a forked child while this process is still clean
(:func:`~uc_jupyter.storage.objects.fork_safe`). The manifest is read by its key, at most one byte
more than a manifest may hold.

Example:
    >>> resolved = get_catalog().resolve_volume_path("/Volumes/main/ml/exports/points")  # doctest: +SKIP
    >>> committed_entries(resolved, found=[("_uc_export.json", 300, None)])           # doctest: +SKIP
    [('.uc-export-20261202T030500Z-1a2b3c4d/part-00000.parquet', 812, '"9f2c..."')]
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from uc_jupyter.catalog import NotFound
from uc_jupyter.data.volume.folder import folder_storage, folder_writes
from uc_jupyter.storage.export_manifest import MANIFEST, MAX_MANIFEST_BYTES, Manifest, ManifestError

if TYPE_CHECKING:
    from uc_jupyter.catalog import ResolvedVolumePath
    from uc_jupyter.storage.reads import VolumeStorage

__all__ = ["ExportIncomplete", "ManifestError", "committed_entries", "is_export"]


class ExportIncomplete(OSError):
    """An export's manifest names a file that is missing or not the size it gives."""


def committed_entries(
    resolved: ResolvedVolumePath, found: Sequence[tuple[str, int, str | None]]
) -> list[tuple[str, int, str | None]] | None:
    """The committed files of the export folder ``resolved`` as ``(path below the folder, size,
    version)``, or None when its listing ``found`` has no manifest at its top (not an export).

    Raises:
        ManifestError: the manifest is not one an export writes (names outside its prefix, say).
        ExportIncomplete: a file it names is missing, or not the size it gives.
    """
    if not any(relative == MANIFEST for relative, _, _ in found):
        return None
    where = resolved.volume_path
    manifest = Manifest.parse(_read_manifest(resolved), where=where)
    listed = dict(_prefix_entries(resolved, manifest.prefix))
    entries: list[tuple[str, int, str | None]] = []
    for file, key in zip(manifest.files, manifest.file_keys(), strict=True):
        size, version = listed.get(file.name, (None, None))
        if size != file.size:
            state = "is missing" if size is None else f"has {size} bytes, not {file.size}"
            raise ExportIncomplete(
                f"{where}/{MANIFEST} names {key}, which {state}: make the dataset again if an export replaced "
                "it meanwhile, else export the table again"
            )
        entries.append((key, file.size, version or manifest.id))
    return entries


def is_export(resolved: ResolvedVolumePath, storage: VolumeStorage | None) -> bool:
    """Whether the folder holds an export's manifest at its top: one request for that key (a
    listing of a flat folder's top could be a million keys, and the caller wants to start on the
    first page of its own listing), one listing of the top where the storage takes no writes."""
    writes = folder_writes(resolved)
    if writes is not None:
        try:
            writes.read_range(MANIFEST, 0, 1)  # in a forked child while this process is clean (fork_safe)
        except (FileNotFoundError, PermissionError):  # absent, or refused: the folder's listing says what is wrong
            return False
        except OSError:  # there, but not readable so (a range of an empty object): its reader says what is wrong
            return True
        return True
    storage = storage or folder_storage(resolved)
    return any(r == MANIFEST for page in storage.pages(recursive=False) for r, _, _ in page.files)


def _read_manifest(resolved: ResolvedVolumePath) -> bytes:
    """The manifest's bytes, at most one past the most a manifest may hold (a larger one is refused
    by its parser, never read whole)."""
    writes = folder_writes(resolved)
    if writes is None:
        raise NotFound(f"{resolved.volume_path}/{MANIFEST} cannot be read from this storage")
    try:
        return writes.read_range(MANIFEST, 0, MAX_MANIFEST_BYTES + 1)  # in a clean child (fork_safe)
    except FileNotFoundError:
        raise NotFound(f"{resolved.volume_path}/{MANIFEST} was listed but is gone: list the folder again") from None


def _prefix_entries(resolved: ResolvedVolumePath, prefix: str) -> Iterator[tuple[str, tuple[int, str | None]]]:
    """``(file name, (size, version))`` of the regular files right under the export's prefix."""
    try:
        storage = folder_storage(resolved, prefix)
        entries = [entry for page in storage.pages(recursive=False) for entry in page.files]
    except (NotFound, FileNotFoundError):
        return  # every file it names is then missing: the caller says which
    for relative, size, version in entries:
        yield relative, (size, version)
