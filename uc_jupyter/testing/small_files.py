"""Folders of many small files, sized like an image dataset's, for the benchmarks and tests.

Sizes are lognormal: median 16 KiB, sigma 0.5, clipped to 2-128 KiB (mean about 18 KiB), as issue
16's measurement of volume loading used. The bytes are random (nothing decodes them) and the same
for the same ``seed``, so two runs read the same data.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> relatives, total = write_small_files(Path(tempfile.mkdtemp()), 3, seed=1)
    >>> relatives
    ('part-00/img-000000.png', 'part-01/img-000001.png', 'part-02/img-000002.png')
"""

from __future__ import annotations

import math
import random
from pathlib import Path

__all__ = ["MEAN_SIZE", "write_small_files"]

MEDIAN_SIZE, SIGMA, MIN_SIZE, MAX_SIZE = 16 * 1024, 0.5, 2 * 1024, 128 * 1024
MEAN_SIZE = MEDIAN_SIZE * math.exp(SIGMA**2 / 2)  # of the distribution before clipping (clipping moves it < 0.1%)


def write_small_files(
    folder: Path, count: int, *, seed: int, folders: int = 8, suffix: str = ".png"
) -> tuple[tuple[str, ...], int]:
    """Write ``count`` files below ``folder``, spread over ``folders`` sub-folders; returns their
    paths below ``folder`` (sorted) and their total size in bytes."""
    rng = random.Random(seed)
    relatives, total = [], 0
    for i in range(count):
        relative = f"part-{i % folders:02d}/img-{i:06d}{suffix}"
        size = min(MAX_SIZE, max(MIN_SIZE, int(rng.lognormvariate(math.log(MEDIAN_SIZE), SIGMA))))
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(rng.randbytes(size))
        relatives.append(relative)
        total += size
    return tuple(sorted(relatives)), total
