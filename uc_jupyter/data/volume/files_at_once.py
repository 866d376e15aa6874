"""Whether a cache budget can hold the files a consumer holds at once: a pure rule, with the one-line
refusal that names the numbers.

A volume pass that hands out paths keeps each file in the cache (pinned, or streamed and counted
against the budget) until the loop has moved past the batch that holds it. A DataLoader's workers
each make a batch at once while the loop holds its own: a budget that cannot hold that many files
(``batch_size x (num_workers + 1)``) let a worker whose batch comes later take the room of the batch
the loop waits for, and the workers waited on each other until the cache gave up (``wait_seconds``,
120 s by default). Such a budget is refused when the loader is made; above it, each worker pins
within its share of the budget (:mod:`~uc_jupyter.data.volume.share`), so the workers never wait on
each other however many batches torch asks for. Only a budget that even the
smallest of the files overflow is refused (their listed sizes; a budget that is the disk charges
whole blocks, which is more); the advice names what holds the most the loader may hold (every
batch torch asked for, ``batch_size x (num_workers x prefetch_factor + 1)``) of the largest files.

A consumer whose transform makes each item (a decoder) lets go of the file once the item is made,
and needs no such room: the files stream through one at a time.

Example:
    >>> import textwrap
    >>> need, most = (3, "a batch per worker and the loop's"), (5, "every batch asked for")
    >>> check_files_at_once(3000, [1000] * 12, need, most, listed_all=True, where="/Volumes/main/ml/v")
    >>> try:
    ...     check_files_at_once(1500, [1000] * 12, need, most, listed_all=True, where="/Volumes/main/ml/v")
    ... except CacheBudgetError as error:
    ...     print(textwrap.fill(str(error), 100))
    /Volumes/main/ml/v: cache_max_bytes 1,500 bytes holds 1 of its files, but this loader needs room for
    3 at once (a batch per worker and the loop's) and holds up to 5 (every batch asked for), and a file
    stays in the cache while its batch is in use; raise cache_max_bytes to at least 5,000 bytes, or
    lower batch_size, num_workers or prefetch_factor (or give a transform: a file is let go once its
    item is made)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from uc_jupyter.data.cache import CacheBudgetError

__all__ = ["check_files_at_once"]


def check_files_at_once(
    max_bytes: int,
    sizes: Sequence[int],
    need: tuple[int, str],
    most: tuple[int, str],
    *,
    listed_all: bool,
    where: str,
) -> None:
    """Raise :class:`~uc_jupyter.data.cache.CacheBudgetError` when a budget of ``max_bytes`` cannot
    hold ``need`` of the files of these ``sizes``, even the smallest (see the module docstring).

    Args:
        max_bytes: the cache budget.
        sizes: the listed sizes of the dataset's files (those listed so far, unless ``listed_all``).
        need: how many files the loader cannot do without at once, and how that count comes about;
            a listing of fewer files needs room for all of them.
        most: the most files the loader may hold at once, and how: what the advice makes room for.
        listed_all: whether ``sizes`` is the whole listing. A listing still arriving is judged only
            once it has as many files as are needed: smaller ones may still come.
        where: the dataset's ``/Volumes`` folder, named first in the message.
    """
    (needed, needed_why), (most_held, most_why) = need, most
    held = min(needed, len(sizes))
    if held == 0 or (not listed_all and len(sizes) < needed):
        return
    listed = np.fromiter(sizes, dtype=np.int64, count=len(sizes))
    smallest = np.sort(np.partition(listed, held - 1)[:held])
    if int(smallest.sum()) <= max_bytes:
        return
    fits = int(np.searchsorted(np.cumsum(smallest), max_bytes, side="right"))
    advised = min(max(most_held, held), len(sizes))
    enough = int(np.partition(listed, len(listed) - advised)[len(listed) - advised :].sum())
    up_to = f" and holds up to {advised} ({most_why})" if advised > held else ""
    raise CacheBudgetError(
        f"{where}: cache_max_bytes {max_bytes:,} bytes holds {fits} of its files, but this loader needs room for "
        f"{held} at once ({needed_why}){up_to}, and a file stays in the cache while its batch is in use; raise "
        f"cache_max_bytes to at least {enough:,} bytes, or lower batch_size, num_workers or prefetch_factor (or "
        "give a transform: a file is let go once its item is made)"
    )
