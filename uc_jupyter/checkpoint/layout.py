"""What a checkpoint folder holds, and how its parts are read back: pure, no I/O.

One checkpoint is one folder::

    __0_0.distcp __0_1.distcp __1_0.distcp ...   each rank's data files (rank 0's, rank 1's, ...)
    _SAVING                                      the save's in-progress marker (JSON), written first
    .metadata                                    torch.distributed.checkpoint's Metadata (pickled)
    _COMMITTED                                   the commit marker (JSON), written last

A data file holds the raw bytes of tensors (C order, the dtype's own layout) and the bytes of other
items, one after another; :class:`StoredAt` tells where each one is. ``.metadata`` is written only
after every data file is whole, and ``_COMMITTED`` only after ``.metadata``: a folder without the
marker is a save that did not finish, and nothing reads it. ``_SAVING`` says the folder is one of
ours: ``keep_last`` removes the leftovers of an unfinished save only from a folder that holds it
(never a folder torch's own writer, or anyone else, filled), and the commit removes it.

``.metadata`` is a pickle, as torch's own readers read it; a volume is shared storage, so it is read
with :func:`load_metadata`, which accepts only the classes a checkpoint's metadata is made of (a
crafted pickle cannot run code).

Example:
    >>> marker = commit_marker({"__0_0.distcp": 10, ".metadata": 3}, committed_at=1700000000.5, version="1.0")
    >>> read_marker(marker, "/Volumes/main/ml/runs/a/step-1").committed_at
    1700000000.5
    >>> read_saving(saving_marker("3f2a", began=1700000000.0, writer="b00t:1/42/7"), "/Volumes/main/ml/runs/a/step-1")
    Saving(save_id='3f2a', writer='b00t:1/42/7')
    >>> is_data_file("__12_3.distcp"), is_data_file("notes.txt")
    (True, False)
"""

from __future__ import annotations

import io
import json
import pickle
import re
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MARKER",
    "METADATA",
    "SAVING",
    "Marker",
    "Saving",
    "StoredAt",
    "commit_marker",
    "data_file",
    "is_data_file",
    "load_metadata",
    "read_marker",
    "read_saving",
    "saving_marker",
]

MARKER = "_COMMITTED"
METADATA = ".metadata"
SAVING = "_SAVING"
_FORMAT = "uc-jupyter-checkpoint"
_SAVING_FORMAT = "uc-jupyter-checkpoint-saving"
_DATA_FILE = re.compile(r"__\d+_\d+\.distcp")


@dataclass(frozen=True)
class StoredAt:
    """Where one item of the state dict lies: ``length`` bytes at ``offset`` of data file ``file``;
    a tensor's ``dtype`` (its name in torch, e.g. ``"float32"``) and ``shape``, None for other items.
    Every ``.metadata`` names this class by module and name: it must keep both (and its fields)."""

    file: str
    offset: int
    length: int
    dtype: str | None = None
    shape: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Marker:
    """A checkpoint's commit: when (seconds since the epoch), by which uc_jupyter, with which files (name: size)."""

    committed_at: float
    version: str
    files: dict[str, int]


def data_file(rank: int, index: int) -> str:
    """The name of rank ``rank``'s ``index``-th data file."""
    return f"__{rank}_{index}.distcp"


def is_data_file(name: str) -> bool:
    """Whether ``name`` is the name of a checkpoint's data file."""
    return _DATA_FILE.fullmatch(name) is not None


def commit_marker(files: dict[str, int], *, committed_at: float, version: str) -> bytes:
    """The marker's content."""
    body = {"format": _FORMAT, "committed_at": committed_at, "writer": version, "files": dict(sorted(files.items()))}
    return json.dumps(body, indent=1).encode()


def read_marker(content: bytes, where: str) -> Marker:
    """The marker of the checkpoint at ``where`` (ValueError in one line when it is not one)."""
    try:
        body = json.loads(content)
        files = {str(name): int(size) for name, size in body["files"].items()}
        if body["format"] != _FORMAT:
            raise ValueError(body["format"])
        return Marker(float(body["committed_at"]), str(body["writer"]), files)
    except (ValueError, KeyError, TypeError, AttributeError):
        raise ValueError(
            f"{where}/{MARKER} is not a checkpoint's commit marker; remove the folder or save a new checkpoint"
        ) from None


@dataclass(frozen=True)
class Saving:
    """An in-progress marker: which save began writing the folder, and the stamp of its coordinator's
    process (:func:`uc_jupyter.processes.stamp`; "" in a marker written before stamps were)."""

    save_id: str
    writer: str = ""


def saving_marker(save_id: str, *, began: float, writer: str = "") -> bytes:
    """The in-progress marker's content: which save (its id) began writing the folder, when, and by
    which process (``writer``, its stamp: a later save removes the folder's files once it is gone)."""
    return json.dumps({"format": _SAVING_FORMAT, "save_id": save_id, "began": began, "writer": writer}).encode()


def read_saving(content: bytes, where: str) -> Saving:
    """The in-progress marker of the folder ``where`` (ValueError in one line when it is not one)."""
    try:
        body = json.loads(content)
        if body["format"] != _SAVING_FORMAT or not isinstance(body["save_id"], str):
            raise ValueError(body["format"])
        writer = body.get("writer", "")
        return Saving(body["save_id"], writer if isinstance(writer, str) else "")
    except (ValueError, KeyError, TypeError, AttributeError):
        raise ValueError(
            f"{where}/{SAVING} is not a checkpoint's in-progress marker; leaving the folder alone"
        ) from None


# What a Metadata pickle is made of (torch 2.x, checked by pickling a real one), and this module's
# StoredAt: explicit (module, name) pairs only. A whole module is never allowed: pickle resolves a
# dotted name attribute by attribute (protocol >= 4), so ("torch.distributed.checkpoint.metadata",
# "os.system") would reach os.system, and even a plain name there such as "os" or "torch" is a module.
_METADATA_MODULE = "torch.distributed.checkpoint.metadata"
_ALLOWED = frozenset(
    {
        *(
            (_METADATA_MODULE, name)
            for name in (
                "Metadata",
                "TensorStorageMetadata",
                "BytesStorageMetadata",
                "ChunkStorageMetadata",
                "TensorProperties",
                "MetadataIndex",
                "StorageMeta",
                "_MEM_FORMAT_ENCODING",
            )
        ),
        ("torch", "Size"),
        ("collections", "OrderedDict"),
        (__name__, "StoredAt"),
    }
)
# TensorProperties pickles its layout as a call of this function with the layout's name (a lookup in
# a table of torch's layouts): the one callable allowed that is not a class.
_LAYOUT = ("torch.serialization", "_get_layout")


class _MetadataUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        import torch

        if "." in name:  # an attribute path, not a name: never one of the pairs below
            raise pickle.UnpicklingError(f"{module}.{name}")
        if (module, name) in _ALLOWED:
            found = super().find_class(module, name)
            if isinstance(found, type):
                return found
        elif (module, name) == _LAYOUT:
            return torch.serialization._get_layout
        elif module == "torch" and isinstance(getattr(torch, name, None), torch.dtype):
            return getattr(torch, name)
        raise pickle.UnpicklingError(f"{module}.{name}")


def load_metadata(content: bytes, where: str) -> Any:
    """The Metadata pickled in ``content`` (``where``'s ``.metadata``), refusing anything else in one line."""
    try:
        return _MetadataUnpickler(io.BytesIO(content)).load()
    except (pickle.UnpicklingError, EOFError, AttributeError, ValueError, TypeError, LookupError, OverflowError) as exc:
        raise ValueError(
            f"{where}/{METADATA} is not a checkpoint's metadata ({type(exc).__name__}: {exc}); "
            "it may have been altered: do not load it"
        ) from None
