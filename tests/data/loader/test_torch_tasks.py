"""What torch's DataLoader iterator tells of its workers' batches, on torch's own DataLoader."""

from __future__ import annotations

from typing import Any

import torch.utils.data

from tests.data.conftest import WorkerTagged
from uc_jupyter.data.loader.torch_tasks import delivered_worker, outstanding, tasks


def batches_with_workers(loader: torch.utils.data.DataLoader[Any]) -> list[tuple[int, int | None]]:
    """(the worker a batch says made it, the worker delivered_worker names) for every batch."""
    found = []
    iterator = iter(loader)
    while True:
        before = tasks(iterator)
        try:
            batch = next(iterator)
        except StopIteration:
            return found
        found.append((int(batch[0]), delivered_worker(iterator, before)))


def test_the_delivered_worker_is_named_also_where_torch_skips_exhausted_workers() -> None:
    for counts in ([1, 5], [5, 1], [2, 6, 0], [3, 3, 3]):
        loader = torch.utils.data.DataLoader(
            WorkerTagged(counts),
            batch_size=1,
            num_workers=len(counts),
            prefetch_factor=2,
            multiprocessing_context="fork",
        )
        found = batches_with_workers(loader)
        assert sorted(made for made, _ in found) == sorted(w for w, n in enumerate(counts) for _ in range(n))
        assert all(made == named for made, named in found), (counts, found)


def test_out_of_order_delivery_is_named_too() -> None:
    loader = torch.utils.data.DataLoader(
        WorkerTagged([4, 1]), batch_size=1, num_workers=2, multiprocessing_context="fork", in_order=False
    )
    found = batches_with_workers(loader)
    assert all(made == named for made, named in found)


def test_a_single_process_iterator_knows_nothing() -> None:
    iterator = iter(torch.utils.data.DataLoader(WorkerTagged([3]), batch_size=1, num_workers=0))
    before = tasks(iterator)
    next(iterator)
    assert (before, delivered_worker(iterator, before), outstanding(iterator, 0)) == ({}, None, ())


def test_outstanding_counts_the_batches_each_worker_owes() -> None:
    loader = torch.utils.data.DataLoader(
        WorkerTagged([4, 4]), batch_size=1, num_workers=2, prefetch_factor=3, multiprocessing_context="fork"
    )
    iterator = iter(loader)
    next(iterator)  # torch asked 6 batches, one came, one more was asked: 6 owed, or fewer once some arrived
    depths = outstanding(iterator, 2)
    assert len(depths) == 2 and 0 <= sum(depths) <= 6
    assert sum(1 for task in tasks(iterator).values() if len(task) == 1) == sum(depths)
