"""The soak's services, made in a temporary folder and gone when the block ends.

- an S3 test server (:mod:`uc_jupyter.testing.s3_server`) holding bucket ``soak``: the volume's files
  (``data/``), the table (``rows/``) and the checkpoints (``runs/``); its random faults are turned on
  once everything is written (:meth:`SoakStack.faults_on`), so the set-up itself is not what is tested;
- a home whose embedded catalog has ``main.ml.data`` and ``main.ml.runs`` (external volumes on the S3
  server, their credential vending its keys) and ``main.ml.rows`` (an external Delta table there);
- ``uc-jupyter serve`` over that home as a process of its own (:meth:`SoakStack.kill_serve` kills it
  with SIGKILL, :meth:`SoakStack.restart_serve` starts it again on the same port);
- a small tmpfs for the cache (and the checkpoints' staging, which lives beside it), which
  :meth:`SoakStack.fill_disk` fills to the last byte and :meth:`SoakStack.free_disk` empties again;
- :meth:`SoakStack.environment`: what the ranks need in their environment to use all that through
  the catalog server, as a notebook pointed at a catalog server does.

Mounting the tmpfs needs root (as CI has); elsewhere :class:`~uc_jupyter.testing.mounts.MountUnavailable`.

Example:
    >>> with SoakStack(Path(tempfile.mkdtemp()), SoakSize.named("tiny")) as stack:  # doctest: +SKIP
    ...     stack.faults_on(fail_rate=0.01, reset_rate=0.001)
"""

from __future__ import annotations

import contextlib
import errno
import os
import random
import signal
import subprocess
from pathlib import Path
from types import TracebackType
from urllib.parse import urlsplit

import numpy as np

from uc_jupyter.testing.soak.leftovers import stamped
from uc_jupyter.testing.soak.plan import SoakSize
from uc_jupyter.testing.soak.rank_loop import digest

__all__ = ["PAYLOAD_BYTES", "SoakStack"]

PAYLOAD_BYTES = 64  # each table row's payload
_BUCKET = "soak"
_FLOOR = 1 << 20  # the cache's free-disk floor: the tmpfs is the cache's alone
_STAGING_ROOM = 32 << 20  # room on the tmpfs beside the cache's budget, for the checkpoints' staged files


class SoakStack:
    """The services of one soak run under ``root`` (see the module docstring); a context manager."""

    def __init__(self, root: Path, size: SoakSize, *, seed: int = 0) -> None:
        self.root, self.size, self.seed = root, size, seed
        self.volume, self.run, self.table = "/Volumes/main/ml/data", "/Volumes/main/ml/runs/soak", "main.ml.rows"
        self.home = root / "home"
        self.disk = root / "cache-disk"
        self.cache_dir = self.disk / "cache"
        self.expected_files = np.empty(0, "S16")  # every volume file's digest (raw bytes)
        self.expected_rows = np.empty(0, "S16")  # each row id's payload digest, by id
        self.cache_max_bytes = 0
        self.processes: set[str] = set()  # the stamps of every server process started
        self._stack = contextlib.ExitStack()
        self._serve: subprocess.Popen[str] | None = None
        self.serve_url = ""
        self.token = ""

    def __enter__(self) -> SoakStack:
        try:
            self._start()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: object | TracebackType) -> None:
        self._stack.close()

    def _start(self) -> None:
        from uc_jupyter.testing.mounts import mounted
        from uc_jupyter.testing.s3_server import S3TestServer

        self.s3 = self._stack.enter_context(S3TestServer(self.root / "s3", seed=self.seed))
        assert self.s3.process is not None
        self.processes |= stamped([self.s3.process.pid])
        data_bytes = self._write_files()
        self.cache_max_bytes = data_bytes // 2  # half the data: every epoch downloads, and can meet a full disk
        self._stack.enter_context(mounted(self.disk, "tmpfs", f"size={self.cache_max_bytes + _STAGING_ROOM}"))
        self._make_catalog()
        self._stack.callback(self._stop_serve)
        self.restart_serve()

    def _write_files(self) -> int:
        from uc_jupyter.testing.small_files import write_small_files

        folder = self.s3.bucket(_BUCKET) / "data"
        relatives, total = write_small_files(folder, self.size.files, seed=self.seed)
        digests = [bytes.fromhex(digest((folder / relative).read_bytes())) for relative in relatives]
        self.expected_files = np.array(digests, "S16")
        return total

    def _make_catalog(self) -> None:
        import pyarrow as pa

        from uc_jupyter.catalog import as_principal
        from uc_jupyter.catalog.embedded.local import LocalCatalog
        from uc_jupyter.catalog.embedded.tokens import TokenStore
        from uc_jupyter.testing.catalogs import external_location
        from uc_jupyter.testing.served import ADMIN

        rng = random.Random(self.seed)
        payloads = [rng.randbytes(PAYLOAD_BYTES) for _ in range(self.size.rows)]
        self.expected_rows = np.array([bytes.fromhex(digest(payload)) for payload in payloads], "S16")
        rows = pa.table({"id": pa.array(range(self.size.rows), pa.int64()), "payload": pa.array(payloads, pa.binary())})
        with as_principal(ADMIN):
            catalog = LocalCatalog(self.home)
            catalog.create_catalog("main")
            catalog.create_schema("main.ml")
            external_location(catalog, f"s3://{_BUCKET}", {**self.s3.storage_options, "vending": "static"})
            catalog.create_volume("main.ml.data", f"s3://{_BUCKET}/data")
            catalog.create_volume("main.ml.runs", f"s3://{_BUCKET}/runs")
            catalog.create_table(self.table, rows, storage_location=f"s3://{_BUCKET}/rows")
            self.token = TokenStore(catalog).create(ADMIN)[1]

    def faults_on(self, *, fail_rate: float, reset_rate: float) -> None:
        self.s3.reset()
        self.s3.configure(fail_rate=fail_rate, reset_rate=reset_rate)

    def environment(self) -> dict[str, str]:
        """The kernel's settings the ranks inherit: the catalog server and its token, the cache."""
        from uc_jupyter.testing.served import ADMIN

        return {
            "UC_JUPYTER_HOME": str(self.home),
            "UC_JUPYTER_PRINCIPAL": ADMIN,
            "UC_JUPYTER_CATALOG_URL": self.serve_url,
            "UC_JUPYTER_TOKEN": self.token,
            "UC_JUPYTER_CACHE_DIR": str(self.cache_dir),
            "UC_JUPYTER_CACHE_MAX_BYTES": str(self.cache_max_bytes),
            "UC_JUPYTER_CACHE_MIN_FREE_BYTES": str(_FLOOR),
        }

    # ------------------------------------------------------------------ faults the driver injects
    def kill_serve(self) -> None:
        """SIGKILL the catalog server, as the OOM killer would."""
        assert self._serve is not None
        os.kill(self._serve.pid, signal.SIGKILL)
        self._serve.wait()

    def restart_serve(self) -> None:
        """Start ``uc-jupyter serve`` over the home: on a free port the first time, then on the same one
        (the ranks hold its URL)."""
        from uc_jupyter.testing.served import serve_process

        port = [] if not self.serve_url else ["--port", str(urlsplit(self.serve_url).port)]
        self._stop_serve()
        self._serve, self.serve_url = serve_process(self.home, *port, principal="soak-nobody")
        self.processes |= stamped([self._serve.pid])

    def _stop_serve(self) -> None:
        if self._serve is not None and self._serve.poll() is None:
            self._serve.terminate()
            try:
                self._serve.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._serve.kill()
                self._serve.wait()
        if self._serve is not None:
            self._serve.communicate()  # closes its pipes

    @property
    def balloon(self) -> Path:
        return self.disk / "balloon"

    def fill_disk(self) -> int:
        """Fill the cache's disk to the last byte with one file beside the cache; its size."""
        written = 0
        chunk = b"\0" * (1 << 20)
        with open(self.balloon, "wb", buffering=0) as handle:
            while True:
                try:
                    written += handle.write(chunk)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    chunk = chunk[: len(chunk) // 2]
                    if not chunk:
                        return written

    def free_disk(self) -> None:
        self.balloon.unlink(missing_ok=True)
