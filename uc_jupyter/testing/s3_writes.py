"""The writing half of the S3 test server (:mod:`uc_jupyter.testing.s3_server`): PutObject,
DeleteObject, DeleteObjects and multipart uploads (Create, UploadPart, Complete, Abort).

An object appears whole or not at all, as on S3: a body is received into a file under the server
root's ``.uploads`` folder (never a bucket: bucket names starting with ``.`` are refused) and
renamed into place once complete; a multipart upload's parts wait there until Complete joins them.
Received bytes pass the same bandwidth caps as sent ones, so a test can slow an upload down and
act while it is under way.

Example:
    >>> uploads = Uploads(Path("/srv/s3"))                                    # doctest: +SKIP
    >>> upload_id = uploads.create("bucket", "run/step-1/__0_0.distcp")       # doctest: +SKIP
"""

from __future__ import annotations

import os
import re
import shutil
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, unescape

from aiohttp import web

from uc_jupyter.testing.s3_answers import NS, error, etag, xml

__all__ = [
    "Uploads",
    "completed_parts",
    "delete_many",
    "delete_result",
    "deleted_keys",
    "receive",
    "remove_object",
    "write",
]

_CHUNK = 64 * 1024


class Uploads:
    """Bodies being received and multipart uploads in progress, under ``root/.uploads``."""

    def __init__(self, root: Path) -> None:
        self.folder = root / ".uploads"
        self.folder.mkdir(parents=True, exist_ok=True)
        self.targets: dict[str, tuple[str, str]] = {}  # upload id -> (bucket, key)

    def temporary(self) -> Path:
        """A fresh file name to receive one body into (on the buckets' own file system)."""
        return self.folder / uuid.uuid4().hex

    def create(self, bucket: str, key: str) -> str:
        upload_id = uuid.uuid4().hex
        (self.folder / upload_id).mkdir()
        self.targets[upload_id] = (bucket, key)
        return upload_id

    def part(self, upload_id: str, bucket: str, key: str, number: int) -> Path | None:
        """Where part ``number`` of the upload goes, or None when there is no such upload of that key."""
        if self.targets.get(upload_id) != (bucket, key) or not 1 <= number <= 10000:
            return None
        return self.folder / upload_id / f"{number:05d}"

    def complete(self, upload_id: str, bucket: str, key: str, numbers: list[int], target: Path) -> bool:
        """Join the named parts (in the order given, each present) into ``target`` in one rename."""
        if self.targets.get(upload_id) != (bucket, key):
            return False
        parts = [self.folder / upload_id / f"{n:05d}" for n in numbers]
        if not parts or any(not p.is_file() for p in parts) or numbers != sorted(set(numbers)):
            return False
        joined = self.temporary()
        with open(joined, "wb") as out:
            for part in parts:
                with open(part, "rb") as handle:
                    shutil.copyfileobj(handle, out, 1 << 20)
        target.parent.mkdir(parents=True, exist_ok=True)
        joined.replace(target)
        self.abort(upload_id)
        return True

    def abort(self, upload_id: str) -> None:
        self.targets.pop(upload_id, None)
        shutil.rmtree(self.folder / upload_id, ignore_errors=True)


async def receive(request: web.Request, path: Path, throttle: Callable[[int], Awaitable[None]]) -> int:
    """Write the request's body to ``path`` as it arrives, each chunk passing ``throttle``; its size."""
    size = 0
    try:
        with open(path, "wb") as out:
            while chunk := await request.content.read(_CHUNK):
                await throttle(len(chunk))
                out.write(chunk)
                size += len(chunk)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return size


def deleted_keys(body: str) -> list[str]:
    """The keys a DeleteObjects request names."""
    return [_unescape(k) for k in re.findall(r"<Key>(.*?)</Key>", body, flags=re.S)]


def delete_result(keys: list[str]) -> str:
    return "<DeleteResult>" + "".join(f"<Deleted><Key>{escape(k)}</Key></Deleted>" for k in keys) + "</DeleteResult>"


def completed_parts(body: str) -> list[int]:
    return [int(n) for n in re.findall(r"<PartNumber>\s*(\d+)\s*</PartNumber>", body)]


def remove_object(path: Path) -> None:
    """Delete the object's file (absent: nothing to do, as S3 answers 204 either way)."""
    try:
        if not path.is_symlink() and path.is_file():
            os.unlink(path)
    except FileNotFoundError:
        pass


async def write(state: Any, request: web.Request, bucket: str, key: str, path: Path) -> web.Response:
    """PutObject, UploadPart, the multipart calls and DeleteObject (:mod:`uc_jupyter.testing.s3_writes`)."""
    query, uploads = request.query, state.uploads
    upload_id = query.get("uploadId", "")

    async def throttle(size: int) -> None:
        await state.throttle(request, size)
        state.bytes_received += size

    if request.method == "PUT":
        if upload_id:
            part = uploads.part(upload_id, bucket, key, int(query.get("partNumber", "0")))
            if part is None:
                return error(404, "NoSuchUpload", f"no upload {upload_id!r} of {key!r}")
            await receive(request, part, throttle)
            return web.Response(status=200, headers={"ETag": etag(part.stat())})
        tmp = uploads.temporary()
        await receive(request, tmp, throttle)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.replace(path)
        if state.store_then_fail and key.endswith(state.store_then_fail):
            # Stored, yet the client sees an error (a reply lost on the way back): it cannot tell it landed.
            return error(400, "RequestTimeout", "injected failure after the object was stored")
        return web.Response(status=200, headers={"ETag": etag(path.stat())})
    if request.method == "POST" and "uploads" in query:
        made = uploads.create(bucket, key)
        return xml(
            f'<InitiateMultipartUploadResult xmlns="{NS}"><Bucket>{escape(bucket)}</Bucket>'
            f"<Key>{escape(key)}</Key><UploadId>{made}</UploadId></InitiateMultipartUploadResult>"
        )
    if request.method == "POST" and upload_id:
        numbers = completed_parts(await request.text())
        if not uploads.complete(upload_id, bucket, key, numbers, path):
            return error(400, "InvalidPart", f"upload {upload_id!r} of {key!r} has not those parts")
        return xml(
            f'<CompleteMultipartUploadResult xmlns="{NS}"><Bucket>{escape(bucket)}</Bucket>'
            f"<Key>{escape(key)}</Key><ETag>{escape(etag(path.stat()))}</ETag></CompleteMultipartUploadResult>"
        )
    if request.method == "DELETE":
        if upload_id:
            uploads.abort(upload_id)
        else:
            remove_object(path)
        return web.Response(status=204)
    return error(405, "MethodNotAllowed", request.method)


def delete_many(
    state: Any, bucket: str, body: str, object_path: Callable[[Any, str, str], Path | None]
) -> web.Response:
    keys = deleted_keys(body)
    for key in keys:
        path = object_path(state, bucket, key)
        if path is not None:
            remove_object(path)
    state.requests["DELETE"] += len(keys)
    return xml(delete_result(keys))


def _unescape(text: str) -> str:
    return unescape(text, {"&quot;": '"', "&apos;": "'"})
