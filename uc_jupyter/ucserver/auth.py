"""Bearer-token authentication in front of routing: no path, method or body is looked at without a token.

:class:`BearerAuth` is a plain ASGI middleware that wraps the whole application, so every request,
to a known route, an unknown path (404) or with a wrong method (405), is answered 401
``UNAUTHENTICATED`` unless its ``Authorization: Bearer <token>`` header names a live token. The check
is :meth:`~uc_jupyter.catalog.embedded.tokens.TokenStore.authenticate`, which reads the token's row on every
request, so a revocation from another process refuses the very next request. It runs in a worker
thread (it reads SQLite) and the principal it returns goes into ``scope["state"]["principal"]``; the
routes act as that principal and never as anything the client says (no header, no variable).

Example:
    >>> bearer_token([(b"authorization", b"Bearer ucj_abc")])
    'ucj_abc'
    >>> bearer_token([(b"authorization", b"Basic dXNlcg==")]) is None
    True
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import Any

import anyio.to_thread
from starlette.types import ASGIApp, Receive, Scope, Send

from uc_jupyter.catalog import Unauthenticated
from uc_jupyter.catalog.embedded.tokens import TokenStore
from uc_jupyter.catalog.wire.errors import to_error

__all__ = ["BearerAuth", "bearer_token"]

log = logging.getLogger(__name__)

_MISSING = "no token: send the header 'Authorization: Bearer <token>' (uc-jupyter token create PRINCIPAL makes one)"


def bearer_token(headers: Iterable[tuple[bytes, bytes]]) -> str | None:
    """The token of the one ``Authorization: Bearer`` header, None when there is none (or several)."""
    values = [v for k, v in headers if k.lower() == b"authorization"]
    if len(values) != 1:
        return None
    scheme, _, token = values[0].decode("latin-1").strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


class BearerAuth:
    """The ASGI middleware (see the module docstring); lifespan events pass, websockets are closed."""

    def __init__(self, app: ASGIApp, store: TokenStore) -> None:
        self.app = app
        self.store = store

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":
            await send({"type": "websocket.close", "code": 1008})
            return
        token = bearer_token(scope.get("headers", ()))
        try:
            if token is None:
                raise Unauthenticated(_MISSING)
            principal = await anyio.to_thread.run_sync(self.store.authenticate, token)
        except Unauthenticated as exc:
            await _refuse(send, exc)
            return
        except Exception as exc:  # e.g. a corrupt tokens.db: refused too, in UC's shape, and logged
            log.exception("token check failed")
            await _refuse(send, exc)
            return
        scope.setdefault("state", {})["principal"] = principal
        await self.app(scope, receive, send)


async def _refuse(send: Send, exc: Exception) -> None:
    # The request body is never read: a refused client learns nothing from what it sent.
    status, body = to_error(exc)
    payload = json.dumps(body).encode()
    headers: list[Any] = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(payload)).encode()),
        (b"www-authenticate", b'Bearer realm="uc-jupyter"'),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})
