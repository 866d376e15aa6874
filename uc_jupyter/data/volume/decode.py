"""Decoding wrappers for volume datasets: turn each local path into a tensor, text or bytes.

Decoding runs in the stream (inside the DataLoader worker), right after the file is fetched, and
the cache may release the file as soon as the decoder returns.

Each decoder takes a path or an open binary file. A dataset reading a local volume in place hands
a decoder the file it opened and checked (no symlink followed, see
:mod:`uc_jupyter.storage.local_volume`) rather than its path, so what is decoded is the file that was
checked. Chains made with :func:`~uc_jupyter.data.volume.mapped.map_paths`, and ``functools.partial`` of a
decoder, read the same way; any other transform is given the path. A transform of your own can ask for the open file by
having an attribute ``reads_files = True``.

Image decoding reads image files only: :func:`~uc_jupyter.data.volume.mapped.map_paths` with
:func:`decode_image` (and :func:`~uc_jupyter.data.volume.mapped.labelled_folder`, ``load(decode="image")``)
leaves out files whose extension Pillow cannot open (``labels.csv`` beside the class folders) and
counts them as skipped (``dataset.skipped``, ``Sample.skipped``); a dataset made with ``include=``
keeps exactly what its patterns match. A file that still fails raises :class:`DecodeError` naming
its ``/Volumes`` path and the decoder.

Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "a.txt")
    >>> with open(path, "w") as f:
    ...     _ = f.write("hello")
    >>> decode_text(path), decode_bytes(path)
    ('hello', b'hello')
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

__all__ = [
    "Chained",
    "DecodeError",
    "Decoding",
    "decode_bytes",
    "decode_failure",
    "decode_image",
    "decode_text",
    "decoder_name",
    "is_image_file",
    "reads_files",
]

Source = str | os.PathLike[str] | IO[bytes]  # a path, or a binary file open for reading


class DecodeError(ValueError):
    """A file could not be decoded; the message names its ``/Volumes`` path and the decoder."""


def decode_failure(where: str, transform: Callable[..., Any] | None, source: Any, exc: Exception) -> DecodeError:
    """What a failed ``transform(source)`` of the file at ``where`` (its /Volumes path) raises: that
    path and the transform, never the cache's path (raise it ``from None`` for the built-in
    decoders, whose frames tell nothing, and from the error for a transform of one's own).

    Example:
        >>> decode_failure("/Volumes/c/s/v/a.png", None, "/cache/x.png", ValueError("bad /cache/x.png")).args[0]
        '/Volumes/c/s/v/a.png: the transform could not decode it (ValueError: bad /Volumes/c/s/v/a.png)'
    """
    detail = str(exc).splitlines()[0] if str(exc) else ""
    # The message often repeats what it was given (a cache path, a descriptor's repr): the
    # /Volumes path leads the line already.
    detail = " ".join(detail.replace(repr(source), "").replace(str(source), where).split())
    name = decoder_name(transform) if transform is not None else "the transform"
    return DecodeError(f"{where}: {name} could not decode it ({type(exc).__name__}: {detail})")


class Decoding:
    """The decode stage of a volume pass: a file's item, made from its local path (or, by a decoder
    that reads open files, from a descriptor the dataset checked), with its class label when the
    dataset labels by folder. A transform that fails raises :class:`DecodeError` naming the file's
    /Volumes path and the transform, never the local path.

    Args:
        transform: the dataset's transform; None: the item is the path.
        where: the /Volumes folder the files are listed below.
        labels: class folder (a listed path's first part) -> label; empty: no labels.

    Example:
        >>> Decoding(None, "/Volumes/c/s/v", {"cat": 0, "dog": 1})("/cache/x.png", "dog/x.png")
        ('/cache/x.png', 1)
        >>> Decoding(decode_text, "/Volumes/c/s/v", {})("/cache/gone.txt", "gone.txt")
        Traceback (most recent call last):
        ...
        uc_jupyter.data.volume.decode.DecodeError: /Volumes/c/s/v/gone.txt: decode_text could not decode it (...)
    """

    def __init__(self, transform: Callable[[Any], Any] | None, where: str, labels: Mapping[str, int]) -> None:
        self.transform, self._where, self._labels = transform, where, labels
        # Whether the transform takes an open file (then a local volume's file is read through the
        # descriptor its checks opened: :meth:`read`).
        self.reads_files = transform is not None and reads_files(transform)
        # The built-in decoders' failures are Pillow's or the codec's: their frames tell nothing.
        self._quiet = transform is None or built_in(transform)

    def __call__(self, path: str, relative: str) -> Any:
        """The item of the file at ``path`` (local), listed as ``relative``."""
        transform = self.transform
        if transform is None:
            item: Any = path
        else:
            try:
                item = transform(path)
            except Exception as exc:
                raise self._failure(path, relative, exc) from (None if self._quiet else exc)
        return (item, self._labels[relative.split("/", 1)[0]]) if self._labels else item

    def read(self, handle: IO[bytes], relative: str) -> Any:
        """The item of the file open at ``handle``, listed as ``relative`` (for a transform that
        :attr:`reads_files`)."""
        assert self.transform is not None, "only a transform reads open files"
        try:
            item = self.transform(handle)
        except Exception as exc:
            raise self._failure(handle, relative, exc) from (None if self._quiet else exc)
        return (item, self._labels[relative.split("/", 1)[0]]) if self._labels else item

    def _failure(self, source: Any, relative: str, exc: Exception) -> DecodeError:
        return decode_failure(f"{self._where}/{relative}", self.transform, source, exc)


def is_image_file(relative: str) -> bool:
    """Whether a file's extension is one Pillow opens (case-insensitive).

    Example:
        >>> is_image_file("circle/a.PNG"), is_image_file("labels.csv")
        (True, False)
    """
    dot = relative.rfind(".")
    return dot > relative.rfind("/") and relative[dot:].lower() in _image_extensions()


@functools.cache
def _image_extensions() -> frozenset[str]:
    # Pillow's own table, narrowed to formats it can open (it also lists save-only ones, e.g. .pdf).
    from PIL import Image

    Image.init()
    return frozenset(ext.lower() for ext, kind in Image.registered_extensions().items() if kind in Image.OPEN)


def decoder_name(transform: Callable[..., Any]) -> str:
    """How an error names a transform: ``decode_image``, ``decode_text(encoding='latin-1')``, a
    function's name, or a chain's steps joined by ``then``.

    Example:
        >>> decoder_name(functools.partial(decode_text, encoding="latin-1"))
        "decode_text(encoding='latin-1')"
    """
    if isinstance(transform, Chained):
        return f"{decoder_name(transform.first)} then {decoder_name(transform.second)}"
    if isinstance(transform, functools.partial):
        given = [repr(a) for a in transform.args] + [f"{k}={v!r}" for k, v in transform.keywords.items()]
        return f"{decoder_name(transform.func)}({', '.join(given)})"
    return str(getattr(transform, "__qualname__", None) or type(transform).__name__)


def decodes_images(transform: Callable[..., Any] | None) -> bool:
    """Whether ``transform`` starts with :func:`decode_image` (a partial or a chain of one)."""
    while isinstance(transform, (functools.partial, Chained)):
        transform = transform.func if isinstance(transform, functools.partial) else transform.first
    return transform is decode_image


def built_in(transform: Callable[..., Any]) -> bool:
    """Whether every step of ``transform`` is one of this module's decoders: their failures are
    Pillow's or the codec's, whose frames and local paths tell a user nothing."""
    if isinstance(transform, Chained):
        return built_in(transform.first) and built_in(transform.second)
    while isinstance(transform, functools.partial):
        transform = transform.func
    return any(transform is decoder for decoder in _FILE_DECODERS)


class Chained:
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
