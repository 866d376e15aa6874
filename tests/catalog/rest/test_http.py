"""uc_jupyter.catalog.rest.http against a real tiny HTTP server on 127.0.0.1 that answers what each test scripts."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.catalog.rest.scripted_http import Scripted, scripted_server
from uc_jupyter.catalog import AlreadyExists, CatalogError, NotFound, PermissionDenied, Unauthenticated
from uc_jupyter.catalog.rest.http import CATALOG_RETRY, Http, base_url
from uc_jupyter.processes import free_port
from uc_jupyter.storage.retry import RetryPolicy


@pytest.fixture
def scripted() -> Iterator[Scripted]:
    with scripted_server() as server:
        yield server


class Sleeps:
    """The injected sleep: records what would have been slept."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def _http(url: str, sleeps: Sleeps, **kwargs: Any) -> Http:
    return Http(url, "ucj_token", sleep=sleeps, rng=lambda: 1.0, clock=lambda: 1_000_000.0, **kwargs)


def test_base_url_forms() -> None:
    assert base_url("http://h:1") == base_url("http://h:1/") == base_url("http://h:1/api/2.1/unity-catalog")
    assert base_url("http://h:1/prefix") == "http://h:1/prefix/api/2.1/unity-catalog"
    assert base_url("https://adb.net", dialect="databricks") == "https://adb.net/api/2.1/unity-catalog"
    for bad in ("ftp://h", "h:1", "http://h/?x=1", ""):
        with pytest.raises(ValueError, match="catalog URL"):
            base_url(bad)


def test_databricks_temporary_credentials_are_under_2_0() -> None:
    http = Http("adb.net", "t", dialect="databricks")
    assert (
        http.url_of("/temporary-table-credentials")
        == "https://adb.net/api/2.0/unity-catalog/temporary-table-credentials"
    )
    assert http.url_of("/tables") == "https://adb.net/api/2.1/unity-catalog/tables"


def test_backoff_is_exponential_capped_and_jittered() -> None:
    policy = RetryPolicy(attempts=6, base_seconds=0.5, max_seconds=2.0, jitter="equal")
    assert policy.delays(5, lambda: 1.0) == [0.5, 1.0, 2.0, 2.0, 2.0]
    assert policy.delays(2, lambda: 0.0) == [0.25, 0.5]
    assert policy.delays(9, lambda: 1.0) == [0.5, 1.0, 2.0, 2.0, 2.0]  # never more retries than attempts - 1
    assert CATALOG_RETRY.delays(CATALOG_RETRY.attempts, lambda: 0.0) == [0.1, 0.2, 0.4, 0.8]


def test_sends_bearer_token_query_and_json(scripted: Scripted) -> None:
    scripted.script = [(200, {"name": "main"}, {})]
    http = _http(scripted.url, Sleeps())
    assert http.call("POST", "/catalogs", body={"name": "main"}, query={"force": True, "x": None}) == {"name": "main"}
    assert http.call("GET", "/catalogs", token="ucj_other") == {"name": "main"}
    first, second = scripted.seen
    assert first["path"] == "/api/2.1/unity-catalog/catalogs?force=true"
    assert first["auth"] == "Bearer ucj_token" and json.loads(first["body"]) == {"name": "main"}
    assert second["auth"] == "Bearer ucj_other"
    assert "ucj_token" not in repr(http)


def test_get_retries_503_and_429_then_succeeds(scripted: Scripted) -> None:
    scripted.script = [(503, {}, {}), (429, {}, {"Retry-After": "3"}), (200, {"ok": 1}, {})]
    sleeps = Sleeps()
    assert _http(scripted.url, sleeps).call("GET", "/catalogs") == {"ok": 1}
    assert len(scripted.seen) == 3
    assert sleeps.waits == [0.2, 3.0]  # backoff, then the server's Retry-After


def test_retry_after_as_a_date_and_bounded(scripted: Scripted) -> None:
    scripted.script = [
        (503, {}, {"Retry-After": "Mon, 12 Jan 1970 13:46:50 GMT"}),  # clock + 10 s
        (503, {}, {"Retry-After": "86400"}),
        (200, {}, {}),
    ]
    sleeps = Sleeps()
    _http(scripted.url, sleeps).call("DELETE", "/catalogs/x")
    assert sleeps.waits == [10.0, 30.0]


def test_gives_up_after_the_retries_with_one_line(scripted: Scripted) -> None:
    scripted.script = [(503, {"error_code": "TEMPORARILY_UNAVAILABLE", "message": "busy"}, {})]
    sleeps = Sleeps()
    with pytest.raises(CatalogError, match=r"^busy \(TEMPORARILY_UNAVAILABLE 503\)$"):
        _http(scripted.url, sleeps, retry=RetryPolicy(attempts=3, base_seconds=0.2, jitter="equal")).call(
            "GET", "/catalogs"
        )
    assert len(scripted.seen) == 3 and len(sleeps.waits) == 2


def test_creates_are_never_repeated(scripted: Scripted) -> None:
    scripted.script = [(503, {}, {}), (200, {}, {})]
    sleeps = Sleeps()
    with pytest.raises(CatalogError):
        _http(scripted.url, sleeps).call("POST", "/catalogs", body={"name": "x"})
    assert len(scripted.seen) == 1 and sleeps.waits == []


def test_idempotent_posts_are_retried(scripted: Scripted) -> None:
    scripted.script = [(502, {}, {}), (200, {"url": "file:///x"}, {})]
    http = _http(scripted.url, Sleeps())
    assert http.call("POST", "/temporary-volume-credentials", body={}, idempotent=True) == {"url": "file:///x"}


def test_connection_refused_is_retried_then_one_line() -> None:
    sleeps = Sleeps()
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(CatalogError, match="cannot reach the catalog server at .* after 3 tries") as caught:
        _http(url, sleeps, retry=RetryPolicy(attempts=3, base_seconds=0.2, jitter="equal")).call("GET", "/catalogs")
    assert "\n" not in str(caught.value) and len(sleeps.waits) == 2


def test_a_create_whose_connection_was_refused_is_tried_again() -> None:
    """Nothing was sent, so repeating it cannot make it happen twice: a server restarting (refusing
    connections for a moment) does not fail a create, which reaches it once it is back; a create the
    server answered 503 is still never repeated (above)."""
    port = free_port()
    with contextlib.ExitStack() as started:
        back: list[Scripted] = []

        class ServerBackAfterTwoWaits(Sleeps):
            def __call__(self, seconds: float) -> None:
                super().__call__(seconds)
                if len(self.waits) == 2:  # the server is up again on its port
                    back.append(started.enter_context(scripted_server(port)))
                    back[0].script = [(200, {"name": "x"}, {})]

        http = _http(f"http://127.0.0.1:{port}", ServerBackAfterTwoWaits())
        assert http.call("POST", "/catalogs", body={"name": "x"}) == {"name": "x"}
        assert [seen["method"] for seen in back[0].seen] == ["POST"]  # reached once, after two refusals


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (404, {"error_code": "CATALOG_NOT_FOUND", "message": "catalog x does not exist"}, NotFound),
        (400, {"error_code": "CATALOG_ALREADY_EXISTS", "message": "catalog x already exists"}, AlreadyExists),
        (401, {"error_code": "UNAUTHENTICATED", "message": "token refused"}, Unauthenticated),
        (400, {"error_code": "INVALID_ARGUMENT", "message": "bad name"}, ValueError),
        (404, b"<html>not json</html>", NotFound),
    ],
)
def test_errors_become_our_exceptions(scripted: Scripted, status: int, body: Any, expected: type) -> None:
    scripted.script = [(status, body, {})]
    with pytest.raises(expected):
        _http(scripted.url, Sleeps()).call("GET", "/catalogs/x")


def test_permission_denied_keeps_its_fields(scripted: Scripted) -> None:
    details = [
        {"reason": "PERMISSION_DENIED", "metadata": {"principal": "bob", "privilege": "SELECT", "securable": "c.s.t"}}
    ]
    scripted.script = [
        (403, {"error_code": "PERMISSION_DENIED", "message": "bob lacks SELECT on c.s.t", "details": details}, {})
    ]
    with pytest.raises(PermissionDenied) as caught:
        _http(scripted.url, Sleeps()).call("GET", "/tables/c.s.t")
    assert (caught.value.principal, caught.value.privilege, caught.value.securable) == ("bob", "SELECT", "c.s.t")


def test_a_success_without_a_json_object_is_refused(scripted: Scripted) -> None:
    scripted.script = [(200, b"[1, 2]", {})]
    with pytest.raises(CatalogError, match="without a JSON object"):
        _http(scripted.url, Sleeps()).call("GET", "/catalogs")


def test_no_token_is_a_one_line_error() -> None:
    with pytest.raises(ValueError, match="set UC_JUPYTER_TOKEN"):
        Http("http://127.0.0.1:1", "")


def test_redirects_are_not_followed_so_the_token_stays_with_the_server(scripted: Scripted) -> None:
    with scripted_server() as elsewhere:
        scripted.script = [(307, {}, {"Location": f"{elsewhere.url}/steal"})]
        with pytest.raises(CatalogError, match="307"):
            _http(scripted.url, Sleeps()).call("GET", "/catalogs")
        assert elsewhere.seen == []  # the bearer token never reached the other server
