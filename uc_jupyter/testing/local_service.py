"""A test service (an emulator or server of someone else's make) in its own process on 127.0.0.1:
started with its output in a file, waited for until it answers HTTP, and stopped however the block
ends. moto_iam, azurite and gcs_emulator start theirs through :func:`serving`.

Example:
    >>> argv = ["moto_server", "-p", "5000"]
    >>> with serving("moto_server", argv, "http://127.0.0.1:5000/moto-api/") as process:  # doctest: +SKIP
    ...     process.pid
"""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from typing import IO

__all__ = ["serving"]


@contextlib.contextmanager
def serving(
    name: str,
    argv: Sequence[str],
    ready_url: str,
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    ready_seconds: float = 60.0,
) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``argv`` until the block ends; ready once ``ready_url`` answers with any HTTP status (an
    unsigned request may get a 4xx). Its output goes to a file, not a pipe: a chatty emulator logging
    every request would stall on a full pipe. A service that exits or does not answer within
    ``ready_seconds`` is a RuntimeError carrying the end of its output."""
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
        )
        try:
            _wait_ready(name, ready_url, process, log, ready_seconds)
            yield process
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_ready(name: str, url: str, process: subprocess.Popen[bytes], log: IO[bytes], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log.seek(0)
            tail = log.read().decode(errors="replace").strip()[-2000:]
            raise RuntimeError(f"{name} exited with status {process.returncode}: {tail}")
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return
        except urllib.error.HTTPError:
            return  # it answered
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{name} did not answer on {url} within {seconds:.0f} s")
