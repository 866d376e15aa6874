"""Where the current process sits: its rank among training processes and its DataLoader worker.

Rank and world size come from an initialised ``torch.distributed``, else from the ``RANK`` and
``WORLD_SIZE`` environment variables (torchrun's), else rank 0 of 1. The worker comes from
``torch.utils.data.get_worker_info()``.

Example:
    >>> current_grid()  # doctest: +SKIP
    Grid(rank=0, world_size=1, worker=0, num_workers=1)
"""

from __future__ import annotations

import os
import sys
from typing import Any

from uc_jupyter.data.stream.partition import Grid

__all__ = ["current_grid", "current_rank", "every_rank", "ranks_on_this_node", "stream_name"]


def current_rank() -> tuple[int, int]:
    """(rank, world_size) of this process."""
    dist = sys.modules.get("torch.distributed")  # only when torch is already in use
    if dist is not None and dist.is_available() and dist.is_initialized():
        return int(dist.get_rank()), int(dist.get_world_size())
    rank, world = os.environ.get("RANK"), os.environ.get("WORLD_SIZE")
    if (rank is None) != (world is None):
        have, missing = ("RANK", "WORLD_SIZE") if rank is not None else ("WORLD_SIZE", "RANK")
        raise RuntimeError(f"{have} is set but {missing} is not; set both (as torchrun does) or neither")
    if rank is None or world is None:
        return 0, 1
    try:
        values = int(rank), int(world)
    except ValueError:
        raise RuntimeError(f"RANK={rank!r} and WORLD_SIZE={world!r} must be integers") from None
    if not 0 <= values[0] < values[1]:
        raise RuntimeError(f"RANK={rank} must be in [0, WORLD_SIZE={world})")
    return values


def ranks_on_this_node() -> int:
    """How many training processes run on this machine (``LOCAL_WORLD_SIZE``, as torchrun and
    uc_jupyter's launchers set it; 1 without it, or when it is not a positive integer): they share
    its file cache.

    Example:
        >>> import os; os.environ.pop("LOCAL_WORLD_SIZE", None) and None; ranks_on_this_node()
        1
    """
    try:
        return max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    except ValueError:
        return 1


def current_grid() -> Grid:
    """This stream's place: rank and world size, DataLoader worker id and count."""
    rank, world = current_rank()
    worker, workers = 0, 1
    data = sys.modules.get("torch.utils.data")
    info = data.get_worker_info() if data is not None else None
    if info is not None:
        worker, workers = int(info.id), int(info.num_workers)
    return Grid(rank=rank, world_size=world, worker=worker, num_workers=workers)


def stream_name(rank: int, worker: int) -> str:
    """The name of stream ``(rank, worker)`` in checkpoints: ``rank0-worker1``."""
    return f"rank{rank}-worker{worker}"


def every_rank(value: Any) -> list[Any] | None:
    """Every rank's ``value``, in rank order, when ``torch.distributed`` is up (a collective:
    every rank must call it together), else None."""
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    everyone: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, value)
    return everyone
