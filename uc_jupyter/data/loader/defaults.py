"""The arguments of :class:`~uc_jupyter.data.DataLoader`: checked before torch sees them, and the
defaults torch's lack (how many workers, how far ahead they fetch, whether they persist, how they
start).

Any argument the caller gives wins. ``num_workers`` defaults to 6, clamped (with one notice line) to
the CPUs this process may use; with workers, ``prefetch_factor=4`` and ``persistent_workers=True``;
and workers start with ``spawn`` (one notice line) once this process has made object_store
requests, which forked children cannot make (tokio's runtime does not survive a fork).

Example:
    >>> kwargs = {"num_workers": 2}
    >>> apply_defaults(kwargs); kwargs
    {'num_workers': 2, 'prefetch_factor': 4, 'persistent_workers': True}
"""

from __future__ import annotations

import inspect
import os
import pickle
from typing import Any

import torch.utils.data

from uc_jupyter import options as opt
from uc_jupyter.errors import first_line
from uc_jupyter.notices import notice

__all__ = [
    "DEFAULT_PREFETCH",
    "DEFAULT_WORKERS",
    "apply_defaults",
    "check_arguments",
    "check_dataset",
    "check_ranks_agree",
    "worker_start_method",
]

DEFAULT_WORKERS = 6
DEFAULT_PREFETCH = 4
_CLAMP_NOTICE = "uc_jupyter.data.loader.dataloader: workers clamped"  # each said once per process
_SPAWN_NOTICE = "uc_jupyter.data.loader.dataloader: spawned workers"
_FORKED_ANYWAY_NOTICE = "uc_jupyter.data.loader.dataloader: forked though not fork-safe"


def apply_defaults(kwargs: dict[str, Any]) -> None:
    """Fill in the tuned defaults the caller did not give (keyword arguments only)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if "num_workers" not in kwargs:
        kwargs["num_workers"] = min(DEFAULT_WORKERS, cpus)
        if cpus < DEFAULT_WORKERS:
            notice(
                f"uc_jupyter DataLoader: using {cpus} workers instead of {DEFAULT_WORKERS} (this process may use "
                f"{cpus} CPUs); pass num_workers= to choose",
                key=_CLAMP_NOTICE,
            )
    if kwargs["num_workers"] > 0:
        kwargs.setdefault("prefetch_factor", DEFAULT_PREFETCH)
        kwargs.setdefault("persistent_workers", True)


def worker_start_method(dataset: Any, collate_fn: Any, worker_init_fn: Any) -> str | None:
    """How to start workers when the caller did not say: None (torch's default, fork on Linux), or
    ``"spawn"`` when this process has made object_store requests, after which a forked child's own
    requests hang (tokio's runtime does not survive a fork) and object storage would fall back to
    fsspec (far more CPU per file) or, for gs:// and Azure, fail. Spawned workers start clean, at the
    price of a fresh interpreter each and a pickled dataset; not ``forkserver``: its server keeps the
    environment of when it started, so workers would miss a later ``RANK`` or ``AWS_*`` variable.
    When the dataset or the functions do not pickle (a lambda transform), workers are forked as
    before."""
    from uc_jupyter.storage.objects import fork_safe

    if fork_safe():
        return None
    try:
        pickle.dumps((dataset, collate_fn, worker_init_fn))
    except Exception as exc:
        notice(
            "uc_jupyter DataLoader: this process has used object storage, so forked workers cannot; "
            f"they would be spawned, but the dataset or its functions do not pickle ({first_line(exc)}); "
            "pass multiprocessing_context= to choose",
            key=_FORKED_ANYWAY_NOTICE,
        )
        return None
    notice(
        "uc_jupyter DataLoader: starting workers with multiprocessing_context='spawn' (this process has "
        "used object storage, which forked workers cannot); pass multiprocessing_context= to choose",
        key=_SPAWN_NOTICE,
    )
    return "spawn"


def check_dataset(dataset: Any) -> None:
    """TypeError unless ``dataset`` is a torch Dataset, an IterableDataset or a sequence."""
    if isinstance(dataset, torch.utils.data.Dataset):
        return
    if hasattr(dataset, "__getitem__") and hasattr(dataset, "__len__"):
        return
    raise TypeError(f"DataLoader needs a torch Dataset, an IterableDataset or a sequence, got {type(dataset).__name__}")


def check_arguments(dataset: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """torch's arguments, given by keyword or by position, checked before torch sees them: torch
    coerces some (``shuffle="no"`` shuffles) and fails raw on others."""
    try:
        given = inspect.signature(torch.utils.data.DataLoader.__init__).bind_partial(None, dataset, *args, **kwargs)
    except TypeError as exc:  # an argument torch does not take: its own one-line message
        raise TypeError(f"DataLoader: {exc}") from None
    opt.check_loader_arguments(given.arguments)


def check_structures(dataset: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """A dataset whose samples differ in structure (a Mix of file paths and table rows) needs a
    ``collate_fn`` that takes them all: refused in one line before anything is read, not on the first batch."""
    mismatch = getattr(dataset, "structure_mismatch", None)
    if not callable(mismatch):
        return
    given = inspect.signature(torch.utils.data.DataLoader.__init__).bind_partial(None, dataset, *args, **kwargs)
    batching = given.arguments.get("batch_size", 1) is not None or given.arguments.get("batch_sampler") is not None
    if batching and given.arguments.get("collate_fn") is None:
        reason = mismatch()
        if reason is not None:
            raise ValueError(reason)


def check_ranks_agree(dataset: Any, num_workers: int, batch_size: int | None) -> None:
    """With torch.distributed up, every rank must build the same loader (workers, batch size, data,
    ``on_uneven``), or data is duplicated or skipped: a collective, on each loader's first pass."""
    from dataclasses import asdict

    from uc_jupyter.data.stream.grid import every_rank

    fingerprint = getattr(dataset, "fingerprint", None)
    mine = {
        "num_workers": num_workers,
        "batch_size": batch_size,
        "dataset": asdict(fingerprint()) if callable(fingerprint) else type(dataset).__name__,
        "on_uneven": getattr(dataset, "on_uneven", None),
    }
    everyone = every_rank(mine) or [mine]
    for rank, theirs in enumerate(everyone):
        for key in mine:
            if theirs[key] != everyone[0][key]:
                raise RuntimeError(
                    f"ranks disagree on {key}: rank 0 has {everyone[0][key]!r}, rank {rank} has "
                    f"{theirs[key]!r}; every rank must build the same loader or data is duplicated or skipped"
                )
