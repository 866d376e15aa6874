"""``UCVolumeReader``: a ``torch.distributed.checkpoint`` storage reader of a committed checkpoint in a volume.

READ VOLUME is checked as the caller's principal, and the folder must hold the commit marker
(:mod:`uc_jupyter.checkpoint.commit`), before anything else is read: a save that did not finish is
never loaded. ``.metadata`` is unpickled accepting only the classes a checkpoint's metadata is made of
(:func:`~uc_jupyter.checkpoint.layout.load_metadata`). Each rank reads only the byte ranges of the
items its plan asks for (DCP reshards: a checkpoint of 2 ranks loads on 3), ``threads`` ranges at
once, a large one in pieces. Items that are not tensors reach DCP's planner, which unpickles them with
``torch.load(weights_only=False)``; each is first checked to unpickle with ``weights_only=True`` (plain
values, tensors, containers), and refused in one line otherwise, unless ``trust_pickles=True``: a
volume others may write must not run their code in whoever loads from it.

Example:
    >>> import torch.distributed.checkpoint as dcp
    >>> state = {"model": model.state_dict()}
    >>> dcp.load(state, storage_reader=UCVolumeReader(latest("/Volumes/main/ml/runs/a")))  # doctest: +SKIP
"""

from __future__ import annotations

import io
import os
import uuid
from collections.abc import Sequence
from concurrent.futures import Future as Pending
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch
from torch.distributed.checkpoint.metadata import Metadata, StorageMeta
from torch.distributed.checkpoint.planner import LoadItemType, LoadPlan, LoadPlanner, ReadItem
from torch.distributed.checkpoint.storage import StorageReader
from torch.futures import Future

from uc_jupyter.catalog import Catalog
from uc_jupyter.checkpoint.folder import CheckpointFolder, open_folder
from uc_jupyter.checkpoint.layout import MARKER, METADATA, StoredAt, load_metadata, read_marker

__all__ = ["UCVolumeReader"]

_PIECE = 16 << 20  # a range larger than this is read in pieces of this size at once


class UCVolumeReader(StorageReader):
    """Reads the committed checkpoint in the folder ``path`` of a volume (see the module's docstring).

    Raises:
        PermissionError: the principal lacks READ VOLUME (one line naming the path and principal).
        FileNotFoundError: the folder holds no committed checkpoint.
        ValueError: its ``.metadata`` is not a checkpoint's metadata written by UCVolumeWriter (and, in
            dcp.load, an item that is not a tensor holds more than plain values: see ``trust_pickles``).
    """

    def __init__(
        self, path: str, *, catalog: Catalog | None = None, threads: int = 8, trust_pickles: bool = False
    ) -> None:
        super().__init__()
        if threads < 1:
            raise ValueError(f"threads={threads}: give a number >= 1")
        self.threads, self.trust_pickles = threads, trust_pickles
        self._catalog = catalog
        self._metadata: Metadata
        self._folder = self._opened(path)
        self._stored: dict[Any, StoredAt] = {}
        self._load_id = uuid.uuid4().hex

    @property
    def path(self) -> str:
        """The checkpoint's /Volumes folder."""
        return self._folder.path

    def _opened(self, path: str) -> CheckpointFolder:
        """The folder, after its marker is found and its metadata read (here, so that whatever is wrong
        is said in one line before dcp.load begins, on every rank alike)."""
        folder = open_folder(path, write=False, catalog=self._catalog)
        try:
            read_marker(folder.writes.read_bytes(folder.file(MARKER)), folder.path)
        except FileNotFoundError:
            parent = folder.path_of(folder.parent_key)
            raise FileNotFoundError(
                f"{folder.path} holds no committed checkpoint (no {MARKER}: its save did not finish, or it never "
                f"began); load uc_jupyter.checkpoint.latest({parent!r}) instead"
            ) from None
        metadata = load_metadata(folder.writes.read_bytes(folder.file(METADATA)), folder.path)
        if not isinstance(metadata, Metadata):
            raise ValueError(f"{folder.path}/{METADATA} holds a {type(metadata).__name__}, not a checkpoint's metadata")
        stored = metadata.storage_data
        if not isinstance(stored, dict) or not all(isinstance(at, StoredAt) for at in stored.values()):
            raise ValueError(f"{folder.path} was not written by UCVolumeWriter: read it with the reader of its writer")
        _within_files(folder, stored)
        self._metadata = metadata
        return folder

    # ---------------------------------------------------------------- the StorageReader protocol
    def reset(self, checkpoint_id: str | os.PathLike[str] | None = None) -> None:
        if checkpoint_id is not None and str(checkpoint_id) != self._folder.path:
            self._folder = self._opened(str(checkpoint_id))
        self._stored = {}
        self._load_id = uuid.uuid4().hex

    def read_metadata(self, *args: Any, **kwargs: Any) -> Metadata:
        meta = self._metadata.storage_meta or StorageMeta()
        meta.load_id = self._load_id
        self._metadata.storage_meta = meta
        return self._metadata

    def set_up_storage_reader(self, metadata: Metadata, is_coordinator: bool, *args: Any, **kwargs: Any) -> None:
        self._stored = metadata.storage_data

    def prepare_local_plan(self, plan: LoadPlan) -> LoadPlan:
        return plan

    def prepare_global_plan(self, plans: list[LoadPlan]) -> list[LoadPlan]:
        return plans

    def read_data(self, plan: LoadPlan, planner: LoadPlanner) -> Future[None]:
        items = list(plan.items)
        with ThreadPoolExecutor(self.threads, thread_name_prefix="uc-checkpoint-read") as pool:
            # Each item's bytes arrive in threads; they reach the planner here, one after another, in order.
            pending = [(item, self._read(pool, self._stored[item.storage_index])) for item in items]
            for item, pieces in pending:
                data = _joined([piece.result() for piece in pieces])
                at = self._stored[item.storage_index]
                if item.type == LoadItemType.BYTE_IO and not self.trust_pickles:
                    _plain_values_only(data, item, self._folder.path)
                _apply(item, data, at, planner)
        done: Future[None] = Future()
        done.set_result(None)
        return done

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id: str | os.PathLike[str]) -> bool:
        return str(checkpoint_id).startswith("/Volumes/")

    # ---------------------------------------------------------------- reading
    def _read(self, pool: ThreadPoolExecutor, at: StoredAt) -> list[Pending[bytes]]:
        key = self._folder.file(at.file)
        starts = range(at.offset, at.offset + at.length, _PIECE) if at.length else [at.offset]
        ends = [min(start + _PIECE, at.offset + at.length) for start in starts]
        reads = self._folder.writes.read_range
        return [pool.submit(reads, key, start, end - start) for start, end in zip(starts, ends, strict=True)]


def _within_files(folder: CheckpointFolder, stored: dict[Any, StoredAt]) -> None:
    """ValueError in one line unless every item lies inside its data file as it is on storage: a
    length read from ``.metadata`` decides what is allocated and asked for (2^46 bytes once asked
    for gigabytes of reads before anything failed), so it is checked against the files' real sizes,
    from one listing, before anything is read."""
    sizes = {entry.key: entry.size for entry in folder.writes.listing(folder.key)}
    for index, at in stored.items():
        where = f"{folder.path}/{METADATA}: item {getattr(index, 'fqn', index)!r}"
        if not (isinstance(at.offset, int) and isinstance(at.length, int) and at.offset >= 0 and at.length >= 0):
            raise ValueError(f"{where} lies at offset {at.offset!r}, length {at.length!r}: the checkpoint is damaged")
        size = sizes.get(folder.file(at.file))
        if size is None:
            raise ValueError(
                f"{where} lies in {at.file}, which is not there: the checkpoint is damaged; load an earlier one"
            )
        if at.offset + at.length > size:
            raise ValueError(
                f"{where} lies at bytes {at.offset:,} to {at.offset + at.length:,} of {at.file}, which holds {size:,}: "
                "the checkpoint is damaged; load an earlier one"
            )


def _joined(pieces: Sequence[bytes]) -> bytearray:
    whole = bytearray(sum(len(p) for p in pieces))
    view, at = memoryview(whole), 0
    for piece in pieces:
        view[at : at + len(piece)] = piece
        at += len(piece)
    return whole


def _plain_values_only(data: bytearray, item: ReadItem, where: str) -> None:
    """Refuse a non-tensor item whose pickle holds more than plain values: DCP's planner unpickles it
    with ``torch.load(weights_only=False)``, which would run whatever code it names."""
    try:
        torch.load(io.BytesIO(bytes(data)), weights_only=True)
    except Exception as exc:
        why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(
            f"{where}: item {item.storage_index.fqn!r} is a pickle of more than plain values ({why}); "
            "load it only if you trust everyone who may write this volume: UCVolumeReader(..., trust_pickles=True)"
        ) from None


def _apply(item: ReadItem, data: bytearray, at: StoredAt, planner: LoadPlanner) -> None:
    if len(data) != at.length:
        raise OSError(f"{at.file} is shorter than its checkpoint's metadata says ({len(data)} of {at.length} bytes)")
    if item.type == LoadItemType.BYTE_IO:
        planner.load_bytes(item, io.BytesIO(bytes(data)))
        return
    if at.dtype is None or at.shape is None:
        raise ValueError(f"{at.file}: an item stored as bytes is asked for as a tensor")
    dtype = getattr(torch, at.dtype, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(
            f"{at.file}: {at.dtype!r} is not a torch dtype; the checkpoint's metadata may have been altered"
        )
    stored = torch.frombuffer(data, dtype=torch.uint8) if data else torch.empty(0, dtype=torch.uint8)
    tensor = stored.view(dtype).reshape(at.shape)
    for dim, (start, length) in enumerate(zip(item.storage_offsets, item.lengths, strict=True)):
        tensor = tensor.narrow(dim, start, length)
    target = planner.resolve_tensor(item).detach()
    if target.size() != tensor.size():
        raise ValueError(
            f"{at.file}: item {item.storage_index.fqn} is {tuple(tensor.size())}, "
            f"the state dict asks for {tuple(target.size())}"
        )
    target.copy_(tensor)
    planner.commit_tensor(item, target)
