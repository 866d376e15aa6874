"""``UCVolumeWriter``: a ``torch.distributed.checkpoint`` storage writer into a ``/Volumes`` folder.

Every rank makes its own writer (``UCVolumeWriter(path)``, WRITE VOLUME checked as the caller's
principal before anything is written) and writes its own data files in parallel: its items in
files of about ``file_bytes`` each, ``threads`` of them at once. On a ``file://`` volume a file is
written in place (beside its name, renamed when whole, through the openat walk that follows no
symlink); on object storage it is staged on local disk (``UC_JUPYTER_CACHE_DIR``'s or the home's
``staging`` folder) and uploaded, a large one in parts at once, while the other threads write the
next files. The coordinator then writes ``.metadata`` and, last, the commit marker ``_COMMITTED``
(:mod:`uc_jupyter.checkpoint.commit`): a save that stops anywhere before leaves a folder no reader
takes for a checkpoint. What a killed save leaves (its folder's files, its staged files) is removed
by a later save once its process is gone. A committed checkpoint is immutable: saving into it again is refused.

``dcp.async_save(..., storage_writer=UCVolumeWriter(path))`` works: torch copies the state dict to
CPU memory in the caller (the only time the training loop waits), then runs the whole save, the
writer included, in one background thread of the rank, with collectives on the process group
given. A loop that runs its own collectives meanwhile must give async_save a process group of its
own (``dist.new_group(backend="gloo")``), made once and reused, so the two never interleave on one
group; wait for the returned future (``.result()``) before the next save and before the rank ends.

Example:
    >>> import torch.distributed.checkpoint as dcp
    >>> dcp.save({"model": model.state_dict()}, storage_writer=UCVolumeWriter("/Volumes/main/ml/runs/a/step-100",
    ...          keep_last=3))                                                                   # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, BinaryIO

import torch
from torch.distributed.checkpoint.metadata import Metadata, StorageMeta
from torch.distributed.checkpoint.planner import SavePlan, SavePlanner, WriteItem, WriteItemType
from torch.distributed.checkpoint.storage import StorageWriter, WriteResult
from torch.futures import Future

from uc_jupyter.catalog import Catalog
from uc_jupyter.checkpoint.commit import check_keep_last, commit
from uc_jupyter.checkpoint.folder import CheckpointFolder, open_folder
from uc_jupyter.checkpoint.layout import MARKER, METADATA, SAVING, StoredAt, data_file, saving_marker
from uc_jupyter.processes import stamp
from uc_jupyter.storage import staged
from uc_jupyter.storage import urls as st
from uc_jupyter.storage.writes import staging_folder

__all__ = ["UCVolumeWriter"]

_FILE_BYTES = 16 << 20  # one PUT each on S3 (no multipart to join), many at once: measured fastest


@dataclasses.dataclass(frozen=True)
class _RankFiles:
    """The storage data of one rank's plan: its rank, so its files are named ``__<rank>_<n>.distcp``."""

    rank: int


class UCVolumeWriter(StorageWriter):
    """Writes a checkpoint into the folder ``path`` of a volume (see the module's docstring).

    Args:
        path: the checkpoint's folder, ``/Volumes/<catalog>/<schema>/<volume>/<run>/<step>``.
        keep_last: after this checkpoint is committed, remove the committed sibling checkpoints (the
            other folders of ``<run>``) beyond the newest ``keep_last``, and the leftovers of saves
            that never committed and were last written before this save began. None: remove nothing.
        catalog: the catalog to check WRITE VOLUME with (default: :func:`~uc_jupyter.catalog.get_catalog`).
        threads: data files each rank writes at once.
        file_bytes: about how large each data file grows (a larger tensor gets a file of its own).

    Raises:
        PermissionError: the principal lacks WRITE VOLUME (one line naming the path and principal).
        FileExistsError: ``path`` holds a committed checkpoint already (a checkpoint is immutable).
    """

    def __init__(
        self,
        path: str,
        *,
        keep_last: int | None = None,
        catalog: Catalog | None = None,
        threads: int = 8,
        file_bytes: int = _FILE_BYTES,
    ) -> None:
        super().__init__()
        if keep_last is not None and (isinstance(keep_last, bool) or not isinstance(keep_last, int) or keep_last < 1):
            # keep_last=True is an int to Python: refused here, not read as "keep 1"
            raise ValueError(f"keep_last={keep_last!r}: give a number of checkpoints >= 1, or None to keep all")
        if threads < 1 or file_bytes < 1:
            raise ValueError(f"threads={threads}, file_bytes={file_bytes}: give numbers >= 1")
        self.keep_last, self.threads, self.file_bytes = keep_last, threads, file_bytes
        self._catalog = catalog
        self._folder: CheckpointFolder = open_folder(path, write=True, catalog=catalog)
        check_keep_last(self._folder, keep_last)
        self._checked = False  # the folder was found uncommitted, and no save has used that finding yet
        self._refuse_committed()
        self._save_id = uuid.uuid4().hex
        self._began = time.time()
        self.is_coordinator = False
        if not st.is_local(self._folder.writes.url):  # files bound for object storage are staged here
            staged.sweep(staging_folder())  # what killed saves and exports left on this node's disk

    @property
    def path(self) -> str:
        """The checkpoint's /Volumes folder."""
        return self._folder.path

    # ---------------------------------------------------------------- the StorageWriter protocol
    def reset(self, checkpoint_id: str | os.PathLike[str] | None = None) -> None:
        if checkpoint_id is not None and str(checkpoint_id) != self._folder.path:
            self._folder = open_folder(str(checkpoint_id), write=True, catalog=self._catalog)
            check_keep_last(self._folder, self.keep_last)
            self._refuse_committed()
        self._save_id = uuid.uuid4().hex

    def set_up_storage_writer(self, is_coordinator: bool, *args: Any, **kwargs: Any) -> None:
        self.is_coordinator = is_coordinator
        self._began = time.time()
        if not self._checked:  # checked when the writer was made; else again (DCP hands the error to every rank)
            self._refuse_committed()
        self._checked = False
        if is_coordinator:  # before any rank writes a data file (the ranks' plans come after this step)
            # Stamped with this process: a later save removes the folder's files once it is gone.
            marker = saving_marker(self._save_id, began=self._began, writer=stamp())
            self._folder.writes.put_bytes(self._folder.file(SAVING), marker)

    def _refuse_committed(self) -> None:
        """FileExistsError when the folder holds a committed checkpoint. Every rank makes its writer and
        reads the same marker, so every rank refuses, before dcp.save starts its collectives."""
        try:
            self._folder.writes.read_bytes(self._folder.file(MARKER))
        except FileNotFoundError:
            self._checked = True
            return
        raise FileExistsError(
            f"{self.path} is a committed checkpoint already, and a checkpoint is immutable: "
            "save to a new folder (e.g. the next step's), or delete this one first"
        )

    def prepare_local_plan(self, plan: SavePlan) -> SavePlan:
        return plan

    def prepare_global_plan(self, plans: list[SavePlan]) -> list[SavePlan]:
        return [dataclasses.replace(plan, storage_data=_RankFiles(rank)) for rank, plan in enumerate(plans)]

    def write_data(self, plan: SavePlan, planner: SavePlanner) -> Future[list[WriteResult]]:
        rank = plan.storage_data.rank if isinstance(plan.storage_data, _RankFiles) else 0
        bins = _bins(plan.items, self.file_bytes)
        # A failure raises here: DCP hands it to every rank, and no marker is written.
        with ThreadPoolExecutor(min(self.threads, len(bins)), thread_name_prefix="uc-checkpoint") as pool:
            written = list(pool.map(lambda n: self._write_file(data_file(rank, n), bins[n], planner), range(len(bins))))
        done: Future[list[WriteResult]] = Future()
        done.set_result([result for results in written for result in results])
        return done

    def finish(self, metadata: Metadata, results: list[list[WriteResult]]) -> None:
        """The coordinator's last step, after every rank's files are whole: ``.metadata``, then the marker."""
        stored: dict[Any, StoredAt] = {}
        files: dict[str, int] = {}
        for result in (r for rank_results in results for r in rank_results):
            at: StoredAt = result.storage_data
            stored[result.index] = at
            files[at.file] = max(files.get(at.file, 0), at.offset + at.length)
        metadata.storage_data = stored
        metadata.storage_meta = self.storage_meta()
        content = pickle.dumps(metadata, protocol=pickle.HIGHEST_PROTOCOL)
        self._folder.writes.put_bytes(self._folder.file(METADATA), content)
        files[METADATA] = len(content)
        commit(self._folder, files, keep_last=self.keep_last, save_began=self._began)
        self._checked = False  # a second save into it is refused by the marker now

    def storage_meta(self) -> StorageMeta | None:
        return StorageMeta(checkpoint_id=self._folder.path, save_id=self._save_id)

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id: str | os.PathLike[str]) -> bool:
        return str(checkpoint_id).startswith("/Volumes/")

    # ---------------------------------------------------------------- the data files
    def _write_file(self, name: str, items: Sequence[WriteItem], planner: SavePlanner) -> list[WriteResult]:
        results: list[WriteResult] = []
        with self._folder.writes.new_file(self._folder.file(name)) as out:
            offset = 0
            for item in items:
                at = _write_item(out, name, offset, item, planner.resolve_data(item))
                results.append(WriteResult(index=item.index, size_in_bytes=at.length, storage_data=at))
                offset += at.length
        return results


def _write_item(out: BinaryIO, name: str, offset: int, item: WriteItem, data: Any) -> StoredAt:
    if item.type == WriteItemType.BYTE_IO:
        view = data.getbuffer()
        out.write(view)
        return StoredAt(name, offset, len(view))
    tensor = data.detach()
    if tensor.device.type != "cpu":
        tensor = tensor.cpu()
    tensor = tensor.contiguous()
    raw = tensor.reshape(-1).view(torch.uint8) if tensor.numel() else torch.empty(0, dtype=torch.uint8)
    out.write(raw.numpy().data)
    dtype = str(tensor.dtype).removeprefix("torch.")
    return StoredAt(name, offset, raw.numel(), dtype, tuple(tensor.shape))


def _item_bytes(item: WriteItem) -> int:
    if item.tensor_data is None:
        return 0
    return (
        int(torch.Size(item.tensor_data.size).numel())
        * torch.empty((), dtype=item.tensor_data.properties.dtype).element_size()
    )


def _bins(items: Sequence[WriteItem], file_bytes: int) -> list[list[WriteItem]]:
    """The items in files of about ``file_bytes`` (largest first, each into the emptiest file that has room),
    the non-tensor items in the first file; at least one file."""
    tensors = sorted((i for i in items if i.type != WriteItemType.BYTE_IO), key=_item_bytes, reverse=True)
    total = sum(_item_bytes(i) for i in tensors)
    count = max(1, -(-total // file_bytes))
    bins: list[list[WriteItem]] = [[] for _ in range(count)]
    sizes = [0] * count
    for item in tensors:
        emptiest = sizes.index(min(sizes))
        bins[emptiest].append(item)
        sizes[emptiest] += _item_bytes(item)
    bins[0] = [i for i in items if i.type == WriteItemType.BYTE_IO] + bins[0]
    return [b for b in bins if b] or [[]]
