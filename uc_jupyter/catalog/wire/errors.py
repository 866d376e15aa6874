"""The catalog's errors on the wire, both ways: our exceptions <-> Unity Catalog error bodies and statuses.

A Unity Catalog server answers an error with an HTTP status and
``{"error_code": ..., "message": ..., "details": [{"@type": ".../google.rpc.ErrorInfo", "reason": ...}]}``
(UC OSS ``GlobalExceptionHandler``). :func:`to_error` makes that body from one of our exceptions (the
server's side) and :func:`from_error` makes our exception from a body (a client's side), by ``error_code``
first and the status second. UC OSS answers "already exists" with 400, not 409, and a non-empty catalog
or schema with ``FAILED_PRECONDITION`` (400); this module follows it. Storage that overlaps another
table's or volume's is ``RESOURCE_ALREADY_EXISTS`` (400; UC OSS says PERMISSION_DENIED there, but it is
our ``AlreadyExists`` and must come back as one through :func:`from_error`). A ``PermissionDenied`` also carries
its principal, privilege and securable in the ``ErrorInfo`` metadata (a string map in ``google.rpc``),
which the official client ignores and :func:`from_error` reads back.

Messages stay our one-line ones (``catalog main does not exist; did you mean mian?``), never a stack.

Example:
    >>> from uc_jupyter.catalog.model import NotFound
    >>> status, body = to_error(NotFound("catalog nope does not exist"))
    >>> status, body["error_code"], body["message"]
    (404, 'CATALOG_NOT_FOUND', 'catalog nope does not exist')
    >>> from_error(status, body)
    NotFound('catalog nope does not exist')
    >>> to_error(PermissionDenied("alice", "USE CATALOG", "main"))[1]["details"][0]["metadata"]
    {'principal': 'alice', 'privilege': 'USE CATALOG', 'securable': 'main'}
"""

from __future__ import annotations

from typing import Any

from uc_jupyter.catalog.model import (
    AlreadyExists,
    CatalogError,
    NotEmpty,
    NotFound,
    PermissionDenied,
    Unauthenticated,
)

__all__ = ["STATUS", "RemotePermissionDenied", "WireError", "error_body", "from_error", "to_error"]

ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"

# UC OSS's codes and their HTTP statuses (srv/exception/ErrorCode.java), those we send or read.
STATUS: dict[str, int] = {
    "INVALID_ARGUMENT": 400,
    "FAILED_PRECONDITION": 400,
    "OUT_OF_RANGE": 400,
    "CATALOG_ALREADY_EXISTS": 400,
    "SCHEMA_ALREADY_EXISTS": 400,
    "TABLE_ALREADY_EXISTS": 400,
    "RESOURCE_ALREADY_EXISTS": 400,
    "STORAGE_CREDENTIAL_ALREADY_EXISTS": 400,
    "EXTERNAL_LOCATION_ALREADY_EXISTS": 400,
    "UNAUTHENTICATED": 401,
    "PERMISSION_DENIED": 403,
    "NOT_FOUND": 404,
    "CATALOG_NOT_FOUND": 404,
    "SCHEMA_NOT_FOUND": 404,
    "TABLE_NOT_FOUND": 404,
    "METHOD_NOT_ALLOWED": 405,
    "ALREADY_EXISTS": 409,
    "RESOURCE_EXHAUSTED": 429,
    "INTERNAL": 500,
    "UNIMPLEMENTED": 501,
}

# Our NotFound and AlreadyExists messages begin with the kind of the object ("schema main.ml does not
# exist", "volume main.ml.v already exists": metastore.py, external.py), which picks UC's code.
_NOT_FOUND = {"catalog": "CATALOG_NOT_FOUND", "schema": "SCHEMA_NOT_FOUND", "table": "TABLE_NOT_FOUND"}
_ALREADY = {
    "catalog": "CATALOG_ALREADY_EXISTS",
    "schema": "SCHEMA_ALREADY_EXISTS",
    "table": "TABLE_ALREADY_EXISTS",
    "volume": "RESOURCE_ALREADY_EXISTS",
    "storage": "STORAGE_CREDENTIAL_ALREADY_EXISTS",
    "credential": "STORAGE_CREDENTIAL_ALREADY_EXISTS",
    "external": "EXTERNAL_LOCATION_ALREADY_EXISTS",
    "location": "EXTERNAL_LOCATION_ALREADY_EXISTS",
}


class WireError(Exception):
    """An error the server answers with a chosen code: bad request bodies, parameters, page tokens.

    Example:
        >>> to_error(WireError("INVALID_ARGUMENT", "unknown field 'x' in CreateCatalog"))[0]
        400
    """

    def __init__(self, error_code: str, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


class RemotePermissionDenied(PermissionDenied):
    """A server's PERMISSION_DENIED whose principal, privilege and object it did not spell out: the
    message is the server's own text."""

    def __init__(self, message: str) -> None:
        super().__init__("?", "?", "?")
        self.args = (message,)
        self.message = message

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.message,))


def error_body(error_code: str, message: str, **metadata: str) -> dict[str, Any]:
    """The UC error body: ``message`` made one line, ``error_code`` repeated as the ErrorInfo reason."""
    info: dict[str, Any] = {"@type": ERROR_INFO, "reason": error_code}
    if metadata:
        info["metadata"] = metadata
    return {"error_code": error_code, "message": _one_line(message), "details": [info]}


def to_error(exc: BaseException) -> tuple[int, dict[str, Any]]:
    """The HTTP status and UC error body for ``exc``; anything unexpected is INTERNAL (500), named by
    its type only (its text may hold paths or data the caller should not see)."""
    code = _code_of(exc)
    if code == "INTERNAL":
        return 500, error_body(code, f"internal error ({type(exc).__name__}); the server's log has the details")
    message = exc.message if isinstance(exc, WireError) else str(exc)
    if isinstance(exc, PermissionDenied) and not isinstance(exc, RemotePermissionDenied):
        fields = {"principal": exc.principal, "privilege": exc.privilege, "securable": exc.securable}
        return STATUS[code], error_body(code, message, **fields)
    return STATUS.get(code, 400), error_body(code, message)


def _code_of(exc: BaseException) -> str:
    if isinstance(exc, WireError):
        return exc.error_code
    first = str(exc).split(" ", 1)[0].lower()
    if str(exc).startswith("table or volume "):  # a three-part name of unknown kind (metastore._existing_row)
        first = "object"
    if isinstance(exc, Unauthenticated):
        return "UNAUTHENTICATED"
    if isinstance(exc, PermissionDenied):
        return "PERMISSION_DENIED"
    if isinstance(exc, NotFound):
        return _NOT_FOUND.get(first, "NOT_FOUND")
    if isinstance(exc, AlreadyExists):
        # Storage overlapping a table's or volume's (external.py), or a name a volume holds when a table is
        # made (table_writes.py): the message names no kind first, and UC's generic code fits both.
        if str(exc).startswith("storage location ") or " already exists as a " in str(exc):
            return "RESOURCE_ALREADY_EXISTS"
        return _ALREADY.get(first, "ALREADY_EXISTS")
    if isinstance(exc, NotEmpty):  # UC: a non-empty catalog or schema is a failed precondition
        return "FAILED_PRECONDITION" if first in ("catalog", "schema") else "INVALID_ARGUMENT"
    if isinstance(exc, ValueError | CatalogError):  # InvalidName is a ValueError; ReservedStorage a CatalogError
        return "INVALID_ARGUMENT"
    return "INTERNAL"


def from_error(status: int, body: object) -> Exception:
    """Our exception for an error answer (``body`` the decoded JSON, or anything else when it was not
    JSON): UC OSS and Databricks codes first, then the status.

    Example:
        >>> from_error(403, {"error_code": "PERMISSION_DENIED", "message": "Access denied."})
        RemotePermissionDenied('Access denied.')
        >>> from_error(400, {"error_code": "CATALOG_ALREADY_EXISTS", "message": "catalog main already exists"})
        AlreadyExists('catalog main already exists')
    """
    code, message, metadata = "", f"the server answered HTTP {status}", {}
    if isinstance(body, dict):
        code = str(body.get("error_code") or "")
        message = _one_line(str(body.get("message") or message))
        for detail in body.get("details") or ():
            if isinstance(detail, dict) and isinstance(detail.get("metadata"), dict):
                metadata = detail["metadata"]
    if code == "UNAUTHENTICATED" or (not code and status == 401):
        return Unauthenticated(message)
    if code == "PERMISSION_DENIED" or (not code and status == 403):
        fields = [metadata.get(k) for k in ("principal", "privilege", "securable")]
        if all(isinstance(f, str) and f for f in fields):
            return PermissionDenied(*fields)  # type: ignore[arg-type]
        return RemotePermissionDenied(message)
    if code.endswith(("NOT_FOUND", "DOES_NOT_EXIST")) or (not code and status == 404):
        return NotFound(message)
    if code.endswith("ALREADY_EXISTS") or (not code and status == 409):
        return AlreadyExists(message)
    if status == 400 or code in ("INVALID_ARGUMENT", "INVALID_PARAMETER_VALUE", "FAILED_PRECONDITION", "BAD_REQUEST"):
        return ValueError(message)
    return CatalogError(f"{message} ({code or 'HTTP'} {status})")


def _one_line(text: str) -> str:
    return " ".join(line.strip() for line in text.splitlines() if line.strip()) or "error"
