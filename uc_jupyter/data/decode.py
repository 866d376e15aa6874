"""Decoding wrappers for volume datasets: turn each local path into a tensor, text or bytes.

Decoding runs in the stream (inside the DataLoader worker), right after the file is fetched, and
the cache may release the file as soon as the decoder returns.

Example:
    >>> from uc_jupyter.data import UCVolumeDataset, decode_image, labelled_folder, map_paths
    >>> images = map_paths(UCVolumeDataset("/Volumes/main/ml/images/circle"), decode_image)  # doctest: +SKIP
    >>> pairs = labelled_folder("/Volumes/main/ml/images")         # doctest: +SKIP
    >>> image, label = next(iter(pairs)); image.shape, pairs.classes  # doctest: +SKIP
    (torch.Size([3, 32, 32]), ('circle', 'square', 'triangle'))
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from uc_jupyter.data.volume_dataset import UCVolumeDataset

__all__ = ["decode_bytes", "decode_image", "decode_text", "labelled_folder", "map_paths"]


class _Then:
    """``second(first(x))``, picklable when both are (spawned DataLoader workers need that)."""

    def __init__(self, first: Callable[[Any], Any], second: Callable[[Any], Any]) -> None:
        self.first, self.second = first, second

    def __call__(self, value: Any) -> Any:
        return self.second(self.first(value))


def map_paths(dataset: UCVolumeDataset, fn: Callable[[Any], Any]) -> UCVolumeDataset:
    """A copy of ``dataset`` that yields ``fn(item)``; chains with earlier ``map_paths`` calls.

    Example:
        >>> sizes = map_paths(map_paths(ds, decode_bytes), len)  # doctest: +SKIP
    """
    if not callable(fn):
        raise TypeError(f"map_paths needs a callable, got {type(fn).__name__}")
    mapped = copy.copy(dataset)
    mapped.transform = fn if dataset.transform is None else _Then(dataset.transform, fn)
    return mapped


def decode_image(path: str, mode: str = "RGB") -> torch.Tensor:
    """Read an image file with Pillow into a ``uint8`` tensor of shape ``[channels, height, width]``."""
    import numpy as np
    import torch
    from PIL import Image

    with Image.open(path) as image:
        array = np.asarray(image.convert(mode))
    if array.ndim == 2:
        array = array[:, :, None]
    return torch.from_numpy(array.copy()).permute(2, 0, 1)


def decode_text(path: str, encoding: str = "utf-8") -> str:
    """Read a text file."""
    with open(path, encoding=encoding) as handle:
        return handle.read()


def decode_bytes(path: str) -> bytes:
    """Read a file's bytes."""
    with open(path, "rb") as handle:
        return handle.read()


def labelled_folder(path: str, decode: Callable[[str], Any] = decode_image, **options: Any) -> UCVolumeDataset:
    """A dataset of ``(decode(file), label)`` from a folder with one sub-folder per class.

    Labels number the class folders in sorted order; ``dataset.classes`` names them. ``options``
    go to :class:`UCVolumeDataset` (``shuffle=True``, ``include="*.png"``, ...).
    """
    from uc_jupyter.data.volume_dataset import UCVolumeDataset

    return UCVolumeDataset(path, recursive=True, label_by="folder", transform=decode, **options)
