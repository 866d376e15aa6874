"""A credential's raw secrets (``uc_jupyter_storage_options``) are accepted only over https or from the
server's own machine: plain http from another machine could be read on the way, so it is refused
with a one-line 400 and nothing is created.

Two ways in, both through a real ``uc-jupyter serve``: a server bound to this machine's non-loopback
address, reached on it (so the client address the server sees is not loopback: skipped where the
machine has no such address), and a loopback server behind a proxy's ``X-Forwarded-For`` /
``X-Forwarded-Proto`` headers, which uvicorn honours from loopback clients only.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ucserver.conftest import Answer, Client, Served, start_server
from tests.ucserver.test_catalogs import ok, refused

SECRETS = {"key": "AKIAEXAMPLE", "secret": "s3cr3t"}
REMOTE = "203.0.113.7"  # TEST-NET-3: a client address no machine here has


def _non_loopback_address() -> str | None:
    """This machine's address on its default route (a UDP connect sends nothing), None without one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect((REMOTE, 9))
        except OSError:
            return None
        address = str(probe.getsockname()[0])
    return None if address.startswith("127.") else address


@pytest.fixture
def remote_server(tmp_path: Path) -> Iterator[Served]:
    address = _non_loopback_address()
    if address is None:
        pytest.skip("this machine has no non-loopback IPv4 address to serve on")
    served = start_server(tmp_path / "home", host=address)
    yield served
    code, err = served.stop()
    assert (code, err) == (0, ""), err


def _create(client: Client, name: str, headers: dict[str, str] | None = None, **body: object) -> Answer:
    return client.call("POST", "credentials", json_body={"name": name, **body}, headers=headers)


def test_secrets_over_plain_http_from_another_machine_are_refused(remote_server: Served) -> None:
    admin = remote_server.admin()
    answer = _create(admin, "leaky", uc_jupyter_storage_options=SECRETS)
    message = refused(answer, 400, "INVALID_ARGUMENT")
    assert "uc_jupyter_storage_options carries storage secrets" in message and "https" in message
    assert "\n" not in message and SECRETS["secret"] not in message
    refused(admin.call("GET", "credentials/leaky"), 404, "NOT_FOUND")
    # What holds no secret still works from there: a role ARN names a role, it grants nothing.
    role = {"role_arn": "arn:aws:iam::123456789012:role/uc"}
    assert ok(_create(admin, "roled", aws_iam_role=role))["aws_iam_role"] == role


@pytest.mark.parametrize(
    ("headers", "accepted"),
    [
        ({}, True),  # a client on this machine
        ({"X-Forwarded-For": REMOTE}, False),  # a proxy here relaying plain http from elsewhere
        ({"X-Forwarded-For": REMOTE, "X-Forwarded-Proto": "http"}, False),
        ({"X-Forwarded-For": REMOTE, "X-Forwarded-Proto": "https"}, True),  # TLS ended at the proxy
    ],
)
def test_behind_a_proxy_the_forwarded_client_and_scheme_decide(
    server: Served, headers: dict[str, str], accepted: bool
) -> None:
    name = f"proxied_{len(headers)}_{headers.get('X-Forwarded-Proto', 'none')}"
    answer = _create(server.admin(), name, headers, uc_jupyter_storage_options=SECRETS)
    if accepted:
        assert ok(answer)["uc_jupyter_option_names"] == ["key", "secret"]
        ok(server.admin().call("DELETE", f"credentials/{name}"))
    else:
        assert "over plain http from another machine" in refused(answer, 400, "INVALID_ARGUMENT")
        refused(server.admin().call("GET", f"credentials/{name}"), 404, "NOT_FOUND")
