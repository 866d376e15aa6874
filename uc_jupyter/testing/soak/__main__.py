"""``python -m uc_jupyter.testing.soak``: run the soak, print what held, exit 1 when anything did not.

The size comes from ``--size`` (or ``UC_JUPYTER_SOAK_SIZE``): ``full`` (the default), ``quick`` or
``tiny``; ``--epochs``, ``--files`` and ``--rows`` change one count of it.

Example:
    python -m uc_jupyter.testing.soak --size quick --epochs 10
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

from uc_jupyter.testing.soak.driver import run_soak
from uc_jupyter.testing.soak.plan import SoakSize


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m uc_jupyter.testing.soak", description=__doc__.splitlines()[0])
    parser.add_argument("--size", default=os.environ.get("UC_JUPYTER_SOAK_SIZE", "full"), help="full, quick or tiny")
    parser.add_argument("--epochs", type=int, help="epochs (at least 6: one fault an epoch after the baseline)")
    parser.add_argument("--files", type=int, help="volume files (a multiple of ranks x workers x batch size)")
    parser.add_argument("--rows", type=int, help="table rows (a multiple of ranks x the table's batch)")
    parser.add_argument("--seed", type=int, default=0, help="the data's and the faults' seed")
    args = parser.parse_args(argv)
    try:
        size = SoakSize.named(args.size)
        changes = {name: getattr(args, name) for name in ("epochs", "files", "rows") if getattr(args, name)}
        size = size.with_(**changes) if changes else size
    except ValueError as exc:
        parser.error(str(exc))
    # Stopped with SIGTERM (a CI job's end, timeout(1)), the run still stops its servers and ranks,
    # unmounts its disk and removes its folder: what a plain SIGTERM would skip.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    report = run_soak(size, seed=args.seed)
    print(report.text(), flush=True)
    return 0 if report.held else 1


if __name__ == "__main__":
    sys.exit(main())
