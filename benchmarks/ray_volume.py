"""What reading a volume through the catalog costs Ray: ``uc_jupyter.ray.read_volume(path,
files="images")`` (READ VOLUME checked, the folder listed once, each file opened as the catalog opens a
resolved path) against ``ray.data.read_images`` of the same files' folder, side by side in one run.

One managed volume of the embedded catalog on local disk holding ``--files`` PNG images
(``volume_decode.py``'s: random pixels, mean about 18 KiB) in 8 sub-folders, read on a 2-node Ray
cluster of this machine (``RayTestCluster``; both nodes see the disk), decoded to RGB arrays by both;
a pass is the whole read, its rows counted in the driver. Passes alternate between the cases, each
round starting with the other one; the ratio is the median of the per-round ratios.

Usage: python benchmarks/ray_volume.py [--files N] [--rounds R]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ray_catalog import alternating, ratios, ray_cluster
from volume_decode import write_images


def timed(read: Callable[[], Any]) -> float:
    """Images per second of one whole read."""
    start = time.perf_counter()
    rows = sum(len(batch["image"]) for batch in read().iter_batches(batch_size=256))
    return rows / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        os.environ["UC_JUPYTER_HOME"] = home
        import ray

        import uc_jupyter.ray as ucray
        from uc_jupyter.catalog import get_catalog

        cat = get_catalog()
        cat.create_catalog("main")
        cat.create_schema("main.ml")
        volume = cat.create_volume("main.ml.images")
        folder = Path(volume.storage_location.removeprefix("file://"))
        write_images(folder, args.files)
        with ray_cluster():
            rates = alternating(
                {
                    "ray.data.read_images(folder)": lambda: timed(
                        lambda: ray.data.read_images(str(folder), mode="RGB", include_paths=True)
                    ),
                    "read_volume(path, files='images')": lambda: timed(
                        lambda: ucray.read_volume(volume.path, files="images", recursive=True, catalog=cat)
                    ),
                },
                args.rounds,
            )
    print(f"{args.files} PNGs in 8 folders, 2 Ray nodes x 2 CPUs, {args.rounds} rounds")
    ratios(rates, "images/s", "read_images")


if __name__ == "__main__":
    main()
