"""A script run in a fresh Python interpreter, for the tests that need a process of their own (one
that has not used object_store, a terminal without a kernel): it must succeed, and its last line
of output is its answer, as JSON.

Example:
    >>> answer, run = run_python("import json, sys; print(json.dumps(sys.argv[1:]))", "a", "b")
    >>> answer, run.returncode
    (['a', 'b'], 0)
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

__all__ = ["run_python"]


def run_python(script: str, *args: str, timeout: float = 120) -> tuple[Any, subprocess.CompletedProcess[str]]:
    """Run ``script`` with ``args`` in a fresh interpreter; its last output line parsed as JSON, and
    the finished process (for its stderr). Fails the test with the end of its stderr when it fails."""
    run = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1]), run
