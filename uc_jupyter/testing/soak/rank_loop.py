"""The soak's training loop on each rank: one epoch per call of the pool, resumed from checkpoints.

Every rank keeps its loop (the two loaders with their persistent workers, a small DDP model, its
optimiser) in this module between the pool's calls, so one call is one epoch of one long training
run. After a failure the driver asks for ``resume``: the loop is built again and restored from the
newest complete checkpoint of the run, as a person's training script would be.

Each epoch reads the volume (its files' bytes hashed in the DataLoader workers: a sample's identity
is its digest, so a corrupted file would show as a digest the source never had) and then the table
(each row's payload hashed against its id). Every ``save_every`` steps, and at the epoch's end, the
job is saved with ``torch.distributed.checkpoint`` into a volume: the model, the optimiser, both
loaders' positions, the random state, and ``progress``: the digests the whole job had been given
in this epoch so far, so that a resumed epoch can be told to hold every file exactly once.

Faults a rank injects into itself, at a step of the epoch the driver names: rank 0 kills one of
its DataLoader workers (SIGKILL), rank 1 kills itself (SIGKILL). For the driver's own faults, rank 0
waits at that step until the driver has injected them (:func:`~uc_jupyter.testing.soak.injections.meet`).

Example:
    >>> digest(b"abc")
    'cf4ab791c62b8d2b2109c90275287816'
    >>> pool.run(train_epoch, EpochCall(0, False, folder, table, run, size))  # doctest: +SKIP
"""

from __future__ import annotations

import array
import hashlib
import multiprocessing
import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from uc_jupyter.testing.soak.injections import meet
from uc_jupyter.testing.soak.plan import SoakSize

__all__ = ["FEATURES", "EpochCall", "EpochResult", "digest", "rss_bytes", "train_epoch"]

FEATURES = 16  # the model's inputs: a sample's first bytes, scaled to [0, 1]
_SEED = 7


def digest(data: bytes) -> str:
    """A sample's identity and checksum in one: 16 bytes of BLAKE2b, as hex."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def rss_bytes(pid: int | str = "self") -> int:
    """The resident set of process ``pid`` in bytes (Linux ``/proc``), 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


@dataclass(frozen=True)
class EpochCall:
    """What the driver asks of one call: the 0-based ``epoch`` it expects, whether to ``resume`` (build
    the loop again from the newest checkpoint), where the data and checkpoints are, and the steps of
    this epoch at which rank 0 kills a DataLoader worker, rank 1 kills itself, or rank 0 meets the
    driver in the ``handshake`` folder for a fault of the driver's (None: no fault)."""

    epoch: int
    resume: bool
    volume: str
    table: str
    run: str
    size: SoakSize
    kill_worker_at: int | None = None
    kill_rank_at: int | None = None
    meet_at: int | None = None
    handshake: str = ""


@dataclass(frozen=True)
class EpochResult:
    """What one rank brings back from an epoch it finished: ``before``, the digests the whole job had
    been given in it before the checkpoint this call resumed from (the same on every rank); ``after``,
    this rank's own since; ``row_ids`` and ``row_digests``, its table rows; its RSS at the epoch's end.
    Digests come as their raw bytes end to end and ids as int64s (a few large objects per epoch: the
    driver's memory is what the soak measures, and 10^5 small strings an epoch would fragment it)."""

    rank: int
    epoch: int
    resumed_from: str | None
    before: bytes
    after: bytes
    row_ids: bytes
    row_digests: bytes
    rss_bytes: int
    saves: int


def read_sample(path: str) -> tuple[str, Any]:
    """The volume's transform, in the DataLoader workers: the file's digest and the model's features."""
    import torch

    with open(path, "rb") as handle:
        data = handle.read()
    features = torch.frombuffer(bytearray(data[:FEATURES]), dtype=torch.uint8).float() / 255
    return digest(data), features


_LOOP: dict[str, _Loop] = {}  # this rank's loop, kept between the pool's calls


def train_epoch(call: EpochCall) -> EpochResult:
    """Run one epoch on this rank (see the module docstring); every rank of the pool calls it together."""
    loop = _LOOP.get("loop")
    if loop is None or call.resume:
        if loop is not None:
            loop.close()
        loop = _LOOP["loop"] = _Loop(call)
    return loop.epoch(call)


class _Loop:
    def __init__(self, call: EpochCall) -> None:
        import torch
        import torch.distributed as dist
        from torch.distributed.checkpoint import load  # type: ignore[attr-defined]
        from torch.distributed.checkpoint.state_dict import set_state_dict
        from torch.nn.parallel import DistributedDataParallel

        from uc_jupyter.checkpoint import UCVolumeReader, latest
        from uc_jupyter.data import DataLoader, UCTableDataset, UCVolumeDataset

        size = call.size
        self.size, self.run, self.rank = size, call.run, dist.get_rank()
        files = UCVolumeDataset(call.volume, recursive=True, shuffle=True, seed=_SEED, transform=read_sample)
        self.files = DataLoader(files, batch_size=size.batch_size, num_workers=size.workers, mlflow=False)
        rows = UCTableDataset(call.table, batch_size=size.table_batch, shuffle=True, seed=_SEED)
        self.rows = DataLoader(rows, batch_size=None, num_workers=0, mlflow=False)
        self.model = DistributedDataParallel(torch.nn.Linear(FEATURES, 1))
        self.optimiser = torch.optim.SGD(self.model.parameters(), lr=0.01)
        self.progress: dict[str, Any] = {"epoch": 0, "step": 0, "epoch_step": 0, "seen": []}
        self.resumed_from = latest(call.run)
        if self.resumed_from is not None:
            restored = self.state()
            load(restored, storage_reader=UCVolumeReader(self.resumed_from))
            set_state_dict(
                self.model,
                self.optimiser,
                model_state_dict=restored["model"],
                optim_state_dict=restored["optim"],
            )

    def state(self) -> dict[str, Any]:
        from torch.distributed.checkpoint.state_dict import get_state_dict

        from uc_jupyter.checkpoint import RandomState

        model, optimiser = get_state_dict(self.model, self.optimiser)
        return {
            "model": model,
            "optim": optimiser,
            "files": self.files,
            "rows": self.rows,
            "rng": RandomState(),
            "progress": self.progress,
        }

    def save(self) -> None:
        from torch.distributed.checkpoint import save  # type: ignore[attr-defined]

        from uc_jupyter.checkpoint import UCVolumeWriter

        writer = UCVolumeWriter(f"{self.run}/step-{self.progress['step']:07d}", keep_last=2)
        save(self.state(), storage_writer=writer)

    def epoch(self, call: EpochCall) -> EpochResult:
        import torch.distributed as dist

        progress, size = self.progress, self.size
        epoch, before = progress["epoch"], list(progress["seen"])
        resumed_from, self.resumed_from = self.resumed_from, None  # said once, by the call that resumed
        given: list[str] = []  # since the last save, gathered from every rank at the next
        after: list[str] = []
        saves = 0
        for digests, features in self.files:
            progress["step"] += 1
            progress["epoch_step"] += 1
            at = progress["epoch_step"]
            if self.rank == 0 and at == call.kill_worker_at:
                _kill_a_worker()
            if self.rank == 0 and at == call.meet_at:
                meet(Path(call.handshake))
            if self.rank == 1 and at == call.kill_rank_at:
                os.kill(os.getpid(), signal.SIGKILL)  # as a lost node
            loss = (self.model(features).squeeze(1) - features.mean(1)).pow(2).mean()
            self.optimiser.zero_grad()
            loss.backward()
            self.optimiser.step()
            given += digests
            after += digests
            if at % size.save_every == 0 and at < size.steps_per_epoch:
                everyone: list[Any] = [None] * dist.get_world_size()
                dist.all_gather_object(everyone, given)
                progress["seen"] += [name for part in everyone for name in part]
                given = []
                self.save()
                saves += 1
        row_ids: list[int] = []
        row_digests: list[str] = []
        for batch in self.rows:
            row_ids += batch["id"].tolist()
            row_digests += (digest(payload) for payload in batch["payload"])
        progress.update(epoch=epoch + 1, epoch_step=0, seen=[])
        self.save()
        return EpochResult(
            rank=self.rank,
            epoch=epoch,
            resumed_from=resumed_from,
            before=bytes.fromhex("".join(before)),
            after=bytes.fromhex("".join(after)),
            row_ids=array.array("q", row_ids).tobytes(),
            row_digests=bytes.fromhex("".join(row_digests)),
            rss_bytes=rss_bytes(),
            saves=saves + 1,
        )

    def close(self) -> None:
        for loader in (self.files, self.rows):
            loader.close()


def _kill_a_worker() -> None:
    """SIGKILL one DataLoader worker of this process (its multiprocessing children are the volume
    loader's workers: the table's loader has none)."""
    workers = multiprocessing.active_children()
    if workers and workers[0].pid is not None:
        os.kill(workers[0].pid, signal.SIGKILL)
