"""A real ``uc-jupyter serve`` process on 127.0.0.1 (a free port), over a temporary home with an admin.

The test process opens the same home as ``admin`` to make principals, grants and tokens, as an admin
would on the server's machine. The server runs with ``UC_JUPYTER_PRINCIPAL`` set to an unregistered
name (``SERVER_ENV_PRINCIPAL``): a request ever run as the process's own principal instead of its
token's would be refused, so the tests would see it.
"""

from __future__ import annotations

import http.client
import json
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import pytest

from uc_jupyter.catalog import NotFound, as_principal
from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.catalog.embedded.tokens import TokenStore
from uc_jupyter.testing.served import serve_process

API = "/api/2.1/unity-catalog"
ADMIN = "admin"
SERVER_ENV_PRINCIPAL = "server-process-env"


@dataclass(frozen=True)
class Answer:
    """An HTTP answer: status, the decoded JSON body (None when empty or not JSON), and the headers."""

    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def error_code(self) -> str | None:
        return self.body.get("error_code") if isinstance(self.body, dict) else None


class Client:
    """One keep-alive HTTP connection to the server, sending ``token`` (None: no Authorization header)."""

    def __init__(self, url: str, token: str | None) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.token = token
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=30)

    def call(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        raw: bytes | None = None,
        query: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Answer:
        target = path if path.startswith("/") else f"{API}/{path}"  # "catalogs": under the API prefix
        if query:
            target += "?" + urlencode(query)
        sent = {**({"Authorization": f"Bearer {self.token}"} if self.token is not None else {}), **(headers or {})}
        body = raw if raw is not None else (None if json_body is None else json.dumps(json_body).encode())
        if body is not None:
            sent.setdefault("Content-Type", "application/json")
        for attempt in (1, 2):  # the server may close a connection after an error answer: reconnect once
            try:
                self.conn.request(method, target, body=body, headers=sent)
                response = self.conn.getresponse()
                data = response.read()
                break
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self.conn.close()
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
                if attempt == 2:
                    raise
        try:
            decoded = json.loads(data) if data else None
        except ValueError:
            decoded = None
        return Answer(response.status, decoded, {k.lower(): v for k, v in response.getheaders()})

    def close(self) -> None:
        self.conn.close()


@dataclass
class Served:
    """A running server, the admin's catalog and token store on its home, and helpers."""

    url: str
    process: subprocess.Popen[str]
    catalog: LocalCatalog
    tokens: TokenStore
    admin_token: str
    clients: list[Client] = field(default_factory=list)

    def principal(self, name: str) -> str:
        """Register ``name`` (once) and return it."""
        with as_principal(ADMIN):
            try:
                self.catalog.get_principal(name)
            except NotFound:
                self.catalog.create_principal(name)
        return name

    def token(self, principal: str, *, ttl_seconds: float | None = None) -> str:
        """A new token for ``principal``, registered first when needed."""
        self.principal(principal)
        with as_principal(ADMIN):
            return self.tokens.create(principal, ttl_seconds=ttl_seconds)[1]

    def client(self, token: str | None) -> Client:
        made = Client(self.url, token)
        self.clients.append(made)
        return made

    def admin(self) -> Client:
        return self.client(self.admin_token)

    def stop(self, sig: int = signal.SIGTERM) -> tuple[int, str]:
        """Send ``sig``, wait; the exit status and what the server wrote to stderr."""
        for made in self.clients:
            made.close()
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            _, err = self.process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            _, err = self.process.communicate()
        return self.process.returncode, err


def start_server(home: Path, *args: str, host: str = "127.0.0.1") -> Served:
    """``uc-jupyter serve --host host --port 0`` over ``home`` (made, with ``admin`` as its metastore admin)."""
    with as_principal(ADMIN):
        catalog = LocalCatalog(home)
        tokens = TokenStore(catalog)
        admin_token = tokens.create(ADMIN)[1]
    try:
        process, url = serve_process(home, *args, host=host, principal=SERVER_ENV_PRINCIPAL)
    except RuntimeError as exc:
        pytest.fail(str(exc))
    return Served(url, process, catalog, tokens, admin_token)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One server per test module (tests use names of their own); it must stop with exit status 0."""
    served = start_server(tmp_path_factory.mktemp("served_home"))
    yield served
    code, err = served.stop()
    assert (code, err) == (0, ""), f"the server ended with {code}: {err}"


@pytest.fixture
def fresh_server(tmp_path: Path) -> Iterator[Served]:
    """A server of this test's own, for tests that stop or count on an empty catalog."""
    served = start_server(tmp_path / "home")
    yield served
    if served.process.poll() is None:
        served.stop(signal.SIGKILL)
