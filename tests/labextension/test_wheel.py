"""A plain (non-editable) wheel builds the TypeScript and ships it where JupyterLab looks, with the
config file that enables the server extension. The wheel is built from a copy of the sources (the
build hook runs ``jlpm install`` and ``jlpm build:prod`` there) and only inspected, never installed."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import uc_jupyter

if TYPE_CHECKING:
    from tests.labextension.conftest import Labext

# Not sources: environments, caches, build output, and what a wheel does not need.
SKIP_TOP = {".venv", ".git", "tests", "notebooks", "benchmarks", "ui-tests", "build", "dist", "mlruns"}
SKIP_ANYWHERE = {"node_modules", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache", ".hypothesis"}
SKIP_IN_SOURCES = {"lib", "lib-test", ".yarn"}


def _copy_sources(labext: Labext, target: Path) -> None:
    def ignore(folder: str, names: list[str]) -> set[str]:
        here = Path(folder).resolve()
        skipped = {n for n in names if n in SKIP_ANYWHERE or n.endswith(".tsbuildinfo")}
        if here == labext.repo:
            skipped |= SKIP_TOP & set(names)
        elif here == labext.sources:
            skipped |= SKIP_IN_SOURCES & set(names)
        elif here == labext.build.parent:
            skipped |= {labext.build.name} & set(names)  # the build output: the hook must make it
        return skipped

    shutil.copytree(labext.repo, target, ignore=ignore, symlinks=True)
    # The installed npm packages are reused (same lockfile), not copied.
    (target / "labextension" / "node_modules").symlink_to(labext.sources / "node_modules", target_is_directory=True)


@pytest.fixture(scope="module")
def wheel(labext: Labext, tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    root = tmp_path_factory.mktemp("wheel")
    source, out = root / "src", root / "dist"
    _copy_sources(labext, source)
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(out), "."],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=600,
        env=labext.env(),
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    (built,) = out.glob("uc_jupyter-*.whl")
    return zipfile.ZipFile(built)


def test_wheel_ships_the_built_labextension(labext: Labext, wheel: zipfile.ZipFile) -> None:
    share = f"uc_jupyter-{uc_jupyter.__version__}.data/data/share/jupyter/labextensions/{labext.name}/"
    names = wheel.namelist()
    package = json.loads(wheel.read(f"{share}package.json"))
    assert (package["name"], package["version"]) == (labext.name, uc_jupyter.__version__)
    assert f"{share}{package['jupyterlab']['_build']['load']}" in names
    assert any(n.startswith(f"{share}static/remoteEntry.") and n.endswith(".js") for n in names)
    assert f"{share}static/style.js" in names
    assert json.loads(wheel.read(f"{share}install.json"))["packageName"] == "uc_jupyter"
    # A production build: no source maps, no TypeScript sources, no npm packages.
    assert not [n for n in names if n.endswith((".map", ".ts")) or "node_modules" in n]


def test_wheel_ships_the_server_extension_config(wheel: zipfile.ZipFile) -> None:
    data = f"uc_jupyter-{uc_jupyter.__version__}.data/data/"
    config = json.loads(wheel.read(f"{data}etc/jupyter/jupyter_server_config.d/uc_jupyter.json"))
    assert config == {"ServerApp": {"jpserver_extensions": {"uc_jupyter.server": True}}}
