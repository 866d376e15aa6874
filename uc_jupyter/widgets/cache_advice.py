"""What the cache should be for a pass's data: the advice when an LRU cache re-downloads each epoch,
streams files without keeping them, starts cold, or is absent. Pure, no I/O; part of
:func:`uc_jupyter.widgets.advice.advise`.

Example:
    >>> from uc_jupyter.telemetry.model import Sample, Snapshot
    >>> worker = Sample(rank=0, worker=0, seq=1, time=1.0, files=10, bytes=640_000, misses=10,
    ...                 bytes_downloaded=640_000, cache_max_bytes=320_000)
    >>> cache_advice(Snapshot({(0, 0): worker}, time=1.0), [worker]).split(";")[0]
    'cache budget 320 kB < data 640 kB: each epoch re-downloads 100%'
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from uc_jupyter.telemetry.model import MAIN_WORKER, Sample, Snapshot
from uc_jupyter.widgets.units import format_bytes

__all__ = ["cache_advice"]


def cache_advice(figures: Snapshot, workers: Sequence[Sample]) -> str:
    """The cache line for a rank whose streams are ``workers`` ('' when the cache is not the
    matter): a budget below the pass's data (with the budget that keeps it), files streamed through
    and not kept, a cold cache that holds the data, or no cache at all."""
    hits, misses = sum(w.hits for w in workers), sum(w.misses for w in workers)
    if not misses:
        return ""
    missed = misses / (hits + misses)
    budget = figures.cache_max_bytes
    # The cache is shared by every rank on the machine: the data it must hold is the whole pass's.
    data = sum(s.bytes for s in figures.samples.values() if s.worker != MAIN_WORKER)
    keeps = format_bytes(_round_up(_budget_to_keep(figures, data)))
    if budget and data > budget:
        return (
            f"cache budget {format_bytes(budget)} < data {format_bytes(data)}: each epoch re-downloads "
            f"{missed:.0%}; raise cache_max_bytes to {keeps} (the data, the files in flight and the "
            "cache's headroom)"
        )
    streamed = sum(w.streamed for w in workers)
    if budget and streamed > 0.5 * misses:
        return (
            f"{missed:.0%} of files were downloaded and streamed through the cache, not kept (cache='never', or "
            f"a cache full of other data): every epoch downloads {format_bytes(figures.bytes_downloaded)}; "
            f"cache='auto' with room for {keeps} reads the next epochs locally"
        )
    if budget and missed > 0.5:
        return (
            f"cold cache: {missed:.0%} of files were downloaded in this pass; the budget "
            f"{format_bytes(budget)} holds the data ({format_bytes(data)}), so the next epoch reads from the cache"
        )
    if not budget and figures.bytes_downloaded:
        return (
            f"no cache: every epoch downloads {format_bytes(figures.bytes_downloaded)}; cache='always' with "
            f"cache_max_bytes of {keeps} reads the next epochs locally"
        )
    return ""


def _budget_to_keep(figures: Snapshot, data: int) -> int:
    """The cache budget under which a pass's ``data`` stays resident: the cache first leaves room for
    the files each loader holds at once (every batch its workers were asked for, and the loop's) and
    for each stream's download window at its deepest (:mod:`uc_jupyter.data.volume.keeping`); a
    budget just above the data kept half of it in the injected test."""
    # Here, not at the top: uc_jupyter.data imports torch, which the rules need only with cache advice.
    from uc_jupyter.data.loader.defaults import DEFAULT_PREFETCH
    from uc_jupyter.data.volume.keeping import budget_to_keep
    from uc_jupyter.data.volume.pace import MAX_DEPTH

    streams = [s for s in figures.samples.values() if s.worker != MAIN_WORKER and s.files]
    files = sum(s.files for s in streams)
    if not files:
        return data
    held = sum(
        loop.samples / loop.batches * (len(loop.worker_queue_depths) * DEFAULT_PREFETCH + 1)
        for loop in figures.loops().values()
    )
    window = (held + len(streams) * MAX_DEPTH) * data / files
    return budget_to_keep(data, window=int(window))


def _round_up(count: float) -> int:
    """Up to two significant digits: 660 kB, not 657,800 bytes."""
    if count <= 0:
        return 0
    scale = 10 ** max(int(math.log10(count)) - 1, 0)
    return int(math.ceil(count / scale) * scale)
