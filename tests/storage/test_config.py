"""Storage options as object_store's configuration (pure): the one mapping deltalake shares, AWS
addressing, what falls back to fsspec and why, and keys that never show in a repr."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from uc_jupyter.storage.config import MAX_CONNECTIONS, Unsupported, object_store_options
from uc_jupyter.storage.credentials import source_of
from uc_jupyter.storage.reads import open_storage
from uc_jupyter.storage.stores import store_args
from uc_jupyter.storage.urls import deltalake_options

text = st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=12)
options_strategy = st.fixed_dictionaries(
    {},
    optional={
        "key": text,
        "secret": text,
        "token": text,
        "endpoint_url": st.sampled_from(["http://127.0.0.1:9000", "https://s3.example.test"]),
        "client_kwargs": st.fixed_dictionaries({}, optional={"region_name": text, "verify": st.booleans()}),
        "config_kwargs": st.fixed_dictionaries(
            {}, optional={"s3": st.sampled_from([{"addressing_style": "virtual"}, {"addressing_style": "path"}])}
        ),
        "anon": st.booleans(),
        "requester_pays": st.booleans(),
        "AWS_REGION": text,
    },
)


@given(options_strategy)
def test_the_mapping_is_deltalakes_and_converting_twice_is_converting_once(options: dict[str, Any]) -> None:
    once = object_store_options(options)
    assert deltalake_options(options) == once
    assert object_store_options(once) == once
    assert all(isinstance(v, str) for v in once.values()) and all(k.startswith("AWS_") for k in once)


@given(options_strategy)
def test_every_mapped_option_builds_a_store_config_and_no_repr_shows_a_key(options: dict[str, Any]) -> None:
    args = store_args("s3://lake/some/prefix", options, env={})
    assert (args.bucket, args.prefix) == ("lake", "some/prefix")
    assert int(args.client_options["pool_max_idle_per_host"]) >= MAX_CONNECTIONS
    sentinels = {name: f"SENTINEL-{name}-0123456789" for name in ("key", "secret", "token") if name in options}
    shown = repr(store_args("s3://lake/some/prefix", {**options, **sentinels}, env={}))
    assert not any(value in shown for value in sentinels.values())


def test_aws_itself_is_addressed_by_virtual_host_and_an_own_endpoint_by_path() -> None:
    assert store_args("s3://b/p", {}, env={}).config["virtual_hosted_style_request"] == "true"
    own = store_args("s3://b/p", {"endpoint_url": "http://127.0.0.1:9000"}, env={})
    assert (own.config["virtual_hosted_style_request"], own.client_options["allow_http"]) == ("false", "true")
    from_env = store_args("s3://b/p", {}, env={"AWS_ENDPOINT_URL": "http://127.0.0.1:9000"})
    assert (from_env.config["virtual_hosted_style_request"], from_env.client_options["allow_http"]) == ("false", "true")
    virtual = {"endpoint_url": "https://s3.example.test", "config_kwargs": {"s3": {"addressing_style": "virtual"}}}
    assert store_args("s3://b/p", virtual, env={}).config["virtual_hosted_style_request"] == "true"
    regional = store_args("s3a://b/p", {"client_kwargs": {"region_name": "eu-west-1"}}, env={})
    assert regional.config["region"] == "eu-west-1"
    assert store_args("s3://my.dotted.bucket/p", {}, env={}).config["virtual_hosted_style_request"] == "false"


def test_requester_pays_anonymous_and_timeouts_are_mapped() -> None:
    args = store_args(
        "s3://b/p",
        {"requester_pays": True, "anon": True, "config_kwargs": {"connect_timeout": 2, "read_timeout": 30.5}},
        env={},
    )
    assert (args.config["request_payer"], args.config["skip_signature"]) == ("true", "true")
    assert (args.client_options["connect_timeout"], args.client_options["read_timeout"]) == ("2000ms", "30500ms")
    assert args.client_options["timeout"] == "30min"  # not object_store's 30 s per request: large files outlast it


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"s3_additional_kwargs": {"SSECustomerKey": "k"}}, "storage option 's3_additional_kwargs'"),
        ({"version_aware": True}, "storage option 'version_aware'"),
        ({"client_kwargs": {"proxies": {}}}, "storage option client_kwargs.proxies"),
        ({"config_kwargs": {"signature_version": "s3"}}, "signature_version='s3'"),
        ({"client_kwargs": {"verify": "/etc/ca.pem"}}, "client_kwargs.verify"),
    ],
)
def test_options_object_store_cannot_honour_are_named(options: dict[str, Any], named: str) -> None:
    with pytest.raises(Unsupported, match=named):
        store_args("s3://b/p", options, env={})


def test_an_s3_volume_with_such_options_is_read_through_fsspec_with_one_notice(
    capsys: pytest.CaptureFixture[str],
) -> None:
    storage = open_storage("s3://b/p", {"version_aware": True}, where="/Volumes/c/s/fallback")
    assert type(storage).__name__ == "FsspecStorage"
    line = capsys.readouterr().err.strip()
    assert line == (
        "/Volumes/c/s/fallback is read through fsspec, not object_store (storage option 'version_aware'): "
        "remove that option to read faster"
    )


def test_the_credential_source_follows_botocores_order() -> None:
    keys = {"access_key_id": "AK", "secret_access_key": "S"}
    everything = {"AWS_PROFILE": "p", "AWS_ACCESS_KEY_ID": "E", "AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://x"}
    assert source_of(keys, everything) == "options"
    assert source_of({"skip_signature": "true"}, everything) == "anonymous"
    assert source_of({}, everything) == "profile"
    assert source_of({}, {}, profile="p") == "profile"
    assert source_of({}, {"AWS_ACCESS_KEY_ID": "E"}) == "environment"
    assert source_of({}, {"AWS_WEB_IDENTITY_TOKEN_FILE": "/t", "AWS_ROLE_ARN": "arn"}) == "environment"
    assert source_of({}, {"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "/v2/x"}) == "environment"
    full = {"AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://127.0.0.1:1/x"}
    assert source_of({}, {**full, "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": "/t"}) == "environment"
    assert source_of({}, full) == "container"
