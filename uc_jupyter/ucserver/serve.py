"""``uc-jupyter serve``: the embedded catalog of ``$UC_JUPYTER_HOME`` as a Unity Catalog server.

It binds ``--host``/``--port`` itself (``--port 0``: a free port; a port in use is a one-line error
and exit status 1), serves the application of :mod:`uc_jupyter.ucserver.app` with uvicorn (one
process; Starlette runs the routes in its thread pool, SQLite serialises the writes), and prints
``http://HOST:PORT`` alone on a line of standard output, with the real port, once it accepts requests.

Stopping: SIGTERM or Ctrl-C (SIGINT) ends the server gracefully (requests under way finish, for at
most :data:`GRACE_S` seconds) and the command exits 0. uvicorn 0.54 swaps in its own handlers while it
serves, then restores the previous ones and raises the signal it caught once more
(``Server.capture_signals``): with Python's default handlers that would end the process by SIGTERM
(status 143) or turn into a KeyboardInterrupt. So ours are installed first: the re-raised signal
lands in them and only asks the (already stopped) server to stop.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser()
    >>> add_arguments(parser)
    >>> vars(parser.parse_args(["--port", "0"]))
    {'host': '127.0.0.1', 'port': 0}
"""

from __future__ import annotations

import argparse
import signal
import socket
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import uvicorn

    from uc_jupyter.catalog.embedded.local import LocalCatalog
    from uc_jupyter.catalog.embedded.tokens import TokenStore
    from uc_jupyter.ucserver.vendor import Vendor

__all__ = ["GRACE_S", "HELP", "Listening", "add_arguments", "prepare", "run", "serve"]

GRACE_S = 5.0
HELP = "serve the catalog of $UC_JUPYTER_HOME as a Unity Catalog REST server (stop with Ctrl-C or SIGTERM)"


def _port(text: str) -> int:
    if not text.isdigit() or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"{text!r}: give a port from 0 to 65535 (0: any free port)")
    return int(text)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``serve``: ``--host`` (default 127.0.0.1) and ``--port`` (default 8080; 0: free)."""
    parser.add_argument("--host", default="127.0.0.1", help="the address to listen on (default: 127.0.0.1)")
    parser.add_argument("--port", type=_port, default=8080, help="the TCP port (default: 8080; 0: any free port)")


def run(catalog: object, args: argparse.Namespace) -> tuple[list[str], None]:
    """The ``serve`` command of :mod:`uc_jupyter.cli`: serve until stopped; nothing more to print."""
    from uc_jupyter.catalog.embedded.local import LocalCatalog

    if not isinstance(catalog, LocalCatalog):
        raise ValueError("uc-jupyter serve serves the embedded catalog of $UC_JUPYTER_HOME")
    if getattr(args, "as_principal", None) is not None:
        # Every request acts as its token's principal; a server-wide principal would only mislead.
        raise ValueError("uc-jupyter serve acts as each request's token principal; leave out --as")
    serve(catalog, args.host, args.port)
    return [], None


def serve(catalog: LocalCatalog, host: str, port: int) -> None:
    """Serve ``catalog`` on ``host:port`` until SIGTERM or SIGINT (see the module docstring)."""
    listening = prepare(catalog, host, port, on_started=lambda url: print(url, flush=True))

    def stop(_sig: int, _frame: FrameType | None) -> None:
        listening.server.should_exit = True  # before uvicorn's handlers are in, and the re-raise after they are gone

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        listening.run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@dataclass(frozen=True)
class Listening:
    """A bound socket and the uvicorn server that will serve on it (:func:`prepare`); ``url`` has the
    real port. :meth:`run` serves until ``server.should_exit`` is set, then closes the socket and
    stops the vendor's reaper (its records stay in ``vends.db`` for the next server)."""

    server: uvicorn.Server
    sock: socket.socket
    url: str
    vendor: Vendor

    def run(self) -> None:
        try:
            self.server.run(sockets=[self.sock])
        finally:
            self.close()

    def close(self) -> None:
        """Close the socket and stop the reaper thread; for a server that was never run, too."""
        self.sock.close()
        self.vendor.close()


def prepare(
    catalog: LocalCatalog,
    host: str,
    port: int,
    *,
    on_started: Callable[[str], None] = lambda _url: None,
    store: TokenStore | None = None,
) -> Listening:
    """Bind ``host:port`` (0: a free port) and make the uvicorn server of ``catalog``'s application
    on it; ``on_started(url)`` is called once it accepts requests. The one place both ``serve`` and
    :mod:`uc_jupyter.testing.served` make a server, so the socket options and uvicorn's settings
    cannot drift apart.

    Example:
        >>> import tempfile
        >>> from uc_jupyter.catalog.embedded.local import LocalCatalog
        >>> listening = prepare(LocalCatalog(tempfile.mkdtemp()), "127.0.0.1", 0)
        >>> listening.url.startswith("http://127.0.0.1:")
        True
        >>> listening.close()
    """
    import uvicorn

    from uc_jupyter.ucserver.app import build_app
    from uc_jupyter.ucserver.vendor import Vendor

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto given explicitly: asyncio sets TCP_NODELAY only on sockets whose proto is IPPROTO_TCP, and
    # without it a response's header and body writes wait out the client's delayed ACK (~40 ms a call).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise OSError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    vendor = Vendor(catalog.root)
    config = uvicorn.Config(
        build_app(catalog, store, vendor),
        log_level="warning",
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=int(GRACE_S),
        server_header=False,
    )
    url = f"http://{shown}:{bound}"

    class Server(uvicorn.Server):  # made here: uvicorn is imported only when serving
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if self.started:  # listening: the URL is what a caller waits for
                on_started(url)

    return Listening(Server(config), sock, url, vendor)
