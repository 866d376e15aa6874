"""What torch's multi-process DataLoader iterator knows of its workers' batches, read, never changed.

torch keeps one entry per *task* (a batch asked of a worker): ``_task_info[idx] = (worker,)`` until
the batch arrives, ``(worker, data)`` once it arrived ahead of its turn; an entry goes when its
batch is handed on, or when torch skips the task of a worker whose iterable dataset ran out (its
last task brings no batch). ``_rcvd_idx`` is the next task to hand on. These are private attributes
of torch 2.x, read only here (tests/data/test_torch_tasks.py checks them on each torch we pin). A
single-process iterator has none of them: every function then answers "nothing known".

Example:
    >>> before = tasks(iterator)                 # just before next(iterator)   # doctest: +SKIP
    >>> batch = next(iterator)                                                  # doctest: +SKIP
    >>> delivered_worker(iterator, before)       # the worker that made batch   # doctest: +SKIP
    1
"""

from __future__ import annotations

from typing import Any

__all__ = ["delivered_worker", "outstanding", "tasks"]

Tasks = dict[int, tuple[Any, ...]]


def tasks(inner: Any) -> Tasks:
    """The iterator's tasks now (a copy; empty for a single-process iterator)."""
    info = getattr(inner, "_task_info", None)
    return dict(info) if info else {}


def delivered_worker(inner: Any, before: Tasks) -> int | None:
    """The worker whose batch the ``next(inner)`` after ``before`` was taken returned; None when
    unknown (a single-process iterator).

    torch hands batches on in task order: the one returned is task ``_rcvd_idx - 1`` (tasks of
    exhausted workers it skipped on the way lie before it). Out of order (``in_order=False``) it may
    instead hand on a later task as it arrives, without moving ``_rcvd_idx``: then the batch's task
    is the one gone from the tasks at or past ``_rcvd_idx``."""
    info = getattr(inner, "_task_info", None)
    received = getattr(inner, "_rcvd_idx", None)
    if info is None or received is None:
        return None
    gone = [idx for idx in before if idx not in info]
    ahead = [idx for idx in gone if idx >= received]
    idx = ahead[0] if ahead else received - 1
    task = before.get(idx)
    return int(task[0]) if task is not None and idx in gone else None


def outstanding(inner: Any, workers: int) -> tuple[int, ...]:
    """Per worker, batches asked of it and not yet handed to the loop (prefetched or in the making)."""
    depths = [0] * workers
    for task in (getattr(inner, "_task_info", None) or {}).values():
        if len(task) == 1 and 0 <= task[0] < workers:  # (worker,) until the batch arrives
            depths[task[0]] += 1
    return tuple(depths)
