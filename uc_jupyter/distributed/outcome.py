"""What came back from one call on every rank, and what it means for the caller: the values in rank
order, or one error (the original exception of a single failing rank, RankError, RankDied,
RankTimeout, or a one-line KeyboardInterrupt).

Example:
    >>> outcome = Outcome(1)
    >>> outcome.pending
    [0]
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal

from uc_jupyter.distributed.errors import (
    RankDied,
    RankError,
    RankTimeout,
    RemoteFailure,
    carrying,
    interrupted,
)
from uc_jupyter.distributed.payload import unpack
from uc_jupyter.distributed.protocol import Reply

if TYPE_CHECKING:
    from uc_jupyter.distributed.stuck import Stuck

__all__ = ["Outcome", "listing", "results"]


class Outcome:
    """What came back from one call on every rank."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.replies: dict[int, Reply] = {}
        self.died: dict[int, str] = {}  # rank -> how it died
        self.killed: tuple[int, ...] = ()
        self.tails: dict[int, str] = {}  # the log's last lines of a rank that died
        self.interrupted: tuple[int, ...] = ()  # the ranks still running when Ctrl-C came
        self.stuck: dict[int, Stuck] = {}  # where a rank killed for not stopping was (its stack dump)
        self.reason: Literal["failure", "died", "timeout", "interrupt"] | None = None

    @property
    def pending(self) -> list[int]:
        return [r for r in range(self.size) if r not in self.replies and r not in self.died]


def results(outcome: Outcome, timeout: float | None, stop_grace: float) -> list[Any]:
    """The per-rank values of a call, or the error its outcome stands for (one-line interrupts, timeouts,
    dead ranks, failures with their tracebacks)."""
    if outcome.reason == "interrupt":
        raise interrupted(_interrupted(outcome, stop_grace))
    failures = [
        reply.failure
        for reply in outcome.replies.values()
        if reply.failure is not None
        and not (outcome.reason is not None and reply.failure.type_name == "builtins.KeyboardInterrupt")
    ]
    restarted = ", so the pool was stopped (the next call starts a fresh one)" if outcome.killed else ""
    stuck = _stuck_failures(outcome, stop_grace)
    if outcome.reason == "timeout":
        still = sorted(set(outcome.pending) | set(outcome.killed) | _stopped(outcome))
        raise RankTimeout(
            [*failures, *stuck],
            world_size=outcome.size,
            summary=f"the call ran past timeout={timeout:g} s; ranks {listing(still)} were stopped{restarted}",
        )
    if outcome.died:
        deaths = [
            RemoteFailure(rank, "RankDied", f"died: {how}", outcome.tails.get(rank, ""))
            for rank, how in sorted(outcome.died.items())
        ]
        summary = "; ".join(f"rank {d.rank} {d.message}" for d in deaths)
        reports = [*deaths, *failures, *stuck]
        raise RankDied(reports, world_size=outcome.size, summary=f"{summary}; the pool was stopped")
    if failures:
        error = RankError(failures, world_size=outcome.size)
        if outcome.killed:
            error = RankError(
                failures,
                world_size=outcome.size,
                summary=f"{error}; ranks {listing(outcome.killed)} did not stop{restarted}{_where(outcome)}",
            )
        original = failures[0].original() if len(failures) == 1 else None
        if original is not None:
            raise carrying(original, error)
        raise error
    values = []
    for rank in range(outcome.size):
        try:
            values.append(unpack(outcome.replies[rank].value or b""))
        except Exception as exc:
            raise RankError(
                [RemoteFailure(rank, type(exc).__qualname__, str(exc), "")],
                world_size=outcome.size,
                summary=f"rank {rank}'s result cannot be unpickled here ({type(exc).__name__}: {exc}); "
                "return plain data (numbers, lists, arrays, tensors, state dicts)",
            ) from None
    return values


def _stuck_failures(outcome: Outcome, stop_grace: float) -> list[RemoteFailure]:
    """A failure for each rank killed for not stopping: where it was, and its frames (the user's shown)."""
    return [
        RemoteFailure(
            rank,
            "RankStuck",
            f"did not stop within {stop_grace:g} s; it was in {stuck.where}",
            "",
            frames=stuck.frames,
        )
        for rank, stuck in sorted(outcome.stuck.items())
    ]


def _where(outcome: Outcome) -> str:
    """``; rank N was in <frame>`` for each rank killed for not stopping whose stack came."""
    return "".join(f"; rank {rank} was in {stuck.where}" for rank, stuck in sorted(outcome.stuck.items()))


def _interrupted(outcome: Outcome, stop_grace: float) -> str:
    """The one line a Ctrl-C leaves: how many ranks it stopped, and whether the pool lives on."""
    count = len(outcome.interrupted)
    ranks = f"{count} rank{'s' if count != 1 else ''}" + (f" of {outcome.size}" if count != outcome.size else "")
    if outcome.killed:
        return (
            f"interrupted {ranks}; ranks {listing(outcome.killed)} did not stop within {stop_grace:g} s "
            f"and were killed (the next call starts a fresh pool){_where(outcome)}"
        )
    return f"interrupted {ranks}; the pool is still warm"


def _stopped(outcome: Outcome) -> set[int]:
    """Ranks that answered an interrupt of ours with KeyboardInterrupt."""
    return {
        rank
        for rank, reply in outcome.replies.items()
        if reply.failure is not None and reply.failure.type_name == "builtins.KeyboardInterrupt"
    }


def listing(ranks: Iterable[int]) -> str:
    return ", ".join(str(r) for r in ranks)
