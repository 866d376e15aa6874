"""Storage options that expire: when a dataset resolves its table or volume again, and downloads that
switch to the new options without a pass noticing.

A :class:`~uc_jupyter.catalog.rest.client.RestCatalog` answers ``resolve_*`` with credentials the server vended
for that one object, which end at ``expires_at``; the embedded catalog's options never expire
(``expires_at`` None). A dataset keeps its options for every pass and every DataLoader worker, so it
asks the catalog again when they are due: :func:`~uc_jupyter.catalog.rest.vended.refresh_due` (the vended
cache's own margin, ``max(60 s, 10 %)`` of the lifetime before expiry). The renewed resolve is made as
the principal the dataset was made by, so it is a fresh privilege check: a revoked grant ends the
dataset's access at its next renewal. With no expiry nothing is ever asked and nothing is counted.

Example:
    >>> clock = lambda: 1000.0
    >>> Renewal(None, clock=clock).is_due()
    False
    >>> from datetime import datetime, timezone
    >>> r = Renewal(datetime.fromtimestamp(1600.0, tz=timezone.utc), clock=clock)  # 600 s: due 60 s before expiry
    >>> r.due, r.is_due()
    (1540.0, False)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, TypeVar

from uc_jupyter.catalog.rest.vended import refresh_due
from uc_jupyter.storage.downloads import Download, Downloads, Job

if TYPE_CHECKING:
    from uc_jupyter.catalog import Catalog

__all__ = ["Renewal", "RenewingDownloads", "renew"]


class _Expiring(Protocol):
    @property
    def expires_at(self) -> datetime | None: ...


R = TypeVar("R", bound=_Expiring)


class Renewal:
    """When options that expire at ``expires_at`` (None: never) are due to be fetched again, by
    ``clock`` (epoch seconds; tests give their own). Picklable with the default clock."""

    def __init__(self, expires_at: datetime | None, *, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.due: float | None = None if expires_at is None else refresh_due(expires_at.timestamp(), clock())

    def is_due(self) -> bool:
        """Whether the options are to be replaced now (never for options that do not expire)."""
        return self.due is not None and self.clock() >= self.due


def renew(
    renewal: Renewal,
    catalog: Catalog,
    principal: str | None,
    resolve: Callable[[Catalog], R],
    location: Callable[[R], str],
    *,
    what: str,
    was: str,
    error: type[Exception],
) -> tuple[R, Renewal] | None:
    """When ``renewal`` is due: ``resolve`` again as ``principal`` (who made the dataset: a fresh
    privilege check) and the next renewal; None when not due. ``error`` (one line) when the object
    now lies elsewhere than ``was``: dropped and made again, it is not what the dataset read."""
    if not renewal.is_due():
        return None
    assert principal is not None, "a dataset with options that expire knows who made it"
    with catalog.as_principal(principal):
        resolved = resolve(catalog)
    if location(resolved) != was:
        raise error(f"{what} now lies at {location(resolved)}, not at {was} where it was read; make the dataset again")
    return resolved, Renewal(resolved.expires_at, clock=renewal.clock)


class RenewingDownloads:
    """:class:`~uc_jupyter.storage.downloads.Downloads` that, before starting a batch, asks ``renew``
    whether the options are due (it replaces them when so, and says True) and then makes new
    downloads with ``make``: a pass longer than the margin reads on with fresh keys. Downloads
    started with the old options finish with them; all are closed at :meth:`close`."""

    def __init__(self, make: Callable[[], Downloads], renew: Callable[[], bool]) -> None:
        self._make, self._renew = make, renew
        self._current = make()
        self._retired: list[Downloads] = []
        self._lock = threading.Lock()  # the prefetcher may start a download from another thread

    def start(self, jobs: Sequence[Job]) -> list[Download]:
        with self._lock:
            if self._renew():
                self._retired.append(self._current)
                self._current = self._make()
            current = self._current
        return current.start(jobs)

    def cancel(self, futures: Sequence[Download]) -> None:
        # A future may come from a retired one: each ignores the futures it did not start.
        with self._lock:
            every = (self._current, *self._retired)
        for downloads in every:
            downloads.cancel(futures)

    def close(self) -> None:
        for downloads in (*self._retired, self._current):
            downloads.close()
        self._retired = []
