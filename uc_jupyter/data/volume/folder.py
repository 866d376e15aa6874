"""The storage of a ``/Volumes`` folder a catalog resolved: what its listing reads through, and what
one of its files is read through by key (an export's manifest). Both start a local volume's walks at
the volume's own root, so no symlink below it is followed.

Example:
    >>> resolved = get_catalog().resolve_volume_path("/Volumes/main/ml/exports/points")  # doctest: +SKIP
    >>> [page.files for page in folder_storage(resolved).pages(recursive=False)]         # doctest: +SKIP
    [[('_uc_export.json', 300, None)]]
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from uc_jupyter.catalog import ResolvedVolumePath
    from uc_jupyter.storage.reads import VolumeStorage
    from uc_jupyter.storage.writes import VolumeWrites

__all__ = ["folder_storage", "folder_writes"]


def folder_storage(resolved: ResolvedVolumePath, below: str = "") -> VolumeStorage:
    """The storage of the folder ``resolved`` (or of its sub-folder ``below``)
    (:func:`~uc_jupyter.storage.reads.open_storage`)."""
    from uc_jupyter.storage.reads import open_storage

    url, where = resolved.url, resolved.volume_path
    if below:
        url, where = f"{url.rstrip('/')}/{below}", f"{where}/{below}"
    return open_storage(url, resolved.storage_options, where=where, root=resolved.volume.storage_location)


def folder_writes(resolved: ResolvedVolumePath) -> VolumeWrites | None:
    """The folder's writes (reads of one file by its key), or None for a storage only fsspec serves
    (:func:`~uc_jupyter.storage.writes.open_writes`)."""
    from uc_jupyter.storage.writes import open_writes

    try:
        return open_writes(
            resolved.url, resolved.storage_options, where=resolved.volume_path, root=resolved.volume.storage_location
        )
    except ValueError:
        return None
