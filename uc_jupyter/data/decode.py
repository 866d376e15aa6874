"""Decoding wrappers for volume datasets: turn each local path into a tensor, text or bytes.

Decoding runs in the stream (inside the DataLoader worker), right after the file is fetched, and
the cache may release the file as soon as the decoder returns.

Each decoder takes a path or an open binary file. A dataset reading a local volume in place hands
a decoder the file it opened and checked (no symlink followed, see
:mod:`uc_jupyter.data.local_volume`) rather than its path, so what is decoded is the file that was
checked. Chains made with :func:`map_paths`, and ``functools.partial`` of a decoder, read the same
way; any other transform is given the path. A transform of your own can ask for the open file by
having an attribute ``reads_files = True``.

Example:
    >>> from uc_jupyter.data import UCVolumeDataset, decode_image, labelled_folder, map_paths
    >>> images = map_paths(UCVolumeDataset("/Volumes/main/ml/images/circle"), decode_image)  # doctest: +SKIP
    >>> pairs = labelled_folder("/Volumes/main/ml/images")         # doctest: +SKIP
    >>> image, label = next(iter(pairs)); image.shape, pairs.classes  # doctest: +SKIP
    (torch.Size([3, 32, 32]), ('circle', 'square', 'triangle'))
"""

from __future__ import annotations

import copy
import functools
import os
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from uc_jupyter.data.volume_dataset import UCVolumeDataset

__all__ = ["decode_bytes", "decode_image", "decode_text", "labelled_folder", "map_paths", "reads_files"]

Source = str | os.PathLike[str] | IO[bytes]  # a path, or a binary file open for reading


class _Then:
    """``second(first(x))``, picklable when both are (spawned DataLoader workers need that)."""

    def __init__(self, first: Callable[[Any], Any], second: Callable[[Any], Any]) -> None:
        self.first, self.second = first, second

    def __call__(self, value: Any) -> Any:
        return self.second(self.first(value))

    @property
    def reads_files(self) -> bool:
        """The chain takes an open file when its first step does."""
        return reads_files(self.first)


def reads_files(transform: Callable[..., Any]) -> bool:
    """Whether ``transform`` takes an open binary file as well as a path: the built-in decoders,
    their ``functools.partial``, :func:`map_paths` chains that start with one, and callables with
    ``reads_files = True``.

    Example:
        >>> import functools
        >>> reads_files(decode_bytes), reads_files(functools.partial(decode_text, encoding="latin-1")), reads_files(len)
        (True, True, False)
    """
    while isinstance(transform, functools.partial):
        transform = transform.func
    if any(transform is decoder for decoder in _FILE_DECODERS):  # by identity: a transform may be unhashable
        return True
    return getattr(transform, "reads_files", False) is True


def map_paths(dataset: UCVolumeDataset, fn: Callable[[Any], Any]) -> UCVolumeDataset:
    """A copy of ``dataset`` that yields ``fn(item)``; chains with earlier ``map_paths`` calls.

    Example:
        >>> sizes = map_paths(map_paths(ds, decode_bytes), len)  # doctest: +SKIP
    """
    from uc_jupyter.data.volume_dataset import UCVolumeDataset

    if not isinstance(dataset, UCVolumeDataset):
        raise TypeError(f"map_paths needs a UCVolumeDataset, got {type(dataset).__name__}")
    if not callable(fn):
        raise TypeError(f"map_paths needs a callable, got {type(fn).__name__}")
    mapped = copy.copy(dataset)
    mapped.transform = fn if dataset.transform is None else _Then(dataset.transform, fn)
    return mapped


def decode_image(source: Source, mode: str = "RGB") -> torch.Tensor:
    """Read an image (a path or an open binary file) with Pillow into a ``uint8`` tensor of shape
    ``[channels, height, width]``."""
    import numpy as np
    import torch
    from PIL import Image

    with Image.open(source) as image:
        array = np.asarray(image.convert(mode))
    if array.ndim == 2:
        array = array[:, :, None]
    return torch.from_numpy(array.copy()).permute(2, 0, 1)


def decode_text(source: Source, encoding: str = "utf-8") -> str:
    """Read a text file (a path or an open binary file)."""
    return decode_bytes(source).decode(encoding)


def decode_bytes(source: Source) -> bytes:
    """Read a file's bytes (a path or an open binary file)."""
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as handle:
            return handle.read()
    return source.read()


_FILE_DECODERS: tuple[Callable[..., Any], ...] = (decode_image, decode_text, decode_bytes)


def labelled_folder(path: str, decode: Callable[[str], Any] = decode_image, **options: Any) -> UCVolumeDataset:
    """A dataset of ``(decode(file), label)`` from a folder with one sub-folder per class.

    Labels number the class folders in sorted order; ``dataset.classes`` names them. ``options``
    go to :class:`UCVolumeDataset` (``shuffle=True``, ``include="*.png"``, ...), all but those this
    function sets itself.
    """
    from uc_jupyter.data.volume_dataset import UCVolumeDataset

    if not callable(decode):
        raise TypeError(f"invalid decode {decode!r}: give a function (a callable) such as decode_image")
    fixed = sorted({"recursive", "label_by", "transform"} & set(options))
    if fixed:
        raise TypeError(f"labelled_folder sets {fixed[0]} itself; leave it out (map_paths adds a transform)")
    return UCVolumeDataset(path, recursive=True, label_by="folder", transform=decode, **options)
