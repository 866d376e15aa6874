"""moto in server mode with IAM enforcement: an S3 + IAM + STS endpoint on 127.0.0.1 that checks keys
and role policies, for tests of vended credentials (docs/design/unity-catalog-server.md section 6.1).

:func:`moto_iam` starts ``moto_server`` as a real process on a free port with enforcement off, makes
the buckets asked for and an IAM user (``uc-server``) allowed everything, whose keys a catalog
server's storage credential holds, then turns enforcement on (``POST /moto-api/reset-auth`` ``0``):
from then on every request must be signed by a known key and allowed by a policy of its user or
assumed role. What moto does not check (session policies, expiry, ``s3:prefix`` conditions) is in
the design note and proven in tests/ucserver/test_routes_vending.py. moto 5.2.6 checks each S3 call's API name
(``s3:HeadObject``) instead of its IAM action (``s3:GetObject``) and so refuses correctly scoped keys: the
dev extra keeps moto below it (constraints.txt pins the version the suite passed with).

Example:
    >>> with moto_iam(["lake"]) as moto:                                   # doctest: +SKIP
    ...     moto.admin_client("s3").put_object(Bucket="lake", Key="a/x", Body=b"1")
    ...     moto.client("s3", moto.admin_keys).get_object(Bucket="lake", Key="a/x")["Body"].read()
    b'1'
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from uc_jupyter.processes import free_port
from uc_jupyter.testing.local_service import serving

__all__ = ["MotoIam", "moto_iam"]

REGION = "us-east-1"
_READY_S = 60.0


@dataclass(frozen=True)
class MotoIam:
    """A running enforcing moto: its ``endpoint``, and the keys of the ``uc-server`` IAM user."""

    endpoint: str
    admin_keys: tuple[str, str]

    def client(self, service: str, keys: tuple[str, ...]) -> Any:
        """A boto3 client of ``service`` signing with ``keys`` (access key, secret[, session token])."""
        import boto3
        from botocore.config import Config

        return boto3.session.Session().client(
            service,
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id=keys[0],
            aws_secret_access_key=keys[1],
            aws_session_token=keys[2] if len(keys) > 2 else None,
            config=Config(retries={"max_attempts": 1}),  # a denial is an answer, not a fault to retry
        )

    def admin_client(self, service: str) -> Any:
        return self.client(service, self.admin_keys)

    def options(self, **more: Any) -> dict[str, Any]:
        """The storage options of a credential holding the admin keys (``more``: e.g. ``vending``)."""
        key, secret = self.admin_keys
        return {
            "key": key,
            "secret": secret,
            "endpoint_url": self.endpoint,
            "client_kwargs": {"region_name": REGION},
            **more,
        }


def _moto_server() -> list[str]:
    found = Path(sys.executable).with_name("moto_server")
    if found.is_file():
        return [str(found)]
    on_path = shutil.which("moto_server")
    if on_path is None:
        raise RuntimeError("moto_server is not installed: pip install 'moto[server]' (a dev dependency)")
    return [on_path]


@contextlib.contextmanager
def moto_iam(buckets: Sequence[str] = ()) -> Iterator[MotoIam]:
    """A moto server with ``buckets`` and the ``uc-server`` user, enforcing IAM; stopped on exit."""
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    argv = [*_moto_server(), "-H", "127.0.0.1", "-p", str(port)]
    with serving("moto_server", argv, f"{endpoint}/moto-api/", ready_seconds=_READY_S):
        yield _bootstrap(endpoint, buckets)


def _bootstrap(endpoint: str, buckets: Sequence[str]) -> MotoIam:
    """Buckets and the ``uc-server`` user made while enforcement is off, then enforcement on."""
    bootstrap = MotoIam(endpoint, ("bootstrap", "bootstrap"))  # any key: enforcement is still off
    iam = bootstrap.client("iam", bootstrap.admin_keys)
    iam.create_user(UserName="uc-server")
    everything = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
    iam.put_user_policy(UserName="uc-server", PolicyName="admin", PolicyDocument=json.dumps(everything))
    made = iam.create_access_key(UserName="uc-server")["AccessKey"]
    s3 = bootstrap.client("s3", bootstrap.admin_keys)
    for bucket in buckets:
        s3.create_bucket(Bucket=bucket)
    # text/plain: a form content type (urllib's default) would leave moto's request.data empty.
    request = urllib.request.Request(
        f"{endpoint}/moto-api/reset-auth", data=b"0", method="POST", headers={"Content-Type": "text/plain"}
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        answer.read()
    return MotoIam(endpoint, (made["AccessKeyId"], made["SecretAccessKey"]))
