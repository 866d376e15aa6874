"""A real tiny HTTP server on 127.0.0.1 that answers what a test scripts: for the HTTP client's retries
and for playing a Unity Catalog server other than ours (no extension routes, odd paging)."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Scripted", "scripted_server"]


class Scripted(ThreadingHTTPServer):
    """Answers each request with the next scripted (status, body, headers); the last one repeats."""

    daemon_threads = True

    def __init__(self, port: int = 0) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.script: list[tuple[int, Any, dict[str, str]]] = [(200, {}, {})]
        self.seen: list[dict[str, Any]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: Scripted
    protocol_version = "HTTP/1.1"  # keep-alive, as a real server

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.server.seen.append(
            {"method": self.command, "path": self.path, "auth": self.headers.get("Authorization"), "body": body}
        )
        status, answer, headers = self.server.script.pop(0) if len(self.server.script) > 1 else self.server.script[0]
        data = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_DELETE = do_PATCH = _answer

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass


@contextlib.contextmanager
def scripted_server(port: int = 0) -> Iterator[Scripted]:
    """A :class:`Scripted` server (on ``port``; 0: any free one), serving in a thread until the block ends."""
    server = Scripted(port)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
