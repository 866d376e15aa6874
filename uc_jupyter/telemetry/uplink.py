"""Where a rank's training loop sends its telemetry onward: the kernel that started the rank.

A rank process started by a :class:`~uc_jupyter.distributed.pool.RankPool` installs a sender that
puts samples on its channel to the kernel; a DataLoader calls :func:`forward` with its newest samples
whenever it collects them (at most 10 times a second). Outside a rank pool nothing is installed and
:func:`forward` costs one global lookup.

Example:
    >>> from uc_jupyter.telemetry.model import Sample
    >>> got = []
    >>> install(got.extend)
    >>> forward([Sample(rank=1, worker=0, seq=1, time=0.0)]); len(got)
    1
    >>> install(None)
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable

from uc_jupyter.telemetry.model import Sample

__all__ = ["forward", "install", "installed"]

_sender: Callable[[tuple[Sample, ...]], object] | None = None


def install(sender: Callable[[tuple[Sample, ...]], object] | None) -> None:
    """Send this process's loader samples through ``sender`` (None stops forwarding)."""
    global _sender
    _sender = sender


def installed() -> bool:
    return _sender is not None


def forward(samples: Iterable[Sample]) -> None:
    """Pass ``samples`` on, when a sender is installed."""
    if _sender is None:
        return
    # A failing sender (the kernel went away; the rank's watchdog ends the process) never disturbs training.
    with contextlib.suppress(Exception):
        _sender(tuple(samples))
