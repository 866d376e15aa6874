"""gs:// and Azure storage options as obstore's GCSStore / AzureStore arguments (cloud.py), reached
through the one mapping (config.store_args), and the stores they build, listed and read against
fake-gcs-server and Azurite on 127.0.0.1."""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import obstore
import pytest
from hypothesis import given
from hypothesis import strategies as hs
from obstore.store import AzureStore, GCSStore

from uc_jupyter.storage.cloud import azure_store_args, gcs_store_args, parse_connection_string
from uc_jupyter.storage.config import StoreArgs, Unsupported
from uc_jupyter.storage.stores import store_args
from uc_jupyter.testing.azurite import ACCOUNT, Azurite, azurite
from uc_jupyter.testing.gcs_emulator import GcsEmulator, gcs_emulator

# --- gs:// ------------------------------------------------------------------------------------------


def test_gcsfs_anon_and_endpoint_become_skip_signature_and_base_url_over_http() -> None:
    args = gcs_store_args("gs://lake/images/train", {"token": "anon", "endpoint_url": "http://127.0.0.1:4443"})
    assert (args.kind, args.bucket, args.prefix) == ("gcs", "lake", "images/train")
    assert args.config == {"skip_signature": "true", "base_url": "http://127.0.0.1:4443"}
    assert args.client_options["allow_http"] == "true"


def test_gcs_tokens_map_to_object_stores_credential_keys() -> None:
    assert gcs_store_args("gs://lake", {"token": "/keys/sa.json"}).config == {
        "application_credentials": "/keys/sa.json"
    }
    key = {"type": "service_account", "client_email": "a@b", "private_key": "k"}
    assert '"client_email": "a@b"' in gcs_store_args("gs://lake", {"token": key}).config["service_account_key"]
    for default in (None, "google_default", "cloud"):  # object_store's own chain, the environment first
        assert gcs_store_args("gs://lake", {"token": default, "project": "p"}).config == {}
    native = {"GOOGLE_SERVICE_ACCOUNT": "/sa.json", "bearer_token": "t"}
    assert gcs_store_args("gcs://lake/x", native).config == {"google_service_account": "/sa.json", "bearer_token": "t"}


def test_a_google_auth_credentials_object_becomes_a_refreshing_provider() -> None:
    from google.oauth2.credentials import Credentials
    from obstore.auth.google import GoogleCredentialProvider

    provider = gcs_store_args("gs://lake", {"token": Credentials(token="ya29.x")}).credential_provider
    assert isinstance(provider, GoogleCredentialProvider)


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"token": "browser"}, "token='browser'"),
        ({"token": {"type": "authorized_user", "refresh_token": "r"}}, "authorized_user"),
        ({"requester_pays": True}, "'requester_pays'"),
        ({"AWS_ACCESS_KEY_ID": "AK"}, "'AWS_ACCESS_KEY_ID'"),
        ({"endpoint_url": {"x": 1}}, "'endpoint_url'"),
    ],
)
def test_gcs_options_object_store_cannot_honour_are_refused_by_name(options: dict[str, Any], named: str) -> None:
    with pytest.raises(Unsupported, match=named) as caught:
        gcs_store_args("gs://lake/x", options)
    assert "\n" not in str(caught.value)


# --- Azure ------------------------------------------------------------------------------------------


def test_abfss_reads_the_account_from_its_host_and_strips_the_sas_question_mark() -> None:
    args = azure_store_args("abfss://raw@lake.dfs.core.windows.net/images/2024", {"sas_token": "?sv=1&sig=x"})
    assert (args.kind, args.bucket, args.prefix) == ("azure", "raw", "images/2024")
    assert args.config == {"sas_key": "sv=1&sig=x", "account_name": "lake"}


def test_abfss_in_another_azure_cloud_gets_that_clouds_blob_endpoint() -> None:
    config = azure_store_args("abfss://raw@lake.dfs.core.chinacloudapi.cn/x", {}).config
    assert config["endpoint"] == "https://lake.blob.core.chinacloudapi.cn"
    assert (
        azure_store_args("abfss://workspace@onelake.dfs.fabric.microsoft.com/x", {}).config["use_fabric_endpoint"]
        == "true"
    )


def test_adlfs_options_map_to_object_stores_names() -> None:
    options = {
        "account_name": "lake",
        "tenant_id": "t",
        "client_id": "c",
        "client_secret": "s",
        "account_host": "lake.blob.core.windows.net",
        "AZURE_STORAGE_AUTHORITY_HOST": "https://login.example",
        "blocksize": 1 << 20,
    }
    assert azure_store_args("az://raw/x", options).config == {
        "account_name": "lake",
        "tenant_id": "t",
        "client_id": "c",
        "client_secret": "s",
        "endpoint": "https://lake.blob.core.windows.net",
        "azure_storage_authority_host": "https://login.example",
    }
    assert azure_store_args("az://raw", {"anon": True}).config == {"skip_signature": "true"}
    upper = azure_store_args("az://raw", {"AZURE_STORAGE_ENDPOINT": "http://127.0.0.1:10000/dev"})
    assert upper.client_options["allow_http"] == "true"
    local = azure_store_args("az://raw", {"endpoint_url": "http://127.0.0.1:10000/dev/"})
    assert (local.config, local.client_options["allow_http"]) == ({"endpoint": "http://127.0.0.1:10000/dev"}, "true")


def test_connection_strings_give_account_key_sas_and_blob_endpoint() -> None:
    azurite_form = (
        "DefaultEndpointsProtocol=http;AccountName=dev;AccountKey=a2V5==;BlobEndpoint=http://127.0.0.1:10000/dev/;"
    )
    assert parse_connection_string(azurite_form) == {
        "account_name": "dev",
        "account_key": "a2V5==",  # the '=' of base64 stays: a field splits at its first '=' only
        "endpoint": "http://127.0.0.1:10000/dev",
    }
    assert parse_connection_string("UseDevelopmentStorage=true") == {"use_emulator": "true"}
    assert parse_connection_string("AccountName=a;SharedAccessSignature=sv=1&sig=x") == {
        "account_name": "a",
        "sas_key": "sv=1&sig=x",
    }
    args = azure_store_args("az://raw", {"connection_string": azurite_form})
    assert args.client_options["allow_http"] == "true"
    with pytest.raises(ValueError, match="'AccountName' has no '='"):
        parse_connection_string("AccountName;AccountKey=x")


@pytest.mark.parametrize(
    ("url", "options", "message"),
    [
        ("abfss://raw@lake.dfs.core.windows.net/x", {"account_name": "other"}, "lies in account 'lake'"),
        (
            "abfss://raw@lake.dfs.core.windows.net/x",
            {"connection_string": "AccountName=other;AccountKey=a2V5"},
            "storage options are for 'other'",
        ),
        ("abfss://raw/x", {}, "names no account"),
        ("az://Raw/x", {}, "not an Azure container name"),
        ("az://r/x", {}, "not an Azure container name"),
        ("abfss://raw@LA.KE.dfs.core.windows.net/x", {}, "not an Azure storage account name"),
        ("az://raw/a/../secret", {}, "'..' segment is refused"),
        ("az://raw/a//b", {}, "empty"),
        ("az://raw/x?comp=list", {}, "invalid storage URL"),
    ],
)
def test_urls_that_could_reach_another_account_or_folder_are_refused_in_one_line(
    url: str, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message) as caught:
        azure_store_args(url, options)
    assert "\n" not in str(caught.value)


def test_keys_are_taken_as_written_never_decoded_twice() -> None:
    # Catalog URLs hold keys unquoted: "%2E%2E" is a folder's literal name (object_store sends it quoted
    # again), not "..", and "a%20b" is not "a b".
    assert azure_store_args("az://raw/a/%2E%2E/secret", {}).prefix == "a/%2E%2E/secret"
    assert gcs_store_args("gs://lake/a%20b/c", {}).prefix == "a%20b/c"


def test_azure_options_with_python_objects_or_unknown_names_are_refused_by_name() -> None:
    with pytest.raises(Unsupported, match="'credential' .a Python object; give account_key"):
        azure_store_args("az://raw", {"credential": object()})
    with pytest.raises(Unsupported, match="'location_mode'"):
        azure_store_args("az://raw", {"location_mode": "secondary"})
    with pytest.raises(Unsupported, match="'GOOGLE_BASE_URL'"):
        azure_store_args("az://raw", {"GOOGLE_BASE_URL": "http://x"})


@given(hs.lists(hs.sampled_from(["a", ".", "..", "", "%2e", "%2E%2e", "b.c", "%2F"]), min_size=1, max_size=5))
def test_no_accepted_prefix_has_a_segment_an_http_layer_could_fold(segments: list[str]) -> None:
    url = "gs://lake/" + "/".join(segments)
    try:
        prefix = gcs_store_args(url, {}).prefix
    except ValueError:
        return
    assert all(part not in ("", ".", "..") for part in prefix.split("/") if prefix)


def test_the_one_mapping_dispatches_gs_and_azure_urls_here() -> None:
    assert store_args("gs://lake/x", {"token": "anon"}).kind == "gcs"
    assert store_args("abfss://raw@lake.dfs.core.windows.net/x", {}).kind == "azure"
    assert store_args("az://raw/x", {"account_name": "lake"}).config == {"account_name": "lake"}


# --- the stores these arguments build, against the emulators ----------------------------------------------


@pytest.fixture(scope="module")
def az() -> Iterator[Azurite]:
    with azurite([ACCOUNT, "other"]) as running:
        running.put("raw", "images/a.png", b"a" * 10)
        running.put("raw", "images/sub/b c+%.png", b"b" * 20)
        running.put("private", "x.bin", b"secret")
        yield running


@pytest.fixture(scope="module")
def gcs() -> Iterator[GcsEmulator]:
    with gcs_emulator() as running:
        running.put("lake", "images/a.png", b"a" * 10)
        running.put("lake", "images/sub/b c+%.png", b"b" * 20)
        yield running


@pytest.fixture(scope="module")
def child() -> Iterator[ProcessPoolExecutor]:
    """A spawned process that makes this module's obstore requests: object_store's runtime does not
    survive fork, and the pytest process, which forks listings and DataLoader workers in other
    tests, must not have started it."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        yield pool


def _store(args: StoreArgs) -> Any:
    kind = GCSStore if args.kind == "gcs" else AzureStore
    return kind(
        args.bucket,
        prefix=args.prefix or None,
        config=args.config,  # type: ignore[arg-type]
        client_options=args.client_options,  # type: ignore[arg-type]
        credential_provider=args.credential_provider,
    )


def _list_and_read(args: StoreArgs, path: str) -> tuple[dict[str, int], bytes]:
    """In the child: the listing (path -> size) and the bytes of ``path``; an obstore error comes
    back as a RuntimeError with its first line (obstore's exceptions do not pickle)."""
    try:
        store = _store(args)
        listed = {meta["path"]: meta["size"] for page in obstore.list(store) for meta in page}
        return listed, bytes(obstore.get(store, path).bytes())
    except Exception as exc:
        raise RuntimeError(str(exc).split("\n")[0]) from None


def _listed(child: ProcessPoolExecutor, args: StoreArgs, path: str = "a.png") -> tuple[dict[str, int], bytes]:
    return child.submit(_list_and_read, args, path).result(timeout=120)


def test_a_gcs_store_lists_and_reads_the_emulators_objects(gcs: GcsEmulator, child: ProcessPoolExecutor) -> None:
    args = gcs_store_args("gs://lake/images", gcs.options())
    assert _listed(child, args, "sub/b c+%.png") == ({"a.png": 10, "sub/b c+%.png": 20}, b"b" * 20)


@pytest.mark.parametrize(
    "options",
    [
        pytest.param(lambda az: az.options(), id="connection_string"),
        pytest.param(
            lambda az: {"account_name": ACCOUNT, "account_key": az.keys[ACCOUNT], "endpoint": az.endpoint()},
            id="account_key",
        ),
        pytest.param(
            lambda az: {"account_name": ACCOUNT, "sas_token": "?" + az.container_sas("raw"), "endpoint": az.endpoint()},
            id="container_sas",
        ),
    ],
)
def test_an_azure_store_lists_and_reads_azurite_with_each_kind_of_key(
    az: Azurite, options: Any, child: ProcessPoolExecutor
) -> None:
    args = azure_store_args("az://raw/images", options(az))
    assert _listed(child, args) == ({"a.png": 10, "sub/b c+%.png": 20}, b"a" * 10)


def test_azurite_refuses_a_wrong_key_and_a_sas_of_another_container(az: Azurite, child: ProcessPoolExecutor) -> None:
    wrong = azure_store_args("az://raw", {"connection_string": az.connection_string(key=az.keys["other"])})
    with pytest.raises(RuntimeError, match="403 Forbidden"):
        _listed(child, wrong)
    other_container = {"account_name": ACCOUNT, "sas_token": az.container_sas("raw"), "endpoint": az.endpoint()}
    with pytest.raises(RuntimeError, match="403 Forbidden"):
        _listed(child, azure_store_args("az://private", other_container), "x.bin")


def test_the_account_key_may_come_from_the_environment(az: Azurite, monkeypatch: pytest.MonkeyPatch) -> None:
    args = azure_store_args("az://raw/images", {"endpoint": az.endpoint()})  # a credential naming only where
    assert "account_key" not in args.config and "account_name" not in args.config
    for key, answer in ((az.keys[ACCOUNT], "ok"), (az.keys["other"], "403 Forbidden")):
        monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_NAME", ACCOUNT)
        monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_KEY", key)
        # a fresh spawned process: the environment is read when the store is made, in that process
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as fresh:
            try:
                got = "ok" if _listed(fresh, args)[0] == {"a.png": 10, "sub/b c+%.png": 20} else "wrong listing"
            except RuntimeError as exc:
                got = "403 Forbidden" if "403 Forbidden" in str(exc) else str(exc)
        assert got == answer


def test_the_modules_examples_run_as_shown() -> None:
    import doctest

    from uc_jupyter.storage import cloud

    assert doctest.testmod(cloud, optionflags=doctest.NORMALIZE_WHITESPACE).failed == 0


def test_a_service_account_file_may_come_from_the_environment(
    gcs: GcsEmulator, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # object_store's own reading of GOOGLE_SERVICE_ACCOUNT: the file says where the store is and that
    # it takes no OAuth (the emulator's form); the volume's options say nothing.
    account = tmp_path / "sa.json"
    account.write_text(
        json.dumps(
            {
                "gcs_base_url": gcs.url,
                "disable_oauth": True,
                "client_email": "",
                "private_key": "",
                "private_key_id": "",
            }
        )
    )
    monkeypatch.setenv("GOOGLE_SERVICE_ACCOUNT", str(account))
    args = gcs_store_args("gs://lake/images", {})
    assert args.config == {}
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as fresh:
        args = dataclasses.replace(args, client_options={**args.client_options, "allow_http": "true"})
        assert _listed(fresh, args) == ({"a.png": 10, "sub/b c+%.png": 20}, b"a" * 10)
