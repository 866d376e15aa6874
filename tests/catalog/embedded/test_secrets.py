"""uc_jupyter.catalog.embedded.secrets: the secret store apart from the metastore, and checking storage options."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from uc_jupyter.catalog.embedded.secrets import SecretStore, check_options

SECRET = {"key": "AKIA-not-for-you", "secret": "s3cr3t-value", "client_kwargs": {"region_name": "eu-west-1"}}


@pytest.fixture
def wide_umask() -> Iterator[None]:
    """Files made meanwhile would be world-readable if the code left their mode to the umask."""
    previous = os.umask(0o000)
    try:
        yield
    finally:
        os.umask(previous)


def legacy_put(root: Path, name: str, options: str) -> None:
    """A secret as versions before ids stored it: kind 'securable', keyed by the object's name."""
    with contextlib.closing(sqlite3.connect(root / "secrets.db")) as conn, conn:
        conn.execute("INSERT INTO secrets VALUES ('securable', ?, ?)", (name, options))


def test_options_come_back_as_stored_and_missing_ones_are_empty(tmp_path: Path) -> None:
    store = SecretStore(tmp_path)
    store.put("credential", "lake", SECRET)
    assert store.get("credential", "lake") == SECRET
    assert store.get("credential", "other") == {}
    store.put("credential", "lake", {"token": "t"})  # replaced, not merged
    assert store.get("credential", "lake") == {"token": "t"}


def test_a_credential_and_an_object_of_the_same_key_never_read_each_others_secret(tmp_path: Path) -> None:
    store = SecretStore(tmp_path)
    store.put("credential", "same", SECRET)
    assert store.get("object", "same") == {}
    store.put("object", "same", {"token": "object's"})
    assert store.get("credential", "same") == SECRET
    store.delete("object", "same")
    assert store.get("credential", "same") == SECRET


def test_keys_are_exact_no_prefix_case_or_pattern_reaches_another(tmp_path: Path) -> None:
    store = SecretStore(tmp_path)
    store.put("object", "id-1", SECRET)
    for other in ("id-", "ID-1", "id-1 ", "id-%", "id-_", "%", "*", "' OR '1'='1"):
        assert store.get("object", other) == {}, other


def test_a_store_opened_again_or_beside_sees_the_same_secrets(tmp_path: Path) -> None:
    first, second = SecretStore(tmp_path), SecretStore(tmp_path)
    first.put("object", "id-1", SECRET)
    assert second.get("object", "id-1") == SECRET
    second.delete("object", "id-1")
    assert SecretStore(tmp_path).get("object", "id-1") == {}


def test_delete_forgets_one_and_a_missing_one_is_nothing_to_do(tmp_path: Path) -> None:
    store = SecretStore(tmp_path)
    store.put("object", "a", {"k": "1"})
    store.put("object", "b", {"k": "2"})
    store.delete("object", "a")
    store.delete("object", "never-stored")
    assert (store.get("object", "a"), store.get("object", "b")) == ({}, {"k": "2"})


def test_delete_many_forgets_exactly_those_of_that_kind(tmp_path: Path) -> None:
    store = SecretStore(tmp_path)
    for name in ("a", "b", "c"):
        store.put("object", name, {"k": name})
    store.put("credential", "a", {"k": "credential"})
    store.delete_many("object", ["a", "c", "missing"])
    store.delete_many("object", [])
    assert [store.get("object", n) for n in ("a", "b", "c")] == [{}, {"k": "b"}, {}]
    assert store.get("credential", "a") == {"k": "credential"}


def test_the_repr_tells_nothing_of_what_it_holds(tmp_path: Path) -> None:
    store = SecretStore(tmp_path)
    store.put("credential", "lake", SECRET)
    assert repr(store) == "SecretStore(...)"
    assert str(tmp_path) not in repr(store)


def test_the_secrets_file_and_its_journal_are_private_whatever_the_umask(tmp_path: Path, wide_umask: None) -> None:
    store = SecretStore(tmp_path)
    store.put("credential", "lake", SECRET)
    assert store.get("credential", "lake") == SECRET  # the write-ahead log holds it now
    files = sorted(tmp_path.glob("secrets.db*"))
    assert {p.name for p in files} >= {"secrets.db", "secrets.db-wal"}
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path.name


def test_a_secrets_file_an_older_version_left_readable_is_tightened_on_open(tmp_path: Path) -> None:
    SecretStore(tmp_path).put("credential", "lake", SECRET)
    os.chmod(tmp_path / "secrets.db", 0o644)
    store = SecretStore(tmp_path)
    assert stat.S_IMODE((tmp_path / "secrets.db").stat().st_mode) == 0o600
    assert store.get("credential", "lake") == SECRET


def test_secrets_are_kept_in_their_own_file_only(tmp_path: Path) -> None:
    SecretStore(tmp_path).put("credential", "lake", SECRET)
    assert {p.name for p in tmp_path.iterdir()} <= {"secrets.db", "secrets.db-wal", "secrets.db-shm"}


def test_legacy_name_keyed_secrets_move_to_their_objects_ids(tmp_path: Path) -> None:
    store = SecretStore(tmp_path)
    legacy_put(tmp_path, "main.ml.kept", '{"key": "old"}')
    legacy_put(tmp_path, "main.ml.dropped", '{"key": "left by a dead drop"}')
    assert sorted(store.legacy_keys()) == ["main.ml.dropped", "main.ml.kept"]
    store.adopt_legacy({"main.ml.kept": "id-kept", "main.ml.other": "id-other"})
    assert store.get("object", "id-kept") == {"key": "old"}
    assert store.get("object", "id-other") == {}  # no legacy secret of its name: it gets none
    assert store.legacy_keys() == []  # the dropped object's secret is gone, not kept under any id
    assert store.get("object", "main.ml.dropped") == {} and store.get("object", "main.ml.kept") == {}


def test_an_id_that_already_has_a_secret_keeps_its_own(tmp_path: Path) -> None:
    store = SecretStore(tmp_path)
    store.put("object", "id-1", {"key": "current"})
    legacy_put(tmp_path, "main.ml.v", '{"key": "legacy"}')
    store.adopt_legacy({"main.ml.v": "id-1"})
    assert store.get("object", "id-1") == {"key": "current"}
    assert store.legacy_keys() == []


def test_no_legacy_secrets_is_nothing_to_adopt(tmp_path: Path) -> None:
    store = SecretStore(tmp_path)
    store.put("credential", "lake", SECRET)
    assert store.legacy_keys() == []
    store.adopt_legacy({"main.ml.v": "id-1"})
    assert store.get("credential", "lake") == SECRET and store.get("object", "id-1") == {}


# ----------------------------------------------------------------- check_options


def test_options_that_json_holds_are_taken_as_a_copy() -> None:
    assert check_options(None, "credential raw") == {}
    checked = check_options(SECRET, "credential raw")
    assert checked == SECRET and checked is not SECRET
    checked["extra"] = 1
    assert "extra" not in SECRET


@pytest.mark.parametrize(
    ("options", "got"),
    [
        ([("key", "k")], "got list"),
        ("key=k", "got str"),
        ({1: "k"}, "got a dict with non-string keys"),
        ({"": "k"}, "got a dict with non-string keys"),  # an empty name is no option name
        ({None: "k"}, "got a dict with non-string keys"),
    ],
)
def test_what_is_not_a_dict_of_option_names_is_a_type_error_naming_the_owner(options: object, got: str) -> None:
    with pytest.raises(TypeError, match=f"^storage_options of volume main.ml.v must be a dict .*, {got}$"):
        check_options(options, "volume main.ml.v")


def test_a_value_json_cannot_hold_is_named_by_its_option_never_shown() -> None:
    options = {"key": "AKIA-visible?", "secret": b"raw-bytes-secret", "client_kwargs": {"session": object()}}
    with pytest.raises(
        TypeError, match=r"^storage_options of table main\.ml\.t: option client_kwargs, secret is not"
    ) as bad:
        check_options(options, "table main.ml.t")
    message = str(bad.value)
    assert "raw-bytes-secret" not in message and "AKIA-visible" not in message and "object at" not in message
    assert "\n" not in message
