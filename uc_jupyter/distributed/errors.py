"""What a failure on the ranks looks like to the caller: a few lines that start with the rank's error.

A rank that raises sends back a :class:`RemoteFailure` (its exception type, message, frames,
traceback text and, when it pickles, the exception itself). The pool turns the failures of one call
into a :class:`RankError` (several ranks failed, a rank died, a call timed out) or, when exactly one
rank raised an exception the kernel can unpickle, into that exception re-raised (``except
ValueError`` still works), carrying the rank's report.

The report reads ``[rank N] Type: message`` and then that rank's own frames; the frames of
uc_jupyter itself and of the libraries it calls into (torch, the standard library: anything
installed), on the rank and in the kernel, are left out. A call that lost a rank (:class:`RankDied`)
leads with the lost rank and how it died, then says in one line which ranks failed after it (a
collective whose peer is gone fails on every other rank: that error is not the cause). In a
notebook IPython shows only the report (through ``_render_traceback_``); in plain Python the report
is the exception's note and the kernel-side traceback stops at the public call
(:func:`hide_internal_frames`). To see everything, set ``UC_JUPYTER_VERBOSE=1`` (any process), call
:func:`set_verbose`, or in a notebook ``%config UCMagics.verbose = True``; it applies to errors
raised after it is set.

Example:
    >>> failure = RemoteFailure(rank=1, type_name="builtins.ValueError", message="bad batch",
    ...     traceback="", frames=(RemoteFrame("<rank cell 1>", 2, "<module>", "raise ValueError('bad batch')"),))
    >>> str(RankError([failure], world_size=2))
    'rank 1 of 2 raised ValueError: bad batch'
    >>> print("\\n".join(failure.report()))
    [rank 1] ValueError: bad batch
      File "<rank cell 1>", line 2, in <module>
        raise ValueError('bad batch')
"""

from __future__ import annotations

import functools
import os
import pickle
import signal
import sysconfig
import traceback as tb_module
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import ParamSpec, TypeVar

from uc_jupyter.errors import first_line, set_verbose, verbose

__all__ = [
    "ClusterError",
    "PayloadError",
    "RankDied",
    "RankError",
    "RankStartError",
    "RankTimeout",
    "RemoteFailure",
    "RemoteFrame",
    "carrying",
    "describe_exit",
    "failure_from",
    "frames_of",
    "hide_internal_frames",
    "interrupted",
    "is_internal",
    "set_verbose",
    "verbose",
]

P = ParamSpec("P")
R = TypeVar("R")

_PACKAGE = str(Path(__file__).resolve().parent.parent)  # uc_jupyter/: frames from here are internal
# Where installed code lives (site-packages, the standard library): a library's frames, hidden like ours.
_LIBRARIES = tuple(
    os.path.abspath(path) + os.sep
    for path in {sysconfig.get_path(name) for name in ("stdlib", "platstdlib", "purelib", "platlib")}
    if path
)
_SHAPED = "_uc_jupyter_report"  # the attribute that marks an exception this module shaped


# ---------------------------------------------------------------- what crosses the process boundary
@dataclass(frozen=True)
class RemoteFrame:
    """One frame of a rank's traceback."""

    filename: str
    lineno: int
    name: str
    line: str = ""
    internal: bool = False  # uc_jupyter's own code or a library's (hidden unless verbose), judged where it ran

    def lines(self) -> list[str]:
        """The frame as Python's traceback prints it."""
        where = [f'  File "{self.filename}", line {self.lineno}, in {self.name}']
        return [*where, f"    {self.line}"] if self.line else where


def is_internal(filename: str) -> bool:
    """Whether ``filename`` is not the user's: inside the uc_jupyter package, or installed code
    (site-packages, the standard library, frozen into the interpreter: ``<frozen runpy>``) such as
    torch's, whose frames say where the user's call went, not what to change.

    Example:
        >>> import torch.distributed
        >>> is_internal(__file__), is_internal(torch.distributed.__file__), is_internal("<rank cell 1>")
        (True, True, False)
        >>> is_internal("<frozen runpy>")
        True
    """
    if filename.startswith("<"):
        return filename.startswith("<frozen ")
    path = os.path.abspath(filename)
    return path.startswith(_PACKAGE + os.sep) or path.startswith(_LIBRARIES)


def frames_of(tb: TracebackType | None) -> tuple[RemoteFrame, ...]:
    """The frames of a traceback, outermost first, with their source lines."""
    return tuple(
        RemoteFrame(f.filename, f.lineno or 0, f.name, (f.line or "").strip(), is_internal(f.filename))
        for f in tb_module.extract_tb(tb)
    )


@dataclass(frozen=True)
class RemoteFailure:
    """One rank's failure, as it crosses the process boundary."""

    rank: int
    type_name: str  # module-qualified, e.g. "builtins.ValueError"
    message: str
    traceback: str  # Python's full text of the rank's traceback (or a dead rank's last log lines)
    exception: bytes | None = None  # the pickled exception, when it pickles
    frames: tuple[RemoteFrame, ...] = ()  # the raised exception's frames, outermost first
    cause: str = ""  # "Type: message" of the exception it was raised from, if any
    notes: tuple[str, ...] = ()  # the exception's own notes

    @property
    def short_type(self) -> str:
        return self.type_name.rsplit(".", 1)[-1]

    @property
    def headline(self) -> str:
        return f"{self.short_type}: {self.message}" if self.message else self.short_type

    def report(self, *, full: bool = False, notes: bool = True) -> list[str]:
        """``[rank N] Type: message``, then the rank's own frames (every frame and the chained
        exceptions when ``full``), the cause and the exception's notes (unless ``notes=False``)."""
        lines = [f"[rank {self.rank}] {self.headline}"]
        if full and self.frames and self.traceback:
            lines += ["  " + line for line in self.traceback.rstrip("\n").splitlines()]
            return lines
        if self.frames:
            for frame in self.frames:
                if full or not frame.internal:
                    lines += frame.lines()
        elif self.traceback.strip():  # a dead rank: the last lines of its log say what it was doing
            lines += ["  " + line for line in self.traceback.rstrip("\n").splitlines()]
        if self.cause:
            lines.append(f"  raised from {self.cause}")
        if notes:
            lines += [line for note in self.notes for line in note.splitlines()]
        return lines

    def original(self) -> BaseException | None:
        """The exception object the rank raised, when the kernel can unpickle it."""
        if self.exception is None:
            return None
        try:
            exc = pickle.loads(self.exception)
        except Exception:  # the type exists only on the rank, or its constructor is unusual
            return None
        return exc if isinstance(exc, BaseException) else None


def failure_from(exc: BaseException, rank: int, tb: TracebackType | None, pickled: bytes | None) -> RemoteFailure:
    """The RemoteFailure for ``exc`` raised on ``rank``, from ``tb`` on (the rank's own frames)."""
    cls = type(exc)
    chained = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    cause = ""
    if chained is not None:
        cause = f"{type(chained).__name__}: {chained}" if str(chained) else type(chained).__name__
    return RemoteFailure(
        rank=rank,
        type_name=f"{cls.__module__}.{cls.__qualname__}",
        message=_message_of(exc),
        traceback="".join(tb_module.format_exception(cls, exc, tb)),
        exception=pickled,
        frames=frames_of(tb),
        cause=cause,
        notes=tuple(str(n) for n in getattr(exc, "__notes__", ())),
    )


def _message_of(exc: BaseException) -> str:
    """``exc``'s message; for torch's CheckpointException, whose message lists the ranks that failed
    and then their tracebacks, one line with the ranks and the first one's error (its whole text is
    in the rank's traceback)."""
    failures = getattr(exc, "failures", None)  # CheckpointException: {rank: (exception, its frames)}
    if isinstance(failures, dict) and failures and all(isinstance(v, tuple) and v for v in failures.values()):
        ranks = sorted(failures)
        first = failures[ranks[0]][0]
        if isinstance(first, BaseException):
            return f"the checkpoint failed on ranks {ranks}: {type(first).__name__}: {first_line(first)}"
    return str(exc)


# ---------------------------------------------------------------- what the caller gets
class RankError(RuntimeError):
    """One or more ranks failed; ``failures`` holds each failing rank's type, message and frames.

    IPython shows :meth:`report` (each rank's error and its own frames) instead of the pool's frames;
    plain Python prints it as the exception's note. Verbose (see :func:`verbose`) shows everything.
    """

    def __init__(self, failures: Sequence[RemoteFailure], *, world_size: int, summary: str | None = None) -> None:
        self.failures = tuple(sorted(failures, key=lambda f: f.rank))
        self.world_size = world_size
        self.summarised = summary is not None  # says more than the failures' headlines do
        self.verbose = verbose()
        super().__init__(summary or self._summary())
        if self.failures:
            _note(self, "\n".join(self.rank_report()))

    def _summary(self) -> str:
        if len(self.failures) == 1:
            failure = self.failures[0]
            return f"rank {failure.rank} of {self.world_size} raised {failure.headline}"
        parts = "; ".join(f"rank {f.rank}: {f.headline}" for f in self.failures)
        return f"{len(self.failures)} of {self.world_size} ranks failed: {parts}"

    @property
    def ranks(self) -> tuple[int, ...]:
        return tuple(f.rank for f in self.failures)

    def rank_report(self, *, notes: bool = True) -> list[str]:
        """Each failing rank's report lines, in rank order."""
        return [line for f in self.failures for line in f.report(full=self.verbose, notes=notes)]

    def report(self) -> list[str]:
        """What a notebook shows: the ranks' reports, then the summary when it adds to them."""
        lines = self.rank_report()
        if self.summarised or not lines:
            lines.append(f"{type(self).__name__}: {self}")
        return lines

    def remote_tracebacks(self) -> str:
        """Every failing rank's full traceback text, each line prefixed ``[rank N]``."""
        return "\n".join(_prefixed(f) for f in self.failures)

    @property
    def _render_traceback_(self) -> Callable[[], list[str]]:
        # IPython shows what this returns instead of a traceback. Verbose: no such attribute, so
        # IPython prints its own full traceback, with the notes.
        if self.verbose:
            raise AttributeError("_render_traceback_")
        return self.report

    def __reduce__(self) -> tuple[object, ...]:  # keyword-only arguments need help to pickle
        summary = str(self) if self.summarised else None
        return (_rebuild, (type(self), self.failures, self.world_size, summary))


def _rebuild(
    cls: type[RankError], failures: Sequence[RemoteFailure], world_size: int, summary: str | None
) -> RankError:
    return cls(failures, world_size=world_size, summary=summary)


def _prefixed(failure: RemoteFailure) -> str:
    text = failure.traceback.rstrip("\n") or failure.headline
    return "\n".join(f"[rank {failure.rank}] {line}" for line in text.splitlines())


class RankDied(RankError):
    """A rank's process ended without answering (a crash, a signal such as the OOM killer's).

    Its report leads with the cause: each lost rank, how it died and its log's last lines; then one
    line for the ranks that failed after it (their errors, a collective whose peer is gone, are the
    consequence), then that the pool was stopped. Verbose: every rank's report in rank order.

    Example:
        >>> lost = RemoteFailure(1, "RankDied", "died: killed by signal SIGKILL", "step 40\\n")
        >>> peer = RemoteFailure(0, "builtins.RuntimeError", "Connection closed by peer", "")
        >>> print("\\n".join(RankDied([lost, peer], world_size=2, summary="rank 1 died").report()))
        rank 1 died: killed by signal SIGKILL
          step 40
        rank 0 failed after rank 1 was lost: RuntimeError: Connection closed by peer
        the pool was stopped (the next call starts a fresh one)
    """

    def rank_report(self, *, notes: bool = True) -> list[str]:
        if self.verbose:
            return super().rank_report(notes=notes)
        deaths = [f for f in self.failures if f.type_name == "RankDied"]
        after = [f for f in self.failures if f.type_name != "RankDied"]
        lines = []
        for death in deaths:
            lines.append(f"rank {death.rank} {death.message}")
            lines += ["  " + line for line in death.traceback.rstrip("\n").splitlines() if line.strip()]
        if after:
            lost = ", ".join(str(d.rank) for d in deaths)
            who = f"rank {after[0].rank}" if len(after) == 1 else f"ranks {', '.join(str(f.rank) for f in after)}"
            first = after[0].headline.splitlines()[0] if after[0].headline else after[0].short_type
            also = f" (and {len(after) - 1} more: verbose shows each)" if len(after) > 1 else ""
            lines.append(f"{who} failed after rank {lost} was lost: {_clipped(first)}{also}")
        return lines

    def report(self) -> list[str]:
        if self.verbose:
            return super().report()
        return [*self.rank_report(), "the pool was stopped (the next call starts a fresh one)"]


def _clipped(text: str, most: int = 200) -> str:
    return text if len(text) <= most else text[: most - 3] + "..."


class RankTimeout(RankError, TimeoutError):
    """A call ran past its ``timeout=``; the ranks still running were stopped."""


class RankStartError(RankError):
    """The pool could not start: a rank failed to import, initialise torch.distributed or answer."""


class ClusterError(RuntimeError):
    """The cluster cannot take the ranks (no cluster at the address, not enough free resources, other
    Python or torch versions there); raised before any rank starts, nothing is left running."""


class PayloadError(ValueError):
    """A function, its captures or its arguments cannot be shipped to the ranks (unpicklable or too big)."""


def carrying(original: BaseException, error: RankError) -> BaseException:
    """``original`` (the one failing rank's own exception, rebuilt here) carrying ``error``'s report:
    as its note (plain Python), as what IPython shows, and as ``original.rank_error``."""
    lines = error.report()
    note = error.rank_report(notes=False)  # its own notes travel with it already
    if error.summarised:
        note.append(str(error))
    _note(original, "\n".join(note))
    with _settable():
        original.rank_error = error  # type: ignore[attr-defined]
    if not error.verbose:
        _shown_as(original, lines)
    return original


def interrupted(message: str) -> KeyboardInterrupt:
    """A KeyboardInterrupt that a notebook shows as the one line ``message`` (it still stops the cell).

    Example:
        >>> interrupted("interrupted 2 ranks; the pool is still warm")._render_traceback_()
        ['interrupted 2 ranks; the pool is still warm']
    """
    exc = KeyboardInterrupt(message)
    _shown_as(exc, [message])
    return exc


def _shown_as(exc: BaseException, lines: Iterable[str]) -> None:
    shown = list(lines)
    with _settable():
        exc._render_traceback_ = lambda: list(shown)  # type: ignore[attr-defined]
        setattr(exc, _SHAPED, True)


def _note(exc: BaseException, text: str) -> None:
    add_note = getattr(exc, "add_note", None)  # Python >= 3.11
    if add_note is not None:
        add_note(text)


class _settable:
    """Ignore exceptions whose instances take no attributes (``__slots__``): they keep Python's form."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, value: object, tb: object) -> bool:
        return isinstance(value, (AttributeError, TypeError))


def hide_internal_frames(fn: Callable[P, R]) -> Callable[P, R]:
    """Decorate a public entry point: a rank error leaving it keeps none of uc_jupyter's frames below
    it (plain Python then prints the caller's frames, one line here, and the ranks' report).

    Example:
        >>> @hide_internal_frames
        ... def call():
        ...     raise interrupted("interrupted 2 ranks; the pool is still warm")
        >>> try:
        ...     call()
        ... except KeyboardInterrupt as exc:
        ...     [frame.name for frame in frames_of(exc.__traceback__)]
        ['<module>', 'entry']
    """

    @functools.wraps(fn)
    def entry(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except BaseException as exc:
            if verbose() or not _from_ranks(exc):
                raise
            raise exc.with_traceback(None) from exc.__cause__  # what the ranks raised is in the note below

    return entry


def _from_ranks(exc: BaseException) -> bool:
    return isinstance(exc, RankError) or getattr(exc, _SHAPED, False) is True


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
