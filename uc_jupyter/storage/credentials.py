"""Where an S3 volume's credentials come from, every source on object_store's fast path.

In the order botocore would take them (so a volume reads with the keys s3fs would have used):

1. keys in the volume's options (s3fs's ``key``/``secret``/``token`` or ``AWS_*``, as a catalog
   vends them): signed with exactly those; the environment's ``AWS_SESSION_TOKEN`` never joins
   keys it does not belong to.
2. ``anon=True``: nothing is signed.
3. a profile (the ``profile`` option, or ``AWS_PROFILE``): boto3 resolves it (static keys, assumed
   roles, SSO, ``credential_process``) and object_store asks it again before the keys it gave expire.
4. ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` (``AWS_SESSION_TOKEN``) in the environment,
   web identity (``AWS_WEB_IDENTITY_TOKEN_FILE`` + ``AWS_ROLE_ARN``), container roles
   (ECS's ``AWS_CONTAINER_CREDENTIALS_RELATIVE_URI``; EKS Pod Identity's ``_FULL_URI`` with
   ``AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE``): object_store's own chain.
5. a container's ``AWS_CONTAINER_CREDENTIALS_FULL_URI`` without a token file (plain, or with
   ``AWS_CONTAINER_AUTHORIZATION_TOKEN``): object_store falls to the instance role there, botocore
   does not, so boto3 resolves it.
6. a shared credentials or config file (``~/.aws/credentials``, ``AWS_SHARED_CREDENTIALS_FILE``,
   ``AWS_CONFIG_FILE``): its default profile, through boto3.
7. otherwise the instance's role (IMDSv2), object_store's chain again.

Example:
    >>> source_of({"access_key_id": "AK", "secret_access_key": "S"}, {"AWS_PROFILE": "dev"})
    'options'
    >>> source_of({}, {"AWS_PROFILE": "dev"}), source_of({}, {"AWS_ACCESS_KEY_ID": "AK"}), source_of({}, {})
    ('profile', 'environment', 'instance')
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, Literal

__all__ = ["Source", "provider_for", "source_of"]

Source = Literal["options", "anonymous", "profile", "environment", "container", "shared-files", "instance"]

# Renewed this long before boto3's refreshable credentials would be: object_store asks again when
# the answer's expires_at comes.
_PROFILE_TTL = timedelta(minutes=10)
_ENVIRONMENT_CHAIN = ("AWS_ACCESS_KEY_ID", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")


def source_of(config: Mapping[str, str], env: Mapping[str, str], profile: str | None = None) -> Source:
    """Which source signs for a volume whose store ``config`` is this (object_store's names,
    :attr:`~uc_jupyter.storage.config.StoreArgs.config`) in environment ``env``."""
    if config.get("access_key_id") and config.get("secret_access_key"):
        return "options"
    if config.get("skip_signature", "").lower() == "true":
        return "anonymous"
    if profile or env.get("AWS_PROFILE"):
        return "profile"
    if any(env.get(name) for name in _ENVIRONMENT_CHAIN):
        return "environment"
    if env.get("AWS_CONTAINER_CREDENTIALS_FULL_URI"):
        return "environment" if env.get("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE") else "container"
    if _shared_files(env):
        return "shared-files"
    return "instance"


def provider_for(source: Source, config: Mapping[str, str], profile: str | None) -> tuple[Any, str | None]:
    """The credential provider object_store calls for ``source`` (None: object_store's own chain
    or the keys in its config), and the region a profile names (None if it names none).

    Raises:
        ValueError: the profile does not exist or yields no credentials (one line naming it).
    """
    if source == "options":
        return _Static(config), None
    if source not in ("profile", "container", "shared-files"):
        return None, None
    import boto3
    import botocore.exceptions
    from obstore.auth.boto3 import Boto3CredentialProvider

    name = profile or (os.environ.get("AWS_PROFILE") if source == "profile" else None)
    try:
        session = boto3.Session(profile_name=name)
        return Boto3CredentialProvider(session, ttl=_PROFILE_TTL), session.region_name
    except botocore.exceptions.ProfileNotFound:
        raise ValueError(
            f"the AWS profile {name!r} does not exist: check AWS_CONFIG_FILE and its [profile] sections"
        ) from None
    except (ValueError, botocore.exceptions.BotoCoreError) as exc:
        shown = f"profile {name!r}" if name else "default profile"
        raise ValueError(f"the AWS {shown} yields no credentials ({exc}): run `aws configure` or fix it") from None


class _Static:
    """The volume's own keys, never mixed with the environment's (object_store reads
    ``AWS_SESSION_TOKEN`` from it whenever the config lacks one). No expiry: asked once."""

    def __init__(self, config: Mapping[str, str]) -> None:
        self._credential = {
            "access_key_id": config["access_key_id"],
            "secret_access_key": config["secret_access_key"],
            "token": config.get("session_token") or None,
            "expires_at": None,
        }

    def __call__(self) -> dict[str, Any]:
        return self._credential

    def __repr__(self) -> str:  # never the keys
        return "<the volume's own keys>"


def _shared_files(env: Mapping[str, str]) -> bool:
    home = os.path.expanduser("~")
    paths = (
        env.get("AWS_SHARED_CREDENTIALS_FILE") or os.path.join(home, ".aws", "credentials"),
        env.get("AWS_CONFIG_FILE") or os.path.join(home, ".aws", "config"),
    )
    return any(os.path.isfile(path) for path in paths)
