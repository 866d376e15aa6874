"""Every AWS credential source, each through object_store, against an enforcing moto_server (it checks
SigV4 signatures and IAM policies, :mod:`uc_jupyter.testing.moto_iam`): keys in the options, AWS_*
variables, profiles from the shared files, session tokens from STS, a container role served on
127.0.0.1, and wrong keys refused with one line naming the volume."""

from __future__ import annotations

import concurrent.futures as cf
import json
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from uc_jupyter.storage.downloads import Job
from uc_jupyter.storage.errors import VolumeReadError
from uc_jupyter.storage.reads import VolumeStorage, open_storage
from uc_jupyter.storage.retry import RetryPolicy
from uc_jupyter.testing.moto_iam import REGION, MotoIam, moto_iam

pytestmark = pytest.mark.in_a_fork  # object_store requests: keep the test process clean (conftest)

BUCKET = "creds"
FILES = {"a.bin": b"first file", "sub/b.bin": b"second file"}
WHERE = "/Volumes/main/ml/creds"
ONCE = RetryPolicy(attempts=1)
# Variables of the AWS credential chain; each test sets only its own.
_CHAIN = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_ARN",
    "AWS_METADATA_ENDPOINT",
    "AWS_ENDPOINT_URL",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
)


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoIam]:
    with moto_iam([BUCKET]) as running:
        s3 = running.admin_client("s3")
        for name, body in FILES.items():
            s3.put_object(Bucket=BUCKET, Key=f"data/{name}", Body=body)
        s3.put_object(Bucket=BUCKET, Key="outside.bin", Body=b"not the volume's")
        yield running


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No credential of the machine's own leaks in: every chain variable unset, HOME empty."""
    for name in _CHAIN:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def endpoint_only(moto: MotoIam) -> dict[str, Any]:
    return {"endpoint_url": moto.endpoint, "client_kwargs": {"region_name": REGION}}


def read_all(storage: VolumeStorage, tmp_path: Path) -> dict[str, bytes]:
    """List the folder and download every file; {relative path: content}."""
    listed = sorted(relative for page in storage.pages(recursive=True) for relative, _, _ in page.files)
    assert listed == sorted(FILES)
    downloads = storage.downloads(ONCE, on_retry=lambda: None, threads=4)
    try:
        jobs = [
            Job(f"{BUCKET}/data/{name}", str(tmp_path / f"{i}.out"), f"{WHERE}/{name}", len(FILES[name]))
            for i, name in enumerate(listed)
        ]
        for future in downloads.start(jobs):
            future.result(60)
    finally:
        downloads.close()
    return {name: Path(job.local).read_bytes() for name, job in zip(listed, jobs, strict=True)}


def test_keys_in_the_options_sign_alone_whatever_the_environment_holds(
    moto: MotoIam, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A session token of someone else's in the environment must not join the volume's own keys.
    monkeypatch.setenv("AWS_SESSION_TOKEN", "a-token-of-another-identity")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDNOTTHEVOLUMES")
    storage = open_storage(f"s3://{BUCKET}/data", moto.options(), where=WHERE)
    assert type(storage).__name__ == "ObjectStorage"
    assert read_all(storage, tmp_path) == FILES


def test_upper_case_keys_as_a_catalog_vends_them(moto: MotoIam, tmp_path: Path) -> None:
    key, secret = moto.admin_keys
    options = {"AWS_ACCESS_KEY_ID": key, "AWS_SECRET_ACCESS_KEY": secret, "AWS_ENDPOINT_URL": moto.endpoint}
    assert read_all(open_storage(f"s3://{BUCKET}/data", options, where=WHERE), tmp_path) == FILES


def test_keys_from_aws_variables(moto: MotoIam, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key, secret = moto.admin_keys
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    assert read_all(open_storage(f"s3://{BUCKET}/data", endpoint_only(moto), where=WHERE), tmp_path) == FILES


def test_the_endpoint_and_keys_all_from_aws_variables(
    moto: MotoIam, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key, secret = moto.admin_keys
    for name, value in (("AWS_ACCESS_KEY_ID", key), ("AWS_SECRET_ACCESS_KEY", secret), ("AWS_REGION", REGION)):
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto.endpoint)
    monkeypatch.setenv("AWS_ALLOW_HTTP", "true")
    assert read_all(open_storage(f"s3://{BUCKET}/data", {}, where=WHERE), tmp_path) == FILES


def write_profiles(folder: Path, moto: MotoIam, name: str) -> tuple[Path, Path]:
    key, secret = moto.admin_keys
    folder.mkdir(parents=True, exist_ok=True)
    credentials, config = folder / "credentials", folder / "config"
    credentials.write_text(f"[{name}]\naws_access_key_id = {key}\naws_secret_access_key = {secret}\n")
    section = "default" if name == "default" else f"profile {name}"
    config.write_text(f"[{section}]\nregion = {REGION}\n")
    return credentials, config


@pytest.mark.parametrize("how", ["AWS_PROFILE", "option", "default-profile"])
def test_a_profile_from_the_shared_files(
    moto: MotoIam, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    name = "default" if how == "default-profile" else "training"
    credentials, config = write_profiles(tmp_path / "aws", moto, name)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    options = endpoint_only(moto)
    if how == "AWS_PROFILE":
        monkeypatch.setenv("AWS_PROFILE", name)
    elif how == "option":
        options["profile"] = name
    assert read_all(open_storage(f"s3://{BUCKET}/data", options, where=WHERE), tmp_path) == FILES


def test_a_profile_that_does_not_exist_is_one_line_naming_it(moto: MotoIam, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^the AWS profile 'nobody' does not exist: check AWS_CONFIG_FILE"):
        open_storage(f"s3://{BUCKET}/data", {**endpoint_only(moto), "profile": "nobody"}, where=WHERE)


def assumed_keys(moto: MotoIam) -> tuple[str, str, str]:
    """Temporary keys (with a session token) of a role allowed to read the bucket, from moto's STS."""
    iam = moto.admin_client("iam")
    anyone = {"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}
    trust = {"Version": "2012-10-17", "Statement": [anyone]}
    try:
        role = iam.create_role(RoleName="reader", AssumeRolePolicyDocument=json.dumps(trust))["Role"]
    except iam.exceptions.EntityAlreadyExistsException:
        role = iam.get_role(RoleName="reader")["Role"]
    reads = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}
    iam.put_role_policy(RoleName="reader", PolicyName="reads", PolicyDocument=json.dumps(reads))
    got = moto.admin_client("sts").assume_role(RoleArn=role["Arn"], RoleSessionName="test")["Credentials"]
    return got["AccessKeyId"], got["SecretAccessKey"], got["SessionToken"]


def test_a_session_token_from_sts(moto: MotoIam, tmp_path: Path) -> None:
    key, secret, token = assumed_keys(moto)
    options = {**endpoint_only(moto), "key": key, "secret": secret, "token": token}
    assert read_all(open_storage(f"s3://{BUCKET}/data", options, where=WHERE), tmp_path) == FILES
    # The same keys without their token are refused: moto checks the session.
    with pytest.raises(PermissionError, match=f"^cannot list {WHERE}: the storage refused the credentials"):
        list(open_storage(f"s3://{BUCKET}/data", {**options, "token": None}, where=WHERE).pages(recursive=True))


class ContainerCredentials(BaseHTTPRequestHandler):
    """What ECS/EKS's credentials endpoint answers: the role's keys as JSON."""

    keys: ClassVar[tuple[str, str, str]] = ("", "", "")
    asked: ClassVar[list[str]] = []
    authorizations: ClassVar[list[str | None]] = []

    def do_GET(self) -> None:
        type(self).asked.append(self.path)
        type(self).authorizations.append(self.headers.get("Authorization"))
        key, secret, token = self.keys
        expires = (datetime.now(timezone.utc) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = json.dumps({"AccessKeyId": key, "SecretAccessKey": secret, "Token": token, "Expiration": expires})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: Any) -> None:
        pass


@pytest.mark.parametrize("token", ["file", "variable", None])
def test_a_container_role_from_a_loopback_credentials_endpoint(
    moto: MotoIam, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, token: str | None
) -> None:
    """EKS Pod Identity (a token file: object_store's own provider) and ECS-style full URIs (a token
    in a variable, or none: boto3's container provider, as object_store would fall to IMDS)."""
    ContainerCredentials.keys = assumed_keys(moto)
    ContainerCredentials.asked = []
    ContainerCredentials.authorizations = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), ContainerCredentials)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        monkeypatch.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", f"http://127.0.0.1:{server.server_port}/v2/role")
        if token == "file":
            (tmp_path / "token").write_text("pod-token")
            monkeypatch.setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", str(tmp_path / "token"))
        elif token == "variable":
            monkeypatch.setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", "pod-token")
        assert read_all(open_storage(f"s3://{BUCKET}/data", endpoint_only(moto), where=WHERE), tmp_path) == FILES
        assert "/v2/role" in ContainerCredentials.asked
        assert set(ContainerCredentials.authorizations) == ({None} if token is None else {"pod-token"})
    finally:
        server.shutdown()
        server.server_close()


def test_wrong_keys_are_one_line_naming_the_volume_and_what_to_do(moto: MotoIam, tmp_path: Path) -> None:
    options = {**endpoint_only(moto), "key": "AKIDWRONG", "secret": "wrong"}
    storage = open_storage(f"s3://{BUCKET}/data", options, where=WHERE)
    with pytest.raises(PermissionError) as listing:
        list(storage.pages(recursive=True))
    assert str(listing.value).startswith(f"cannot list {WHERE}: the storage refused the credentials (403")
    assert "check" in str(listing.value) and "\n" not in str(listing.value)
    downloads = storage.downloads(RetryPolicy(attempts=3, base_seconds=0.001), on_retry=lambda: None, threads=1)
    [future] = downloads.start([Job(f"{BUCKET}/data/a.bin", str(tmp_path / "a"), f"{WHERE}/a.bin", 10)])
    with pytest.raises(VolumeReadError) as read:
        future.result(60)
    downloads.close()
    message = str(read.value)
    assert message.startswith(f"cannot read {WHERE}/a.bin: PermissionError: 403")  # refused at once, not retried
    assert "check the volume's credentials" in message and "\n" not in message
    assert not (tmp_path / "a").exists()


def test_a_download_outside_the_folder_is_refused_however_it_is_spelled(moto: MotoIam, tmp_path: Path) -> None:
    """The store is rooted at the volume's folder: no spelling of a path reaches the bucket's other keys."""
    downloads = open_storage(f"s3://{BUCKET}/data", moto.options(), where=WHERE).downloads(
        ONCE, on_retry=lambda: None, threads=2
    )
    spellings = [
        f"{BUCKET}/outside.bin",
        f"{BUCKET}/data/../outside.bin",
        f"{BUCKET}/data/./../outside.bin",
        f"{BUCKET}/data//../outside.bin",
        f"{BUCKET}/datax/../outside.bin",
        "other/data/a.bin",
        f"{BUCKET}/data/%2E%2E/outside.bin",
    ]
    # The outside object's true size: a spelling that reached it would download it whole, and fail this test.
    jobs = [
        Job(path, str(tmp_path / f"{i}"), f"{WHERE}/x{i}", len(b"not the volume's")) for i, path in enumerate(spellings)
    ]
    futures = downloads.start(jobs)
    for i, future in enumerate(futures):
        with pytest.raises(VolumeReadError, match=rf"^cannot read {WHERE}/x{i}: "):
            future.result(60)
        assert not (tmp_path / f"{i}").exists()
    downloads.close()


class PublicBucket(BaseHTTPRequestHandler):
    """A public bucket's listing of one object; it keeps each request's Authorization header."""

    authorizations: ClassVar[list[str | None]] = []

    def do_GET(self) -> None:
        type(self).authorizations.append(self.headers.get("Authorization"))
        body = (
            b'<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>public</Name><KeyCount>1</KeyCount>'
            b"<IsTruncated>false</IsTruncated><Contents><Key>data/a.bin</Key><Size>3</Size>"
            b'<LastModified>2026-01-01T00:00:00.000Z</LastModified><ETag>"e"</ETag></Contents></ListBucketResult>'
        )
        self.send_response(200)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_anonymous_reads_send_no_signature(tmp_path: Path) -> None:
    PublicBucket.authorizations = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), PublicBucket)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        options = {"anon": True, "endpoint_url": f"http://127.0.0.1:{server.server_port}"}
        pages = list(open_storage("s3://public/data", options, where=WHERE).pages(recursive=True))
    finally:
        server.shutdown()
        server.server_close()
    assert [page.files for page in pages] == [[("a.bin", 3, '"e"')]]
    assert PublicBucket.authorizations == [None]


def test_futures_of_one_batch_all_end(moto: MotoIam, tmp_path: Path) -> None:
    downloads = open_storage(f"s3://{BUCKET}/data", moto.options(), where=WHERE).downloads(
        ONCE, on_retry=lambda: None, threads=8
    )
    jobs = [Job(f"{BUCKET}/data/a.bin", str(tmp_path / f"{i}"), f"{WHERE}/a.bin", 10) for i in range(20)]
    done, _ = cf.wait(downloads.start(jobs), timeout=60)
    downloads.close()
    assert len(done) == 20 and all(f.exception() is None for f in done)
    assert {(tmp_path / f"{i}").read_bytes() for i in range(20)} == {FILES["a.bin"]}
    assert {(tmp_path / f"{i}").stat().st_mode & 0o777 for i in range(20)} == {0o600}


def test_a_dataset_over_wrong_keys_fails_at_once_in_one_line(moto: MotoIam, tmp_path: Path) -> None:
    from uc_jupyter.catalog.embedded.local import LocalCatalog
    from uc_jupyter.data import UCVolumeDataset
    from uc_jupyter.testing.catalogs import external_location

    catalog = LocalCatalog(tmp_path / "home")
    catalog.create_catalog("main")
    catalog.create_schema("main.ml")
    external_location(catalog, f"s3://{BUCKET}", {**endpoint_only(moto), "key": "AKIDWRONG", "secret": "wrong"})
    catalog.create_volume("main.ml.creds", f"s3://{BUCKET}/data")
    with pytest.raises(PermissionError) as refused:
        UCVolumeDataset(WHERE, catalog=catalog, cache_dir=tmp_path / "cache")
    message = str(refused.value)
    assert message.startswith(f"cannot list {WHERE}: the storage refused the credentials (403")
    assert message.endswith("check the volume's credentials and their grants") and "\n" not in message


class InstanceMetadata(BaseHTTPRequestHandler):
    """EC2's instance metadata service (IMDSv2): a session token, the role's name, its keys."""

    keys: ClassVar[tuple[str, str, str]] = ("", "", "")
    asked: ClassVar[list[str]] = []

    def do_PUT(self) -> None:  # http.server's name
        type(self).asked.append(f"PUT {self.path}")
        self._answer("imds-session-token", "text/plain")

    def do_GET(self) -> None:  # http.server's name
        type(self).asked.append(f"GET {self.path}")
        if self.headers.get("X-aws-ec2-metadata-token") != "imds-session-token":
            self.send_response(401)
            self.end_headers()
            return
        if self.path.rstrip("/") == "/latest/meta-data/iam/security-credentials":
            self._answer("instance-role", "text/plain")
            return
        key, secret, token = self.keys
        expires = (datetime.now(timezone.utc) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        keys = {"Code": "Success", "AccessKeyId": key, "SecretAccessKey": secret, "Token": token, "Expiration": expires}
        self._answer(json.dumps(keys), "application/json")

    def _answer(self, text: str, kind: str) -> None:
        body = text.encode()
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_an_instance_role_from_the_metadata_service(
    moto: MotoIam, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing in the options, the environment or the shared files: object_store asks the instance
    metadata service (here on 127.0.0.1, through AWS_METADATA_ENDPOINT) for the role's keys."""
    InstanceMetadata.keys = assumed_keys(moto)
    InstanceMetadata.asked = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), InstanceMetadata)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("AWS_METADATA_ENDPOINT", f"http://127.0.0.1:{server.server_port}")
        assert read_all(open_storage(f"s3://{BUCKET}/data", endpoint_only(moto), where=WHERE), tmp_path) == FILES
    finally:
        server.shutdown()
        server.server_close()
    assert InstanceMetadata.asked[0] == "PUT /latest/api/token"
    assert "GET /latest/meta-data/iam/security-credentials/instance-role" in InstanceMetadata.asked
