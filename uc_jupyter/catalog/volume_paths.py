"""Where a ``/Volumes`` path lies in its volume's storage, once the caller's check has passed: the
last step of ``resolve_volume_path`` in both catalogs (the embedded one and the REST client).

Example:
    >>> from datetime import datetime
    >>> from uc_jupyter.catalog.model import VolumeInfo
    >>> from uc_jupyter.catalog.rules.names import parse_volume_path
    >>> info = VolumeInfo("main", "ml", "raw", "alice", "EXTERNAL", "s3://lake/raw", datetime.now())
    >>> open_volume_path(parse_volume_path("/Volumes/main/ml/raw/a/b.png"), info, {}).url
    's3://lake/raw/a/b.png'
"""

from __future__ import annotations

from typing import Any

from uc_jupyter.catalog.model import EscapesVolume, ResolvedVolumePath, VolumeInfo
from uc_jupyter.catalog.rules.names import VolumePath
from uc_jupyter.storage import urls as st

__all__ = ["open_volume_path"]


def open_volume_path(volume_path: VolumePath, info: VolumeInfo, options: dict[str, Any]) -> ResolvedVolumePath:
    """Where ``volume_path`` lies in volume ``info``, opened with ``options``, once the caller's check
    has passed: both catalogs end their ``resolve_volume_path`` here. A local path that a symlink
    leads out of the volume is refused (:class:`EscapesVolume`)."""
    root = st.storage_path(info.storage_location)
    target = f"{root.rstrip('/')}/{volume_path.relative}" if volume_path.relative else root
    if st.is_local(info.storage_location) and not st.realpath_within(root, target):
        raise EscapesVolume(f"{volume_path} leads outside volume {info.full_name} (through a symlink); refused")
    return ResolvedVolumePath(
        volume_path=str(volume_path),
        volume=info,
        path=target,
        url=st.join_location(info.storage_location, volume_path.relative),
        storage_options=st.fsspec_options(options),
    )
