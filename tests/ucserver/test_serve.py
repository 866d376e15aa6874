"""uc_jupyter.ucserver.serve without serving: the options, the refusals of ``run``, and ``prepare``'s
bound socket (the real port in the URL, a port in use as one line). Serving and stopping by signal:
test_catalogs.py, with a real ``uc-jupyter serve`` process."""

from __future__ import annotations

import argparse
import socket
from pathlib import Path

import pytest

from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.catalog.rest.client import RestCatalog
from uc_jupyter.ucserver.serve import add_arguments, prepare, run


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="serve")
    add_arguments(parser)
    return parser.parse_args(list(argv))


@pytest.fixture
def catalog(tmp_path: Path) -> LocalCatalog:
    return LocalCatalog(tmp_path / "home")


def test_ports_from_0_to_65535_are_taken() -> None:
    assert vars(parse()) == {"host": "127.0.0.1", "port": 8080}
    assert parse("--port", "0").port == 0
    assert parse("--port", "65535", "--host", "::1").port == 65535


@pytest.mark.parametrize("port", ["65536", "-1", "80.0", "http", "", " 80"])
def test_anything_else_is_a_usage_error_naming_the_range(port: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parse("--port", port)
    assert exited.value.code == 2
    assert f"argument --port: {port!r}: give a port from 0 to 65535 (0: any free port)" in capsys.readouterr().err


def test_run_serves_only_the_embedded_catalog() -> None:
    remote = RestCatalog("http://127.0.0.1:9", "ucj_not_a_real_token")  # never contacted
    try:
        with pytest.raises(ValueError, match=r"serves the embedded catalog of \$UC_JUPYTER_HOME"):
            run(remote, parse("--port", "0"))
    finally:
        remote.close()


def test_prepare_binds_a_free_port_and_names_it_in_the_url(catalog: LocalCatalog) -> None:
    listening = prepare(catalog, "127.0.0.1", 0)
    try:
        host, port = listening.sock.getsockname()
        assert host == "127.0.0.1" and port != 0
        assert listening.url == f"http://127.0.0.1:{port}"
        assert listening.sock.proto == socket.IPPROTO_TCP  # asyncio sets TCP_NODELAY only then
        assert not listening.server.started
    finally:
        listening.close()
    assert listening.sock.fileno() == -1  # closed, though it never served


def test_a_port_in_use_is_one_line_naming_the_address(catalog: LocalCatalog) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(OSError, match=f"^cannot listen on 127.0.0.1:{port}: ") as refused:
            prepare(catalog, "127.0.0.1", port)
    message = str(refused.value)
    assert message.startswith(f"cannot listen on 127.0.0.1:{port}: ") and "\n" not in message
    assert refused.value.__cause__ is None and refused.value.__suppress_context__


def test_an_ipv6_host_is_bracketed_in_the_url(catalog: LocalCatalog) -> None:
    try:
        listening = prepare(catalog, "::1", 0)
    except OSError as exc:
        pytest.skip(f"no IPv6 loopback here: {exc}")
    try:
        assert listening.sock.family == socket.AF_INET6
        assert listening.url == f"http://[::1]:{listening.sock.getsockname()[1]}"
    finally:
        listening.close()
