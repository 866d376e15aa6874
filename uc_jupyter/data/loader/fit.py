"""A loader's shape against its dataset, checked as the DataLoader is made, and again as its first
pass starts for what a listing still arriving left open: each a one-line error at once.

- ``batch_size`` against what a pass holds: the dataset's length (an ``IterableDataset``'s), or what
  the sampler draws (a map-style one's). A batch beyond it is torch's behaviour, one batch holding the
  whole pass (the default 32 over a folder of 12 images), up to :data:`HARMLESS_BATCH`; beyond that it
  is refused: torch's batch sampler makes a list of ``batch_size`` slots per batch (for an
  ``IterableDataset``, filled one index at a time before the dataset is asked for anything), and
  ``batch_size=10**9`` took 15.5 GB and a minute before it failed. With ``drop_last=True`` any batch
  beyond the pass is refused: the pass would yield nothing. A length not known yet (a listing still
  arriving, whose ``len()`` waits for its end) is not waited for when the loader is made; the first
  pass waits until a batch's worth of items has arrived (no batch could be made before) or the
  listing has ended.
- The files the loop cannot do without at once (:func:`files_held_at_once`: a batch in each worker
  and the loop's) against the dataset's cache budget: a dataset that keeps files in a cache while
  they are used says whether its budget can hold them
  (:meth:`UCVolumeDataset.check_files_at_once <uc_jupyter.data.UCVolumeDataset.check_files_at_once>`).

Example:
    >>> need, most = files_held_at_once(64, 2, 4)
    >>> need
    (192, "a batch in each worker and the loop's: batch_size 64 x (2 workers + 1)")
    >>> most
    (576, 'batch_size 64 x (2 workers x prefetch_factor 4 + 1)')
    >>> check_fit([1, 2, 3], None, batch_size=32, workers=0, prefetch_factor=None)  # one batch of 3
    >>> check_fit([1, 2, 3], None, batch_size=10**9, workers=0, prefetch_factor=None)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: batch_size 1,000,000,000 is larger than the 3 items a pass of this list holds; give ... at most 3
    >>> check_fit([1, 2, 3], None, batch_size=4, workers=0, prefetch_factor=None, drop_last=True)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: batch_size 4 with drop_last=True leaves no batch of the 3 items a pass of this list holds; ...
"""

from __future__ import annotations

from typing import Any

import torch.utils.data

__all__ = ["HARMLESS_BATCH", "check_fit", "files_held_at_once"]

_TORCH_PREFETCH = 2  # torch's prefetch_factor when workers are given none
# The largest batch_size let beyond what a pass holds: torch's sampler then lists 64 Ki slots a batch
# (0.5 MiB) for nothing, no more than a real batch of that size would.
HARMLESS_BATCH = 1 << 16


def files_held_at_once(
    batch_size: int | None, workers: int, prefetch_factor: int | None
) -> tuple[tuple[int, str], tuple[int, str]]:
    """How many items the training loop cannot do without at once (a batch under way in each
    worker, and the loop's own), and the most it may hold (every batch torch has asked its workers
    for, made, queued or in the loop's hands, and the loop's own); each with how it comes about.
    Without workers both are the batch being made (the loop has moved past the one before)."""
    batch, said = (
        (batch_size, f"batch_size {batch_size}") if batch_size is not None else (1, "batch_size None (1 item)")
    )
    if not workers:
        alone = (batch, f"{said}, without workers")
        return alone, alone
    prefetch = prefetch_factor if prefetch_factor is not None else _TORCH_PREFETCH
    need = (batch * (workers + 1), f"a batch in each worker and the loop's: {said} x ({workers} workers + 1)")
    most = (batch * (prefetch * workers + 1), f"{said} x ({workers} workers x prefetch_factor {prefetch} + 1)")
    return need, most


def check_fit(
    dataset: Any,
    sampler: Any,
    *,
    batch_size: int | None,
    workers: int,
    prefetch_factor: int | None,
    waiting_for: int = 0,
    drop_last: bool = False,
) -> None:
    """Refuse a ``batch_size`` beyond what a pass holds (past :data:`HARMLESS_BATCH`, or any with
    ``drop_last``), and a cache budget that cannot hold the
    files the loop holds at once (see the module docstring). ``waiting_for``: how many items of a
    listing still arriving to wait for before its length is judged (0: none, when the loader is made).

    Raises:
        ValueError: the batch size, naming both numbers.
        CacheBudgetError: the budget (the dataset's own error, naming the numbers).
    """
    if batch_size is not None:
        length = _pass_length(dataset, sampler, waiting_for=waiting_for)
        if length is not None and batch_size > length:
            holds = f"the {length:,} items a pass of this {type(dataset).__name__} holds"
            if drop_last and length:
                raise ValueError(
                    f"batch_size {batch_size:,} with drop_last=True leaves no batch of {holds}; "
                    f"give a batch_size of at most {length:,}"
                )
            if batch_size > HARMLESS_BATCH:
                raise ValueError(
                    f"batch_size {batch_size:,} is larger than {holds}; give a batch_size of at most {length:,}"
                )
    check_files = getattr(dataset, "check_files_at_once", None)
    if callable(check_files):
        check_files(*files_held_at_once(batch_size, workers, prefetch_factor))


def _pass_length(dataset: Any, sampler: Any, *, waiting_for: int) -> int | None:
    """How many items a pass holds, or None when that is not known (yet)."""
    source = sampler
    if isinstance(dataset, torch.utils.data.IterableDataset) or sampler is None:
        known = getattr(dataset, "length_known", None)
        if callable(known):  # a listing still arriving says None rather than wait for its end
            answer = known(waiting_for=waiting_for)
            return None if answer is None else int(answer)
        source = dataset
    try:
        return len(source)
    except (TypeError, NotImplementedError):  # no length: an endless stream, say
        return None
