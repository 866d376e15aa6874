"""Where the JupyterLab extension's sources, build and tools are (the ``labext`` fixture)."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class Labext:
    repo: Path
    sources: Path  # labextension/: TypeScript, package.json, yarn.lock
    build: Path  # uc_jupyter/labextension: what JupyterLab loads
    bin: Path  # this venv's scripts: jupyter, jlpm
    name: str = "uc-jupyter-labextension"

    def env(self) -> dict[str, str]:
        """For jlpm and jupyter: this venv's tools first on PATH, CI mode (no prompts, frozen lockfile)."""
        return {**os.environ, "PATH": f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}", "CI": "true"}


@pytest.fixture(scope="session")
def labext() -> Labext:
    repo = Path(__file__).resolve().parents[2]
    return Labext(repo, repo / "labextension", repo / "uc_jupyter" / "labextension", Path(sys.executable).parent)
