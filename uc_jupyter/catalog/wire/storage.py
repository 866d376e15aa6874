"""The storage model on the wire: credentials, external locations and temporary credentials as UC JSON.

Pure: no I/O. Shapes follow the official client's models (``unitycatalog-client`` 0.7.0:
``CredentialInfo``, ``CreateCredentialRequest``, ``ExternalLocationInfo``, ``CreateExternalLocation``,
``GenerateTemporary*Credential``, ``TemporaryCredentials``; docs/design/unity-catalog-server.md 1.7-1.9, 5.4).

Our credentials are named sets of storage options; UC's are IAM role ARNs. So:

- a ``CredentialInfo`` shows ``purpose: STORAGE``, ``aws_iam_role.role_arn`` when the credential holds
  the option ``role_arn``, and the extension ``uc_jupyter_option_names``: the option *names*, never a
  value (the client drops unknown keys, so extensions are safe);
- a ``CreateCredentialRequest`` may carry, besides UC's fields, the write-only extension
  ``uc_jupyter_storage_options`` (the options themselves: keys, endpoint, vending mode); it is never
  sent back;
- ``CreateExternalLocation.credential_name`` is required by the client's model but optional here
  (absent: the server's own environment);
- ``TemporaryCredentials`` carries ``url``, ``expiration_time`` (epoch ms), ``aws_temp_credentials`` for
  s3 and the extension ``uc_jupyter_storage_options``: non-secret options a client needs to reach the
  storage (``endpoint_url``, ``region``), which UC's model has no field for.

Example:
    >>> from datetime import datetime, timezone
    >>> from uc_jupyter.catalog.model import CredentialInfo
    >>> at = datetime(2026, 1, 1, tzinfo=timezone.utc)
    >>> info = CredentialInfo("lake", "admin", at, ("key", "role_arn", "secret"))
    >>> body = credential_json(info, "arn:aws:iam::1:role/r")
    >>> body["purpose"], body["aws_iam_role"], body["uc_jupyter_option_names"]
    ('STORAGE', {'role_arn': 'arn:aws:iam::1:role/r'}, ['key', 'role_arn', 'secret'])
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from uc_jupyter.catalog.model import CredentialInfo, ExternalLocationInfo
from uc_jupyter.catalog.wire.errors import WireError
from uc_jupyter.catalog.wire.shapes import Model, epoch_ms, object_id

__all__ = [
    "CREATE_CREDENTIAL",
    "CREATE_EXTERNAL_LOCATION",
    "OPTIONS_FIELD",
    "PATH_OPERATIONS",
    "TABLE_OPERATIONS",
    "TEMPORARY_PATH",
    "TEMPORARY_TABLE",
    "TEMPORARY_VOLUME",
    "VOLUME_OPERATIONS",
    "AwsSession",
    "Vended",
    "credential_json",
    "credential_options",
    "location_json",
    "operation",
    "temporary_credentials_json",
]

OPTIONS_FIELD = "uc_jupyter_storage_options"  # the write-only extension of CreateCredentialRequest
CREATE_CREDENTIAL = Model(
    "CreateCredentialRequest",
    {"name": str, "comment": str, "aws_iam_role": dict, "purpose": str, OPTIONS_FIELD: dict},
    frozenset({"name"}),
)
CREATE_EXTERNAL_LOCATION = Model(
    "CreateExternalLocation",
    {"name": str, "url": str, "credential_name": str, "comment": str},
    frozenset({"name", "url"}),
)
TEMPORARY_TABLE = Model(
    "GenerateTemporaryTableCredential", {"table_id": str, "operation": str}, frozenset({"table_id", "operation"})
)
TEMPORARY_VOLUME = Model(
    "GenerateTemporaryVolumeCredential", {"volume_id": str, "operation": str}, frozenset({"volume_id", "operation"})
)
TEMPORARY_PATH = Model(
    "GenerateTemporaryPathCredential", {"url": str, "operation": str}, frozenset({"url", "operation"})
)

# The operations of each request and whether they write. UNKNOWN_* is in the client's enums but asks
# for nothing (UC OSS: "Privileges cannot be null or empty"), so it is refused like any other value.
TABLE_OPERATIONS = {"READ": False, "READ_WRITE": True}
VOLUME_OPERATIONS = {"READ_VOLUME": False, "WRITE_VOLUME": True}
PATH_OPERATIONS = {"PATH_READ": False, "PATH_READ_WRITE": True, "PATH_CREATE_TABLE": True}


def operation(body: dict[str, Any], known: dict[str, bool], model: Model) -> str:
    """The request's ``operation`` when it is one of ``known``, else a one-line 400.

    Example:
        >>> operation({"operation": "READ_VOLUME"}, VOLUME_OPERATIONS, TEMPORARY_VOLUME)
        'READ_VOLUME'
    """
    asked = body["operation"]
    if asked not in known:
        raise WireError(
            "INVALID_ARGUMENT",
            f"operation {asked[:40]!r} of {model.name} is not one of {', '.join(known)}",
        )
    return str(asked)


def _audit(info: CredentialInfo | ExternalLocationInfo) -> dict[str, Any]:
    created = epoch_ms(info.created_at)
    return {
        "owner": info.owner,
        "created_at": created,
        "created_by": info.created_by or info.owner,
        "updated_at": epoch_ms(info.updated_at) if info.updated_at else created,
        "updated_by": info.updated_by or info.created_by or info.owner,
    }


def _id(info: CredentialInfo | ExternalLocationInfo, kind: str) -> str:
    # A stored id when the catalog keeps one, else the derived one of wire.object_id (older homes).
    return info.id or object_id(kind, info.name, info.created_at)


def credential_json(info: CredentialInfo, role_arn: str | None = None) -> dict[str, Any]:
    """A UC ``CredentialInfo`` (see the module docstring); ``role_arn`` is the credential's option of
    that name, the one option value that is shown (an ARN names a role, it grants nothing)."""
    body: dict[str, Any] = {
        "name": info.name,
        "comment": info.comment,
        **_audit(info),
        "full_name": info.name,
        "id": _id(info, "credential"),
        "purpose": "STORAGE",
        "uc_jupyter_option_names": sorted(info.option_names),
    }
    if role_arn:
        body["aws_iam_role"] = {"role_arn": role_arn}
    return {k: v for k, v in body.items() if v is not None}


def location_json(info: ExternalLocationInfo, credential: CredentialInfo | None = None) -> dict[str, Any]:
    """A UC ``ExternalLocationInfo``; ``credential`` (when the caller may see it) gives ``credential_id``.

    Example:
        >>> from datetime import datetime, timezone
        >>> at = datetime(2026, 1, 1, tzinfo=timezone.utc)
        >>> body = location_json(ExternalLocationInfo("raw", "s3://lake/raw", None, "admin", at))
        >>> body["url"], "credential_name" in body, body["updated_at"] == body["created_at"]
        ('s3://lake/raw', False, True)
    """
    body: dict[str, Any] = {
        "name": info.name,
        "id": _id(info, "external_location"),
        "url": info.url,
        "credential_name": info.credential_name,
        "comment": info.comment,
        **_audit(info),
        "credential_id": _id(credential, "credential") if credential is not None else None,
    }
    return {k: v for k, v in body.items() if v is not None}


def credential_options(body: dict[str, Any]) -> dict[str, Any]:
    """The storage options a ``CreateCredentialRequest`` asks for: the extension field's, plus
    ``role_arn`` from ``aws_iam_role``. Refuses (400) a purpose other than STORAGE, an ``aws_iam_role``
    with other keys, and two different role ARNs.

    Example:
        >>> credential_options({"name": "c", "aws_iam_role": {"role_arn": "arn:aws:iam::1:role/r"}})
        {'role_arn': 'arn:aws:iam::1:role/r'}
    """
    purpose = body.get("purpose", "STORAGE")
    if purpose != "STORAGE":
        raise WireError(
            "INVALID_ARGUMENT", f"purpose {purpose[:32]!r} is not supported: this server keeps STORAGE credentials"
        )
    options: dict[str, Any] = dict(body.get(OPTIONS_FIELD) or {})
    role = body.get("aws_iam_role")
    if role is not None:
        if set(role) != {"role_arn"} or not isinstance(role["role_arn"], str) or not role["role_arn"]:
            raise WireError(
                "INVALID_ARGUMENT", "aws_iam_role must be an object with one field, role_arn, a non-empty string"
            )
        if options.get("role_arn", role["role_arn"]) != role["role_arn"]:
            raise WireError("INVALID_ARGUMENT", f"aws_iam_role.role_arn and {OPTIONS_FIELD}.role_arn differ; give one")
        options["role_arn"] = role["role_arn"]
    return options


@dataclass(frozen=True)
class AwsSession:
    """Temporary AWS keys (an STS session, or a credential's static keys where it says so)."""

    access_key_id: str
    secret_access_key: str = field(repr=False)
    session_token: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Vended:
    """What a temporary-credentials call answers: the storage ``url`` it is for, when it expires
    (epoch seconds), AWS keys for s3 (None for local storage), and non-secret options."""

    url: str
    expires_at: float
    aws: AwsSession | None = None
    storage_options: dict[str, str] = field(default_factory=dict)


def temporary_credentials_json(vended: Vended) -> dict[str, Any]:
    """A UC ``TemporaryCredentials`` (plus ``uc_jupyter_storage_options`` when there are any).

    Example:
        >>> temporary_credentials_json(Vended("file:///data/v", 1767225600.5))
        {'url': 'file:///data/v', 'expiration_time': 1767225600500}
    """
    body: dict[str, Any] = {"url": vended.url, "expiration_time": int(vended.expires_at * 1000)}
    if vended.aws is not None:
        aws = {"access_key_id": vended.aws.access_key_id, "secret_access_key": vended.aws.secret_access_key}
        if vended.aws.session_token:
            aws["session_token"] = vended.aws.session_token
        body["aws_temp_credentials"] = aws
    if vended.storage_options:
        body[OPTIONS_FIELD] = dict(vended.storage_options)
    return body
