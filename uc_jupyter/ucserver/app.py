"""The ASGI application of ``uc-jupyter serve``: token check, bounded bodies, UC errors, the routes.

Layers, outermost first: :class:`~uc_jupyter.ucserver.auth.BearerAuth` (no token: 401, before routing),
Starlette's router (unknown path: 404 ``NOT_FOUND``, wrong method: 405, both as UC error bodies), then
for each route: the body read up to :data:`MAX_BODY` bytes (more: 400, nothing done), parsed against its
model, and the route function run in Starlette's thread pool inside ``as_principal(<the token's
principal>)``. anyio runs each call in a copy of the caller's context, so the principal set in the
worker stays with that one call and never leaks to the next request the thread serves. Our errors
become UC error bodies (:mod:`uc_jupyter.catalog.wire.errors`); anything unexpected is a one-line 500
and a log record with the traceback.

Example:
    >>> import tempfile
    >>> from uc_jupyter.catalog.embedded.local import LocalCatalog
    >>> app = build_app(LocalCatalog(tempfile.mkdtemp()))
    >>> paths = sorted({r.path for r in app.routes})
    >>> paths[:2]  # 2.0: table credentials where a Databricks workspace serves them
    ['/api/2.0/unity-catalog/temporary-table-credentials', '/api/2.1/unity-catalog/catalogs']
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route as StarletteRoute

from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.catalog.embedded.tokens import TokenStore
from uc_jupyter.catalog.wire.errors import WireError, error_body, to_error
from uc_jupyter.catalog.wire.shapes import parse_request
from uc_jupyter.ucserver import PREFIX
from uc_jupyter.ucserver.auth import BearerAuth
from uc_jupyter.ucserver.routes_data import ROUTES, Call, Route
from uc_jupyter.ucserver.routes_extensions import ROUTES as EXTENSION_ROUTES
from uc_jupyter.ucserver.routes_governance import ROUTES as GOVERNANCE_ROUTES
from uc_jupyter.ucserver.routes_storage import routes as storage_routes
from uc_jupyter.ucserver.routes_storage import secure_transport
from uc_jupyter.ucserver.routes_vending import routes as vending_routes
from uc_jupyter.ucserver.routes_workspace import WORKSPACE_PREFIX
from uc_jupyter.ucserver.routes_workspace import routes as workspace_routes
from uc_jupyter.ucserver.vendor import Vendor

__all__ = ["MAX_BODY", "PREFIX", "build_app"]

log = logging.getLogger(__name__)

MAX_BODY = 1 << 20  # 1 MiB: every UC request body is far smaller


def build_app(catalog: LocalCatalog, store: TokenStore | None = None, vendor: Vendor | None = None) -> Starlette:
    """The server's application over ``catalog``; tokens from ``store`` (default: the catalog's own),
    temporary credentials from ``vendor`` (default: one over the catalog's home)."""
    by_path: dict[str, dict[str, Route]] = {}
    vendor = vendor or Vendor(catalog.root)
    # One Starlette route per path: a 405's Allow names every method.
    for route in (*ROUTES, *GOVERNANCE_ROUTES, *EXTENSION_ROUTES, *storage_routes(vendor), *vending_routes(vendor)):
        by_path.setdefault(PREFIX + route.path, {})[route.method] = route
    # What a Databricks workspace serves outside the UC prefix (clients built on databricks-sdk ask there).
    for route in workspace_routes(vendor):
        by_path.setdefault(WORKSPACE_PREFIX + route.path, {})[route.method] = route
    app = Starlette(
        routes=[
            StarletteRoute(path, _endpoint(catalog, methods), methods=list(methods), include_in_schema=False)
            for path, methods in by_path.items()
        ],
        middleware=[Middleware(BearerAuth, store=store or TokenStore(catalog))],
        exception_handlers={HTTPException: _http_error},  # type: ignore[dict-item]
    )
    # No 307 to the same path without its trailing slash: Starlette builds that redirect from the Host
    # header the client sent. A trailing slash is an unknown route (404), like any other.
    app.router.redirect_slashes = False
    return app


def _endpoint(catalog: LocalCatalog, methods: dict[str, Route]) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        principal: str = request.scope["state"]["principal"]  # set by BearerAuth; nothing else sets it
        route = methods["GET" if request.method == "HEAD" else request.method]
        try:
            body = parse_request(await _read_body(request), route.model) if route.model else {}
            secure = secure_transport(request.url.scheme, request.client.host if request.client else None)
            call = Call(dict(request.path_params), dict(request.query_params), body, secure)
            result = await run_in_threadpool(_as_principal, catalog, principal, route, call)
        except Exception as exc:
            status, error = to_error(exc)
            if status >= 500:
                log.exception("%s %s failed", request.method, request.url.path)
            return JSONResponse(error, status_code=status)
        return JSONResponse(result)

    return endpoint


def _as_principal(catalog: LocalCatalog, principal: str, route: Route, call: Call) -> dict[str, Any]:
    with catalog.as_principal(principal):
        return route.handler(catalog, call)


async def _read_body(request: Request) -> bytes:
    """The body, refused with 400 once it passes :data:`MAX_BODY` (a lying Content-Length too)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY:
        raise WireError("INVALID_ARGUMENT", f"request body too large: over {MAX_BODY} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise WireError("INVALID_ARGUMENT", f"request body too large: over {MAX_BODY} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def _http_error(request: Request, exc: HTTPException) -> Response:
    # Routing's own answers (404 unknown path, 405 wrong method) in UC's error shape.
    code = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED"}.get(exc.status_code, "INVALID_ARGUMENT")
    message = f"no route {request.method} {request.url.path}"
    if exc.status_code == 405:
        message = f"{request.method} is not allowed on {request.url.path}"
    return Response(
        json.dumps(error_body(code, message)),
        status_code=exc.status_code,
        headers=exc.headers,
        media_type="application/json",
    )
