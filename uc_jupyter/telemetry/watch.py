"""Live views of a loop's passes, asked for by the library without knowing what shows them.

The data pipeline and the rank pool sit below the widgets (docs/architecture.md, "Layers"): a
``DataLoader(monitor=True)`` or a ``%%uc_distributed --monitor`` cell asks :func:`watch_passes` for a
:class:`PassWatch` over its snapshots, and the view registered with :func:`show_passes_with` makes it.
``import uc_jupyter`` registers the widgets' ``LoaderMonitor`` (imported only when a view is first
asked for); a notebook front end of its own registers its own. A loader also hands over its
``headroom(step)``, which a view may offer as an action (the dashboard's *Measure headroom*).

Example:
    >>> class Printed:
    ...     def __init__(self, source, title, *, headroom=None): self.title = title
    ...     def begin(self, label, start, **given): print("begin", self.title, repr(label))
    ...     def end(self, final, *, error=None, stopped=False): print("end", error, stopped)
    >>> previous = show_passes_with(Printed)
    >>> with watching(watch_passes(lambda: None, "2 ranks")):
    ...     pass
    begin 2 ranks ''
    end None False
    >>> _ = show_passes_with(previous)
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from uc_jupyter.telemetry.model import Snapshot

__all__ = ["Headroom", "PassWatch", "ViewMaker", "show_passes_with", "watch_passes", "watching"]


class PassWatch(Protocol):
    """One live view over a loop's passes: each pass begun, then ended (done, stopped or failed)."""

    def begin(
        self,
        label: str,
        start: Snapshot | None,
        *,
        epoch: int | None = None,
        total: int | None = None,
        positioned: bool = False,
    ) -> None:
        """A new pass called ``label``, from the cumulative snapshot ``start`` (None: from zero), of
        ``total`` batches when that is known; ``epoch``: the loader's epoch, set on purpose when
        ``positioned`` (a checkpoint loaded), else a view may number the passes of a cell from 0."""

    def end(self, final: Snapshot | None, *, error: BaseException | str | None = None, stopped: bool = False) -> None:
        """The open pass ended at ``final`` (None: ask the source); failed with ``error``, or left early."""


# A loader's headroom(step): runs the step fed by the loader, then from memory, and returns its report.
Headroom = Callable[[Callable[[Any], object]], object]


class ViewMaker(Protocol):
    """What makes a view: from the source of cumulative snapshots (thread-safe: polled), a title,
    and the loader's ``headroom`` when there is one to offer (None: a rank pool's view)."""

    def __call__(self, source: Callable[[], Snapshot], title: str, *, headroom: Headroom | None = None) -> PassWatch:
        """A new view."""


_maker: ViewMaker | None = None


def show_passes_with(maker: ViewMaker | None) -> ViewMaker | None:
    """Make every view asked for from now on with ``maker``; returns the one it replaces."""
    global _maker
    previous, _maker = _maker, maker
    return previous


def watch_passes(source: Callable[[], Snapshot], title: str, *, headroom: Headroom | None = None) -> PassWatch:
    """A new view of ``source()``'s snapshots called ``title``, made by the registered maker, which
    may offer ``headroom`` (the loader's) as an action."""
    if _maker is None:
        raise RuntimeError(
            "no live view is registered: import uc_jupyter (it registers the dashboard) or use monitor=False"
        )
    return _maker(source, title, headroom=headroom)


@contextlib.contextmanager
def watching(view: PassWatch) -> Iterator[PassWatch]:
    """``view`` over one block of work: one pass, begun as the block starts and ended as it ends
    (failed with the block's exception; stopped when a generator around it was closed early)."""
    view.begin("", None)
    try:
        yield view
    except GeneratorExit:
        view.end(None, stopped=True)
        raise
    except BaseException as error:
        view.end(None, error=error)
        raise
    view.end(None)
