"""Faults the soak's driver injects from outside the ranks while a call runs: the catalog server
killed (and started again), the cache's disk filled (and emptied again).

They must land in the middle of an epoch whatever the machine's speed, so the ranks and the driver
meet there: rank 0, at the step the driver named, makes the file ``reached`` in the handshake folder
and waits for ``go`` (:func:`meet`); the driver's thread (:func:`during`) sees ``reached``, injects,
makes ``go`` and undoes the fault ``hold_s`` later or when the call ends, whichever is first. When
the call ends before rank 0 got there (it failed first), nothing is injected and
:attr:`Injection.done` stays False, so the driver can try again in the next epoch.

Example:
    >>> import tempfile
    >>> with during(lambda: "filled", lambda: None, handshake=Path(tempfile.mkdtemp()), hold_s=5.0) as injected:
    ...     pass  # a call that ended before rank 0 reached the step
    >>> injected.done
    False
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from uc_jupyter.errors import first_line

__all__ = ["Injection", "during", "meet"]

_POLL_S = 0.05
_MEET_TIMEOUT_S = 120.0  # a rank waits this long for the driver at most, then goes on without the fault


@dataclass
class Injection:
    """Whether the fault was injected, what ``inject`` said of it, and an error of ``inject`` or
    ``undo`` (one line), which the driver reports as a fault that did not hold."""

    done: bool = False
    said: str = ""
    error: str = ""


def meet(handshake: Path, *, timeout_s: float = _MEET_TIMEOUT_S) -> bool:
    """The rank's side: say the step is reached, wait for the driver's ``go``; whether it came."""
    (handshake / "reached").touch()
    deadline = time.monotonic() + timeout_s
    while not (handshake / "go").exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(_POLL_S)
    return True


@contextlib.contextmanager
def during(
    inject: Callable[[], str], undo: Callable[[], None], *, handshake: Path, hold_s: float
) -> Iterator[Injection]:
    """The driver's side: inject once rank 0 has reached the step, undo ``hold_s`` later or when the
    block ends (see the module docstring)."""
    ended = threading.Event()
    injection = Injection()
    handshake.mkdir(parents=True, exist_ok=True)

    def run() -> None:
        while not (handshake / "reached").exists():
            if ended.wait(_POLL_S):
                return
        try:
            injection.said = inject()
            injection.done = True
            (handshake / "go").touch()
            ended.wait(hold_s)
        except Exception as exc:  # reported, never lost in the thread
            injection.error = f"{type(exc).__name__}: {first_line(exc)}"
            (handshake / "go").touch()
        finally:
            try:
                undo()
            except Exception as exc:
                injection.error = injection.error or f"{type(exc).__name__}: {first_line(exc)}"

    thread = threading.Thread(target=run, name="soak fault", daemon=True)
    thread.start()
    try:
        yield injection
    finally:
        ended.set()
        thread.join()
