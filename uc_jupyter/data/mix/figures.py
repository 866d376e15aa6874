"""What a mix delivered of each source against what was asked: pure, from telemetry's per-source counts.

Example:
    >>> for row in source_figures(["/Volumes/main/ml/a", "main.ml.t"], [3, 1], (600, 200), (1, 0)):
    ...     print(row)
    /Volumes/main/ml/a: 600 samples, 75.0% of the mix (asked 75.0%), its epoch 1
    main.ml.t: 200 samples, 25.0% of the mix (asked 25.0%), its epoch 0
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

__all__ = ["SourceFigures", "source_figures"]


@dataclass(frozen=True)
class SourceFigures:
    """One source of a mix: its samples so far, their share of the mix, the share asked, its own epoch."""

    name: str
    samples: int
    share: float
    asked: float
    epoch: int

    def __str__(self) -> str:
        return (
            f"{self.name}: {self.samples:,} samples, {self.share:.1%} of the mix (asked {self.asked:.1%}), "
            f"its epoch {self.epoch}"
        )


def source_figures(
    names: Sequence[str],
    weights: Sequence[Fraction | int | float],
    samples: Sequence[int],
    epochs: Sequence[int],
) -> tuple[SourceFigures, ...]:
    """A row per source (no samples yet: all zero)."""
    samples = list(samples) or [0] * len(names)
    epochs = list(epochs) or [0] * len(names)
    total, asked = sum(samples), sum(Fraction(w) for w in weights)
    return tuple(
        SourceFigures(name, count, count / total if total else 0.0, float(Fraction(weight) / asked), epoch)
        for name, weight, count, epoch in zip(names, weights, samples, epochs, strict=True)
    )
