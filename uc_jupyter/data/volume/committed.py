"""Reading an export folder: only the files its committed manifest names.

A folder that holds ``_uc_export.json`` at its top is a table export
(:mod:`uc_jupyter.storage.export_manifest`): its files are those the manifest names, under the
export's hidden prefix, and nothing else in the folder (an upload in progress or killed, files put
beside it). Each named file must be there with the size the manifest gives, or the listing fails
in one line: a manifest naming a missing file is not read as a smaller dataset. A folder without
a manifest (an export made before manifests, any other folder) is listed as always.

Names come from the manifest's own checks (one file name each, under the export's own prefix), and
the prefix is listed like the rest of the volume: a local one without following a symlink (a
prefix or a file swapped for one is refused, or missing), a remote one through the folder's storage,
in a forked child while this process is still clean (:func:`~uc_jupyter.storage.objects.fork_safe`).

Example:
    >>> resolved = get_catalog().resolve_volume_path("/Volumes/main/ml/exports/points")  # doctest: +SKIP
    >>> committed_entries(resolved, found=[("_uc_export.json", 300, None)])           # doctest: +SKIP
    [('.uc-export-20261202T030500Z-1a2b3c4d/part-00000.parquet', 812, '"9f2c..."')]
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from uc_jupyter.catalog import NotFound
from uc_jupyter.storage import urls as st
from uc_jupyter.storage.export_manifest import MANIFEST, MAX_MANIFEST_BYTES, Manifest, ManifestError

if TYPE_CHECKING:
    from uc_jupyter.catalog import ResolvedVolumePath
    from uc_jupyter.storage.local_volume import LocalVolume
    from uc_jupyter.storage.reads import VolumeStorage

__all__ = ["ExportIncomplete", "ManifestError", "committed_entries", "is_export"]


class ExportIncomplete(OSError):
    """An export's manifest names a file that is missing or not the size it gives."""


def committed_entries(
    resolved: ResolvedVolumePath,
    found: Sequence[tuple[str, int, str | None]],
    *,
    local: LocalVolume | None = None,
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
    manifest = Manifest.parse(_read_manifest(resolved, local), where=where)
    listed = dict(_prefix_entries(resolved, manifest.prefix, local))
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
    """Whether the folder holds an export's manifest at its top: one request for that key on
    object storage (a listing of a flat folder's top could be a million keys, and the caller wants
    to start on the first page of its own listing), one listing of the top elsewhere."""
    if st.is_local(resolved.url):
        from uc_jupyter.storage.local_volume import LocalVolume

        return any(r == MANIFEST for r, _, _ in LocalVolume.of(resolved).entries(recursive=False)[0])
    from uc_jupyter.storage.writes import open_writes

    try:
        writes = open_writes(resolved.url, resolved.storage_options, where=resolved.volume_path)
    except ValueError:  # a storage only fsspec serves: list the top
        writes = None
    if writes is not None:
        try:
            writes.read_bytes(MANIFEST)  # in a forked child while this process is clean (fork_safe)
        except OSError:  # absent, or refused: the folder's own listing then says what is wrong
            return False
        return True
    if storage is None:
        from uc_jupyter.storage.reads import open_storage

        storage = open_storage(resolved.url, resolved.storage_options, where=resolved.volume_path)
    return any(r == MANIFEST for page in storage.pages(recursive=False) for r, _, _ in page.files)


def _read_manifest(resolved: ResolvedVolumePath, local: LocalVolume | None) -> bytes:
    if st.is_local(resolved.url):
        from uc_jupyter.storage.local_volume import LocalVolume

        fd = (local or LocalVolume.of(resolved)).open(MANIFEST, None)  # no symlink followed, never a FIFO
        with os.fdopen(fd, "rb") as f:
            data = f.read(MAX_MANIFEST_BYTES + 1)
        return data
    from uc_jupyter.storage.writes import open_writes

    writes = open_writes(resolved.url, resolved.storage_options, where=resolved.volume_path)
    try:
        return writes.read_bytes(MANIFEST)  # in a forked child while this process is clean (fork_safe)
    except FileNotFoundError:
        raise NotFound(f"{resolved.volume_path}/{MANIFEST} was listed but is gone: list the folder again") from None


def _prefix_entries(
    resolved: ResolvedVolumePath, prefix: str, local: LocalVolume | None
) -> Iterator[tuple[str, tuple[int, str | None]]]:
    """``(file name, (size, version))`` of the regular files right under the export's prefix."""
    where = f"{resolved.volume_path}/{prefix}"
    try:
        if st.is_local(resolved.url):
            from uc_jupyter.storage.local_volume import LocalVolume

            volume = local or LocalVolume.of(resolved)
            below = f"{volume.folder}/{prefix}" if volume.folder else prefix
            files, _ = LocalVolume(volume.root, below, where).entries(recursive=False)
            entries: Sequence[tuple[str, int, str | None]] = files
        else:
            from uc_jupyter.storage.reads import open_storage

            storage = open_storage(f"{resolved.url.rstrip('/')}/{prefix}", resolved.storage_options, where=where)
            entries = [entry for page in storage.pages(recursive=False) for entry in page.files]
    except (NotFound, FileNotFoundError):
        return  # every file it names is then missing: the caller says which
    for relative, size, version in entries:
        yield relative, (size, version)
