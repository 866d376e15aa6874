"""What a soak runs (pure): its size, and in which epoch each fault is injected.

A :class:`SoakSize` is the data and the loop: how many volume files and table rows, how many epochs,
the batch sizes and how often a checkpoint is saved. Its counts are kept multiples of what one step
of the whole job takes (ranks x workers x batch), so no rank pads or drops a sample and every rank
takes the same number of steps: a padded sample would be delivered twice by design, and ranks with
uneven steps would wait for each other in DDP's collectives.

:func:`fault_epochs` spreads the four faults over the epochs after the second (the second is where
the memory baseline is taken), one epoch each, in the order of :data:`FAULTS`.

Example:
    >>> size = SoakSize.named("tiny")
    >>> size.epochs, size.files % (RANKS * size.workers * size.batch_size)
    (6, 0)
    >>> fault_epochs(20)
    {'rank': 3, 'worker': 7, 'serve': 12, 'disk': 16}
"""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = ["BASELINE_EPOCH", "FAULTS", "RANKS", "SoakSize", "fault_epochs"]

RANKS = 2
BASELINE_EPOCH = 2  # memory is compared between the end of this epoch (1-based) and the last one
# The faults, in the order they are injected: a rank first, so the ranks measured at the last epoch
# have run most of the soak; the cache disk last, while downloads are in their steady state.
FAULTS = ("rank", "worker", "serve", "disk")


@dataclass(frozen=True)
class SoakSize:
    """The soak's data and loop. ``files`` volume files (about 18 KiB each) and ``rows`` table rows
    are read every epoch by :data:`RANKS` ranks, each with ``workers`` DataLoader workers on the
    volume; ``save_every`` steps (and at each epoch's end) the job is checkpointed into a volume."""

    epochs: int = 20
    files: int = 49_152  # about 0.9 GB
    rows: int = 131_072
    batch_size: int = 16
    table_batch: int = 256
    workers: int = 2
    save_every: int = 400  # 3 checkpoints inside each epoch of 1,536 steps, and one at its end

    @classmethod
    def named(cls, name: str) -> SoakSize:
        """``full`` (the default: 38 minutes on a busy 2-core machine), ``quick`` (a minute or two)
        or ``tiny`` (the test's: every fault, the least data)."""
        sizes = {
            "full": cls(),
            "quick": cls(epochs=8, files=2048, rows=8192, save_every=24),
            "tiny": cls(epochs=6, files=128, rows=1024, batch_size=8, save_every=3),
        }
        if name not in sizes:
            raise ValueError(f"unknown soak size {name!r}: use one of {sorted(sizes)}")
        return sizes[name]

    def __post_init__(self) -> None:
        step = RANKS * self.workers * self.batch_size
        if self.files <= 0 or self.files % step:
            raise ValueError(f"files={self.files} must be a positive multiple of {step} (ranks x workers x batch)")
        if self.rows <= 0 or self.rows % (RANKS * self.table_batch):
            raise ValueError(f"rows={self.rows} must be a positive multiple of {RANKS * self.table_batch}")
        if self.epochs < BASELINE_EPOCH + len(FAULTS):
            raise ValueError(f"epochs={self.epochs}: the soak needs {BASELINE_EPOCH + len(FAULTS)}, a fault an epoch")
        if not 0 < self.save_every < self.steps_per_epoch:
            raise ValueError(f"save_every={self.save_every} must be below the {self.steps_per_epoch} steps of an epoch")

    @property
    def steps_per_epoch(self) -> int:
        """The volume batches each rank takes per epoch."""
        return self.files // (RANKS * self.batch_size)

    def with_(self, **changes: int) -> SoakSize:
        """This size with some counts changed (checked again)."""
        return replace(self, **changes)


def fault_epochs(epochs: int) -> dict[str, int]:
    """The 1-based epoch each fault of :data:`FAULTS` is injected in: spread evenly over the epochs
    after :data:`BASELINE_EPOCH`, one each."""
    first = BASELINE_EPOCH + 1
    span = epochs - BASELINE_EPOCH
    return {fault: first + i * span // len(FAULTS) for i, fault in enumerate(FAULTS)}
