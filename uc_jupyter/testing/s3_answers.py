"""The answers of the S3 test server (:mod:`uc_jupyter.testing.s3_server`): XML bodies, errors, ETags.

Example:
    >>> error(404, "NoSuchKey", "no key 'a'").status
    404
    >>> etag(os.stat(__file__)).startswith('"')
    True
"""

from __future__ import annotations

import os
from xml.sax.saxutils import escape

from aiohttp import web

__all__ = ["NS", "error", "etag", "xml"]

NS = "http://s3.amazonaws.com/doc/2006-03-01/"


def xml(body: str, status: int = 200) -> web.Response:
    return web.Response(
        status=status,
        body=f'<?xml version="1.0" encoding="UTF-8"?>\n{body}'.encode(),
        content_type="application/xml",
    )


def error(status: int, code: str, message: str) -> web.Response:
    return xml(f"<Error><Code>{code}</Code><Message>{escape(message)}</Message></Error>", status)


def etag(stat: os.stat_result) -> str:
    return f'"{stat.st_ino:x}-{stat.st_mtime_ns:x}-{stat.st_size:x}"'
