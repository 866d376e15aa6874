"""Streaming data into PyTorch: volume files through a shared cache, and table rows.

Attributes load lazily so ``import uc_jupyter.data`` does not import torch.

Example:
    >>> from uc_jupyter.data import UCVolumeDataset  # doctest: +SKIP
"""

from __future__ import annotations

from uc_jupyter.lazy import lazy_attributes

__all__ = [
    "BatchTiming",
    "DataLoader",
    "DecodeError",
    "FileCache",
    "Mix",
    "UCTableDataset",
    "UCVolumeDataset",
    "decode_bytes",
    "decode_image",
    "decode_text",
    "labelled_folder",
    "map_paths",
]

_HOMES = {
    "BatchTiming": "uc_jupyter.data.loader.dataloader",
    "DataLoader": "uc_jupyter.data.loader.dataloader",
    "DecodeError": "uc_jupyter.data.volume.decode",
    "FileCache": "uc_jupyter.data.cache",
    "Mix": "uc_jupyter.data.mix.dataset",
    "UCTableDataset": "uc_jupyter.data.table.dataset",
    "UCVolumeDataset": "uc_jupyter.data.volume.dataset",
    "decode_bytes": "uc_jupyter.data.volume.decode",
    "decode_image": "uc_jupyter.data.volume.decode",
    "decode_text": "uc_jupyter.data.volume.decode",
    "labelled_folder": "uc_jupyter.data.volume.mapped",
    "map_paths": "uc_jupyter.data.volume.mapped",
}


__getattr__ = lazy_attributes("uc_jupyter.data", _HOMES)
