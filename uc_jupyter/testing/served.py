"""An in-process ``uc-jupyter serve`` for tests and benchmarks: the real application, on 127.0.0.1.

:func:`serving` opens the embedded catalog of ``home`` as its metastore admin (``admin``, registered
as the metastore's admin when ``home`` is new, as the first opener of a metastore always is), serves
it with uvicorn on a free port in a daemon thread (the same socket and uvicorn settings as ``uc-jupyter
serve``: :func:`uc_jupyter.ucserver.serve.prepare`), waits until it accepts requests, and stops it when
the block ends. Starting one costs a few milliseconds after imports, so a test can have its own.

What differs from the command: one process, so the test's own code and the server share the
``as_principal`` contextvar's *module*, but not its value (each request runs in a worker thread inside
its token's principal), and the server never reads ``UC_JUPYTER_PRINCIPAL``.

Example:
    >>> import tempfile, urllib.request
    >>> from pathlib import Path
    >>> with serving(Path(tempfile.mkdtemp())) as served:
    ...     request = urllib.request.Request(served.url + "/api/2.1/unity-catalog/catalogs",
    ...                                      headers={"Authorization": f"Bearer {served.admin_token}"})
    ...     urllib.request.urlopen(request).read()
    b'{"catalogs":[]}'
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from uc_jupyter.catalog import NotFound, Unauthenticated, as_principal
from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.catalog.embedded.tokens import TokenStore

__all__ = ["ADMIN", "STARTUP_TIMEOUT_S", "Served", "serve_process", "serving"]

ADMIN = "admin"
STARTUP_TIMEOUT_S = 30.0


@dataclass
class Served:
    """A running in-process server: its base ``url`` (no API suffix), the admin's ``catalog`` and token
    ``store`` on its home, and the admin's token."""

    url: str
    home: Path
    catalog: LocalCatalog
    store: TokenStore
    admin_token: str
    _tokens: dict[str, str] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def token_for(self, principal: str) -> str | None:
        """A token of ``principal`` (made once and reused while it stays valid), None when ``principal``
        is not registered. Shaped to be a :class:`~uc_jupyter.catalog.rest.client.RestCatalog`'s ``token_for``.

        A cached token is checked first (a primary-key read): a principal dropped and registered again
        has lost its old tokens, and gets a new one."""
        with self._lock:
            cached = self._tokens.get(principal)
            if cached is not None:
                try:
                    self.store.authenticate(cached)
                    return cached
                except Unauthenticated:
                    del self._tokens[principal]
            with as_principal(ADMIN):
                try:
                    self.catalog.get_principal(principal)
                except NotFound:
                    return None
                made = self.store.create(principal)[1]
            self._tokens[principal] = made
            return made


@contextlib.contextmanager
def serving(home: Path) -> Iterator[Served]:
    """Serve the catalog of ``home`` (made when missing) until the block ends (see the module docstring).

    Raises RuntimeError (one line) when the server does not start within :data:`STARTUP_TIMEOUT_S`.
    """
    from uc_jupyter.ucserver.serve import prepare

    with as_principal(ADMIN):
        catalog = LocalCatalog(home)
        store = TokenStore(catalog)
        admin_token = store.create(ADMIN)[1]
    started = threading.Event()
    listening = prepare(catalog, "127.0.0.1", 0, on_started=lambda _url: started.set(), store=store)
    failed: list[BaseException] = []

    def run() -> None:
        try:
            listening.run()
        except BaseException as exc:  # reported to the waiting caller below, not lost in the thread
            failed.append(exc)
        finally:
            started.set()

    thread = threading.Thread(target=run, name=f"uc-serve {listening.url}", daemon=True)
    thread.start()
    try:
        if not started.wait(STARTUP_TIMEOUT_S) or failed or not listening.server.started:
            why = f"{type(failed[0]).__name__}: {failed[0]}" if failed else f"not started in {STARTUP_TIMEOUT_S} s"
            raise RuntimeError(f"the in-process catalog server on {listening.url} did not start ({why})")
        yield Served(listening.url, catalog.root, catalog, store, admin_token)
    finally:
        listening.server.should_exit = True
        thread.join(timeout=STARTUP_TIMEOUT_S)


def serve_process(home: Path, *args: str, host: str = "127.0.0.1", principal: str) -> tuple[subprocess.Popen[str], str]:
    """``uc-jupyter serve --host host --port 0 *args`` over ``home`` as a process of its own, with
    ``UC_JUPYTER_PRINCIPAL=principal`` in its environment (a name the server must never act as) and no
    remote catalog's settings (``UC_JUPYTER_CATALOG_URL``, ``DATABRICKS_HOST`` and their tokens): the
    process and its URL, once it prints it. RuntimeError (one line, with the server's stderr) when it
    prints anything else; the process is then gone.

    Example:
        >>> process, url = serve_process(Path(tempfile.mkdtemp()), principal="nobody")  # doctest: +SKIP
        >>> process.terminate(); process.wait()                                       # doctest: +SKIP
        0
    """
    # The server serves home's embedded catalog: a catalog server the caller points at (as a soak
    # that restarts its server does, for its ranks) must not become the server's own catalog.
    remote = ("UC_JUPYTER_CATALOG_URL", "UC_JUPYTER_TOKEN", "DATABRICKS_HOST", "DATABRICKS_TOKEN")
    env = {name: value for name, value in os.environ.items() if name not in remote}
    env.update(UC_JUPYTER_HOME=str(home), UC_JUPYTER_PRINCIPAL=principal)
    process = subprocess.Popen(
        [sys.executable, "-m", "uc_jupyter.cli", "serve", "--host", host, "--port", "0", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert process.stdout is not None
    line = process.stdout.readline().strip()  # blocks until the server prints its URL (or exits)
    if not line.startswith(f"http://{host}:"):
        process.kill()
        _, err = process.communicate()
        raise RuntimeError(f"uc-jupyter serve printed {line!r} instead of its URL: {err.strip()}")
    return process, line
