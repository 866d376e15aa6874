"""``gs://`` and Azure volumes' storage options as the arguments of obstore's GCSStore and AzureStore.

Users and catalogs give the options gcsfs and adlfs take; object_store's own names (lower case as in
obstore's ``GCSConfig`` / ``AzureConfig``, or upper case as environment variables and deltalake take
them) pass as they are. :mod:`uc_jupyter.storage.stores` calls :func:`gcs_store_args` and
:func:`azure_store_args` by scheme. What the options leave out, object_store reads from the
environment itself (``GOOGLE_APPLICATION_CREDENTIALS``, ``GOOGLE_SERVICE_ACCOUNT``,
``AZURE_STORAGE_ACCOUNT_NAME``, ``AZURE_STORAGE_ACCOUNT_KEY``, ``AZURE_CLIENT_ID``...), then the
instance's metadata service.

=========================================  =====================================================
gcsfs option                               object_store key
=========================================  =====================================================
``token="anon"``                           ``skip_signature``
``token="/path/credentials.json"``         ``application_credentials`` (service account or user)
``token={...service account JSON...}``     ``service_account_key``
``token=<google.auth Credentials>``        a credential provider refreshing them
``token=None|"google_default"|"cloud"``    nothing: object_store's own chain
``endpoint_url``                           ``base_url`` (``http://`` allowed)
=========================================  =====================================================

=========================================  =====================================================
adlfs option                               object_store key
=========================================  =====================================================
``account_name``, ``account_key``          ``account_name``, ``account_key``
``sas_token``                              ``sas_key``
``connection_string``                      its AccountName, AccountKey, SharedAccessSignature,
                                           BlobEndpoint (or EndpointSuffix), UseDevelopmentStorage
``tenant_id``, ``client_id``,              the same names (a service principal)
``client_secret``
``account_host``                           ``endpoint`` ``https://<account_host>``
``endpoint_url``                           ``endpoint`` (``http://`` allowed)
``anon=True``                              ``skip_signature``
=========================================  =====================================================

Credentials a catalog vends (:mod:`uc_jupyter.catalog.rest.vended`) arrive as ``sas_token`` (Azure) and
``bearer_token`` (Google). A URL's own account (``abfss://<container>@<account>.dfs.core.windows.net/...``)
is the one read: options naming another account are refused rather than signed for it.

Example:
    >>> args = azure_store_args("abfss://raw@lake.dfs.core.windows.net/images", {"sas_token": "?sv=1&sig=x"})
    >>> args.kind, args.bucket, args.prefix, args.config["account_name"], args.config["sas_key"]
    ('azure', 'raw', 'images', 'lake', 'sv=1&sig=x')
    >>> args = gcs_store_args("gs://lake/images", {"token": "anon", "endpoint_url": "http://127.0.0.1:4443"})
    >>> args.config, args.client_options["allow_http"]
    ({'skip_signature': 'true', 'base_url': 'http://127.0.0.1:4443'}, 'true')
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from uc_jupyter.storage.config import HARMLESS_OPTIONS, MAX_CONNECTIONS, VENDOR_OPTIONS, StoreArgs, Unsupported
from uc_jupyter.storage.locations import Family, family_of

__all__ = ["azure_store_args", "gcs_store_args", "parse_connection_string"]


# Options that change nothing a listing or a whole-object GET returns (listing caches, block sizes,
# concurrency of file objects, the project a bucket is created in), and the vendor's own options.
_HARMLESS = HARMLESS_OPTIONS | VENDOR_OPTIONS | {"blocksize"}
_GCS_HARMLESS = _HARMLESS | {"project", "access", "consistency", "cache_timeout", "check_connection"}
_AZURE_HARMLESS = _HARMLESS | {"assume_container_exists", "socket_timeout", "max_single_get_size"}
# object_store's own lower-case names, accepted as they are.
_GCS_NATIVE = frozenset(
    {"service_account", "service_account_key", "application_credentials", "base_url", "bearer_token", "skip_signature"}
)
_AZURE_NATIVE = frozenset(
    {
        "account_name",
        "account_key",
        "sas_key",
        "bearer_token",
        "tenant_id",
        "client_id",
        "client_secret",
        "authority_host",
        "endpoint",
        "use_emulator",
        "use_fabric_endpoint",
        "skip_signature",
        "msi_endpoint",
        "object_id",
        "msi_resource_id",
        "federated_token_file",
        "use_azure_cli",
        "credential_type",
    }
)
# object_store keys that configure its HTTP client rather than the store.
_CLIENT_KEYS = frozenset({"allow_http", "allow_invalid_certificates"})
_SHOWN: dict[Family, str] = {"gcs": "gs", "azure": "az"}  # the scheme an error suggests
_GCS_BUCKET = re.compile(r"[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]")
_AZURE_CONTAINER = re.compile(r"\$root|\$web|\$logs|[a-z0-9](?!.*--)[a-z0-9-]{1,61}[a-z0-9]")
_AZURE_ACCOUNT = re.compile(r"[a-z0-9]{3,24}")
# The connection-string fields read, and the object_store keys they become.
_CONNECTION_FIELDS = {"accountname": "account_name", "accountkey": "account_key", "sharedaccesssignature": "sas_key"}


def gcs_store_args(url: str, options: Mapping[str, Any] | None) -> StoreArgs:
    """What GCSStore is built from for the folder at ``gs://bucket/prefix`` with gcsfs-style options.

    Raises:
        Unsupported: an option object_store cannot honour, named.
        ValueError: a URL that names no valid bucket, or a key with empty, ``.`` or ``..`` segments.

    Example:
        >>> gcs_store_args("gs://lake/a/b", {"token": {"type": "service_account", "client_email": "x"}}).config
        {'service_account_key': '{"type": "service_account", "client_email": "x"}'}
    """
    bucket, prefix = _bucket_and_prefix(url, "gcs", _GCS_BUCKET, "bucket")
    config: dict[str, str] = {}
    client = _client_options()
    credential_provider = None
    for key, value in (options or {}).items():
        if key in _GCS_HARMLESS:
            continue
        if key == "token":
            credential_provider = _gcs_token(value, config)
        elif key in ("endpoint_url", "gcs_base_url"):
            config["base_url"] = _string(key, value)
        elif (key == "requester_pays" and value is False) or (key == "session_kwargs" and not value):
            continue
        else:
            _native(key, value, "google_", _GCS_NATIVE, config, client)
    _allow_http(config, client)
    return StoreArgs("gcs", bucket, prefix, config, client, credential_provider=credential_provider)


def azure_store_args(url: str, options: Mapping[str, Any] | None) -> StoreArgs:
    """What AzureStore is built from for the folder at ``az://container/prefix`` (the account from the
    options or the environment) or ``abfss://container@account.dfs.core.windows.net/prefix``, with
    adlfs-style options.

    Raises:
        Unsupported: an option object_store cannot honour, named.
        ValueError: a URL that names no valid container or account, options naming an account other
            than the URL's, or a key with empty, ``.`` or ``..`` segments.

    Example:
        >>> azure_store_args("az://raw/x", {"connection_string": "UseDevelopmentStorage=true"}).config
        {'use_emulator': 'true'}
    """
    scheme, authority, path = _split(url, "azure")
    container, at, host = authority.partition("@")
    config: dict[str, str] = {}
    client = _client_options()
    for key, value in (options or {}).items():
        if key in _AZURE_HARMLESS:
            continue
        if key == "connection_string":
            config.update(parse_connection_string(_string(key, value)))
        elif key == "sas_token":
            config["sas_key"] = _string(key, value).lstrip("?")
        elif key == "account_host":
            config["endpoint"] = f"https://{_string(key, value)}"
        elif key == "endpoint_url":  # the spelling of s3fs and gcsfs, and of uc-jupyter serve's vended options
            config["endpoint"] = _string(key, value).rstrip("/")
        elif key == "anon":
            if value is True:
                config["skip_signature"] = "true"
        elif key in ("credential", "request_session"):
            raise Unsupported(
                f"storage option {key!r} (a Python object; give account_key, sas_token, or client_id, "
                "client_secret and tenant_id instead)"
            )
        elif (key == "location_mode" and value == "primary") or (key == "version_aware" and value is False):
            continue
        else:
            _native(key, value, "azure_", _AZURE_NATIVE, config, client)
    if "sas_key" in config:
        config["sas_key"] = config["sas_key"].lstrip("?")
    if at:
        _url_account(url, host, config)
    elif scheme in ("abfs", "abfss"):
        raise ValueError(f"{url} names no account: give abfss://<container>@<account>.dfs.core.windows.net/<path>")
    if not _AZURE_CONTAINER.fullmatch(container):
        raise ValueError(f"{url}: {container!r} is not an Azure container name (3-63 lower-case letters, digits, '-')")
    _allow_http(config, client)
    return StoreArgs("azure", container, _prefix(url, path), config, client)


def parse_connection_string(text: str) -> dict[str, str]:
    """An Azure storage connection string as object_store keys (the fields that name the account,
    its key or SAS, and where its blobs are; the queue, table and file endpoints are not read).

    Example:
        >>> parse_connection_string("DefaultEndpointsProtocol=https;AccountName=lake;AccountKey=a2V5;"
        ...                         "EndpointSuffix=core.chinacloudapi.cn")  # doctest: +NORMALIZE_WHITESPACE
        {'account_name': 'lake', 'account_key': 'a2V5', 'endpoint': 'https://lake.blob.core.chinacloudapi.cn'}
    """
    fields: dict[str, str] = {}
    for part in text.split(";"):
        name, equals, value = part.strip().partition("=")  # keys end in '=': split at the first one
        if not name:
            continue
        if not equals:
            raise ValueError(f"invalid Azure connection string: {name!r} has no '='; give Name=value;Name=value")
        fields[name.lower()] = value.strip()
    out = {theirs: fields[ours] for ours, theirs in _CONNECTION_FIELDS.items() if fields.get(ours)}
    if fields.get("usedevelopmentstorage", "").lower() == "true":
        out["use_emulator"] = "true"
    if fields.get("blobendpoint"):
        out["endpoint"] = fields["blobendpoint"].rstrip("/")
    elif fields.get("endpointsuffix") and out.get("account_name"):
        protocol = fields.get("defaultendpointsprotocol", "https")
        out["endpoint"] = f"{protocol}://{out['account_name']}.blob.{fields['endpointsuffix']}"
    return out


def _gcs_token(value: Any, config: dict[str, str]) -> Any:
    """gcsfs's ``token`` into ``config``; a google.auth ``Credentials`` object gives a credential provider."""
    if value is None or value in ("google_default", "cloud"):
        return None  # object_store's own chain: GOOGLE_APPLICATION_CREDENTIALS, gcloud's file, metadata
    if value == "anon":
        config["skip_signature"] = "true"
        return None
    if isinstance(value, str) and value in ("cache", "browser"):
        raise Unsupported(f"storage option token={value!r} (an interactive login; give a credentials file's path)")
    if isinstance(value, str) and value:
        config["application_credentials"] = value
        return None
    if isinstance(value, dict):
        if value.get("type") != "service_account":
            raise Unsupported(
                f"storage option token (a {value.get('type') or 'credentials'!s} dict; give its JSON file's path)"
            )
        config["service_account_key"] = json.dumps(value)
        return None
    if hasattr(value, "refresh") and hasattr(value, "token"):  # google.auth.credentials.Credentials
        from obstore.auth.google import GoogleCredentialProvider

        return GoogleCredentialProvider(credentials=value)
    raise Unsupported(f"storage option token of type {type(value).__name__}")


def _native(
    key: str, value: Any, prefix: str, native: frozenset[str], config: dict[str, str], client: dict[str, str]
) -> None:
    """An option given in object_store's own spelling (``account_key``, ``AZURE_STORAGE_ACCOUNT_KEY``,
    ``allow_http``), or Unsupported naming it."""
    lowered = key.lower()
    if lowered in _CLIENT_KEYS:
        client[lowered] = _string(key, value)
    elif lowered in native or (key.isupper() and lowered.startswith(prefix)):
        config[lowered] = _string(key, value)
    else:
        raise Unsupported(f"storage option {key!r}")


def _url_account(url: str, host: str, config: dict[str, str]) -> None:
    """The account of ``abfss://container@<account>.<dfs|blob>.<suffix>``, checked against the options'."""
    account, _, suffix = host.partition(".")
    if not _AZURE_ACCOUNT.fullmatch(account):
        raise ValueError(f"{url}: {account!r} is not an Azure storage account name (3-24 lower-case letters, digits)")
    given = config.get("account_name") or config.get("azure_storage_account_name")
    if given and given.lower() != account:
        raise ValueError(f"{url} lies in account {account!r} but its storage options are for {given!r}; refused")
    config.pop("azure_storage_account_name", None)
    config["account_name"] = account
    service, _, cloud = suffix.partition(".")
    if any(k in config for k in ("endpoint", "azure_storage_endpoint", "use_emulator", "azure_storage_use_emulator")):
        return
    if suffix.endswith("fabric.microsoft.com"):
        config["use_fabric_endpoint"] = "true"
    elif service in ("dfs", "blob") and cloud and cloud != "core.windows.net":  # another Azure cloud
        config["endpoint"] = f"https://{account}.blob.{cloud}"


def _split(url: str, family: Family) -> tuple[str, str, str]:
    """``(scheme, authority, key)`` of ``url``, a URL of ``family``, as written: catalog URLs hold keys
    unquoted (see :mod:`uc_jupyter.storage.locations`), so ``%2E`` here is a key's own text, never
    decoded again."""
    parts = urlsplit(url)
    if family_of(url) != family or not parts.netloc or parts.query or parts.fragment:
        raise ValueError(f"invalid storage URL {url!r}: give {_SHOWN[family]}://<name>/<path>")
    return parts.scheme.lower(), parts.netloc, parts.path


def _bucket_and_prefix(url: str, family: Family, valid: re.Pattern[str], what: str) -> tuple[str, str]:
    _, bucket, key = _split(url, family)
    if not valid.fullmatch(bucket):
        raise ValueError(f"{url}: {bucket!r} is not a valid {what} name")
    return bucket, _prefix(url, key)


def _prefix(url: str, key: str) -> str:
    """The key prefix of a folder, refused when a segment is empty, ``.`` or ``..``: object stores
    take them literally, and an HTTP layer in between may fold them into another folder."""
    segments = key.strip("/").split("/") if key.strip("/") else []
    for segment in segments:
        if segment in ("", ".", "..") or "\x00" in segment:
            raise ValueError(f"{url}: a key with an empty, '.' or '..' segment is refused; give the folder's own key")
    return "/".join(segments)


def _client_options() -> dict[str, str]:
    return {"pool_max_idle_per_host": str(MAX_CONNECTIONS)}


def _allow_http(config: dict[str, str], client: dict[str, str]) -> None:
    """Plain HTTP for an endpoint given as ``http://`` (an emulator, a proxy): said, so allowed."""
    for key, value in config.items():
        if key.endswith(("endpoint", "base_url")) and value.startswith("http://"):
            client.setdefault("allow_http", "true")


def _string(key: str, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float) and str(value):
        return str(value)
    raise Unsupported(f"storage option {key!r} of type {type(value).__name__} (give a string)")
