"""The hand-out stage of a volume pass: each file's item made and counted, and the files handed out
kept pinned, so that their paths stay valid while they are used.

:meth:`Held.hand_out` is the stage: it takes the runs of pinned files the fetch-or-hit stage
(:meth:`~uc_jupyter.data.volume.prefetch.Prefetcher.run`) yields, makes each file's item (its
path, or what the decode stage, the dataset's transform, makes of it), counts it and yields it.
It runs per file of every pass: a warm pass's file costs it the item, the count and the hold.

A pinned resident file cannot be evicted; a file streamed past a full cache is deleted when it is
released. :class:`Held` releases a file only once the stream's consumer is done with it (see
:mod:`uc_jupyter.data.stream.loop_progress`): a file is done with once the consumer has moved past the batch
that holds it. With a consumer that reports its batches (uc_jupyter's DataLoader), files done with
are let go at each batch the stream completes, and when the cache needs room
(:meth:`Held.relieve`); a file still in use never is. A budget too small for the files still in
use plus the next one is an error at once, not a wait that cannot end.

A consumer that says nothing (iterated directly, or torch's own DataLoader) is taken to be done
with a file once it asks for the next one. The last ``window`` files handed out stay pinned until
the cache needs their room; :meth:`Held.relieve` then lets go of the oldest half of the streamed
files at a time (then of the resident ones), since the later files are the likelier to sit in a
batch the stream cannot see.

Example:
    >>> held = Held(cache, window=512, consumer=consumer.of(dataset))  # doctest: +SKIP
    >>> held.add(got)              # handed out: pinned                 # doctest: +SKIP
    >>> leftovers = held.finish(completed=True)  # the pass ended       # doctest: +SKIP
    >>> items = held.hand_out(fetch.run(wanted), positions, None, count, ended)  # the stage  # doctest: +SKIP
"""

from __future__ import annotations

import collections
import sys
import time
from collections.abc import Callable, Generator, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from uc_jupyter.data.cache import CacheBudgetError
from uc_jupyter.data.stream.loop_progress import UNKNOWN, Consumer

if TYPE_CHECKING:
    from uc_jupyter.data.cache import CachedFile, FileCache

__all__ = ["Count", "Deliver", "Held"]

# The decode stage: the item of the file at a path, given its position in the listing.
Deliver = Callable[[str, int], Any]
# Counts one file handed out: (its size, downloaded by this pass, resident in the cache).
Count = Callable[[int, bool, bool], None]


class Held:
    """The files one pass of a stream handed out and still pins (see the module docstring).

    Args:
        cache: the cache the files are pinned in.
        window: how many of the last files handed out stay pinned while the cache has room
            (what a consumer that says nothing gets; one that reports its batches may get fewer).
        consumer: who uses the files; its pass starts when ``Held`` is made.
        hold: False: :meth:`hand_out` releases each file once its item is made (a transform that
            returned is done with the path).

    :meth:`hand_out` is the stage; on its own, call ``add(got)`` for each file handed out,
    :meth:`relieve` when the cache needs room, and :meth:`finish` when the pass ends.
    """

    def __init__(self, cache: FileCache, window: int, consumer: Consumer = UNKNOWN, *, hold: bool = True) -> None:
        # No lock: only the stream's own thread adds, relieves (from inside its cache.get) and finishes.
        self._cache, self._window = cache, window
        self._hold = hold
        self._exact = consumer.exact
        self._stages = consumer.stages  # the fetch and decode stages' seconds go here
        self._first_in_use = consumer.start()
        # Positions are implicit: the files held are the last len(_files) of the _handed handed out,
        # since only the oldest are released (a consumer that says nothing needs no positions).
        self._files: collections.deque[CachedFile] = collections.deque()
        self._handed = 0
        # Files before this position are done with (a cached answer: it only grows). A consumer that
        # says nothing is done with every file handed out before the one it asks for.
        self._done = 0 if self._exact else sys.maxsize
        # A consumer that reports its batches is asked once per batch (its answer changes no more
        # often): what it is done with goes then, so that a worker idle between batches pins only
        # what the loop still uses, and never a file a download elsewhere could evict.
        self._batch = consumer.batch_size if self._exact else 0
        # First asked once the stream's second batch is complete: when its first is, the loop cannot
        # have moved past it (it has not received it yet).
        self._next_ask = 2 * self._batch or sys.maxsize
        # ``add(got)``: ``got`` was handed out. It runs per file (a warm epoch's file costs a few
        # calls), so each kind of consumer gets its own, the one that says nothing the leanest.
        self.add: Callable[[CachedFile], None] = self._add_counted if self._exact else self._add_windowed

    def hand_out(
        self,
        runs: Generator[Sequence[CachedFile], None, None],
        positions: Iterable[int],
        deliver: Deliver | None,
        count: Count,
        ended: Callable[[list[CachedFile], bool], None],
    ) -> Generator[Any, None, None]:
        """The stage: yield the item of each file of ``runs`` (in order: the files at ``positions``),
        its path itself when ``deliver`` is None; ``count`` each; keep each pinned as the consumer
        needs (or release it at once without ``hold``). When the pass ends, however it ends,
        ``runs`` is closed and ``ended(lingering, completed)`` told what :meth:`finish` left pinned."""
        cache, stages, clock = self._cache, self._stages, time.perf_counter
        add = self.add if self._hold else cache.release  # without hold, a file is done with once its item is made
        at = iter(positions) if deliver is not None else None
        ready: Sequence[CachedFile] = ()
        taken, completed = 0, False
        try:
            while True:
                asked = clock()  # the fetch stage's time: waiting for the next run (a hit's is a lookup)
                run = next(runs, None)
                stages.fetch += clock() - asked
                if run is None:
                    break
                ready, taken = run, 0
                for got in ready:
                    taken += 1
                    try:
                        if at is None:
                            item = got.path
                        else:
                            began = clock()
                            item = deliver(got.path, next(at))  # type: ignore[misc]
                            stages.decode += clock() - began
                    finally:
                        add(got)
                    count(got.size, got.downloaded, got.resident)
                    yield item
            ready = ()
            completed = True
        finally:
            try:
                runs.close()  # the window's own files and downloads first
            finally:
                for got in ready[taken:]:  # a run's files not handed out
                    cache.release(got)
                ended(self.finish(completed=completed), completed)

    def _add_counted(self, got: CachedFile) -> None:
        files = self._files
        files.append(got)
        handed = self._handed = self._handed + 1
        if handed >= self._next_ask:  # a batch is complete: let go of what the loop is done with
            self._next_ask = handed + self._batch
            self._release(self._releasable(ask=True))
        elif len(files) > self._window:
            self._trim()

    def _add_windowed(self, got: CachedFile) -> None:
        # Positions do not matter here (every file handed out before is done with): no count kept.
        files = self._files
        files.append(got)
        if len(files) > self._window:
            self._cache.release(files.popleft())

    def relieve(self, size: int = 0) -> int:
        """Release files done with, to give the cache room for a file of ``size`` bytes; how many
        (0: every file held is in use).

        Raises:
            CacheBudgetError: the files still in use and the one wanted cannot fit the budget at
                all: the loop would wait for ever on a batch that cannot be completed.
        """
        if not self._exact:
            return self._relieve_some()
        releasable = self._releasable(ask=True)
        self._release(releasable)
        if not releasable:
            in_use = sum(f.size for f in self._files)
            if in_use + size > self._cache.max_bytes:
                raise CacheBudgetError(
                    f"cache {self._cache.root}: the {len(self._files)} files handed out that the loop still uses "
                    f"({in_use} bytes) and the next one ({size} bytes) do not fit the budget of "
                    f"{self._cache.max_bytes} bytes, and a batch's files stay in the cache while it is used; "
                    "raise cache_max_bytes, or lower batch_size (or prefetch_factor, num_workers)"
                )
        return releasable

    def finish(self, *, completed: bool) -> list[CachedFile]:
        """The pass ended (``completed``) or stopped early: release what is done with and return the
        files still pinned for the caller to release later (the next pass, or this process's end).

        A DataLoader hands batches on after the stream ends, so at the end some files may still
        sit in batches the loop has not reached. A consumer that says nothing keeps every file of
        a completed pass (and none of one stopped early: it moved on)."""
        if self._exact:
            self._release(self._releasable(ask=True))
        elif not completed:
            self.release_all()
        files, self._files = list(self._files), collections.deque()
        return files

    def release_all(self) -> None:
        """Release every file held."""
        self._release(len(self._files))

    # ---------------------------------------------------------------- internals
    def _releasable(self, *, ask: bool) -> int:
        """How many of the oldest files held are done with."""
        if ask:
            self._done = max(self._done, self._first_in_use())
        oldest = self._handed - len(self._files)
        return max(0, min(len(self._files), self._done - oldest))

    def _trim(self) -> None:
        # Ask the consumer only when the cached answer holds the oldest back (the answer only grows).
        over = len(self._files) - self._window
        releasable = self._releasable(ask=False)
        if releasable < over:
            releasable = self._releasable(ask=True)
        self._release(min(over, releasable))

    def _relieve_some(self) -> int:
        """For a consumer that says nothing: the oldest half of the streamed files (they hold budget
        that files in flight need), else the oldest half of the resident ones (they hold none, but a
        download that has waited may evict them once they are unpinned). Positions no longer matter
        here: every file is done with, so files may leave from the middle."""
        chosen = [f for f in self._files if not f.resident] or list(self._files)
        chosen = chosen[: max(1, len(chosen) // 2)] if chosen else []
        for f in chosen:
            self._files.remove(f)
            self._cache.release(f)
        return len(chosen)

    def _release(self, count: int) -> None:
        files, release = self._files, self._cache.release
        for _ in range(count):
            release(files.popleft())
