"""How long `import uc_jupyter` (and the catalog and CLI modules) takes in a fresh interpreter,
side by side with a bare interpreter and with importing the heavy libraries we keep lazy.

Target: uc_jupyter's own import cost (over a bare interpreter) under 0.5 s.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

RUNS = 7
CASES = {
    "bare interpreter": "pass",
    "import uc_jupyter (+catalog, cli, demo)": (
        "import uc_jupyter, uc_jupyter.catalog.embedded.local, uc_jupyter.cli, uc_jupyter.demo"
    ),
    "import pandas + pyarrow (kept lazy)": "import pandas, pyarrow",
    "import torch (kept lazy)": "import torch",
}


def median_seconds(code: str) -> float:
    samples = []
    for _ in range(RUNS):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    results = {name: median_seconds(code) for name, code in CASES.items()}
    bare = results["bare interpreter"]
    print(f"{'case':<42} {'median s':>9} {'over bare s':>12}")
    for name, seconds in results.items():
        print(f"{name:<42} {seconds:9.3f} {seconds - bare:12.3f}")
    own = results["import uc_jupyter (+catalog, cli, demo)"] - bare
    verdict = "meets" if own < 0.5 else "MISSES"
    print(f"uc_jupyter import cost {own:.3f} s {verdict} the 0.5 s target")


if __name__ == "__main__":
    main()
