"""Listings through object_store (uc_jupyter.storage.objects): a store that cannot be reached fails
within seconds, in one line naming the volume, the endpoint and why."""

from __future__ import annotations

import contextlib
import datetime
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from uc_jupyter.server.browse import status_of
from uc_jupyter.storage.errors import StorageUnreachable
from uc_jupyter.storage.reads import open_storage
from uc_jupyter.testing.s3_server import S3TestServer

pytestmark = pytest.mark.in_a_fork  # object_store requests: keep the test process clean (conftest)


def test_a_store_that_refuses_connections_fails_within_a_second_naming_its_endpoint(tmp_path: Path) -> None:
    (tmp_path / "b" / "data").mkdir(parents=True)
    (tmp_path / "b" / "data" / "a.bin").write_bytes(b"x")
    with S3TestServer(tmp_path) as server:  # a volume's store, then gone (as tutorial 02 leaves one)
        options, endpoint = server.storage_options, server.endpoint
    storage = open_storage("s3://b/data", options, where="/Volumes/main/ml/remote_images")
    started = time.monotonic()
    with pytest.raises(OSError, match="refused the connection") as refused:
        list(storage.pages(recursive=False))
    took = time.monotonic() - started
    assert str(refused.value) == (
        f"cannot list /Volumes/main/ml/remote_images: {endpoint} refused the connection (nothing listens "
        "there); check the volume's endpoint, or that its store runs"
    )
    assert took < 5, took  # object_store's default retries took 3-10 s here
    # One line in a notebook too (no traceback), and the sidebar's answer is that line (502).
    assert isinstance(refused.value, StorageUnreachable)
    assert refused.value._render_traceback_() == [f"StorageUnreachable: {refused.value}"]
    assert status_of(refused.value) == 502


def test_an_endpoint_whose_name_does_not_resolve_says_so() -> None:
    options = {"key": "k", "secret": "s", "endpoint_url": "http://no-such-store.invalid:9000"}
    storage = open_storage("s3://b/data", options, where="/Volumes/main/ml/typo")
    with pytest.raises(
        OSError,
        match=r"^cannot list /Volumes/main/ml/typo: http://no-such-store.invalid:9000: "
        r"the name no-such-store.invalid does not resolve; check",
    ):
        list(storage.pages(recursive=False))


@pytest.fixture
def tls_endpoint(tmp_path: Path) -> Iterator[str]:
    """An https endpoint on 127.0.0.1 whose certificate no one signed: the TLS handshake fails."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    private = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    signed = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)  # signed by itself: no one the client trusts
        .public_key(private.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(private, hashes.SHA256())
    )
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    key.write_bytes(
        private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    cert.write_bytes(signed.public_bytes(serialization.Encoding.PEM))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    listening.listen(16)
    listening.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                client, _ = listening.accept()
            except OSError:
                continue
            with contextlib.suppress(OSError), context.wrap_socket(client, server_side=True) as tls:
                tls.recv(1)  # the client gives up on the certificate before sending anything

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{listening.getsockname()[1]}"
    finally:
        stop.set()
        thread.join()
        listening.close()


def test_a_store_whose_certificate_is_not_trusted_says_the_tls_handshake_failed(tls_endpoint: str) -> None:
    options = {"key": "k", "secret": "s", "endpoint_url": tls_endpoint}
    storage = open_storage("s3://b/data", options, where="/Volumes/main/ml/secure")
    with pytest.raises(StorageUnreachable) as failed:
        list(storage.pages(recursive=False))
    assert str(failed.value) == (
        f"cannot list /Volumes/main/ml/secure: {tls_endpoint}: its TLS certificate is not trusted (self-signed "
        "certificate); check the volume's endpoint, or that its store runs"
    )
