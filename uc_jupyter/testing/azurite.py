"""Azurite, the Azure Storage emulator, as a real process on 127.0.0.1: Blob storage that checks
Shared Key signatures and SAS tokens, for tests of ``az://`` and ``abfss://`` volumes.

:func:`azurite` starts ``azurite-blob`` (installed by ``make azurite`` into ``.azurite/``) on a free
port with a temporary folder and accounts of its own, each with a random key (so no test passes on
the emulator's well-known key), and stops it on exit. :class:`Azurite` makes containers, puts blobs
and signs container SAS tokens through azure-storage-blob (a dev dependency), and gives the storage
options a volume's credential would hold.

Example:
    >>> with azurite() as az:                                                  # doctest: +SKIP
    ...     az.put("raw", "images/a.png", b"png")
    ...     az.options()["connection_string"].startswith("DefaultEndpointsProtocol=http;")
    True
"""

from __future__ import annotations

import base64
import contextlib
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from uc_jupyter.processes import free_port
from uc_jupyter.testing.local_service import serving

__all__ = ["ACCOUNT", "Azurite", "azurite", "azurite_command"]

ACCOUNT = "ucjupyter"  # the first account; :func:`azurite` can make more
_READY_S = 60.0
# Where `make azurite` installs it: the project's own folder, never a global install.
_PROJECT_AZURITE = Path(__file__).resolve().parents[2] / ".azurite" / "node_modules" / ".bin" / "azurite-blob"


@dataclass(frozen=True)
class Azurite:
    """A running Azurite: its blob ``url`` (``http://127.0.0.1:<port>``) and ``keys`` per account."""

    url: str
    keys: dict[str, str] = field(repr=False)

    def endpoint(self, account: str = ACCOUNT) -> str:
        """The blob endpoint of ``account`` as object_store and connection strings name it."""
        return f"{self.url}/{account}"

    def connection_string(self, account: str = ACCOUNT, *, key: str | None = None) -> str:
        """A connection string for ``account`` signing with its key (or ``key``)."""
        return (
            f"DefaultEndpointsProtocol=http;AccountName={account};AccountKey={key or self.keys[account]};"
            f"BlobEndpoint={self.endpoint(account)};"
        )

    def options(self, account: str = ACCOUNT, **more: Any) -> dict[str, Any]:
        """The storage options of a credential holding ``account``'s key (``more`` added or replacing)."""
        return {"connection_string": self.connection_string(account), **more}

    def service(self, account: str = ACCOUNT) -> Any:
        """An azure-storage-blob ``BlobServiceClient`` of ``account``."""
        from azure.storage.blob import BlobServiceClient

        return BlobServiceClient.from_connection_string(self.connection_string(account))

    def put(self, container: str, name: str, data: bytes, *, account: str = ACCOUNT) -> None:
        """Store blob ``name`` in ``container`` (made when missing)."""
        client = self.service(account).get_container_client(container)
        if not client.exists():
            client.create_container()
        client.upload_blob(name, data, overwrite=True)

    def container_sas(
        self, container: str, *, account: str = ACCOUNT, permission: str = "rl", ttl: timedelta = timedelta(hours=1)
    ) -> str:
        """A service SAS for ``container`` only (``permission``: Azure's letters, ``rl`` read and list)."""
        from azure.storage.blob import generate_container_sas

        expiry = datetime.now(timezone.utc) + ttl
        token: str = generate_container_sas(
            account, container, account_key=self.keys[account], permission=permission, expiry=expiry
        )
        return token


def azurite_command() -> list[str]:
    """How to start Azurite's blob service here: the project's ``.azurite/`` install, else one on PATH."""
    if _PROJECT_AZURITE.is_file():
        return [str(_PROJECT_AZURITE)]
    on_path = shutil.which("azurite-blob")
    if on_path is None:
        raise RuntimeError("Azurite is not installed: run `make azurite` (npm, into .azurite/)")
    return [on_path]


@contextlib.contextmanager
def azurite(accounts: Sequence[str] = (ACCOUNT,)) -> Iterator[Azurite]:
    """Azurite's blob service with ``accounts`` (random keys) on a free 127.0.0.1 port; stopped on exit."""
    keys = {name: base64.b64encode(secrets.token_bytes(32)).decode() for name in accounts}
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="azurite-") as folder:
        env = {**os.environ, "AZURITE_ACCOUNTS": ";".join(f"{name}:{key}" for name, key in keys.items())}
        argv = [
            *azurite_command(),
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            str(port),
            "--location",
            folder,
            "--silent",
            "--skipApiVersionCheck",  # clients newer than this Azurite still speak what it serves
            "--disableTelemetry",
        ]
        # Azurite writes its debug and lock files into the working folder.
        with serving("Azurite", argv, url, env=env, cwd=folder, ready_seconds=_READY_S):
            yield Azurite(url, keys)
