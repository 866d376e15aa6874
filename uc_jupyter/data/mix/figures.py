"""What a mix delivered of each source against what was asked: pure, from telemetry's per-source counts.

Example:
    >>> for row in source_figures(["/Volumes/main/ml/a", "main.ml.t"], [3, 1], (600, 200), (1, 0)):
    ...     print(row)
    /Volumes/main/ml/a: 600 samples, 75.0% of the mix (asked 75.0%), its epoch 1
    main.ml.t: 200 samples, 25.0% of the mix (asked 25.0%), its epoch 0
    >>> print(source_figures(["main.ml.t"], [1], (200,), (0,), (0.5,))[0])  # with its stages' seconds
    main.ml.t: 200 samples, 100.0% of the mix (asked 100.0%), its epoch 0, 2.50 ms a sample
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

__all__ = ["SourceFigures", "source_figures"]


@dataclass(frozen=True)
class SourceFigures:
    """One source of a mix: its samples so far, their share of the mix, the share asked, its own
    epoch, and the seconds its stages (fetch, decode) took to make its samples (0.0: not measured)."""

    name: str
    samples: int
    share: float
    asked: float
    epoch: int
    seconds: float = 0.0

    def __str__(self) -> str:
        timed = f", {self.seconds / self.samples * 1000:.2f} ms a sample" if self.seconds > 0 and self.samples else ""
        return (
            f"{self.name}: {self.samples:,} samples, {self.share:.1%} of the mix (asked {self.asked:.1%}), "
            f"its epoch {self.epoch}{timed}"
        )


def source_figures(
    names: Sequence[str],
    weights: Sequence[Fraction | int | float],
    samples: Sequence[int],
    epochs: Sequence[int],
    seconds: Sequence[float] = (),
) -> tuple[SourceFigures, ...]:
    """A row per source (no samples yet: all zero; ``seconds`` not measured: zero)."""
    samples = list(samples) or [0] * len(names)
    epochs = list(epochs) or [0] * len(names)
    seconds = list(seconds) or [0.0] * len(names)
    total, asked = sum(samples), sum(Fraction(w) for w in weights)
    return tuple(
        SourceFigures(name, count, count / total if total else 0.0, float(Fraction(weight) / asked), epoch, spent)
        for name, weight, count, epoch, spent in zip(names, weights, samples, epochs, seconds, strict=True)
    )
