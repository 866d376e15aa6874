"""A real ``jupyter server`` subprocess with the extension enabled, over a demo catalog built for it, and
small HTTP and kernel-websocket clients to talk to it."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from uc_jupyter.catalog import as_principal
from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.demo import init_demo
from uc_jupyter.processes import free_port
from uc_jupyter.testing.waits import wait_until

TOKEN = "uc-jupyter-test-token"
ADMIN, ALICE = "admin", "alice"
_START_TIMEOUT = 60.0


@dataclass
class Reply:
    status: int
    body: dict[str, Any]
    content_type: str


@dataclass
class Server:
    """A running ``jupyter server`` on 127.0.0.1, acting as ``principal`` on the catalog at ``home``."""

    url: str  # http://127.0.0.1:<port>/
    principal: str
    home: Path
    process: subprocess.Popen[bytes]
    log: Path

    def request(
        self, method: str, path: str, *, token: str | None = TOKEN, body: dict[str, Any] | None = None
    ) -> Reply:
        """``method`` on ``path`` (relative to the base URL), with the token in the Authorization header."""
        headers = {"Authorization": f"token {token}"} if token is not None else {}
        data = None if body is None else json.dumps(body).encode()
        if data is not None:
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(self.url + path, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return Reply(response.status, _json(response.read()), response.headers.get("Content-Type", ""))
        except urllib.error.HTTPError as error:
            return Reply(error.code, _json(error.read()), error.headers.get("Content-Type", ""))

    def api(self, route: str, *, token: str | None = TOKEN, **params: str) -> Reply:
        """GET ``uc-jupyter/api/<route>?<params>``."""
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        return self.request("GET", f"uc-jupyter/api/{route}{query}", token=token)

    def execute(self, kernel_id: str, code: str, timeout: float = 60.0) -> str:
        """Run ``code`` in a kernel over its websocket; its printed output, or AssertionError with the error."""
        return asyncio.run(asyncio.wait_for(_execute(self, kernel_id, code), timeout))


def _json(raw: bytes) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except ValueError:
        return {"raw": raw.decode(errors="replace")}
    return value if isinstance(value, dict) else {"value": value}


async def _execute(server: Server, kernel_id: str, code: str) -> str:
    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    ws_url = server.url.replace("http://", "ws://") + f"api/kernels/{kernel_id}/channels"
    connection = await websocket_connect(HTTPRequest(ws_url, headers={"Authorization": f"token {TOKEN}"}))
    msg_id = uuid.uuid4().hex
    header = {
        "msg_id": msg_id,
        "username": "test",
        "session": uuid.uuid4().hex,
        "msg_type": "execute_request",
        "version": "5.3",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    content = {"code": code, "silent": False, "store_history": False, "user_expressions": {}, "allow_stdin": False}
    message = {"header": header, "parent_header": {}, "metadata": {}, "content": content, "channel": "shell"}
    await connection.write_message(json.dumps(message))
    output: list[str] = []
    try:
        while True:
            raw = await connection.read_message()
            assert raw is not None, f"the kernel websocket closed; output so far: {''.join(output)}"
            reply = json.loads(raw)
            if reply.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind, body = reply["msg_type"], reply["content"]
            if kind == "stream":
                output.append(body["text"])
            elif kind == "error":
                output.append("\n".join(body["traceback"]))
            elif kind == "execute_reply":
                assert body["status"] == "ok", (
                    f"kernel error: {body.get('ename')}: {body.get('evalue')}\n{''.join(output)}"
                )
                return "".join(output)
    finally:
        connection.close()


def start_server(principal: str, home: Path, workdir: Path) -> Server:
    """Start ``jupyter server`` with the extension on a free port; wait until it answers."""
    port = free_port()
    root = workdir / f"root-{principal}"
    root.mkdir(exist_ok=True)
    env = {
        **os.environ,
        "UC_JUPYTER_HOME": str(home),
        "UC_JUPYTER_PRINCIPAL": principal,
        "JUPYTER_CONFIG_DIR": str(workdir / "jupyter-config"),
        "JUPYTER_RUNTIME_DIR": str(workdir / f"runtime-{principal}"),
        "IPYTHONDIR": str(workdir / "ipython"),
    }
    log = workdir / f"server-{principal}.log"
    command = [
        sys.executable,
        "-m",
        "jupyter_server",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--ServerApp.token={TOKEN}",
        "--ServerApp.allow_root=True",
        "--ServerApp.open_browser=False",
        f"--ServerApp.root_dir={root}",
        "--ServerApp.jpserver_extensions={'uc_jupyter.server': True}",
    ]
    with log.open("wb") as sink:
        process = subprocess.Popen(command, env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
    server = Server(f"http://127.0.0.1:{port}/", principal, home, process, log)

    def answers() -> bool:
        if process.poll() is not None:
            raise RuntimeError(f"jupyter server exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            return server.request("GET", "api/status").status == 200
        except OSError:
            return False

    try:
        wait_until(
            answers, lambda: f"jupyter server to answer:\n{log.read_text()[-3000:]}", _START_TIMEOUT, interval_s=0.2
        )
    except AssertionError:
        stop_server(server)
        raise
    return server


def stop_server(server: Server) -> None:
    """SIGTERM (the server shuts its kernels down), then SIGKILL of its process group if it lingers."""
    if server.process.poll() is None:
        server.process.send_signal(signal.SIGTERM)
        try:
            server.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(server.process.pid, signal.SIGKILL)
            server.process.wait(timeout=10)


@pytest.fixture(scope="module")
def server_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A demo catalog (main.ml.iris, /Volumes/main/ml/images) where alice may see, not read, the table
    (MODIFY only), and a symlink inside the volume leads out of it."""
    home = tmp_path_factory.mktemp("server_home")
    with as_principal(ADMIN):
        cat = LocalCatalog(home)
        init_demo(cat, rows=300, images_per_class=5)  # alice: USE CATALOG, USE SCHEMA, READ VOLUME
        cat.grant("main.ml.iris", "MODIFY", ALICE)
        images = Path(cat.resolve_volume_path("/Volumes/main/ml/images").path)
    outside = tmp_path_factory.mktemp("outside")
    (outside / "secret.txt").write_text("not in the volume")
    (images / "outside").symlink_to(outside, target_is_directory=True)
    (images / ".hidden").write_text("skipped")
    (images / "_SUCCESS").write_text("")
    return home


@pytest.fixture(scope="module")
def admin_server(server_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    server = start_server(ADMIN, server_home, tmp_path_factory.mktemp("jupyter"))
    yield server
    stop_server(server)


@pytest.fixture(scope="module")
def alice_server(server_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    server = start_server(ALICE, server_home, tmp_path_factory.mktemp("jupyter"))
    yield server
    stop_server(server)
