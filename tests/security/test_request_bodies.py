"""Request bodies built to break the parser of ``uc-jupyter serve`` rather than to mean anything: each
must be a one-line 400 ``INVALID_ARGUMENT`` that creates nothing, never a 500 with a traceback in the
server's log, and never read one way by the server and another way by whatever checked it on the way.

(Bodies that are merely wrong, such as unknown fields, wrong types or over 1 MiB, are tested with the
routes in tests/ucserver/.)
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.ucserver.conftest import ADMIN, Served, start_server
from uc_jupyter.catalog import as_principal

NESTED = 100_000  # far deeper than Python's recursion limit, far smaller than the 1 MiB body limit


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    server = start_server(tmp_path_factory.mktemp("bodies_home"))
    yield server
    assert server.stop()[0] == 0


def catalogs(served: Served) -> list[str]:
    with as_principal(ADMIN):
        return [c.name for c in served.catalog.list_catalogs()]


@pytest.mark.parametrize(
    "raw",
    [b"[" * NESTED + b"]" * NESTED, b'{"name": ' + b"[" * NESTED + b"]" * NESTED + b"}"],
    ids=["nested arrays", "nested value"],
)
def test_deeply_nested_json_is_a_400_not_a_500(served: Served, raw: bytes) -> None:
    before = catalogs(served)
    answer = served.admin().call("POST", "catalogs", raw=raw)
    assert (answer.status, answer.error_code) == (400, "INVALID_ARGUMENT"), answer
    assert catalogs(served) == before


def test_a_key_given_twice_is_refused_not_read_as_one_of_its_values(served: Served) -> None:
    answer = served.admin().call("POST", "catalogs", raw=b'{"name": "shown", "name": "created"}')
    assert (answer.status, answer.error_code) == (400, "INVALID_ARGUMENT"), answer
    assert not {"shown", "created"} & set(catalogs(served))
