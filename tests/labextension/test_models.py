"""The TypeScript models' unit tests (node's test runner on the compiled tests), run from pytest
so that ``make test`` runs them."""

from __future__ import annotations

import re
import subprocess
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.labextension.conftest import Labext


def test_typescript_model_tests_pass(labext: Labext) -> None:
    result = subprocess.run(
        [str(labext.bin / "jlpm"), "test"],
        cwd=labext.sources,
        capture_output=True,
        text=True,
        timeout=300,
        env=labext.env(),
        stdin=subprocess.DEVNULL,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    passed = re.search(r"^\S* ?pass (\d+)$", output, re.MULTILINE)
    failed = re.search(r"^\S* ?fail (\d+)$", output, re.MULTILINE)
    assert passed and failed, output[-3000:]
    assert int(passed.group(1)) >= 20
    assert int(failed.group(1)) == 0
