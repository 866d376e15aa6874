"""Vended storage credentials: parsing a server's ``TemporaryCredentials``, caching them until shortly
before they expire, and turning them into the options fsspec (s3fs) and deltalake take.

A Unity Catalog server answers ``POST /temporary-{table,volume,path}-credentials`` with
``{"url", "expiration_time" (epoch ms), "aws_temp_credentials": {"access_key_id", "secret_access_key",
"session_token"}}`` (for Azure ``"azure_user_delegation_sas": {"sas_token"}``, for Google Cloud Storage
``"gcp_oauth_token": {"oauth_token"}``: options ``sas_token`` / ``bearer_token``, which the volume's
object_store client signs with); ``uc-jupyter serve`` adds ``uc_jupyter_storage_options`` (non-secret options such
as ``endpoint_url`` and ``region``, which UC's model has no field for). A ``file://`` URL comes with no
credentials at all: the local filesystem, under the OS user's own permissions.

:class:`VendedCache` keeps one answer per (token, securable id, operation) and asks again at
``expiration_time - max(60 s, 10 % of the lifetime)``. The token is part of the key: the server
decides per principal, and an answer given to alice must never serve bob's call. Answers that carry
no secret (``file://``: a URL, perhaps an expiry) are not cached: asking is the privilege check, and
nothing but a new question would notice a revoked grant, while keys (an STS session) are worth
keeping. With cached keys a revocation reaches this client at the next refresh, as it reaches
anyone holding the keys themselves.

Example:
    >>> v = parse_vended({"url": "s3://b/p", "expiration_time": 1_000_000,
    ...                   "aws_temp_credentials": {"access_key_id": "AK", "secret_access_key": "S",
    ...                                            "session_token": "T"},
    ...                   "uc_jupyter_storage_options": {"endpoint_url": "http://127.0.0.1:9000",
    ...                                                  "region": "us-east-1"}})
    >>> sorted(v.fsspec_options())
    ['client_kwargs', 'endpoint_url', 'key', 'secret', 'token']
    >>> v.deltalake_options()["AWS_ALLOW_HTTP"]
    'true'
    >>> v.refresh_at(fetched_at=400.0)  # lifetime 600 s: 10 % is 60 s
    940.0
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal

from uc_jupyter.catalog.model import CatalogError
from uc_jupyter.storage.locations import family_of

__all__ = ["MIN_MARGIN_S", "AwsKeys", "CloudToken", "Vended", "VendedCache", "parse_vended", "refresh_due"]

MIN_MARGIN_S = 60.0  # refresh at least this long before expiry: a read started just before must finish
_MARGIN_SHARE = 0.1


def refresh_due(expires_at: float, fetched_at: float) -> float:
    """When credentials fetched at ``fetched_at`` that expire at ``expires_at`` (epoch seconds) are to
    be asked for again: ``max(60 s, 10 % of the lifetime)`` before expiry. The one formula: the cache
    and the datasets that hold options across passes (:mod:`uc_jupyter.data.stream.renewal`) both use it.

    Example:
        >>> refresh_due(expires_at=1000.0, fetched_at=400.0), refresh_due(expires_at=1000.0, fetched_at=990.0)
        (940.0, 940.0)
    """
    lifetime = max(expires_at - fetched_at, 0.0)
    return expires_at - max(MIN_MARGIN_S, _MARGIN_SHARE * lifetime)


@dataclass(frozen=True)
class AwsKeys:
    access_key_id: str = field(repr=False)
    secret_access_key: str = field(repr=False)
    session_token: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class CloudToken:
    """An Azure user-delegation SAS (``kind="azure_sas"``) or a Google OAuth token (``"gcp_oauth"``)."""

    kind: Literal["azure_sas", "gcp_oauth"]
    value: str = field(repr=False)


# Which kind of storage each kind of vended token signs for, and the storage option it becomes.
_TOKEN_FAMILY = {"azure_sas": "azure", "gcp_oauth": "gcs"}
_TOKEN_OPTION = {"azure_sas": "sas_token", "gcp_oauth": "bearer_token"}


@dataclass(frozen=True)
class Vended:
    """One ``TemporaryCredentials`` answer; ``expires_at`` in epoch seconds (None: it does not expire).
    Secrets never appear in its repr."""

    url: str
    expires_at: float | None = None
    aws: AwsKeys | None = None
    options: dict[str, str] = field(default_factory=dict)
    cloud: CloudToken | None = None

    def refresh_at(self, fetched_at: float) -> float | None:
        """When to ask again (epoch seconds): ``max(60 s, 10 %)`` of the lifetime before expiry."""
        return None if self.expires_at is None else refresh_due(self.expires_at, fetched_at)

    def expiry(self) -> datetime | None:
        """``expires_at`` as an aware UTC datetime (what ``Resolved*.expires_at`` carry)."""
        return None if self.expires_at is None else datetime.fromtimestamp(self.expires_at, tz=timezone.utc)

    def fsspec_options(self) -> dict[str, Any]:
        """s3fs's options (``key``, ``secret``, ``token``, ``endpoint_url``, ``client_kwargs.region_name``),
        or an Azure SAS as ``sas_token`` / a Google token as ``bearer_token`` (what the storage seam's
        object_store clients take); ``{}`` when nothing was vended (``file://``: the local filesystem)."""
        options: dict[str, Any] = {}
        if self.cloud is not None:
            options[_TOKEN_OPTION[self.cloud.kind]] = self.cloud.value
        if self.aws is not None:
            options.update(key=self.aws.access_key_id, secret=self.aws.secret_access_key)
            if self.aws.session_token:
                options["token"] = self.aws.session_token
        if self.options.get("endpoint_url"):
            options["endpoint_url"] = self.options["endpoint_url"]
        if self.options.get("region"):
            options["client_kwargs"] = {"region_name": self.options["region"]}
        return options

    def deltalake_options(self) -> dict[str, str]:
        """deltalake's (object_store's) options: the ``AWS_*`` form of :meth:`fsspec_options`, through the
        project's one conversion (:func:`uc_jupyter.storage.urls.deltalake_options`)."""
        from uc_jupyter.storage.urls import deltalake_options

        return deltalake_options(self.fsspec_options())


def parse_vended(body: dict[str, Any]) -> Vended:
    """A ``TemporaryCredentials`` body (AWS keys, an Azure SAS or a Google OAuth token); a token for
    another kind of storage than its URL's, or one without its value, is refused in one line."""
    url = body.get("url")
    if not isinstance(url, str) or not url:
        raise CatalogError("the server's temporary credentials name no url; is it a Unity Catalog server?")
    cloud = _cloud_token(body, url)
    expiration = body.get("expiration_time")
    expires_at = expiration / 1000 if isinstance(expiration, int | float) and not isinstance(expiration, bool) else None
    aws = None
    keys = body.get("aws_temp_credentials")
    if isinstance(keys, dict) and keys.get("access_key_id") and keys.get("secret_access_key"):
        aws = AwsKeys(str(keys["access_key_id"]), str(keys["secret_access_key"]), keys.get("session_token") or None)
    extra = body.get("uc_jupyter_storage_options")
    options = {str(k): str(v) for k, v in extra.items() if v is not None} if isinstance(extra, dict) else {}
    return Vended(url, expires_at, aws, options, cloud)


def _cloud_token(body: dict[str, Any], url: str) -> CloudToken | None:
    family = family_of(url)
    for field_name, inner, kind in (
        ("azure_user_delegation_sas", "sas_token", "azure_sas"),
        ("gcp_oauth_token", "oauth_token", "gcp_oauth"),
    ):
        given = body.get(field_name)
        if not given:
            continue
        value = given.get(inner) if isinstance(given, dict) else None
        if not isinstance(value, str) or not value:
            raise CatalogError(f"the server vended {field_name} for {url} without its {inner}")
        if family != _TOKEN_FAMILY[kind]:
            raise CatalogError(f"the server vended {field_name} for {url}, which is not that kind of storage")
        return CloudToken(kind, value)  # type: ignore[arg-type]
    return None


class VendedCache:
    """Vended credentials per (token, id, operation), fetched again when due (see the module docstring).

    ``fetch(token, id, operation)`` asks the server; ``clock`` gives epoch seconds (injected in tests).
    Two threads asking for the same missing key may both fetch; the later answer is kept (both are valid).
    """

    def __init__(self, fetch: Callable[[str, str, str], Vended], *, clock: Callable[[], float] = time.time) -> None:
        self._fetch = fetch
        self._clock = clock
        self._entries: dict[tuple[str, str, str], tuple[Vended, float]] = {}
        self._lock = threading.Lock()

    def get(self, token: str, securable_id: str, operation: str) -> Vended:
        """The cached credentials when still fresh, else new ones from the server."""
        key = (token, securable_id, operation)
        with self._lock:
            cached = self._entries.get(key)
        if cached is not None and self._clock() < cached[1]:
            return cached[0]
        fetched_at = self._clock()
        vended = self._fetch(token, securable_id, operation)
        due = vended.refresh_at(fetched_at)
        if due is not None and (vended.aws is not None or vended.cloud is not None):
            with self._lock:
                self._entries[key] = (vended, due)
        return vended

    def forget(self, securable_id: str) -> None:
        """Drop every entry of ``securable_id`` (it was dropped, or the server refused its credentials)."""
        with self._lock:
            for key in [k for k in self._entries if k[1] == securable_id]:
                del self._entries[key]
