"""obstore's exceptions as the errors :func:`uc_jupyter.storage.retry.is_transient` classifies.

object_store reports a failed request as one exception whose text holds the HTTP status and the
store's XML answer, followed by a multi-line debug dump. :func:`as_os_error` keeps the first line,
reads the status and the S3 error code, and gives an ``OSError`` of the matching kind: 404
``FileNotFoundError``, 401/403 ``PermissionError``, other answers :class:`StorageResponseError`
(``status``, ``code``: 5xx, 429 and SlowDown are retried), connection faults ``ConnectionError``
and timeouts ``TimeoutError`` (retried). A key a multi-object delete refused (its answer is 200 and
lists the key with ``AccessDenied``) is a ``PermissionError`` too.

Example:
    >>> from obstore.exceptions import GenericError
    >>> error = as_os_error(GenericError("Generic S3 error: ... Server returned non-2xx status code: "
    ...                                  "503 Service Unavailable: <Error><Code>SlowDown</Code></Error>"))
    >>> type(error).__name__, error.status, error.code
    ('StorageResponseError', 503, 'SlowDown')
"""

from __future__ import annotations

import pickle
import re

from uc_jupyter.errors import OneLine

__all__ = [
    "StorageResponseError",
    "StorageUnreachable",
    "VolumeReadError",
    "as_os_error",
    "first_line",
    "picklable",
    "refused_because",
]

_STATUS = re.compile(r"status code: (\d{3})")
_CODE = re.compile(r"<Code>([^<]{1,100})</Code>")
_MESSAGE = re.compile(r"<Message>([^<]{0,300})</Message>")
# A multi-object delete answers 200 and lists each key it refused: object_store reports the first as
# "DeleteObjects request failed for key K: Access Denied (code: AccessDenied)".
_KEY_CODE = re.compile(r"failed for key .{0,1100}\(code: ([A-Za-z]{1,60})\)")
_KEY_REFUSED = ("AccessDenied", "AllAccessDisabled", "InvalidAccessKeyId", "SignatureDoesNotMatch")
# Words of reqwest/hyper for a request that never got an answer, or whose answer's body stopped part-way
# (reqwest's body errors: a connection reset or closed while the bytes flowed, as a store's load
# balancer does now and then; a fresh request reads the object whole).
_CONNECTION = (
    "error sending request",
    "connection reset",
    "connection closed",
    "broken pipe",
    "connection refused",
    "request or response body error",
    "error decoding response body",
)
_TIMEOUT = ("timed out", "timeout", "deadline has elapsed")
_REFUSED = "; the storage refused the credentials: check the volume's credentials and their grants"


class VolumeReadError(OSError):
    """A volume file could not be read, after retries; the message names its /Volumes path."""


class StorageUnreachable(OneLine, OSError):
    """The store behind a volume cannot be reached (it refuses connections, its name does not
    resolve, it does not answer); the message names the /Volumes path, the endpoint and why."""


class StorageResponseError(OSError):
    """The store answered with an error status other than 401, 403 and 404."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code = status, code


def refused_because(error: PermissionError) -> str:
    """What the store said when it refused (a :func:`as_os_error` PermissionError's own words)."""
    return str(error).removesuffix(_REFUSED)


def first_line(exc: BaseException) -> str:
    """The exception's text without object_store's debug dump (everything after a blank line)."""
    text = str(exc).split("\n\nDebug source:", 1)[0]
    return " ".join(text.split())


def as_os_error(exc: Exception) -> Exception:
    """``exc`` as an error of the kind its status says (``exc`` itself when it is one already, or
    when it is no obstore error at all, like a ``ValueError`` for a path object_store refuses)."""
    text = str(exc)
    # obstore raises its own classes, and builtin FileNotFoundError for a 404 (with its dump too).
    ours = (type(exc).__module__ or "").startswith("obstore") or "status code: " in text
    if not ours:
        return exc
    name = type(exc).__name__
    status_found = _STATUS.search(text)
    status = int(status_found.group(1)) if status_found else None
    code_found = _CODE.search(text)
    code = code_found.group(1) if code_found else ""
    message_found = _MESSAGE.search(text)
    message = message_found.group(1).strip().split("\n")[0].strip() if message_found else ""
    line = first_line(exc)
    said = " ".join(part for part in (str(status), code) if part) + (f": {message}" if message else "")
    shown = said if status else line
    if status == 404:
        return FileNotFoundError(shown)
    key_code = _KEY_CODE.search(line)
    if (
        status in (401, 403)
        or name in ("PermissionDeniedError", "UnauthenticatedError")
        or (key_code is not None and key_code.group(1) in _KEY_REFUSED)
    ):
        return PermissionError(f"{shown}{_REFUSED}")
    if status is not None:
        return StorageResponseError(status, code or f"HTTP{status}", shown)
    lowered = line.lower()  # the debug dump names retry_timeout and the like whatever happened
    if any(word in lowered for word in _TIMEOUT):
        return TimeoutError(shown)
    if any(word in lowered for word in _CONNECTION):
        return ConnectionError(shown)
    return OSError(shown)


def picklable(exc: BaseException) -> BaseException:
    """``exc``, or an OSError with its type and first line when it does not survive pickling (to
    send it from a listing process or thread to the process that reads the listing)."""
    try:
        return pickle.loads(pickle.dumps(exc))  # type: ignore[no-any-return]
    except Exception:
        return OSError(f"{type(exc).__name__}: {first_line(exc)}")
