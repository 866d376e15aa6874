"""Datasets made from a volume dataset: :func:`map_paths` chains a transform onto one, and
:func:`labelled_folder` labels each file by its class folder.

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
from typing import Any

from uc_jupyter.data.volume.dataset import UCVolumeDataset
from uc_jupyter.data.volume.decode import Chained, decode_image, decodes_images, is_image_file

__all__ = ["labelled_folder", "map_paths"]


def map_paths(dataset: UCVolumeDataset, fn: Callable[[Any], Any]) -> UCVolumeDataset:
    """A copy of ``dataset`` that yields ``fn(item)``; chains with earlier ``map_paths`` calls.

    Example:
        >>> sizes = map_paths(map_paths(ds, decode_bytes), len)  # doctest: +SKIP
    """
    if not isinstance(dataset, UCVolumeDataset):
        raise TypeError(f"map_paths needs a UCVolumeDataset, got {type(dataset).__name__}")
    if not callable(fn):
        raise TypeError(f"map_paths needs a callable, got {type(fn).__name__}")
    mapped = copy.copy(dataset)
    mapped.transform = fn if dataset.transform is None else Chained(dataset.transform, fn)
    if decodes_images(mapped.transform) and not dataset.include:
        mapped._keep_only(is_image_file, "image files")
    return mapped


def labelled_folder(path: str, decode: Callable[[str], Any] | None = decode_image, **options: Any) -> UCVolumeDataset:
    """A dataset of ``(decode(file), label)`` from a folder with one sub-folder per class.

    Labels number the class folders in sorted order; ``dataset.classes`` names them. Files beside
    the class folders are skipped, and so are files that are not images when ``decode`` is
    :func:`decode_image` (unless ``include=`` says which to read). ``decode=None`` yields
    ``(local path, label)``. ``options`` go to :class:`UCVolumeDataset` (``shuffle=True``,
    ``include="*.png"``, ...), all but those this function sets itself.

    Example:
        >>> pairs = labelled_folder("/Volumes/main/ml/images", shuffle=True)  # doctest: +SKIP
        >>> pairs.classes, pairs.skipped                                       # doctest: +SKIP
        (('circle', 'square', 'triangle'), 1)
    """
    if decode is not None and not callable(decode):
        raise TypeError(f"invalid decode {decode!r}: give a function (a callable) such as decode_image, or None")
    fixed = sorted({"recursive", "label_by", "transform"} & set(options))
    if fixed:
        raise TypeError(f"labelled_folder sets {fixed[0]} itself; leave it out (map_paths adds a transform)")
    return UCVolumeDataset(path, recursive=True, label_by="folder", transform=decode, **options)
