"""HTTP for :class:`~uc_jupyter.catalog.rest.client.RestCatalog`: one keep-alive pool, bearer tokens,
retries, UC errors.

:class:`Http` holds one ``urllib3.PoolManager`` (keep-alive connections, safe to share between
threads) for one server. Every call sends ``Authorization: Bearer <token>`` and JSON, has connect and
read timeouts, and turns an error answer into our exception through
:func:`~uc_jupyter.catalog.wire.errors.from_error` (``NotFound``, ``AlreadyExists``, ``PermissionDenied``
with its principal, privilege and object, ``Unauthenticated``, ``ValueError``).

Retries: a 429, 502, 503 or 504 answer, or a connection error, is tried again with jittered exponential
backoff (``Retry-After`` honoured), but only for calls that are safe to repeat: GET, DELETE and the
POSTs a caller marks ``idempotent`` (the temporary-credential routes). A create is never repeated once
it may have reached the server: a create whose answer was lost may have happened, and doing it twice
would turn its success into "already exists" or worse. A connection that was never made (refused, or
not made in time, as while the server restarts) sent nothing, so any call is tried again then. The
sleep and the clock are injected, so tests of the backoff never sleep.

Base URLs (:func:`base_url`): the server's URL with or without ``/api/2.1/unity-catalog``; for a
Databricks workspace (``DATABRICKS_HOST``, with or without ``https://``) the same suffix, and the
temporary-credential routes under ``/api/2.0/unity-catalog``, where Databricks serves them.

Example:
    >>> base_url("http://127.0.0.1:8080")
    'http://127.0.0.1:8080/api/2.1/unity-catalog'
    >>> base_url("http://127.0.0.1:8080/api/2.1/unity-catalog/")
    'http://127.0.0.1:8080/api/2.1/unity-catalog'
    >>> base_url("adb-1.azuredatabricks.net", dialect="databricks")
    'https://adb-1.azuredatabricks.net/api/2.1/unity-catalog'
    >>> CATALOG_RETRY.delays(4, lambda: 1.0)
    [0.2, 0.4, 0.8, 1.6]
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable, Mapping
from email.utils import parsedate_to_datetime
from typing import Any, Literal
from urllib.parse import urlencode, urlsplit

import urllib3

from uc_jupyter.catalog.model import CatalogError
from uc_jupyter.catalog.wire.errors import from_error
from uc_jupyter.storage.retry import RetryPolicy

__all__ = [
    "API_PREFIX",
    "CATALOG_RETRY",
    "RETRIED_STATUSES",
    "Dialect",
    "Http",
    "base_url",
    "refined",
]

API_PREFIX = "/api/2.1/unity-catalog"
_DATABRICKS_CREDENTIALS_PREFIX = "/api/2.0/unity-catalog"
RETRIED_STATUSES = frozenset({429, 502, 503, 504})
Dialect = Literal["uc", "databricks"]


def base_url(url: str, *, dialect: Dialect = "uc") -> str:
    """The API's base URL (see the module docstring); a URL that is not http(s) is a one-line ValueError."""
    text = url.strip().rstrip("/")
    if dialect == "databricks" and "://" not in text:
        text = "https://" + text
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"catalog URL {url!r} is not an http(s) URL; give e.g. http://127.0.0.1:8080")
    if parts.query or parts.fragment:
        raise ValueError(f"catalog URL {url!r} has a query or fragment; give the server's base URL only")
    path = parts.path.rstrip("/")
    if path.endswith(API_PREFIX):
        path = path[: -len(API_PREFIX)]
    return f"{parts.scheme}://{parts.netloc}{path}{API_PREFIX}"


# Safe calls are tried 5 times; "equal" jitter: clients that failed together spread apart, yet none
# retries at once.
CATALOG_RETRY = RetryPolicy(attempts=5, base_seconds=0.2, max_seconds=5.0, jitter="equal")


class Http:
    """Calls to one Unity Catalog server (see the module docstring).

    ``sleep``, ``clock`` (epoch seconds, for ``Retry-After`` dates) and ``rng`` are injected for tests.

    Example:
        >>> http = Http("http://127.0.0.1:8080", "ucj_...")        # doctest: +SKIP
        >>> http.call("GET", "/catalogs", query={"max_results": 10})  # doctest: +SKIP
        {'catalogs': [...]}
    """

    def __init__(
        self,
        url: str,
        token: str,
        *,
        dialect: Dialect = "uc",
        connect_timeout: float = 10.0,
        read_timeout: float = 60.0,
        retry: RetryPolicy = CATALOG_RETRY,
        pool_size: int = 16,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
        rng: Callable[[], float] = random.random,
    ) -> None:
        if not token:
            raise ValueError(f"no token for the catalog server {url}: set UC_JUPYTER_TOKEN")
        self.base = base_url(url, dialect=dialect)
        self.dialect = dialect
        self.token = token
        self.retry = retry
        self._sleep, self._clock, self._rng = sleep, clock, rng
        # urllib3's own retries are off: ours know which calls are safe to repeat, and honour Retry-After.
        self._pool_settings: dict[str, Any] = {
            "maxsize": pool_size,
            "retries": False,
            "timeout": urllib3.Timeout(connect=connect_timeout, read=read_timeout),
            "headers": {"Accept": "application/json", "User-Agent": "uc-jupyter"},
        }
        self._pool = urllib3.PoolManager(**self._pool_settings)
        self._pid = os.getpid()

    def _pool_here(self) -> urllib3.PoolManager:
        """This process's pool. A forked child (a DataLoader worker) inherits the parent's keep-alive
        sockets: two processes sending on one connection read each other's answers, so a child makes
        its own (the inherited sockets are left to the parent)."""
        if self._pid != os.getpid():
            self._pool, self._pid = urllib3.PoolManager(**self._pool_settings), os.getpid()
        return self._pool

    def __repr__(self) -> str:
        return f"Http({self.base!r})"  # never the token

    def url_of(self, path: str) -> str:
        """The full URL of a route ``path`` (``/catalogs``); Databricks serves temporary credentials under 2.0."""
        if self.dialect == "databricks" and path.startswith("/temporary-"):
            return self.base[: -len(API_PREFIX)] + _DATABRICKS_CREDENTIALS_PREFIX + path
        return self.base + path

    def call(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Mapping[str, Any] | None = None,
        token: str | None = None,
        idempotent: bool | None = None,
    ) -> dict[str, Any]:
        """One call; its decoded JSON answer (``{}`` for an empty one). ``token`` replaces the default
        token for this call; ``idempotent`` (default: GET, HEAD and DELETE are) allows retries."""
        target = self.url_of(path)
        given = {k: _query_value(v) for k, v in (query or {}).items() if v is not None}
        if given:
            target += "?" + urlencode(given)
        headers = {"Authorization": f"Bearer {token or self.token}"}
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        safe = method in ("GET", "HEAD", "DELETE") if idempotent is None else idempotent
        delays = self.retry.delays(self.retry.attempts, self._rng)
        for attempt in range(len(delays) + 1):
            try:
                response = self._pool_here().request(method, target, body=payload, headers=headers, redirect=False)
            except urllib3.exceptions.HTTPError as exc:
                # A call whose connection was never made (refused, or not made in time: a server
                # restarting) sent nothing, so any call may be repeated; one that may have reached
                # the server is repeated only when it is safe to.
                unsent = isinstance(exc, urllib3.exceptions.ConnectTimeoutError)
                if attempt == len(delays) or not (safe or unsent):
                    raise CatalogError(
                        f"cannot reach the catalog server at {self.base} ({_reason(exc)}) after {attempt + 1} "
                        "tries; check that it runs and that UC_JUPYTER_CATALOG_URL names it"
                    ) from None
                self._sleep(delays[attempt])
                continue
            if response.status in RETRIED_STATUSES and attempt < len(delays) and safe:
                self._sleep(self._retry_after(response.headers.get("Retry-After"), delays[attempt]))
                continue
            return self._answer(method, path, response)
        raise AssertionError("unreachable")  # the last attempt always returns or raises

    def _answer(self, method: str, path: str, response: urllib3.BaseHTTPResponse) -> dict[str, Any]:
        data = response.data
        try:
            decoded: Any = json.loads(data) if data.strip() else {}
        except (ValueError, UnicodeDecodeError):
            decoded = None
        if 200 <= response.status < 300:
            if not isinstance(decoded, dict):
                raise CatalogError(f"{method} {self.base}{path} answered {response.status} without a JSON object")
            return decoded
        raise refined(from_error(response.status, decoded), decoded)

    def _retry_after(self, header: str | None, fallback: float) -> float:
        """Seconds the server asked to wait (a number or an HTTP date), bounded; else ``fallback``."""
        if not header:
            return fallback
        try:
            wait = float(header)
        except ValueError:
            try:
                wait = parsedate_to_datetime(header).timestamp() - self._clock()
            except (TypeError, ValueError):
                return fallback
        return min(max(wait, 0.0), self.retry.max_retry_after)

    def close(self) -> None:
        """Close the pooled connections (a later call opens new ones)."""
        self._pool.clear()


def refined(exc: Exception, body: object = None) -> Exception:
    """``exc`` (from :func:`~uc_jupyter.catalog.wire.errors.from_error` for the error ``body``) as the
    exact class the embedded catalog raises where the server's message shows which it was, so callers
    catch the same errors on both backends:

    - a PERMISSION_DENIED whose fields make :class:`~uc_jupyter.catalog.embedded.external.NoExternalLocation`'s
      message becomes one; any other keeps the server's own message, not one rebuilt from its fields;
    - "... is not empty ..." (UC's FAILED_PRECONDITION, 400) becomes :class:`~uc_jupyter.catalog.NotEmpty`.

    Example:
        >>> type(refined(ValueError("catalog main is not empty (1 schema); drop those first"))).__name__
        'NotEmpty'
    """
    from uc_jupyter.catalog.model import NoExternalLocation, NotEmpty, PermissionDenied
    from uc_jupyter.catalog.wire.errors import RemotePermissionDenied

    message = body.get("message") if isinstance(body, dict) else None
    if isinstance(exc, PermissionDenied) and not isinstance(exc, RemotePermissionDenied):
        candidate = NoExternalLocation(exc.principal, exc.privilege, exc.securable)
        if str(candidate) == message:
            return candidate
        if isinstance(message, str) and message and str(exc) != message:
            exc.args = (" ".join(message.split()),)  # the fields stay; the text is the server's
        return exc
    if type(exc) is ValueError and " is not empty" in str(exc):
        return NotEmpty(str(exc))
    return exc


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _reason(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None) or exc
    return " ".join(str(reason).split())[:200] or type(exc).__name__
