"""A real JupyterLab on 127.0.0.1 over a demo catalog, driven by Debian's chromium through Playwright.

Screenshots of every step land in ``ui-tests/artifacts/`` (kept by CI as test artifacts).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from uc_jupyter.processes import free_port

ARTIFACTS = Path(__file__).parent / "artifacts"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
TOKEN = "uc-jupyter-ui-tests"


@dataclass(frozen=True)
class Lab:
    url: str
    root: Path
    home: Path

    def open(self, path: str) -> str:
        """The URL of ``path`` in a fresh workspace."""
        return f"{self.url}/lab/tree/{path}?reset&token={TOKEN}"


@pytest.fixture(scope="session")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    home = tmp_path_factory.mktemp("ui_home")
    root = tmp_path_factory.mktemp("ui_root")
    env = {**os.environ, "UC_JUPYTER_HOME": str(home), "UC_JUPYTER_PRINCIPAL": "admin", "JUPYTER_PLATFORM_DIRS": "1"}
    env.pop("UC_JUPYTER_SPARK_REMOTE", None)
    subprocess.run(
        [sys.executable, "-c", "from uc_jupyter.demo import init_demo; init_demo(rows=300, images_per_class=50)"],
        env=env,
        check=True,
        timeout=300,
    )
    (root / "tutorial.ipynb").write_text(json.dumps(_empty_notebook()))
    port = free_port()
    log = (tmp_path_factory.mktemp("ui_logs") / "lab.log").open("wb")
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={port}",
            f"--ServerApp.token={TOKEN}",
            "--ServerApp.allow_root=True",
            f"--ServerApp.root_dir={root}",
            "--ServerApp.jpserver_extensions={'uc_jupyter.server': True}",
            f"--LabApp.workspaces_dir={root / '.workspaces'}",
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(f"{url}/api/status?token={TOKEN}", server)
        yield Lab(url, root, home)
    finally:
        server.terminate()
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: object, request: pytest.FixtureRequest) -> Iterator[object]:
    context = browser.new_context(viewport={"width": 1400, "height": 900})  # type: ignore[attr-defined]
    tab = context.new_page()
    tab.set_default_timeout(30_000)
    yield tab
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        shot(tab, f"failed-{request.node.name}")
    context.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Remember each phase's report on the test, so the page fixture can screenshot a failure."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    setattr(item, f"rep_{report.when}", report)


def shot(page: object, name: str) -> None:
    """Keep a screenshot of this step as a test artifact."""
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"))  # type: ignore[attr-defined]


def _empty_notebook() -> dict[str, object]:
    return {
        "cells": [
            {"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {}, "outputs": [], "source": text}
            for i, text in enumerate(["%load_ext uc_jupyter", ""])
        ],
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def _wait_until_up(status: str, server: subprocess.Popen[bytes], timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"JupyterLab exited with code {server.returncode} before it answered")
        try:
            with urllib.request.urlopen(status, timeout=2):
                return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"JupyterLab did not answer on {status} within {timeout:g} s")
