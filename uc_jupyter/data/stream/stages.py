"""Where each batch's time went, stage by stage, measured where the stages run.

A stream's stages (see ``docs/architecture.md``, "a pipeline stage") add the seconds they spent to
the :class:`StageTimes` of the process they run in: *fetch* (waiting for the next files, from the
cache or from storage; for a table, taking its rows), *decode* (making each item: the decoder or the
user's transform; for a table, rows to tensors) and *collate* (the collate function). A DataLoader
worker makes one batch at a time, so what its stages added since its last batch is that batch's:
the collate wrapper takes it (:meth:`StageTimes.take`) and sends it with the batch, and the training
loop adds what the batch carries to its own counters. Without workers the stages run inside the loop's
``next()``, and the loop takes them itself after each batch (torch's collate is then part of *other*).
Nothing is sampled from a timer thread.

The seconds only grow (a take remembers where it took from, and never resets them), so a reader in
the stream's own thread may take the difference of two readings itself: a
:class:`~uc_jupyter.data.Mix` reads ``fetch + decode`` where it turns from one source to the next,
and what grew in between is that source's (no clock read of its own).

The loop's side (:mod:`uc_jupyter.data.loader.loop_timing`) adds the stages only it sees: the
*transfer* from the worker to the loop (pinning included) and, when the loop waited longer than its
batch took to make, *other* (the worker was still busy with an earlier batch, or started late).

Example:
    >>> stages = StageTimes()
    >>> stages.fetch += 0.004; stages.decode += 0.010
    >>> stages.take()
    (0.004, 0.01, 0.0)
    >>> stages.take()  # taken: the next batch starts from nothing
    (0.0, 0.0, 0.0)
    >>> stages.decode  # the seconds themselves still grow
    0.01
"""

from __future__ import annotations

__all__ = ["StageTimes"]


class StageTimes:
    """Seconds the stages of this process spent (see the module docstring): cumulative, and taken
    per batch as what they added since the last take.

    Plain attributes, added to in place by the stage that ran: a stage's timing costs two clock reads
    and one addition, per run of files (fetch) or per item (decode).
    """

    __slots__ = ("_taken", "collate", "decode", "fetch")

    def __init__(self) -> None:
        self.fetch = 0.0
        self.decode = 0.0
        self.collate = 0.0
        self._taken = (0.0, 0.0, 0.0)

    def take(self) -> tuple[float, float, float]:
        """The seconds ``(fetch, decode, collate)`` added since the last take (the next take counts from here)."""
        now = (self.fetch, self.decode, self.collate)
        fetch, decode, collate = self._taken
        self._taken = now
        return (now[0] - fetch, now[1] - decode, now[2] - collate)

    def __repr__(self) -> str:
        return f"StageTimes(fetch={self.fetch:.6f}, decode={self.decode:.6f}, collate={self.collate:.6f})"
