"""What the soak held (pure): each check over what the run recorded, and the table a person reads.

Every check is a :class:`Check`: its name, whether it held, and the numbers behind it. The driver
records; these functions judge, so each rule is tested here on made-up records.

- :func:`tally` judges an epoch as it ends: the volume's samples the job was given (what it had been
  given before the checkpoint it resumed from, plus what every rank was given after) against the
  volume's files, the table's rows against its ids; :func:`epochs_exactly_once` and
  :func:`no_corrupted_sample` sum the epochs up.
- :func:`memory_flat`: each process's RSS at the last epoch within ``tolerance`` of its RSS at the
  baseline epoch.

Example:
    >>> memory_flat({"driver": {2: 100, 20: 105}}, baseline=2, last=20).held
    True
    >>> print(table([Check("memory flat", True, "driver +5%")]))
    check        held  numbers
    -----------  ----  ----------
    memory flat  yes   driver +5%
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["Check", "EpochTally", "epochs_exactly_once", "memory_flat", "no_corrupted_sample", "table", "tally"]


@dataclass(frozen=True)
class Check:
    name: str
    held: bool
    numbers: str


@dataclass(frozen=True)
class EpochTally:
    """One epoch judged as it ends (so the driver keeps a few numbers, not every digest): samples
    delivered, expected ones missing, ones delivered more than once, and corrupted ones."""

    delivered: int
    missing: int
    repeated: int
    corrupted: int


def tally(
    files: npt.ArrayLike,
    row_ids: npt.ArrayLike,
    row_digests: npt.ArrayLike,
    expected_files: npt.ArrayLike,
    expected_rows: npt.ArrayLike,
) -> EpochTally:
    """Judge one epoch: ``files``, the digests of the volume's samples the job was given; the table's
    rows as their ids and payload digests; ``expected_files``, every file's digest (unique);
    ``expected_rows``, each row id's payload digest (index = id). A sample's identity is its
    content's digest, so a corrupted file is one the source never had (and its true digest is then
    missing too); a row is corrupted when its payload's digest is not its id's. Arrays, so that an
    epoch of 10^5 samples costs the driver a few large blocks, not 10^5 small objects.

    Example:
        >>> tally([b"a", b"b", b"b", b"x"], [0, 1], [b"p", b"bad"], [b"a", b"b", b"c"], [b"p", b"q"])
        EpochTally(delivered=6, missing=1, repeated=1, corrupted=2)
    """
    delivered = np.asarray(files)
    known_files = np.asarray(expected_files)
    names, counts = np.unique(delivered, return_counts=True)
    known = np.isin(names, known_files)
    repeated = int((counts > 1).sum())
    missing = len(known_files) - int(known.sum())
    corrupted = int((~known).sum())
    ids, digests = np.asarray(row_ids, dtype=np.int64), np.asarray(row_digests)
    wanted = np.asarray(expected_rows)
    seen, row_counts = np.unique(ids, return_counts=True)
    in_range = (ids >= 0) & (ids < len(wanted))
    repeated += int((row_counts > 1).sum())
    missing += len(wanted) - int(((seen >= 0) & (seen < len(wanted))).sum())
    corrupted += int((~in_range).sum()) + int((wanted[ids[in_range]] != digests[in_range]).sum())
    return EpochTally(len(delivered) + len(ids), missing, repeated, corrupted)


def epochs_exactly_once(tallies: Mapping[int, EpochTally], *, epochs: int, samples: int) -> Check:
    """Every epoch 0..``epochs``-1 finished with each of its ``samples`` exactly once."""
    wrong: list[str] = []
    for epoch in range(epochs):
        found = tallies.get(epoch)
        if found is None:
            wrong.append(f"epoch {epoch + 1}: not finished")
        elif found.missing or found.repeated:
            wrong.append(f"epoch {epoch + 1}: {found.missing} missing, {found.repeated} more than once")
    said = f"{len(tallies)}/{epochs} epochs x {samples:,} samples"
    return Check("every epoch exactly once", not wrong, "; ".join(wrong) or said)


def no_corrupted_sample(tallies: Mapping[int, EpochTally]) -> Check:
    """No sample whose content the source never had, in any epoch."""
    checked = sum(found.delivered for found in tallies.values())
    corrupted = sum(found.corrupted for found in tallies.values())
    return Check("no corrupted sample", checked > 0 and not corrupted, f"{checked:,} checksums, {corrupted} bad")


def memory_flat(rss: Mapping[str, Mapping[int, int]], *, baseline: int, last: int, tolerance: float = 0.10) -> Check:
    """Each process's RSS at epoch ``last`` within ``tolerance`` of its RSS at epoch ``baseline``
    (``rss``: process name -> 1-based epoch -> bytes)."""
    said, held = [], True
    for name, by_epoch in sorted(rss.items()):
        before, after = by_epoch.get(baseline), by_epoch.get(last)
        if not before or not after:
            said.append(f"{name}: not measured at epochs {baseline} and {last}")
            held = False
            continue
        change = after / before - 1
        held &= abs(change) <= tolerance
        said.append(f"{name} {before / 2**20:.0f}->{after / 2**20:.0f} MiB ({change:+.1%})")
    return Check(
        f"memory flat (epoch {baseline} -> {last}, within {tolerance:.0%})", held and bool(said), ", ".join(said)
    )


def table(checks: Iterable[Check], *, heading: Sequence[str] = ("check", "held", "numbers")) -> str:
    """The checks as a plain-text table, a row each."""
    rows = [heading, *[(check.name, "yes" if check.held else "NO", check.numbers) for check in checks]]
    widths = [max(len(row[i]) for row in rows) for i in range(len(heading))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)
