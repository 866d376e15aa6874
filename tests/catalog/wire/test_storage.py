"""The storage model on the wire (uc_jupyter.catalog.wire.storage): option names shown and values
never, write-only options taken from a create request and checked, operations known or refused,
temporary credentials as UC spells them."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

from uc_jupyter.catalog.model import CredentialInfo, ExternalLocationInfo
from uc_jupyter.catalog.wire.errors import WireError
from uc_jupyter.catalog.wire.storage import (
    OPTIONS_FIELD,
    PATH_OPERATIONS,
    TEMPORARY_PATH,
    TEMPORARY_VOLUME,
    VOLUME_OPERATIONS,
    AwsSession,
    Vended,
    credential_json,
    credential_options,
    location_json,
    operation,
    temporary_credentials_json,
)

AT = datetime(2026, 1, 1, tzinfo=timezone.utc)


def test_a_credential_shows_its_option_names_and_never_a_value() -> None:
    info = CredentialInfo("lake", "admin", AT, ("secret", "key", "endpoint_url"), comment="the lake")
    body = credential_json(info)
    assert body["uc_jupyter_option_names"] == ["endpoint_url", "key", "secret"]
    assert body["purpose"] == "STORAGE" and body["full_name"] == "lake" and body["comment"] == "the lake"
    assert "aws_iam_role" not in body  # no role_arn option: no role shown
    assert (body["created_by"], body["updated_by"], body["updated_at"]) == ("admin", "admin", body["created_at"])
    assert credential_json(info)["id"] == body["id"]  # derived from the name and time: stable


def test_a_location_names_its_credentials_id_only_when_the_caller_may_see_it() -> None:
    credential = CredentialInfo("lake", "admin", AT, (), id="cred-1")
    location = ExternalLocationInfo("raw", "s3://lake/raw", "lake", "admin", AT, id="loc-1")
    assert location_json(location, credential)["credential_id"] == "cred-1"
    hidden = location_json(location)
    assert "credential_id" not in hidden and hidden["credential_name"] == "lake" and hidden["id"] == "loc-1"


@pytest.mark.parametrize(
    ("body", "options"),
    [
        ({"name": "c"}, {}),
        ({"name": "c", OPTIONS_FIELD: {"key": "k", "secret": "s"}}, {"key": "k", "secret": "s"}),
        (
            {"name": "c", "aws_iam_role": {"role_arn": "arn:r"}, OPTIONS_FIELD: {"role_arn": "arn:r"}},
            {"role_arn": "arn:r"},
        ),
    ],
)
def test_a_create_request_gives_its_options(body: dict[str, Any], options: dict[str, Any]) -> None:
    assert credential_options(body) == options


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"name": "c", "purpose": "SERVICE"}, r"^purpose 'SERVICE' is not supported: this server keeps STORAGE"),
        ({"name": "c", "aws_iam_role": {"role_arn": ""}}, r"^aws_iam_role must be an object with one field, role_arn"),
        ({"name": "c", "aws_iam_role": {"role_arn": "a", "external_id": "x"}}, r"^aws_iam_role must be an object"),
        (
            {"name": "c", "aws_iam_role": {"role_arn": "arn:a"}, OPTIONS_FIELD: {"role_arn": "arn:b"}},
            rf"^aws_iam_role.role_arn and {OPTIONS_FIELD}.role_arn differ; give one$",
        ),
    ],
)
def test_a_create_request_that_contradicts_itself_is_refused(body: dict[str, Any], error: str) -> None:
    with pytest.raises(WireError, match=error) as raised:
        credential_options(body)
    assert raised.value.error_code == "INVALID_ARGUMENT"


def test_operations_are_known_or_refused_naming_the_known_ones() -> None:
    assert operation({"operation": "PATH_CREATE_TABLE"}, PATH_OPERATIONS, TEMPORARY_PATH) == "PATH_CREATE_TABLE"
    with pytest.raises(WireError, match=r"^operation 'UNKNOWN_VOLUME_OPERATION' of GenerateTemporaryVolumeCredential"):
        operation({"operation": "UNKNOWN_VOLUME_OPERATION"}, VOLUME_OPERATIONS, TEMPORARY_VOLUME)
    assert VOLUME_OPERATIONS == {"READ_VOLUME": False, "WRITE_VOLUME": True}  # which ones write


def test_temporary_credentials_carry_keys_expiry_in_milliseconds_and_non_secret_options() -> None:
    vended = Vended("s3://lake/raw", 1767225600.25, AwsSession("AK", "SK", "TOK"), {"endpoint_url": "http://x"})
    assert temporary_credentials_json(vended) == {
        "url": "s3://lake/raw",
        "expiration_time": 1767225600250,
        "aws_temp_credentials": {"access_key_id": "AK", "secret_access_key": "SK", "session_token": "TOK"},
        OPTIONS_FIELD: {"endpoint_url": "http://x"},
    }
    static = temporary_credentials_json(Vended("s3://lake/raw", 1.0, AwsSession("AK", "SK")))
    assert static["aws_temp_credentials"] == {"access_key_id": "AK", "secret_access_key": "SK"}


def test_keys_stay_out_of_reprs() -> None:
    shown = repr(AwsSession("AK", "the-secret", "the-token"))
    assert "the-secret" not in shown and "the-token" not in shown and "AK" in shown
