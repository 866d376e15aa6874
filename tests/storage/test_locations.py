"""Canonical storage locations and containment (pure, property-tested) and their resolution on disk."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from uc_jupyter.storage.locations import (
    InvalidLocation,
    canonical_location,
    location_contains,
    locations_overlap,
    refused_local_path,
)
from uc_jupyter.storage.urls import join_location, resolve_location

segment = st.text(alphabet="abcxyz019_-", min_size=1, max_size=6)
keys = st.lists(segment, max_size=4)
buckets = st.sampled_from(["lake", "b1", "my-bucket", "x.y"])


@st.composite
def object_urls(draw: st.DrawFn) -> str:
    scheme = draw(st.sampled_from(["s3", "gs", "memory"]))
    key = "/".join(draw(keys))
    if scheme == "memory":
        return f"memory://{key}" if key else "memory://root"
    return f"{scheme}://{draw(buckets)}/{key}".rstrip("/")


@st.composite
def local_urls(draw: st.DrawFn) -> str:
    return "file:///" + "/".join(draw(st.lists(segment, min_size=1, max_size=4)))


urls = st.one_of(object_urls(), local_urls())


@given(urls)
def test_canonical_form_is_a_fixed_point(url: str) -> None:
    once = canonical_location(url)
    assert canonical_location(once) == once


@given(urls)
def test_a_location_contains_itself_and_what_lies_below(url: str) -> None:
    assert location_contains(url, url)
    assert location_contains(url, url.rstrip("/") + "/inner/x")
    assert not location_contains(url.rstrip("/") + "/inner", url)


@given(urls, urls)
def test_overlap_is_symmetric_and_means_containment_one_way(a: str, b: str) -> None:
    assert locations_overlap(a, b) == locations_overlap(b, a)
    assert locations_overlap(a, b) == (location_contains(a, b) or location_contains(b, a))


@given(st.lists(segment, min_size=1, max_size=4), st.sampled_from(["s3", "s3a", "s3n", "S3A"]))
def test_s3_aliases_name_one_place(key: list[str], scheme: str) -> None:
    path = "/".join(key)
    assert canonical_location(f"{scheme}://lake/{path}/") == f"s3://lake/{path}"


@given(st.lists(segment, min_size=1, max_size=4), st.data())
def test_local_spellings_name_one_place(parts: list[str], data: st.DataObject) -> None:
    plain = "/" + "/".join(parts)
    prefix = data.draw(st.sampled_from(["", "/", "//", "file://", "file:", "file://localhost", "LOCAL://"]))
    detour = data.draw(st.sampled_from(["", "/.", "/zz/..", "//"]))
    rest = "/" + "/".join(parts[1:]) if parts[1:] else ""
    spelled = f"{prefix}/{parts[0]}{detour}{rest}"
    encoded = "".join(f"%{ord(c):02x}" if c in "abc" else c for c in spelled)
    assert canonical_location(spelled) == canonical_location(encoded) == f"file://{plain}"


def test_neighbours_do_not_overlap() -> None:
    assert not locations_overlap("s3://lake/raw", "s3://lake/rawer")
    assert not locations_overlap("s3://lake/raw", "gs://lake/raw")
    assert not locations_overlap("s3://lake/raw", "s3://lakes/raw")
    assert not locations_overlap("file:///data/a", "file:///data/ab")
    assert locations_overlap("abfss://c@acct.dfs.core.windows.net/p", "az://c/p/q")  # no account in az://


def test_one_container_name_in_two_azure_accounts_is_two_places() -> None:
    # An external location in one account must not grant a volume in another: a service principal's
    # credential signs for any account the URL names.
    assert not location_contains("abfss://c@one.dfs.core.windows.net/p", "abfss://c@two.dfs.core.windows.net/p/q")
    assert not locations_overlap("abfss://c@one.dfs.core.windows.net", "abfss://c@two.blob.core.windows.net")
    assert location_contains("abfss://c@one.dfs.core.windows.net/p", "abfss://c@one.blob.core.windows.net/p/q")
    # No account (az://) and an account (abfss://): they may be one place, but neither grants the other.
    assert locations_overlap("az://c/p", "abfss://c@one.dfs.core.windows.net/p/q")
    assert not location_contains("az://c/p", "abfss://c@one.dfs.core.windows.net/p/q")
    assert not location_contains("abfss://c@one.dfs.core.windows.net/p", "az://c/p/q")


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("", "give a URL like"),
        ("relative/dir", "must be an absolute path"),
        ("filecache::s3://lake/raw", "protocol chains"),
        ("s3://Lake/raw", "lower-case; give 'lake'"),
        ("s3://lake/raw?versionId=1", "query strings"),
        ("s3://lake/a%2Fb", "an encoded '/'"),
        ("s3:///raw", "no bucket or container"),
        ("abfss://container/path", "Azure URLs look like"),
        ("file://server/share", "file URLs name no host"),
        ("/sys/kernel", "inside /sys"),
        ("/a\nb", "control character"),
        ("ftp://host/x", "unknown scheme 'ftp'"),
    ],
)
def test_what_cannot_be_compared_safely_is_refused(url: str, why: str) -> None:
    with pytest.raises(InvalidLocation, match=why) as refused:
        canonical_location(url)
    assert "\n" not in str(refused.value).replace("\\n", "")


def test_refused_local_paths() -> None:
    assert refused_local_path("/") is not None
    assert refused_local_path("/proc") is not None
    assert refused_local_path("/process") is None


def test_resolution_follows_symlinks_and_refuses_links_into_alias_folders(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "alias")
    os.symlink("/proc/self/root", tmp_path / "root")
    assert resolve_location(str(tmp_path / "alias" / "x")) == f"file://{tmp_path}/real/x"
    assert resolve_location("s3a://lake/raw/") == "s3://lake/raw"
    resolved_root = resolve_location(str(tmp_path / "root" / "tmp"))
    assert resolved_root == "file:///tmp"  # realpath reads the magic link: the place itself is compared
    with pytest.raises(InvalidLocation, match="inside /proc"):
        resolve_location(str(tmp_path / "root" / "proc" / "self"))


@settings(max_examples=50)
@given(st.text(alphabet="ab %?#.", min_size=1, max_size=8))
def test_joining_keeps_the_relative_path_as_it_is(relative: str) -> None:
    assert join_location("s3://lake/raw", relative) == f"s3://lake/raw/{relative}"
