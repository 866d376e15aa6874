"""The half-cache scenario: a cache budget of half the data, several shuffled epochs, the disk watched.

The same store and files as ``volume_loading.py`` (issue 16's conditions: lognormal 30 ms latency,
50 MB/s shared and 25 MB/s per connection, lognormal ~18 KiB files named .png; batch 64, 2
DataLoader workers, shuffle), with ``cache_max_bytes`` set to half the data and the credentials in
the volume's options. Reported:

- the fraction of the bytes read that was downloaded again, per epoch after the first (a cache of
  half the data cannot do better than about 0.5 with a fresh permutation each epoch; re-reading
  everything is 1.0);
- the peak disk use of the cache's folder, streamed-through files and the index included, against
  ``cache_max_bytes`` (issue 16 point 7: it must never exceed it). The folder is a tmpfs of its own
  where one can be mounted (root), sampled with ``statvfs`` every 2 ms; elsewhere it is walked every
  20 ms (:class:`~uc_jupyter.testing.disk_use.DiskPeak`). Either is a lower bound of the true peak.

Epoch times are printed but are not the point here (on a tmpfs the cache writes to memory). A miss
is reported, not an error (exit status 0).

Usage: python benchmarks/cache_budget.py [--files 5000] [--epochs 3] [--pass-limit 60]
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import statistics
from collections.abc import Sequence

from volume_loading import (
    Pass,
    add_store_arguments,
    bench_env,
    checked,
    exit_on_sigterm,
    print_conditions,
    timed,
    verdict,
    volume_loader,
)


def main(argv: Sequence[str] | None = None) -> None:
    from uc_jupyter.testing.disk_use import DiskPeak
    from uc_jupyter.testing.mounts import MountUnavailable, mounted

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--files", type=int, default=5000, help="file count (5000)")
    parser.add_argument("--epochs", type=int, default=3, help="epochs, the first one cold (3)")
    add_store_arguments(parser)
    parser.add_argument("--pass-limit", type=float, default=60.0, help="seconds an epoch may take, then left (60)")
    args = parser.parse_args(argv)
    if args.files < 64 or args.epochs < 2 or args.workers < 0 or args.bandwidth <= 0:
        parser.error("--files must be >= 64, --epochs >= 2, --workers >= 0, --bandwidth > 0")
    exit_on_sigterm(os.getpid())
    print_conditions(args)
    args.files = [args.files]
    count = args.files[0]
    runs: list[Pass] = []
    with bench_env(args) as env, contextlib.ExitStack() as stack:
        total = env.sizes[count][1]
        budget = total // 2
        where = env.tmp / "half-cache"
        try:  # a tmpfs of its own: statvfs reads its whole use in one call, so it can be sampled often
            stack.enter_context(mounted(where, "tmpfs", f"size={4 * total}"))
            how = "statvfs of its own tmpfs every 2 ms"
        except MountUnavailable as exc:
            how = f"a walk of the folder every 20 ms ({exc})"
        loader = volume_loader(f"/Volumes/main/bench/options/n{count}", where / "cache", budget, args.workers)
        with DiskPeak(where, whole_file_system=how.startswith("statvfs")) as peak:
            for epoch in range(args.epochs):
                run = timed(f"half cache: epoch {epoch + 1}", env.server, lambda: loader, args.pass_limit)
                runs.append(checked(run, total))
    fractions = [run.bytes_sent / max(run.bytes_read, 1) for run in runs[1:]]
    shown = ", ".join(f"{f:.2f}" for f in fractions)
    print(
        f"\nhalf cache ({count:,} files, {total / 1e6:.1f} MB, cache_max_bytes {budget / 1e6:.1f} MB):\n"
        f"  re-downloaded per epoch after the first: {shown} (median {statistics.median(fractions or [math.nan]):.2f})"
        f"\n  epochs: {', '.join(f'{run.seconds:.1f} s' for run in runs)}\n"
        f"  peak disk use of the cache {peak.peak / 1e6:.1f} MB = {peak.peak / budget:.2f} of cache_max_bytes "
        f"(goal <= 1.00: {verdict(peak.peak, budget, False)}; {peak.samples} samples, {how})"
    )


if __name__ == "__main__":
    main()
