"""A job's data position as checkpoints hold it: gathered from every rank, and one loader's share.

:func:`job_state` makes the state dict of :class:`~uc_jupyter.data.DataLoader` and of a dataset
iterated without one: the fingerprint of the data, the epoch and its segments
(:mod:`uc_jupyter.data.stream.resume`), gathered from every rank under ``torch.distributed`` so that every
rank saves the same dict (``torch.distributed.checkpoint`` keeps one copy of a non-tensor item that
several ranks save under one key, and the keys do not depend on the grid, so a checkpoint of 2 ranks
loads on 3). :class:`LoaderPosition` is one DataLoader's bookkeeping: which epoch its next pass runs,
what its loop received of the running one, and where a loaded state resumes.

Example:
    >>> position = LoaderPosition(rank=0, workers=2)
    >>> position.begin()                     # the pass of epoch 0 starts afresh
    >>> position.received(worker=1, items=4)
    >>> job_state({}, *position.now(), world=1, workers=2, on_uneven="pad")["segments"]
    [[1, 2, 'pad', [0, 4]]]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from uc_jupyter.data.stream.grid import current_rank, every_rank
from uc_jupyter.data.stream.partition import Grid
from uc_jupyter.data.stream.resume import Position, ResumePoint, Segment, resume_point

__all__ = ["LoaderPosition", "job_state"]


def job_state(
    fingerprint: dict[str, Any],
    epoch: int,
    prior: tuple[Segment, ...],
    row: list[int],
    next_stream: int,
    *,
    world: int,
    workers: int,
    on_uneven: str,
    prior_next: tuple[int, ...] = (),
) -> dict[str, Any]:
    """The state dict of the job's position, from this rank's ``row`` (items each of its streams
    delivered in the current segment, after the ``prior`` segments of ``epoch``) and the stream
    its loop takes next. Under ``torch.distributed`` a collective gathers every rank's; without
    it the other ranks' counts are -1 (not known: such a state resumes on its own grid only).
    ``prior_next`` is the next streams the prior segments ended with: a segment that has delivered
    nothing adds nothing, so a resume on the last one's grid turns the streams as they were.

    Raises:
        RuntimeError: the ranks are in different epochs.
    """
    rank = current_rank()[0]
    mine = (epoch, row, next_stream)
    everyone = every_rank(mine) or [mine if r == rank else (epoch, [-1] * workers, 0) for r in range(world)]
    epochs = sorted({e for e, _, _ in everyone})
    if len(epochs) > 1:
        raise RuntimeError(f"ranks are in different epochs {epochs}: take the data position at one step on every rank")
    delivered = tuple(count for _, counts, _ in everyone for count in counts)
    # A segment that has delivered nothing adds nothing (none at all: the epoch from its start).
    segment = Segment(world, workers, on_uneven, delivered)  # type: ignore[arg-type]
    segments = (*prior, segment) if any(delivered) else prior
    nexts = tuple(n for _, _, n in everyone) if any(delivered) or not prior else prior_next
    return {"fingerprint": fingerprint, **Position(epoch, segments, nexts).to_state()}


class LoaderPosition:
    """One DataLoader's position (see the module docstring): call :meth:`begin` as each pass
    starts, :meth:`received` for each batch, :meth:`ended` when a pass runs out."""

    def __init__(self, rank: int, workers: int) -> None:
        self.rank, self.workers = rank, max(workers, 1)
        self.epoch = 0  # the epoch the next pass runs
        self._running: int | None = None  # the epoch of the pass started last
        self._finished = False
        self._delivered = [0] * self.workers  # per stream of this rank, in the current segment
        self._prior: tuple[Segment, ...] = ()
        self._rotate = 0  # torch's worker j runs stream (j + rotate) in a resumed pass
        self._batches = 0
        self._resume: ResumePoint | None = None
        self._loaded: dict[str, Any] | None = None  # a loaded state, until its pass starts
        self._loaded_next: tuple[int, ...] = ()  # the loaded state's next streams
        self._prior_next: tuple[int, ...] = ()  # those the running epoch's prior segments ended with
        self._own: Callable[[], int | None] | None = None  # the dataset's position, asked (see begin)
        self.asks = False

    @property
    def resuming(self) -> bool:
        """A loaded position waits for its pass (the next pass resumes it)."""
        return self._resume is not None or self._loaded is not None

    def begin(self, own: Callable[[], int | None] | None = None) -> None:
        """A pass of :attr:`epoch` starts (and :attr:`epoch` moves to the next). ``own``: without
        workers, the dataset's own stream position (``stream_position``), which counts exactly what
        the loop received however the collate shaped it: asked when the position is taken instead of
        being told each batch (:meth:`received` is then not needed)."""
        self._own = own
        self.asks = own is not None  # the running pass's position is asked of the dataset, not told
        epoch, resume = self.epoch, self._resume
        if resume is None or resume.epoch != epoch:
            resume = None
        self.epoch += 1
        self._running, self._finished, self._batches = epoch, False, 0
        self._resume = self._loaded = None
        self._prior = resume.prior if resume else ()
        self._prior_next = self._loaded_next if resume and resume.prior else ()
        self._rotate = resume.rotate if resume else 0
        self._delivered = list(resume.skip) if resume else [0] * self.workers

    def stream_of(self, worker: int | None) -> int:
        """The stream whose batch torch's ``worker`` (None: the loop's own process) delivered."""
        return 0 if worker is None else (worker + self._rotate) % self.workers

    def received(self, worker: int | None, items: int, position: int | None = None) -> None:
        """The loop has a batch of ``items`` samples from torch's ``worker``; ``position`` (when the
        dataset keeps one) is its stream's position after it, which counts the dataset's own items
        however the collate shaped them (a dict of a table's rows, a padded encoding)."""
        stream = self.stream_of(worker)
        self._delivered[stream] = position if position is not None else self._delivered[stream] + items
        self._batches += 1

    def ended(self) -> None:
        self._finished = True

    def now(self) -> tuple[int, tuple[Segment, ...], list[int], int]:
        """(epoch, prior segments, this rank's row, the stream it takes next) for :func:`job_state`;
        a pass that ended points at the next epoch from its start."""
        if self._running is None or self._finished:
            return self.epoch, (), [0] * self.workers, 0
        row = list(self._delivered)
        own = self._own() if self._own is not None else None
        if own is not None:
            row[0] = own
        return self._running, self._prior, row, (self._rotate + self._batches) % self.workers

    def state(self, fingerprint: dict[str, Any], world: int, on_uneven: str) -> dict[str, Any]:
        if self._loaded is not None:  # loaded, and its pass has not started yet: it, unchanged
            return {**self._loaded, "fingerprint": fingerprint}
        return job_state(
            fingerprint,
            *self.now(),
            world=world,
            workers=self.workers,
            on_uneven=on_uneven,
            prior_next=self._prior_next,
        )

    def load(self, state: dict[str, Any], grid: Grid, on_uneven: str) -> None:
        """Resume ``state`` on ``grid``: the next pass runs its epoch (see :mod:`uc_jupyter.data.stream.resume`)."""
        position = Position.from_state(state)
        self._resume = resume_point(position, grid.rank, grid.world_size, grid.num_workers, on_uneven)
        self.epoch = position.epoch
        self._loaded = {"fingerprint": state["fingerprint"], **position.to_state()}
        self._loaded_next = position.next_stream
