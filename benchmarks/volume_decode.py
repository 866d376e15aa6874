"""Epoch 1 of a remote volume of PNG images decoded in the DataLoader's workers, with a training step
per batch, against the same files on local disk with the same decode (issue 31's decode-and-step row).

The conditions (one run of this script, one machine; the numbers compare only within a run):
- ``--files`` PNG images of random pixels (seeded), their pixel counts lognormal so that the files
  average about 18 KiB, as ``volume_loading.py``'s; decoded by ``uc_jupyter.data.decode_image``
  (PIL, to a uint8 tensor) in 2 DataLoader workers; batch 64, shuffle; after each batch the loop
  sleeps ``--step`` seconds (20 ms), a training step that leaves the CPU to the loader as a GPU's would;
- remote: the S3 test server in its own process on 127.0.0.1, at issue 16's shaping (lognormal 30 ms
  mean latency, sigma 0.6; 50 MB/s shared, 25 MB/s per connection), ``UCVolumeDataset`` with a fresh
  cache each round, epoch 1 timed from the dataset's construction;
- local: the same files on local disk (page cache warm) in a plain map-style ``Dataset`` whose items
  are ``decode_image(path)``, torch's DataLoader with the same settings.
Rounds alternate remote and local, so a busy spell of the machine weighs on both; medians reported.

Beside the rates: the store's time-weighted mean of requests in flight, and the CPU each costs per
file, the loader's (this process and its workers) and the server's. On a machine of few cores the
server shares them, so what it spends is taken from the decoding workers: the CPU column says how
much of the gap that is. A goal missed is reported, not an error (exit 0).

Usage: python benchmarks/volume_decode.py [--files 3000] [--rounds 3] [--step 0.02] [--workers 2]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import math
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.utils.data
from volume_loading import (
    BATCH_SIZE,
    LATENCY_SIGMA,
    SEED,
    _cpu_seconds,
    add_store_arguments,
    exit_on_sigterm,
    shaped_server,
    verdict,
)

GOAL = 0.80  # issue 31: epoch 1 with decode at >= 0.80 of local disk with the same decode
IN_FLIGHT_GOAL = 80  # issue 31: requests in flight at the store, with decode


@dataclass(frozen=True)
class Epoch:
    """One epoch as the loop saw it, and what it cost."""

    samples: int
    seconds: float
    cpu_seconds: float  # this process and its reaped children (the DataLoader workers)
    server_cpu_seconds: float = 0.0
    in_flight: float = 0.0  # the store's time-weighted mean over the epoch

    @property
    def rate(self) -> float:
        return self.samples / self.seconds if self.seconds else math.inf


class LocalImages(torch.utils.data.Dataset[torch.Tensor]):
    """The files on local disk, each item decoded as the remote dataset decodes it."""

    def __init__(self, paths: Sequence[Path]) -> None:
        self.paths = [str(p) for p in paths]

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> torch.Tensor:
        from uc_jupyter.data import decode_image

        return decode_image(self.paths[index])


def write_images(folder: Path, count: int) -> list[Path]:
    """``count`` PNGs of random pixels below ``folder`` (8 sub-folders), about 18 KiB each on average."""
    from PIL import Image

    rng = np.random.default_rng(SEED)
    # Random RGB pixels barely compress: about 3.1 bytes a pixel in a PNG, so a file's size follows
    # its pixel count (lognormal, median about 16 KiB, as volume_loading.py's sizes).
    pixels = np.clip(rng.lognormal(math.log(16 * 1024 / 3.1), 0.5, count), 700, 40_000).astype(int)
    paths = []
    for i, n in enumerate(pixels):
        side = max(8, int(math.sqrt(n)))
        path = folder / f"part-{i % 8:02d}" / f"img-{i:06d}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        buffer = io.BytesIO()
        Image.fromarray(rng.integers(0, 256, (side, side, 3), dtype=np.uint8)).save(buffer, format="PNG")
        path.write_bytes(buffer.getvalue())
        paths.append(path)
    return paths


def epoch(make: Callable[[], Any], step: float, server: Any = None) -> Epoch:
    """One pass over ``make()``'s loader, timed from the call of ``make``, sleeping ``step`` per batch."""
    if server is not None:
        server.reset()
    cpu, server_cpu = _cpu_seconds(), server.cpu_seconds() if server is not None else 0.0
    started = time.perf_counter()
    samples = 0
    batches = iter(make())
    try:
        for batch in batches:
            samples += len(batch)
            time.sleep(step)  # the training step
    finally:
        del batches  # stops and joins the workers (their CPU is counted once they are reaped)
    seconds = time.perf_counter() - started
    if server is None:
        return Epoch(samples, seconds, _cpu_seconds() - cpu)
    stats = server.stats()
    return Epoch(
        samples,
        seconds,
        _cpu_seconds() - cpu,
        server.cpu_seconds() - server_cpu,
        float(stats.get("in_flight", {}).get("mean", 0.0)),
    )


@contextlib.contextmanager
def remote_volume(root: Path, args: argparse.Namespace) -> Iterator[tuple[Any, str]]:
    """The S3 test server over ``root`` (bucket "images") and a catalog whose volume reads it."""
    from uc_jupyter.catalog.embedded.local import LocalCatalog
    from uc_jupyter.testing.catalogs import external_location

    with shaped_server(root, args) as server:
        home = root.parent / "home"
        os.environ["UC_JUPYTER_HOME"] = str(home)
        os.environ["UC_JUPYTER_PRINCIPAL"] = "bench"
        catalog = LocalCatalog(home)
        catalog.create_catalog("main")
        catalog.create_schema("main.bench")
        external_location(catalog, "s3://images", server.storage_options)
        catalog.create_volume("main.bench.images", "s3://images")
        yield server, "/Volumes/main/bench/images"


def remote_loader(volume: str, cache: Path, workers: int) -> Any:
    """The remote volume's images, decoded in the workers, as a user loads them (a fresh cache)."""
    from uc_jupyter.data import DataLoader, UCVolumeDataset, decode_image

    dataset = UCVolumeDataset(volume, recursive=True, shuffle=True, seed=SEED, transform=decode_image, cache_dir=cache)
    return DataLoader(
        dataset, batch_size=BATCH_SIZE, num_workers=workers, collate_fn=list, persistent_workers=False, mlflow=False
    )


def local_loader(paths: Sequence[Path], workers: int) -> Any:
    """The same images on local disk, decoded alike, in torch's own DataLoader."""
    return torch.utils.data.DataLoader(
        LocalImages(paths),
        batch_size=BATCH_SIZE,
        shuffle=True,
        num_workers=workers,
        collate_fn=list,
        multiprocessing_context="fork",
    )


def main(argv: Sequence[str] | None = None) -> None:
    from uc_jupyter.data import decode_image

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--files", type=int, default=3000, help="images (3000)")
    parser.add_argument("--rounds", type=int, default=3, help="remote and local epochs, alternated (3)")
    parser.add_argument("--step", type=float, default=0.02, help="seconds of training step per batch (0.02)")
    add_store_arguments(parser)
    args = parser.parse_args(argv)
    if args.files < BATCH_SIZE or args.rounds < 1 or args.step < 0 or args.workers < 1:
        parser.error(f"--files must be >= {BATCH_SIZE}, --rounds >= 1, --step >= 0, --workers >= 1")
    exit_on_sigterm(os.getpid())
    tmp = Path(tempfile.mkdtemp(prefix="uc-bench-decode-"))
    try:
        paths = write_images(tmp / "s3" / "images", args.files)
        mean = sum(p.stat().st_size for p in paths) / len(paths)
        started = time.perf_counter()
        for p in paths[:300]:
            decode_image(str(p))
        decode_cpu = (time.perf_counter() - started) / min(300, len(paths))
        print(
            f"{args.files} PNGs of mean {mean / 1024:.1f} KiB (decode about {decode_cpu * 1e3:.2f} ms each, one core); "
            f"batch {BATCH_SIZE}, {args.workers} workers, shuffle, a {args.step * 1e3:g} ms step per batch; store "
            f"latency mean {args.latency_mean * 1e3:g} ms (sigma {LATENCY_SIGMA}), {args.bandwidth / 1e6:g} MB/s; "
            f"{os.cpu_count()} CPUs",
            flush=True,
        )
        remote_runs: list[Epoch] = []
        local_runs: list[Epoch] = []
        with remote_volume(tmp / "s3", args) as (server, volume):
            for round_ in range(args.rounds):
                cache = tmp / f"cache-{round_}"
                remote = functools.partial(remote_loader, volume, cache, args.workers)
                local = functools.partial(local_loader, paths, args.workers)
                remote_runs.append(epoch(remote, args.step, server))
                local_runs.append(epoch(local, args.step))
                shutil.rmtree(cache, ignore_errors=True)
                print(
                    f"  round {round_ + 1}: remote {remote_runs[-1].rate:.0f} samples/s, "
                    f"local {local_runs[-1].rate:.0f}",
                    flush=True,
                )
        report(remote_runs, local_runs, args)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def report(remote: Sequence[Epoch], local: Sequence[Epoch], args: argparse.Namespace) -> None:
    remote_rate = statistics.median(e.rate for e in remote)
    local_rate = statistics.median(e.rate for e in local)
    in_flight = statistics.median(e.in_flight for e in remote)
    bound = 1 / (args.step / BATCH_SIZE) if args.step else math.inf
    print()
    print(f"{'':<24} {'samples/s':>10} {'loader CPU ms/file':>19} {'server CPU ms/file':>19} {'in flight':>10}")
    for name, runs in (("remote, epoch 1", remote), ("local disk", local)):
        cpu = statistics.median(e.cpu_seconds / max(e.samples, 1) for e in runs) * 1e3
        server = statistics.median(e.server_cpu_seconds / max(e.samples, 1) for e in runs) * 1e3
        flight = statistics.median(e.in_flight for e in runs)
        print(
            f"{name:<24} {statistics.median(e.rate for e in runs):>10.0f} {cpu:>19.2f} {server:>19.2f} {flight:>10.1f}"
        )
    print(f"(the step alone allows {bound:.0f} samples/s)")
    ratio = remote_rate / local_rate
    print(f"remote / local disk, epoch 1 with decode: {ratio:.2f} (goal >= {GOAL:.2f}: {verdict(ratio, GOAL, True)})")
    print(
        f"requests in flight at the store, with decode: {in_flight:.1f} "
        f"(goal >= {IN_FLIGHT_GOAL}: {verdict(in_flight, IN_FLIGHT_GOAL, True)})"
    )


if __name__ == "__main__":
    main()
