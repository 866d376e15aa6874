"""What the DataLoader's timing hooks, telemetry and MLflow logging cost, and what its defaults buy.

Side by side in one process run, on one loader-bound job (the training loop does nothing, so every
microsecond the loader spends shows): a local volume of small files read in place by
``UCVolumeDataset`` with a decoding transform, batches of 64.

1. ``torch.utils.data.DataLoader`` with the same explicit settings as 2 and 3 (the baseline).
2. ``uc_jupyter.data.DataLoader``, same settings, no hook and no MLflow run.
3. The same with a hook on every batch and an active MLflow run (sqlite store).
4. Both loaders with their *defaults* (torch: ``num_workers=0``; ours: tuned).

Each case also reports its pass end: the median time from a pass's last batch to the loop's exit,
which is where a synchronous MLflow log used to sit (about 5-13 ms a pass on a sqlite store); the
sink now only hands the pass's point to its thread there. That thread's work still takes CPU in
this process, during whatever runs next (here, another case's pass).

Passes alternate between the cases, round by round, each round starting one case later than the
last (no case always runs first); each case's median is reported, and a ratio is the median of the
per-round ratios (a round's cases run back to back, so a busy spell of the machine weighs on both
sides of a ratio). Targets (issue 16 point 8), each measured against the case it adds to: the
DataLoader without hooks or MLflow within 3% of torch's (case 2 vs case 1), and hooks + MLflow
under 1% of throughput (case 3 vs case 2).

Usage: python benchmarks/loader_overhead.py [--files N] [--passes P]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch.utils.data

BATCH = 64


def decode(path: str) -> int:
    with open(path, "rb") as handle:
        return len(handle.read())


def build_volume(count: int) -> str:
    from uc_jupyter.catalog import get_catalog

    cat = get_catalog()
    cat.create_catalog("main")
    cat.create_schema("main.bench")
    volume = cat.create_volume("main.bench.files")
    root = Path(volume.storage_location.removeprefix("file://"))
    for i in range(count):
        (root / f"f{i:06d}.bin").write_bytes(os.urandom(2048))
    return volume.path


# Per case, the seconds from a pass's last batch to the loop's exit (the pass's end on the loop's
# path: the loader's own bookkeeping and, with MLflow, handing the pass's point over).
ends: dict[str, list[float]] = {}


def timed_pass(loader: Any, case: str) -> float:
    start = last = time.perf_counter()
    n = 0
    for batch in loader:
        n += len(batch)
        last = time.perf_counter()
    done = time.perf_counter()
    ends.setdefault(case, []).append(done - last)
    return n / (done - start)


def _ratio(values: list[float], against: list[float]) -> float:
    """The median of the per-round ratios."""
    return statistics.median([v / b for v, b in zip(values, against, strict=True)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--passes", type=int, default=11)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        os.environ["UC_JUPYTER_HOME"] = home
        os.environ.pop("MLFLOW_RUN_ID", None)
        import mlflow

        mlflow.set_tracking_uri(f"sqlite:///{home}/mlflow.db")
        from uc_jupyter.data import DataLoader, UCVolumeDataset

        path = build_volume(args.files)
        dataset = UCVolumeDataset(path, transform=decode)
        explicit: dict[str, Any] = {
            "batch_size": BATCH,
            "num_workers": 2,
            "prefetch_factor": 4,
            "persistent_workers": True,
            "multiprocessing_context": "fork",
        }
        hooked = DataLoader(dataset, **explicit)
        calls = [0]
        hooked.add_hook(lambda _t: calls.__setitem__(0, calls[0] + 1))
        torch_plain, ours, with_mlflow = (
            "torch DataLoader (explicit settings)",
            "uc_jupyter DataLoader, no hook/MLflow",
            "uc_jupyter DataLoader + hook + MLflow",
        )
        cases: dict[str, Callable[[], float]] = {
            torch_plain: lambda: timed_pass(torch_loader, torch_plain),
            ours: lambda: timed_pass(plain, ours),
            with_mlflow: lambda: timed_pass(hooked, with_mlflow),
            "torch DataLoader defaults": lambda: timed_pass(
                torch.utils.data.DataLoader(dataset, batch_size=BATCH), "torch DataLoader defaults"
            ),
            "uc_jupyter DataLoader defaults": lambda: timed_pass(defaults, "uc_jupyter DataLoader defaults"),
        }
        torch_loader = torch.utils.data.DataLoader(dataset, **explicit)
        plain = DataLoader(dataset, mlflow=False, **explicit)
        defaults = DataLoader(dataset, batch_size=BATCH, mlflow=False)
        rates: dict[str, list[float]] = {name: [] for name in cases}
        with mlflow.start_run():  # one run for the whole job, as in training; only `hooked` logs
            for run in cases.values():  # warm-up: start persistent workers, fill the page cache
                run()
            ends.clear()
            order = list(cases.items())
            for round_ in range(args.passes):
                for name, run in order[round_ % len(order) :] + order[: round_ % len(order)]:
                    rates[name].append(run())
            hooked.close()
        baseline = rates["torch DataLoader (explicit settings)"]
        print(f"{args.files} files of 2 KiB read in place, batch {BATCH}, {args.passes} alternating passes each")
        print(f"{'case':<40} {'samples/s':>12} {'vs baseline':>12} {'pass end ms':>12}")
        ratios = {name: _ratio(values, baseline) for name, values in rates.items()}
        for name, values in rates.items():
            end_ms = statistics.median(ends[name]) * 1000
            print(f"{name:<40} {statistics.median(values):12.0f} {ratios[name]:12.3f} {end_ms:12.2f}")
        plain_rates, hooked_rates = (
            rates["uc_jupyter DataLoader, no hook/MLflow"],
            rates["uc_jupyter DataLoader + hook + MLflow"],
        )
        for what, cost, target in (
            ("the DataLoader (no hook/MLflow) vs torch's", 1 - _ratio(plain_rates, baseline), 0.03),
            ("hooks + MLflow vs the same DataLoader without", 1 - _ratio(hooked_rates, plain_rates), 0.01),
        ):
            verdict = "met" if cost < target else "MISSED"
            print(f"{what} cost {cost * 100:.2f}% of throughput (target < {target:.0%}): {verdict}")
        print(f"hook calls: {calls[0]}; MLflow points logged: {hooked._mlflow.flushes if hooked._mlflow else 0}")
        print("pass end ms: median time from a pass's last batch to the loop's exit (on the loop's path)")


if __name__ == "__main__":
    main()
