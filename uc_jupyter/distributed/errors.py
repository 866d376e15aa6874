"""What a failure on the ranks looks like to the caller.

A rank that raises sends back a :class:`RemoteFailure` (its exception type, message, traceback text
and, when it pickles, the exception itself). The pool turns the failures of one call into a
:class:`RankError` (several ranks failed, a rank died, a call timed out) or, when exactly one rank
raised an exception the kernel can unpickle, into that exception re-raised with the rank's
traceback attached as a note.

Example:
    >>> failure = RemoteFailure(rank=1, type_name="builtins.ValueError", message="bad batch",
    ...                         traceback="Traceback (most recent call last):\\n  ...\\nValueError: bad batch\\n")
    >>> str(RankError([failure], world_size=2))
    'rank 1 of 2 raised ValueError: bad batch'
"""

from __future__ import annotations

import pickle
import signal
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "PayloadError",
    "RankDied",
    "RankError",
    "RankStartError",
    "RankTimeout",
    "RemoteFailure",
    "describe_exit",
]


@dataclass(frozen=True)
class RemoteFailure:
    """One rank's failure, as it crosses the process boundary."""

    rank: int
    type_name: str  # module-qualified, e.g. "builtins.ValueError"
    message: str
    traceback: str  # the rank's formatted traceback, user frames only
    exception: bytes | None = None  # the pickled exception, when it pickles

    @property
    def short_type(self) -> str:
        return self.type_name.rsplit(".", 1)[-1].removeprefix("builtins.")

    @property
    def headline(self) -> str:
        return f"{self.short_type}: {self.message}" if self.message else self.short_type

    def original(self) -> BaseException | None:
        """The exception object the rank raised, when the kernel can unpickle it."""
        if self.exception is None:
            return None
        try:
            exc = pickle.loads(self.exception)
        except Exception:  # the type exists only on the rank, or its constructor is unusual
            return None
        return exc if isinstance(exc, BaseException) else None


class RankError(RuntimeError):
    """One or more ranks failed; ``failures`` holds each failing rank's type, message and traceback.

    IPython renders it through ``_render_traceback_``: each rank's remote traceback, prefixed with
    its rank, instead of the pool's own frames.
    """

    def __init__(self, failures: Sequence[RemoteFailure], *, world_size: int, summary: str | None = None) -> None:
        self.failures = tuple(sorted(failures, key=lambda f: f.rank))
        self.world_size = world_size
        super().__init__(summary or self._summary())

    def _summary(self) -> str:
        if len(self.failures) == 1:
            failure = self.failures[0]
            return f"rank {failure.rank} of {self.world_size} raised {failure.headline}"
        parts = "; ".join(f"rank {f.rank}: {f.headline}" for f in self.failures)
        return f"{len(self.failures)} of {self.world_size} ranks failed: {parts}"

    @property
    def ranks(self) -> tuple[int, ...]:
        return tuple(f.rank for f in self.failures)

    def remote_tracebacks(self) -> str:
        """Every failing rank's traceback, each line prefixed ``[rank N]``."""
        return "\n".join(_prefixed(f) for f in self.failures)

    def _render_traceback_(self) -> list[str]:
        return [*self.remote_tracebacks().splitlines(), f"{type(self).__name__}: {self}"]

    def __reduce__(self) -> tuple[object, ...]:  # keyword-only arguments need help to pickle
        return (_rebuild, (type(self), self.failures, self.world_size, str(self)))


def _rebuild(cls: type[RankError], failures: Sequence[RemoteFailure], world_size: int, summary: str) -> RankError:
    return cls(failures, world_size=world_size, summary=summary)


def _prefixed(failure: RemoteFailure) -> str:
    text = failure.traceback.rstrip("\n") or failure.headline
    return "\n".join(f"[rank {failure.rank}] {line}" for line in text.splitlines())


class RankDied(RankError):
    """A rank's process ended without answering (a crash, a signal such as the OOM killer's)."""


class RankTimeout(RankError, TimeoutError):
    """A call ran past its ``timeout=``; the ranks still running were stopped."""


class RankStartError(RankError):
    """The pool could not start: a rank failed to import, initialise torch.distributed or answer."""


class PayloadError(ValueError):
    """A function, its captures or its arguments cannot be shipped to the ranks (unpicklable or too big)."""


def describe_exit(returncode: int | None) -> str:
    """How a process ended, in words: ``killed by signal SIGKILL``, ``exited with code 3``.

    Example:
        >>> describe_exit(-9), describe_exit(3)
        ('killed by signal SIGKILL (the out-of-memory killer, or someone killed it)', 'exited with code 3')
    """
    if returncode is None:
        return "stopped answering"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        hint = {
            "SIGKILL": " (the out-of-memory killer, or someone killed it)",
            "SIGSEGV": " (a crash in native code)",
            "SIGABRT": " (native code aborted)",
            "SIGBUS": " (a crash in native code, or shared memory ran out)",
        }.get(name, "")
        return f"killed by signal {name}{hint}"
    return f"exited with code {returncode}"
