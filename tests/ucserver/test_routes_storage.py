"""uc_jupyter.ucserver.routes_storage, called as the app calls it: what the HTTP tests (test_storage_routes.py,
test_credential_transport.py) leave out: the ``purpose`` filter, and a drop whose vends cannot be ended now."""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from uc_jupyter.catalog import NotFound
from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.catalog.wire.errors import WireError
from uc_jupyter.ucserver.routes_data import Call
from uc_jupyter.ucserver.routes_storage import create_credential, delete_credential, list_credentials, secure_transport
from uc_jupyter.ucserver.vendor import Vendor


@pytest.fixture
def cat(tmp_path: Path) -> LocalCatalog:
    """A fresh home, as its admin, with the storage credential ``lake``."""
    made = LocalCatalog(tmp_path / "home")
    create_credential(made, Call(body={"name": "lake"}, secure=True))
    return made


@pytest.fixture
def vendor(cat: LocalCatalog) -> Iterator[Vendor]:
    made = Vendor(cat.root, reaper=False)
    yield made
    made.close()


def test_credentials_are_listed_for_purpose_storage_or_none_and_never_for_service(cat: LocalCatalog) -> None:
    assert [c["name"] for c in list_credentials(cat, Call())["credentials"]] == ["lake"]
    assert [c["name"] for c in list_credentials(cat, Call(query={"purpose": "STORAGE"}))["credentials"]] == ["lake"]
    assert list_credentials(cat, Call(query={"purpose": "SERVICE"})) == {"credentials": []}


@pytest.mark.parametrize("purpose", ["storage", "ALL", "", "P" * 200])
def test_any_other_purpose_is_an_invalid_argument_echoed_only_in_part(cat: LocalCatalog, purpose: str) -> None:
    with pytest.raises(WireError) as refused:
        list_credentials(cat, Call(query={"purpose": purpose}))
    assert refused.value.error_code == "INVALID_ARGUMENT"
    assert refused.value.message == f"purpose must be STORAGE or SERVICE, got {purpose[:32]!r}"


def test_a_drop_whose_vends_cannot_be_ended_now_still_drops_and_says_so_in_the_log(
    cat: LocalCatalog, vendor: Vendor, caplog: pytest.LogCaptureFixture
) -> None:
    for name in ("vends.db", "vends.db-wal", "vends.db-shm"):
        (cat.root / name).unlink(missing_ok=True)
    (cat.root / "vends.db").write_bytes(b"not a SQLite database " * 100)  # damaged after the server started
    answered: list[dict[str, Any]] = []
    principal = cat.current_principal()

    def request() -> None:  # a route runs in a worker thread, with a connection of its own
        with cat.as_principal(principal):
            answered.append(delete_credential(vendor, cat, Call(path={"name": "lake"})))

    with caplog.at_level(logging.ERROR, logger="uc_jupyter.ucserver.routes_storage"):
        worker = threading.Thread(target=request)
        worker.start()
        worker.join(timeout=30)
    assert answered == [{}]  # the drop is done, and the answer says so
    with pytest.raises(NotFound):
        cat.get_storage_credential("lake")
    (record,) = [r for r in caplog.records if r.name == "uc_jupyter.ucserver.routes_storage"]
    assert record.getMessage() == "storage credential lake was dropped, but its live vends could not be ended now"
    assert record.exc_info is not None and "vends.db is damaged" in str(record.exc_info[1])


def test_force_is_refused_before_anything_is_dropped(cat: LocalCatalog, vendor: Vendor) -> None:
    with pytest.raises(WireError, match="force=true is not supported: drop what uses the credential first"):
        delete_credential(vendor, cat, Call(path={"name": "lake"}, query={"force": "true"}))
    assert cat.get_storage_credential("lake").name == "lake"


@pytest.mark.parametrize(
    ("client", "local"),
    [("::ffff:127.0.0.1", True), ("::ffff:127.8.9.10", True), ("::ffff:192.0.2.9", False), ("::ffff:0:0", False)],
)
def test_an_ipv4_client_of_a_dual_stack_server_is_judged_by_its_ipv4_address(client: str, local: bool) -> None:
    assert secure_transport("http", client) is local


def test_a_client_on_this_machine_reaching_a_dual_stack_socket_over_ipv4_is_local() -> None:
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as server:
        server.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)  # as serve --host :: is on Linux
        server.bind(("::", 0))
        server.listen()
        with socket.create_connection(("127.0.0.1", server.getsockname()[1])):
            accepted, peer = server.accept()
            accepted.close()
    assert peer[0] == "::ffff:127.0.0.1" and secure_transport("http", peer[0])
