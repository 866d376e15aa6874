"""Tornado glue for the sidebar's REST API: every handler is an authenticated ``APIHandler`` GET that
reads its query, runs one :mod:`uc_jupyter.server.browse` function off the event loop and writes JSON.

Errors a user can act on come back as ``{"message": "<one line>", "reason": null}`` with 400
(malformed name, path or parameter; a path escaping its volume), 403 (missing privilege, named in the
message) or 404 (unknown object); see :func:`uc_jupyter.server.browse.status_of`.

Example:
    >>> routes("/")[0][0]
    '/uc-jupyter/api/catalogs'
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import tornado.web
from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import url_path_join

from uc_jupyter.catalog import get_catalog
from uc_jupyter.server import API_PATH, browse

__all__ = [
    "ApiError",
    "CatalogsHandler",
    "LoadLineHandler",
    "ObjectsHandler",
    "PoolsHandler",
    "SchemasHandler",
    "TableHandler",
    "VolumeHandler",
    "routes",
]


class ApiError(tornado.web.HTTPError):
    """An HTTP error whose JSON body is ``{"message": message, "reason": null}`` (logged as a warning)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(status, "%s", message)  # log_message is a %-format: the message may hold a '%'
        self.message = message


class _Handler(APIHandler):
    """Runs a browse function in a worker thread and maps its errors to one-line JSON answers."""

    async def _answer(self, produce: Callable[[], dict[str, Any]]) -> None:
        try:
            payload = await asyncio.to_thread(produce)  # catalog, Delta and storage calls block
        except Exception as exc:
            status = browse.status_of(exc)
            if status is None:
                raise  # a bug: tornado answers 500 and logs the traceback
            raise ApiError(status, " ".join(str(exc).split()) or type(exc).__name__) from exc
        self.set_header("Cache-Control", "no-store")
        await self.finish(json.dumps(payload))

    def _required(self, name: str, example: str) -> str:
        value = self.get_query_argument(name, None)
        if not value:
            raise ApiError(400, f"missing query parameter {name!r} (e.g. ?{name}={example})")
        return value

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info", (None, None, None))[1]
        if not isinstance(exc, ApiError):
            super().write_error(status_code, **kwargs)
            return
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"message": exc.message, "reason": None}))


class CatalogsHandler(_Handler):
    """``GET catalogs``: the catalogs the principal may see."""

    @tornado.web.authenticated
    async def get(self) -> None:
        await self._answer(lambda: browse.list_catalogs(get_catalog()))


class SchemasHandler(_Handler):
    """``GET schemas?catalog=main``: a catalog's schemas."""

    @tornado.web.authenticated
    async def get(self) -> None:
        name = self._required("catalog", "main")
        await self._answer(lambda: browse.list_schemas(get_catalog(), name))


class ObjectsHandler(_Handler):
    """``GET objects?schema=main.ml``: a schema's tables and volumes, each marked ``readable``."""

    @tornado.web.authenticated
    async def get(self) -> None:
        name = self._required("schema", "main.ml")
        await self._answer(lambda: browse.list_objects(get_catalog(), name))


class TableHandler(_Handler):
    """``GET table?name=main.ml.iris&rows=10``: columns and preview rows (SELECT checked)."""

    @tornado.web.authenticated
    async def get(self) -> None:
        name = self._required("name", "main.ml.iris")
        rows = self.get_query_argument("rows", None)
        await self._answer(lambda: browse.table_preview(get_catalog(), name, browse.parse_rows(rows)))


class VolumeHandler(_Handler):
    """``GET volume?path=/Volumes/main/ml/images&limit=200&after=<next>``: one page of a volume folder's
    entries (READ VOLUME checked); ``after`` is the ``next`` token of the page before."""

    @tornado.web.authenticated
    async def get(self) -> None:
        path = self._required("path", "/Volumes/main/ml/images")
        limit = self.get_query_argument("limit", None)
        after = self.get_query_argument("after", None) or None
        await self._answer(lambda: browse.volume_entries(get_catalog(), path, browse.parse_limit(limit), after))


class LoadLineHandler(_Handler):
    """``GET load-line?source=main.ml.iris`` (or a ``/Volumes`` path): the line "Insert %uc_load" writes."""

    @tornado.web.authenticated
    async def get(self) -> None:
        source = self._required("source", "main.ml.iris")
        await self._answer(lambda: browse.load_line(get_catalog(), source))


class WhoHandler(_Handler):
    """``GET who``: the principal the browser lists as, and which catalog it lists."""

    @tornado.web.authenticated
    async def get(self) -> None:
        await self._answer(lambda: browse.who(get_catalog()))


class PoolsHandler(_Handler):
    """``GET pools``: the rank pools of the kernels this server runs."""

    @tornado.web.authenticated
    async def get(self) -> None:
        kernel_ids = list(self.kernel_manager.list_kernel_ids())
        await self._answer(lambda: browse.pool_records(kernel_ids))


def routes(base_url: str) -> list[tuple[str, type[_Handler]]]:
    """The URL patterns of the API under ``base_url`` (every one of them authenticated)."""
    handlers: dict[str, type[_Handler]] = {
        "catalogs": CatalogsHandler,
        "schemas": SchemasHandler,
        "objects": ObjectsHandler,
        "table": TableHandler,
        "volume": VolumeHandler,
        "load-line": LoadLineHandler,
        "pools": PoolsHandler,
        "who": WhoHandler,
    }
    return [(url_path_join(base_url, API_PATH, route), handler) for route, handler in handlers.items()]
