"""fsspec storage options as deltalake's (uc_jupyter.storage.urls.deltalake_options): the one
conversion the catalog, the server and RestCatalog share."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from uc_jupyter.storage import urls as storage
from uc_jupyter.storage.config import VENDOR_OPTIONS
from uc_jupyter.storage.urls import deltalake_options

text = st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=12)
fsspec_options = st.fixed_dictionaries(
    {},
    optional={
        "key": text,
        "secret": text,
        "token": text,
        "endpoint_url": st.sampled_from(["http://127.0.0.1:9000", "https://s3.example.test"]),
        "client_kwargs": st.fixed_dictionaries({}, optional={"region_name": text}),
        "anon": st.booleans(),
        "config_kwargs": st.just({"retries": {"max_attempts": 3}}),
        "AWS_REGION": text,
    },
)


@given(fsspec_options)
def test_converting_twice_is_converting_once_and_every_value_is_a_string(options: dict[str, Any]) -> None:
    once = deltalake_options(options)
    assert deltalake_options(once) == once
    assert all(isinstance(v, str) for v in once.values()) and all(k.isupper() for k in once)


def test_s3fs_options_become_object_store_keys() -> None:
    assert deltalake_options(
        {"key": "AK", "secret": "S", "token": "T", "client_kwargs": {"endpoint_url": "http://h:1", "region_name": "r"}}
    ) == {
        "AWS_ACCESS_KEY_ID": "AK",
        "AWS_SECRET_ACCESS_KEY": "S",
        "AWS_SESSION_TOKEN": "T",
        "AWS_ENDPOINT_URL": "http://h:1",
        "AWS_ALLOW_HTTP": "true",
        "AWS_REGION": "r",
    }
    # Given in deltalake's own form, a key wins over its fsspec spelling; https needs no AWS_ALLOW_HTTP.
    assert deltalake_options({"AWS_ACCESS_KEY_ID": "mine", "key": "other", "endpoint_url": "https://e"}) == {
        "AWS_ACCESS_KEY_ID": "mine",
        "AWS_ENDPOINT_URL": "https://e",
    }
    assert deltalake_options(None) == {} and deltalake_options({"anon": True}) == {"AWS_SKIP_SIGNATURE": "true"}


@given(fsspec_options, st.fixed_dictionaries({}, optional=dict.fromkeys(sorted(VENDOR_OPTIONS), text)))
def test_the_vendors_options_reach_neither_fsspec_nor_deltalake(
    options: dict[str, Any], vendor: dict[str, Any]
) -> None:
    given = {**options, **vendor}
    assert storage.fsspec_options(given) == options
    assert deltalake_options(given) == deltalake_options(options)
