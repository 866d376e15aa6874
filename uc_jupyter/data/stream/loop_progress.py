"""How far the consumer of a stream has got: which of the files a stream handed out may still be in use.

A stream (a volume dataset's pass in one DataLoader worker, or in the training process) hands out
files at positions 0, 1, 2 ... of the pass. A file it streamed past a full cache is deleted once
released, so the stream must know when its consumer is done with each one. The rule is the
consumer's: *a file is done with once the consumer has moved past the batch that holds it*, that
is, once the training loop asks for the next batch or the pass ends.

- :class:`Progress` is the training loop's side, kept by :class:`~uc_jupyter.data.DataLoader`:
  per pass (a *generation*), and per worker, how many of that worker's batches the loop has moved
  past. With workers it lives in shared memory, written by the loop and read by the workers.
- :meth:`Progress.consumer` is one stream's side: the position of the first file it handed out
  that the loop may still use (``moved past * batch size``, since a worker's ``j``-th batch holds
  the ``j``-th ``batch_size`` files of its pass). Once the loop has started another pass, a stream of
  an earlier generation is done with everything.
- Without a DataLoader of ours (the dataset iterated directly, or by torch's own DataLoader, whose
  batches the stream cannot see), :data:`UNKNOWN` stands in: the consumer is done with a file once
  it asks for the next one.

The consumer also holds the :class:`~uc_jupyter.data.stream.stages.StageTimes` the stream's stages
add their seconds to (one per process: each worker's, or the training process's), so what a batch cost
reaches the loop with the batch.

A stream finds its consumer with :func:`of` when its pass starts: the loader binds it to the
dataset it iterates (:func:`install`), in each worker once, and in the training process around each
``next()``, so a dataset iterated elsewhere in the same process never picks up another's progress.

Example:
    >>> progress = Progress(workers=0, batch_size=4)
    >>> progress.new_pass()
    >>> first_in_use = progress.consumer(0).start()
    >>> first_in_use()  # the loop holds the first batch it gets, files 0-3
    0
    >>> progress.moved_past(0)  # it asked for the second batch
    >>> first_in_use()
    4
    >>> progress.new_pass()  # another pass began: the old one's files are all done with
    >>> first_in_use() > 10**9
    True
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable, MutableSequence
from typing import Any, Protocol

from uc_jupyter.data.stream.stages import StageTimes

__all__ = ["UNKNOWN", "Consumer", "Progress", "install", "install_part", "of", "restore"]

_GENERATION = 0  # slot 0 of the counts: the pass; slot 1 + w: batches of worker w moved past
_ALL_DONE = sys.maxsize


class Consumer(Protocol):
    """What a stream knows of its consumer."""

    @property
    def exact(self) -> bool:
        """True when the consumer reports the batches it moved past (then the stream keeps exactly
        the files still in use); False when the stream can only assume (see :data:`UNKNOWN`)."""

    @property
    def batch_size(self) -> int:
        """Files per batch (0 when unknown): the answer of ``start()`` changes only this often."""

    @property
    def in_use(self) -> int:
        """The most files the consumer may hold at once over all its streams (0 when unknown): what
        the cache must keep room for beside its resident files, or the streams wait for it."""

    @property
    def streams(self) -> int:
        """How many streams feed the consumer at once (its DataLoader's workers; 1 when unknown)."""

    @property
    def elsewhere(self) -> bool:
        """True when the consumer runs in another process than its streams (DataLoader workers): a
        stream may then wait for it to move on. In the same process it never could: the consumer
        is the one waiting for the stream."""

    @property
    def stages(self) -> StageTimes:
        """Where the stream's stages add the seconds they spent (taken per batch by the loader)."""

    def start(self) -> Callable[[], int]:
        """Called when a pass starts: a function giving the position of the first file of this pass
        the consumer may still use (files before it are done with). Never decreases."""


class _Unknown:
    """A consumer that says nothing: done with a file once it asks for the next one. A stream asks
    while it fetches the next file, so every file it handed out before is done with."""

    exact = False
    batch_size = 0
    in_use = 0
    streams = 1
    elsewhere = False
    stages = StageTimes()  # added to, never taken: no loader of ours reads this stream's batches

    def start(self) -> Callable[[], int]:
        return lambda: _ALL_DONE

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN: Consumer = _Unknown()


class Progress:
    """The training loop's record of the batches it moved past, per pass and per worker.

    Args:
        workers: the DataLoader's ``num_workers`` (0: the streams run in the training process).
        batch_size: files per batch (1 without batching).
        shared: a multiprocessing context whose shared memory holds the counts (needed with
            workers, which receive them when they start).
        prefetch_factor: batches torch asks of each worker ahead of the loop (None without workers).
    """

    def __init__(
        self, workers: int, batch_size: int, *, shared: Any = None, prefetch_factor: int | None = None
    ) -> None:
        slots = 1 + max(workers, 1)
        self.batch_size = batch_size
        # Held at once: every batch torch has asked for (made, queued or in the loop's hands) plus the
        # one the loop holds; without workers, the loop's batch and the one being made.
        held = (prefetch_factor or 0) * workers + 1 if workers else 2
        self.in_use = held * batch_size
        self.streams = max(workers, 1)
        self.elsewhere = workers > 0
        # This process's stage times: a worker's own copy (unpickled or forked with the rest), or the
        # training process's when the streams run in it (num_workers=0).
        self.stages = StageTimes()
        # Plain 64-bit integers without a lock: one writer (the loop); a reader that sees a count
        # a moment late only keeps a file a moment longer.
        self.counts: MutableSequence[int] = shared.RawArray("q", slots) if shared is not None else [0] * slots

    def new_pass(self) -> None:
        """A pass starts: earlier passes' streams are done with everything, this one's with nothing.
        The generation moves first, so a stream reading in between sees too little, never too much."""
        counts = self.counts
        counts[_GENERATION] += 1
        for slot in range(1, len(counts)):
            counts[slot] = 0

    def end_pass(self) -> None:
        """The pass ended, whether the loop finished it or left it: its streams are done with
        everything, so one waiting for the loop to move on (at the end of its share of the cache
        budget) stops waiting, and its worker stops when torch asks it to instead of at torch's
        5-second timeout."""
        self.counts[_GENERATION] += 1

    def moved_past(self, worker: int) -> None:
        """The loop asked for the batch after one of ``worker``'s (0 without workers)."""
        self.counts[1 + worker] += 1

    def consumer(self, worker: int) -> Consumer:
        """The view of worker ``worker``'s stream (0 without workers)."""
        return _Batches(
            self.counts, 1 + worker, self.batch_size, self.in_use, self.streams, self.stages, self.elsewhere
        )


class _Batches:
    """One stream's view of :class:`Progress`: its ``j``-th batch holds files ``j*B .. j*B+B-1``."""

    exact = True

    def __init__(
        self,
        counts: MutableSequence[int],
        slot: int,
        batch_size: int,
        in_use: int,
        streams: int,
        stages: StageTimes,
        elsewhere: bool,
    ) -> None:
        self._counts, self._slot, self.batch_size = counts, slot, batch_size
        self.in_use, self.streams, self.stages, self.elsewhere = in_use, streams, stages, elsewhere

    def start(self) -> Callable[[], int]:
        counts, slot, batch_size = self._counts, self._slot, self.batch_size
        generation = counts[_GENERATION]

        def first_in_use() -> int:
            if counts[_GENERATION] != generation:
                return _ALL_DONE  # the loop began another pass: this one's consumer is gone
            return counts[slot] * batch_size

        return first_in_use


_bound: tuple[object, Consumer] | None = None


def install(dataset: object, consumer: Consumer | None) -> tuple[object, Consumer] | None:
    """Make ``consumer`` the one streams of ``dataset`` (that very object) find in this process;
    None unbinds. Returns what was bound before, for :func:`restore`."""
    global _bound
    previous = _bound
    _bound = None if consumer is None else (dataset, consumer)
    return previous


def restore(previous: tuple[object, Consumer] | None) -> None:
    """Put back what :func:`install` returned."""
    global _bound
    _bound = previous


# Datasets read as parts of another's stream (a Mix's sources), each with its view of that stream's
# consumer; weakly, so a source that goes takes its binding with it.
_parts: weakref.WeakKeyDictionary[object, Consumer] = weakref.WeakKeyDictionary()


def install_part(dataset: object, consumer: Consumer) -> None:
    """Make ``consumer`` the one streams of ``dataset`` find in this process when it is not the
    dataset bound by :func:`install`: a dataset read as part of another's stream (a Mix's source,
    whose consumer is its view of the mix's) until it is bound again."""
    _parts[dataset] = consumer


def of(dataset: object) -> Consumer:
    """The consumer of a stream of ``dataset`` starting now: the bound one, else :data:`UNKNOWN`."""
    bound = _bound
    if bound is not None and bound[0] is dataset:
        return bound[1]
    try:
        return _parts.get(dataset, UNKNOWN)
    except TypeError:  # an object that cannot be weakly referred to was never bound as a part
        return UNKNOWN
