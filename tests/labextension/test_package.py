"""The npm package and its build agree with the Python package, and JupyterLab sees the extension
enabled and OK in this environment after the Makefile's install (an editable install plus
``jupyter-builder develop``)."""

from __future__ import annotations

import json
import re
import subprocess
from typing import TYPE_CHECKING

import uc_jupyter

if TYPE_CHECKING:
    from tests.labextension.conftest import Labext

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def test_npm_version_is_the_python_version(labext: Labext) -> None:
    package = json.loads((labext.sources / "package.json").read_text())
    assert package["name"] == labext.name
    assert package["version"] == uc_jupyter.__version__
    assert package["jupyterlab"]["outputDir"] == "../uc_jupyter/labextension"


def test_the_build_carries_the_same_name_and_version(labext: Labext) -> None:
    built = json.loads((labext.build / "package.json").read_text())
    assert (built["name"], built["version"]) == (labext.name, uc_jupyter.__version__)
    assert built["jupyterlab"]["_build"]["load"].startswith("static/remoteEntry.")
    assert (labext.build / built["jupyterlab"]["_build"]["load"]).is_file()


def test_python_package_points_jupyterlab_at_the_build(labext: Labext) -> None:
    paths = uc_jupyter._jupyter_labextension_paths()
    assert paths == [{"src": "labextension", "dest": labext.name}]
    assert (labext.repo / "uc_jupyter" / paths[0]["src"] / "package.json").is_file()


def jupyter(labext: Labext, *args: str) -> str:
    """What the venv's ``jupyter *args`` prints (both streams, colours removed)."""
    result = subprocess.run(
        [str(labext.bin / "jupyter"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=labext.env(),
        stdin=subprocess.DEVNULL,
        check=True,
    )
    return ANSI.sub("", result.stdout + result.stderr)


def test_jupyterlab_lists_the_extension_enabled_and_ok(labext: Labext) -> None:
    listing = jupyter(labext, "labextension", "list")
    line = next((row for row in listing.splitlines() if labext.name in row), None)
    assert line is not None, listing
    assert re.search(rf"{labext.name} v{re.escape(uc_jupyter.__version__)} enabled\s+OK", line), line


def test_the_server_extension_config_is_installed_and_enabled(labext: Labext) -> None:
    config = json.loads((labext.repo / "jupyter-config" / "jupyter_server_config.d" / "uc_jupyter.json").read_text())
    assert config == {"ServerApp": {"jpserver_extensions": {"uc_jupyter.server": True}}}
    installed = labext.bin.parent / "etc" / "jupyter" / "jupyter_server_config.d" / "uc_jupyter.json"
    assert json.loads(installed.read_text()) == config
    listing = jupyter(labext, "server", "extension", "list")
    assert re.search(r"uc_jupyter\.server\s+enabled", listing), listing


def test_the_lockfile_is_committed_and_names_no_registry(labext: Labext) -> None:
    lock = (labext.sources / "yarn.lock").read_text()
    assert "__metadata:" in lock
    assert '"@jupyter/builder@npm:' in lock
    assert not re.search(r"https?://", lock)
