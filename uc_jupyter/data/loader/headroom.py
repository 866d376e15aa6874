"""How much faster a training loop would run with a perfect loader: the same steps, once fed by the
loader and once replayed from memory.

The loop's exposed wait says how long it waited; headroom says what removing that wait is worth for
*this* step (a step that overlaps its own work with the loader's, or that slows down when the loader
competes for the CPUs, gains less than the wait suggests). Both runs leave out the first batch,
which is start-up (workers starting, the first files).

Example:
    >>> report = loader.headroom(train_step, steps=20)      # doctest: +SKIP
    >>> report
    Headroom(with a perfect loader the loop would run 1.80x faster: 52.0 ms a step fed by this loader, 28.9 ms
    from memory, over 19 steps)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["Headroom", "measure_headroom"]

_KEEPS_UP = 1.05  # a loader within 5% of a perfect one keeps up


@dataclass(frozen=True)
class Headroom:
    """A step's time fed by the loader and replayed from memory (seconds, means over ``steps``)."""

    steps: int
    loaded_step_seconds: float
    ideal_step_seconds: float

    @property
    def speedup(self) -> float:
        """How many times faster the loop would run with a perfect loader (1.0: none to gain)."""
        return self.loaded_step_seconds / self.ideal_step_seconds if self.ideal_step_seconds > 0 else 1.0

    def __repr__(self) -> str:
        loaded, ideal = _ms(self.loaded_step_seconds), _ms(self.ideal_step_seconds)
        over = f"{loaded} a step fed by this loader, {ideal} from memory, over {self.steps} steps"
        if self.speedup < _KEEPS_UP:
            return f"Headroom(the loader keeps up: {over})"
        return f"Headroom(with a perfect loader the loop would run {self.speedup:.2f}x faster: {over})"


def measure_headroom(
    batches: Iterable[Any], step: Callable[[Any], object], steps: int, clock: Callable[[], float]
) -> Headroom:
    """Run ``step`` on the first ``steps`` batches of ``batches`` (a pass of the loader), then again on
    the same batches kept in memory; the first batch is start-up in both and is not timed."""
    kept: list[Any] = []
    source: Iterator[Any] = iter(batches)
    try:
        first = next(source, None)
        if first is None:
            raise ValueError("headroom() needs batches: the loader delivered none")
        step(first)
        began = clock()
        for batch in source:
            step(batch)
            kept.append(batch)
            if len(kept) == steps - 1:
                break
        loaded = clock() - began
    finally:
        close = getattr(source, "close", None)
        if callable(close):
            close()  # the pass ends here, its workers with it
    if not kept:
        raise ValueError("headroom() needs at least 2 batches: the loader delivered 1")
    began = clock()
    for batch in kept:
        step(batch)
    ideal = clock() - began
    return Headroom(len(kept), loaded / len(kept), ideal / len(kept))


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 10 else f"{seconds:.1f} s"
