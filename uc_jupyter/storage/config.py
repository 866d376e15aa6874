"""A volume's storage options as object_store's configuration: the project's one mapping.

fsspec-style options (s3fs's ``key``, ``secret``, ``token``, ``endpoint_url``, ``client_kwargs``,
``config_kwargs``, ``anon``, ``requester_pays``) and object_store's own upper-case ``AWS_*`` strings
(as vended credentials and deltalake users give them) both come here. :func:`object_store_options`
makes the ``AWS_*`` strings deltalake takes; :func:`s3_store_args` makes what an obstore store is built
from, for ``s3://`` here (``gs://`` / Azure URLs: :mod:`uc_jupyter.storage.cloud`; which one serves a URL:
:func:`uc_jupyter.storage.stores.store_args`).
Options with a meaning object_store cannot honour raise :class:`Unsupported`: the volume is then read
through fsspec, which knows them (:func:`uc_jupyter.storage.reads.open_storage` says so once).

Example:
    >>> object_store_options({"key": "AK", "secret": "S", "endpoint_url": "http://127.0.0.1:9000"})
    ... # doctest: +NORMALIZE_WHITESPACE
    {'AWS_ACCESS_KEY_ID': 'AK', 'AWS_SECRET_ACCESS_KEY': 'S', 'AWS_ENDPOINT_URL': 'http://127.0.0.1:9000',
     'AWS_ALLOW_HTTP': 'true'}
    >>> args = s3_store_args("s3://lake/images/train", {"anon": True, "client_kwargs": {"region_name": "eu-west-1"}})
    >>> args.bucket, args.prefix, args.config["virtual_hosted_style_request"], args.config["skip_signature"]
    ('lake', 'images/train', 'true', 'true')
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

__all__ = [
    "MAX_CONNECTIONS",
    "VENDOR_OPTIONS",
    "StoreArgs",
    "Unsupported",
    "object_store_options",
    "s3_store_args",
]

# Connections kept per store: at least the prefetch ceiling per stream (pace.MAX_DEPTH, not
# imported here so this module stays importable without the data path).
MAX_CONNECTIONS = 128
# Options of a storage credential that only ``uc-jupyter serve``'s vendor reads (how it vends: the
# mode, the role to assume and its external id); no filesystem or deltalake knows them, and s3fs
# refuses the first one it meets ("unexpected keyword argument 'vending'").
VENDOR_OPTIONS = frozenset({"vending", "role_arn", "external_id"})

_S3_KEYS = {"key": "AWS_ACCESS_KEY_ID", "secret": "AWS_SECRET_ACCESS_KEY", "token": "AWS_SESSION_TOKEN"}
# s3fs's aliases of the keys (username/password) and botocore's (client_kwargs.aws_*).
_S3_ALIASES = {"username": "AWS_ACCESS_KEY_ID", "password": "AWS_SECRET_ACCESS_KEY"}
_CLIENT_KEYS = {
    "aws_access_key_id": "AWS_ACCESS_KEY_ID",
    "aws_secret_access_key": "AWS_SECRET_ACCESS_KEY",
    "aws_session_token": "AWS_SESSION_TOKEN",
}
# fsspec options that change nothing a whole-object GET or a listing returns (caching of listings,
# block sizes of file objects...), on every scheme (cloud.py's too).
HARMLESS_OPTIONS = frozenset(
    {
        "skip_instance_cache",
        "use_listings_cache",
        "listings_expiry_time",
        "max_paths",
        "default_block_size",
        "default_cache_type",
        "default_fill_cache",
        "max_concurrency",
        "asynchronous",
        "loop",
    }
)
_HARMLESS = HARMLESS_OPTIONS | {"cache_regions"}
_MAPPED = frozenset(
    {*_S3_KEYS, *_S3_ALIASES, "anon", "endpoint_url", "client_kwargs", "config_kwargs", "requester_pays", "profile"}
)
_MAPPED_CLIENT = frozenset({"region_name", "endpoint_url", "verify", *_CLIENT_KEYS})
_MAPPED_CONFIG = frozenset(
    {"retries", "max_pool_connections", "connect_timeout", "read_timeout", "signature_version", "s3"}
)
# object_store keys that belong to its HTTP client, not to the store's own configuration.
_CLIENT_OPTIONS = {"AWS_ALLOW_HTTP": "allow_http", "AWS_ALLOW_INVALID_CERTIFICATES": "allow_invalid_certificates"}


_TIMEOUTS = {"timeout": "30min", "read_timeout": "60s"}


class Unsupported(ValueError):
    """The options ask for something object_store does not do; the message names the option."""


@dataclass(frozen=True)
class StoreArgs:
    """What an obstore store is built from: ``S3Store(bucket, prefix=prefix, config=config,
    client_options=client_options, credential_provider=credential_provider)`` (``kind`` says which
    store; ``profile``: an AWS profile whose credentials boto3 resolves, see
    :mod:`uc_jupyter.storage.credentials`)."""

    kind: Literal["s3", "gcs", "azure"]
    bucket: str
    prefix: str
    config: dict[str, str] = field(repr=False)  # holds keys: never in a repr
    client_options: dict[str, str] = field(default_factory=dict)
    credential_provider: Callable[[], Any] | None = None
    profile: str | None = None


def object_store_options(options: Mapping[str, Any] | None) -> dict[str, str]:
    """Storage options as object_store's ``AWS_*`` strings (what deltalake takes): s3fs-style
    options mapped, upper-case ones passed as they are (they win over their fsspec spelling, so
    converting twice is converting once), plain HTTP allowed for an ``http://`` endpoint. Options
    with no object_store meaning (``config_kwargs.retries``, ``use_ssl``...) and the vendor's own
    are left out rather than sent as strings object_store would refuse.

    Example:
        >>> object_store_options({"anon": True, "requester_pays": True})
        {'AWS_SKIP_SIGNATURE': 'true', 'AWS_REQUEST_PAYER': 'true'}
    """
    given = {k: v for k, v in (options or {}).items() if k not in VENDOR_OPTIONS}
    out = {k: _text(v) for k, v in given.items() if k.isupper() and isinstance(v, str | int | float | bool)}
    client = _dict(given.get("client_kwargs"))
    for ours, theirs in (*_S3_KEYS.items(), *_S3_ALIASES.items()):
        if isinstance(given.get(ours), str) and given[ours]:
            out.setdefault(theirs, given[ours])
    for ours, theirs in _CLIENT_KEYS.items():
        if isinstance(client.get(ours), str) and client[ours]:
            out.setdefault(theirs, client[ours])
    endpoint = given.get("endpoint_url") or client.get("endpoint_url")
    if isinstance(endpoint, str) and endpoint:
        out.setdefault("AWS_ENDPOINT_URL", endpoint)
    if out.get("AWS_ENDPOINT_URL", "").startswith("http://"):
        out.setdefault("AWS_ALLOW_HTTP", "true")
    region = client.get("region_name") or given.get("region_name")
    if isinstance(region, str) and region:
        out.setdefault("AWS_REGION", region)
    if given.get("anon") is True:
        out.setdefault("AWS_SKIP_SIGNATURE", "true")
    if given.get("requester_pays") is True:
        out.setdefault("AWS_REQUEST_PAYER", "true")
    if client.get("verify") is False:
        out.setdefault("AWS_ALLOW_INVALID_CERTIFICATES", "true")
    style = _dict(_dict(given.get("config_kwargs")).get("s3")).get("addressing_style")
    if style in ("virtual", "path"):
        out.setdefault("AWS_VIRTUAL_HOSTED_STYLE_REQUEST", "true" if style == "virtual" else "false")
    return out


def s3_store_args(url: str, options: Mapping[str, Any] | None, env: Mapping[str, str] | None = None) -> StoreArgs:
    """How to build the obstore store of the ``s3://bucket/prefix`` folder at ``url`` with these
    storage options, in environment ``env`` (default ``os.environ``: object_store reads ``AWS_*``
    variables too, an endpoint among them).

    Raises:
        Unsupported: an option object_store cannot honour (named).
    """
    options, env = dict(options or {}), os.environ if env is None else env
    _check_supported(options)
    parts = urlsplit(url)
    bucket, prefix = parts.netloc, parts.path.strip("/")
    if not bucket:
        raise Unsupported(f"{url} names no bucket")
    strings = object_store_options(options)
    config: dict[str, str] = {}
    client: dict[str, str] = {"pool_max_idle_per_host": str(_pool_size(options))}
    for key, value in strings.items():
        if key in _CLIENT_OPTIONS:
            client[_CLIENT_OPTIONS[key]] = value
        elif key.startswith("AWS_"):
            config[key[len("AWS_") :].lower()] = value
        else:
            raise Unsupported(f"unknown storage option {key!r}: give object_store's AWS_* names or s3fs's")
    endpoint = config.pop("endpoint_url", None) or config.pop("endpoint", None)
    if endpoint:
        config["endpoint"] = endpoint
    else:  # object_store reads these itself; botocore (and so s3fs) reads the first two
        named = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT")
        endpoint = next((env[name] for name in named if env.get(name)), None)
        if endpoint and endpoint.startswith("http://"):
            client.setdefault("allow_http", "true")
    # AWS itself is addressed by virtual host (path style is deprecated there); an endpoint of one's
    # own (127.0.0.1, MinIO...) by path, as s3fs does, unless config_kwargs.s3.addressing_style says.
    # A dotted bucket name breaks the TLS name of its virtual host: path style (botocore's "auto").
    config.setdefault("virtual_hosted_style_request", "false" if endpoint or "." in bucket else "true")
    # object_store ends a whole request at 30 s by default, which a large file on a slow link
    # outlasts (and is then retried for ever): bound each read instead, as botocore does (60 s).
    client.update(_TIMEOUTS)
    timeouts = _dict(options.get("config_kwargs"))
    for name in ("connect_timeout", "read_timeout"):
        seconds = timeouts.get(name)
        if isinstance(seconds, int | float) and not isinstance(seconds, bool) and seconds > 0:
            client[name] = f"{max(1, round(seconds * 1000))}ms"
    profile = options.get("profile")
    if profile is not None and not (isinstance(profile, str) and profile):
        raise Unsupported(f"invalid storage option profile {profile!r}: give the name of an AWS profile")
    return StoreArgs("s3", bucket, prefix, config, client, profile=profile)


def _check_supported(options: dict[str, Any]) -> None:
    for key, value in options.items():
        if key in VENDOR_OPTIONS or key in _HARMLESS or key in _MAPPED or key.isupper():
            continue
        if key == "version_aware" and value is False:
            continue
        if key == "use_ssl" and value is not False:
            continue
        raise Unsupported(f"storage option {key!r}")
    for key in _dict(options.get("client_kwargs")):
        if key not in _MAPPED_CLIENT:
            raise Unsupported(f"storage option client_kwargs.{key}")
    config = _dict(options.get("config_kwargs"))
    for key in config:
        if key not in _MAPPED_CONFIG:
            raise Unsupported(f"storage option config_kwargs.{key}")
    if config.get("signature_version") not in (None, "s3v4"):
        raise Unsupported(f"storage option config_kwargs.signature_version={config['signature_version']!r}")
    addressing = _dict(config.get("s3"))
    if set(addressing) - {"addressing_style"} or addressing.get("addressing_style", "auto") not in (
        "auto",
        "path",
        "virtual",
    ):
        raise Unsupported(f"storage option config_kwargs.s3={addressing!r}")
    if isinstance(options.get("client_kwargs"), dict) and isinstance(options["client_kwargs"].get("verify"), str):
        raise Unsupported("storage option client_kwargs.verify (a CA bundle path)")


def _pool_size(options: dict[str, Any]) -> int:
    given = _dict(options.get("config_kwargs")).get("max_pool_connections")
    if isinstance(given, int) and not isinstance(given, bool) and given > 0:
        return max(given, MAX_CONNECTIONS)
    return MAX_CONNECTIONS


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: str | int | float | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
