"""Each stream's share of the cache budget: how far ahead of its consumer a stream may pin files.

A DataLoader's workers each make batches ahead of the training loop, and every file a worker has
handed out stays pinned until the loop moves past its batch (:mod:`~uc_jupyter.data.volume.handed_out`).
torch asks each worker for ``prefetch_factor`` batches at once. Under a budget smaller than all of
them, a worker that ran ahead could take the room of the batch the loop waits for, made by another
worker, and the two waited on each other until the cache gave up (``CacheBudgetError`` after its
``wait_seconds``, 120 s by default): a budget of three batches with 2 workers and ``prefetch_factor``
3 did so in its first pass.

So each stream pins (hands out, or holds in its fetch-ahead window) only what fits its share of the
budget, counted from the first file its consumer may still use: the budget split evenly between the
streams that share the cache (the loader's workers, on every rank of this node). What fits no longer
depends on the other streams, and the batch the loop waits for always has its room: the other
streams hold no more than their shares. A stream that reaches the end of its share waits for the
loop to move past one of its batches. A batch larger than a whole share could never be made; it is
one :class:`~uc_jupyter.data.cache.CacheBudgetError` naming the numbers, at once.

Example:
    >>> moved_past = [0]
    >>> share = Share([400] * 6, batch_size=2, share_bytes=1000, first_in_use=lambda: moved_past[0])
    >>> share.end(0, 6)  # from file 0, two files fit 1,000 bytes: one batch
    2
    >>> moved_past[0] = 2  # the loop moved past the stream's first batch
    >>> share.end(2, 6)
    4
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from uc_jupyter.data.cache import CacheBudgetError
from uc_jupyter.data.stream.grid import ranks_on_this_node
from uc_jupyter.data.stream.loop_progress import Consumer

__all__ = ["Share", "stream_share"]


class _Sized(Protocol):
    @property
    def size(self) -> int: ...


def stream_share(max_bytes: int, consumer: Consumer, *, holds: bool, listed_bytes: int | None) -> int | None:
    """One stream's share of a ``max_bytes`` budget (split evenly between the consumer's streams on
    every rank of this node), or None where a stream needs none: its consumer does not report the
    batches it moved past (nothing to wait for), runs in the stream's own process (it would wait
    for itself: such a stream's batch that cannot fit is an error at once, see
    :meth:`~uc_jupyter.data.volume.handed_out.Held.relieve`), or is handed items that let go of
    their files once made (``holds`` False); or the share holds all ``listed_bytes`` anyway.

    Example:
        >>> from uc_jupyter.data.stream.loop_progress import Progress
        >>> import multiprocessing
        >>> progress = Progress(workers=2, batch_size=4, shared=multiprocessing.get_context("fork"), prefetch_factor=2)
        >>> stream_share(12_000, progress.consumer(0), holds=True, listed_bytes=10**6)
        6000
        >>> stream_share(12_000, progress.consumer(0), holds=True, listed_bytes=5_000) is None
        True
    """
    if not (consumer.exact and consumer.elsewhere and holds):
        return None
    share = max_bytes // max(1, consumer.streams * ranks_on_this_node())
    return None if listed_bytes is not None and share >= listed_bytes else share


class Share:
    """How far one stream's pass may pin files: within ``share_bytes`` from the first file its
    consumer may still use (see the module docstring).

    Args:
        files: the pass's files in delivery order, each with its ``size`` (a listing still arriving
            may grow; only what was asked about is read).
        batch_size: files per batch: the consumer moves past a stream's files a batch at a time.
        share_bytes: the stream's share of the budget (:func:`budget_share`).
        first_in_use: the position of the first file the consumer may still use (it only grows).
        where: named first in the error (the cache or the dataset).
    """

    def __init__(
        self,
        files: Sequence[int] | Sequence[_Sized],
        *,
        batch_size: int,
        share_bytes: int,
        first_in_use: Callable[[], int],
        where: str = "cache",
    ) -> None:
        self._files, self._batch, self.share_bytes = files, max(1, batch_size), share_bytes
        self._first_in_use, self._where = first_in_use, where
        self._ends = [0]  # _ends[i]: the bytes of files 0 .. i-1 (grown as far as asked)

    def end(self, position: int, wanted: int) -> int:
        """How far (an end position, at most ``wanted``) the stream may pin now, its files up to
        ``position`` pinned already; ``position`` when it must wait for the consumer first.

        Raises:
            CacheBudgetError: the consumer's own batch, the next it takes from this stream, does not
                fit the share: it could never be made.
        """
        first = self._first_in_use()
        if first >= wanted:  # the consumer moved past everything asked about (or on to another pass)
            return wanted
        ends = self._grow(wanted)
        fits = bisect.bisect_right(ends, ends[first] + self.share_bytes, lo=first) - 1
        batch_end = min(wanted, first + self._batch - first % self._batch)
        if fits < batch_end:
            self._refuse(first, batch_end)
        return max(position, min(wanted, fits))

    def reach(self, position: int, wanted: int, *, idle: bool, let_go: Callable[[int], object]) -> int:
        """:meth:`end`, waiting for the consumer to move past a batch while the stream may pin
        nothing more and is ``idle`` (holds nothing it has not handed out: only the consumer can
        give it room). Meanwhile ``let_go(0)`` releases what the consumer is done with. The consumer
        runs in another process (:func:`stream_share` gives no share otherwise), and moves on in
        its own time: the wait polls, from 1 ms up to 20 ms apart.

        Raises:
            CacheBudgetError: as :meth:`end`.
        """
        allowed = self.end(position, wanted)
        delay = 0.001
        while idle and allowed <= position:
            let_go(0)
            time.sleep(delay)
            delay = min(2 * delay, 0.02)
            allowed = self.end(position, wanted)
        return allowed

    def _grow(self, upto: int) -> list[int]:
        ends, files = self._ends, self._files
        for index in range(len(ends) - 1, upto):
            item = files[index]
            ends.append(ends[-1] + (item if isinstance(item, int) else item.size))
        return ends

    def _refuse(self, first: int, batch_end: int) -> None:
        ends = self._ends
        needed = ends[batch_end] - ends[first]
        raise CacheBudgetError(
            f"{self._where}: a batch of {batch_end - first} files needs {needed:,} bytes, more than a worker's "
            f"share of the cache budget ({self.share_bytes:,} bytes: the budget split between the workers of "
            "the ranks on this machine, so that none takes the room of the batch the loop waits for); raise "
            "cache_max_bytes, or lower batch_size or num_workers (or give a transform: a file is let go once "
            "its item is made)"
        )
