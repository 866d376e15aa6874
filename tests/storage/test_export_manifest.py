"""The export manifest (uc_jupyter.storage.export_manifest): its round trip, the names it takes, ids and leftovers."""

from __future__ import annotations

import calendar
import json
import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from uc_jupyter.storage.export_manifest import (
    FORMAT,
    MANIFEST,
    MAX_MANIFEST_BYTES,
    PREFIX,
    STALE_AFTER_S,
    ExportFile,
    Manifest,
    ManifestError,
    leftovers,
    new_export_id,
)

WHERE = "/Volumes/main/ml/exports/t"
NOW = float(calendar.timegm((2026, 12, 2, 4, 0, 0)))  # 2026-12-02T04:00:00Z

names = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_=-]{0,20}(\.[a-z]{1,8})?", fullmatch=True)
counts = st.integers(min_value=0, max_value=2**53)
ids = st.builds(
    new_export_id,
    st.integers(min_value=0, max_value=4_102_444_799).map(float),  # up to 2099-12-31T23:59:59Z
    st.from_regex(r"[0-9a-f]{8}", fullmatch=True),
)
manifests = st.builds(
    Manifest,
    ids,
    st.text(min_size=1, max_size=30),
    st.one_of(st.none(), counts),
    st.lists(st.builds(ExportFile, names, counts, counts), max_size=5, unique_by=lambda f: f.name).map(tuple),
)


def body_of(manifest: Manifest) -> dict[str, object]:
    body: dict[str, object] = json.loads(manifest.to_bytes())
    return body


def parse(body: object) -> Manifest:
    return Manifest.parse(json.dumps(body).encode(), where=WHERE)


@settings(max_examples=150, deadline=None)
@given(manifests)
def test_a_manifest_reads_back_as_written(manifest: Manifest) -> None:
    data = manifest.to_bytes()
    assert data.endswith(b"\n")
    assert Manifest.parse(data, where=WHERE) == manifest
    body = json.loads(data)
    assert body["format"] == FORMAT and body["rows"] == sum(f.rows for f in manifest.files) == manifest.rows


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=40), st.text(alphabet="aZ09._=-/\\\0\n ", max_size=12)))
@example("part-00000.parquet")
@example("..")
@example("a..b.parquet")
@example("part/../../x")
@example("x" * 256)
@example("part-0.parquet\n")
@example("pärt.parquet")
def test_a_name_the_parser_takes_is_one_file_of_the_exports_own_prefix(name: str) -> None:
    manifest = Manifest(new_export_id(NOW, "0badc0de"), "main.ml.t", 0, (ExportFile("a.parquet", 1, 1),))
    body = body_of(manifest)
    body["files"] = [{"name": name, "size": 1, "rows": 1}]
    try:
        parsed = parse(body)
    except ManifestError as exc:
        refused = str(exc)
    else:
        refused = ""
    if refused:
        assert refused.startswith(f"{WHERE}/{MANIFEST} is not a valid export manifest: ")
        assert "\n" not in refused  # one line, whatever the name holds
        return
    [key] = parsed.file_keys()
    assert key == f"{PREFIX}{manifest.id}/{name}"
    assert "/" not in name and ".." not in name and not name.startswith(".") and len(name) <= 255
    assert name.isascii() and name.isprintable()


@pytest.mark.parametrize(
    "export_id",
    [
        "20261202T030500Z-1A2B3C4D",  # upper-case hex
        "20261202T030500Z-1a2b3c4",  # seven digits
        "20261202T030500-1a2b3c4d",  # no Z
        "20261202T030500Z-1a2b3c4d/..",
        "20261202T030500Z-1a2b3c4d\n",
        " 20261202T030500Z-1a2b3c4d",
        7,
    ],
)
def test_an_id_is_only_a_utc_time_and_eight_hex_digits(export_id: object) -> None:
    body = body_of(Manifest(new_export_id(NOW), "t", None, ()))
    body["id"] = export_id
    with pytest.raises(ManifestError, match="invalid id"):
        parse(body)


@pytest.mark.parametrize(
    ("change", "what"),
    [
        ({"table": ""}, "invalid table ''"),
        ({"table": None}, "invalid table None"),
        ({"table_version": -1}, "invalid table_version -1"),
        ({"table_version": "3"}, "invalid table_version '3'"),
        ({"files": [["a.parquet", 1, 1]]}, "a file entry is"),
        ({"files": [{"name": "a.parquet", "size": True, "rows": 1}]}, r"a.parquet: invalid size True"),
        ({"files": [{"name": "a.parquet", "size": 1}]}, r"a.parquet: invalid size 1 or rows None"),
    ],
)
def test_every_field_is_checked(change: dict[str, object], what: str) -> None:
    body = {**body_of(Manifest(new_export_id(NOW), "main.ml.t", 3, ())), **change}
    with pytest.raises(ManifestError, match=f"is not a valid export manifest: {what}"):
        parse(body)


def test_what_is_not_a_manifest_object_is_refused_before_its_fields() -> None:
    for data in (b"[]", b"null", b'"uc-jupyter-export/1"', json.dumps({"format": "uc-jupyter-export/2"}).encode()):
        with pytest.raises(ManifestError, match="its format is not 'uc-jupyter-export/1'"):
            Manifest.parse(data, where=WHERE)
    with pytest.raises(ManifestError, match=f"it has {MAX_MANIFEST_BYTES + 1} bytes"):
        Manifest.parse(b" " * (MAX_MANIFEST_BYTES + 1), where=WHERE)
    manifest = Manifest(new_export_id(NOW), "t", None, ())
    assert Manifest.parse(manifest.to_bytes(), where=WHERE).table_version is None


def test_an_id_begins_with_the_utc_second_it_was_made() -> None:
    assert new_export_id(NOW + 0.999, "0123abcd") == "20261202T040000Z-0123abcd"
    fresh = [new_export_id(NOW) for _ in range(20)]
    assert all(re.fullmatch(r"20261202T040000Z-[0-9a-f]{8}", made) for made in fresh)
    assert len(set(fresh)) == 20  # a random token each
    assert re.fullmatch(r"\d{8}T\d{6}Z-[0-9a-f]{8}", new_export_id())


def test_a_prefix_is_stale_from_exactly_the_staleness_age() -> None:
    committed = Manifest(new_export_id(NOW), "t", 2, (ExportFile("p.parquet", 1, 1),))
    at_limit = f"{PREFIX}{new_export_id(NOW - STALE_AFTER_S)}/p.parquet"
    just_young = f"{PREFIX}{new_export_id(NOW - STALE_AFTER_S + 1)}/p.parquet"
    keys = [*committed.file_keys(), MANIFEST, at_limit, just_young]
    assert leftovers(keys, committed=committed, replaced=None, now=NOW) == [at_limit]
    assert leftovers(keys, committed=committed, replaced=None, now=NOW, stale_after=60) == [at_limit, just_young]


def test_look_alikes_of_the_replaced_exports_prefix_are_not_deleted_with_it() -> None:
    committed = Manifest(new_export_id(NOW), "t", 2, (ExportFile("p.parquet", 1, 1),))
    replaced = Manifest(new_export_id(NOW - 60), "t", 1, (ExportFile("p.parquet", 1, 1),))
    look_alikes = [
        f"{replaced.prefix}-copy/p.parquet",  # begins like it: not an export's prefix at all
        f"{replaced.prefix}x/p.parquet",
        f".{replaced.prefix}/p.parquet",
    ]
    extra = f"{replaced.prefix}/not-named.parquet"  # in the replaced prefix: goes with it
    keys = [*committed.file_keys(), *replaced.file_keys(), *look_alikes, extra]
    gone = leftovers(keys, committed=committed, replaced=replaced, now=NOW)
    assert gone == [*replaced.file_keys(), extra]


def test_the_committed_manifest_and_files_are_never_leftovers_whatever_else_is_there() -> None:
    old = new_export_id(NOW - 10 * STALE_AFTER_S)
    committed = Manifest(old, "t", 2, (ExportFile("p.parquet", 1, 1), ExportFile("q.parquet", 1, 1)))
    keys = [*committed.file_keys(), MANIFEST, f"{committed.prefix}/unnamed.parquet", f"sub/{MANIFEST}"]
    # Its prefix is old, so what it does not name there goes; a manifest below the top is a plain file.
    gone = leftovers(keys, committed=committed, replaced=None, now=NOW)
    assert gone == [f"{committed.prefix}/unnamed.parquet", f"sub/{MANIFEST}"]


@settings(max_examples=100, deadline=None)
@given(manifests, st.lists(st.text(min_size=1, max_size=30), max_size=10))
def test_leftovers_never_name_the_manifest_or_a_committed_file(committed: Manifest, others: list[str]) -> None:
    keys = [MANIFEST, *committed.file_keys(), *others]
    gone = leftovers(keys, committed=committed, replaced=None, now=NOW)
    assert MANIFEST not in gone and not set(committed.file_keys()) & set(gone)
    assert set(gone) <= set(others)
    assert all(not key.startswith(".") or key.startswith(PREFIX) for key in gone)  # other hidden entries stay
