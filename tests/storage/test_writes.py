"""The write seam (uc_jupyter.storage.writes): the same calls on a file:// volume folder and on
the S3 test server (multipart uploads included), one run against moto (signed requests), and the
attacks a local folder invites: folders swapped for symlinks before and during a write, keys that
climb out."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from uc_jupyter.catalog.embedded.local import EscapesVolume
from uc_jupyter.storage.keys import checked_key
from uc_jupyter.storage.writes import VolumeWrites, open_writes
from uc_jupyter.testing.moto_iam import MotoIam, moto_iam
from uc_jupyter.testing.s3_server import S3TestServer
from uc_jupyter.ucserver.vendor import Vendor

Maker = Callable[[], tuple[VolumeWrites, Path]]


@pytest.fixture
def local_writes(tmp_path: Path) -> Maker:
    """Writes into ``vol/run`` of a volume rooted at ``tmp_path/vol``; (writes, the folder on disk)."""

    def make() -> tuple[VolumeWrites, Path]:
        root = tmp_path / "vol"
        root.mkdir(exist_ok=True)
        return open_writes(
            f"file://{root}/run", {}, where="/Volumes/main/ml/vol/run", root=f"file://{root}"
        ), root / "run"

    return make


@pytest.fixture
def s3_writes(s3: S3TestServer) -> Maker:
    def make() -> tuple[VolumeWrites, Path]:
        s3.bucket("writes")
        return open_writes(
            "s3://writes/run", s3.storage_options, where="/Volumes/main/ml/w/run"
        ), s3.root / "writes/run"

    return make


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.servers)])  # s3: the S3 test server
def writes(request: pytest.FixtureRequest) -> tuple[VolumeWrites, Path]:
    made: tuple[VolumeWrites, Path] = request.getfixturevalue(f"{request.param}_writes")()
    return made


@pytest.mark.in_a_fork
def test_put_read_list_delete(writes: tuple[VolumeWrites, Path], tmp_path: Path) -> None:
    store, folder = writes
    big = tmp_path / "big.bin"
    content = os.urandom(1 << 20) * 37  # 37 MiB: three parts of a multipart upload on S3
    big.write_bytes(content)
    store.put_file("step-1/__0_0.distcp", big)
    store.put_bytes("step-1/.metadata", b"meta")
    store.put_bytes("step-2/x", b"2")
    assert store.list() == ["step-1/.metadata", "step-1/__0_0.distcp", "step-2/x"]
    assert store.list("step-1") == ["step-1/.metadata", "step-1/__0_0.distcp"]
    assert store.list("step-1/") == store.list("step-1")
    assert store.list("step-9") == []
    assert store.read_bytes("step-1/__0_0.distcp") == content
    assert store.read_range("step-1/__0_0.distcp", 5 << 20, 100) == content[5 << 20 : (5 << 20) + 100]
    assert store.read_range("step-1/.metadata", 2, 100) == b"ta"
    listed = store.listing("step-1")
    assert [(entry.key, entry.size) for entry in listed] == [("step-1/.metadata", 4), ("step-1/__0_0.distcp", 37 << 20)]
    assert all(abs(entry.modified - time.time()) < 600 for entry in listed)
    assert (folder / "step-1/.metadata").read_bytes() == b"meta"
    store.put_bytes("step-1/.metadata", b"again")  # replaced whole
    assert store.read_bytes("step-1/.metadata") == b"again"
    with pytest.raises(FileNotFoundError, match=r"/Volumes/main/ml/\w+/run/step-1/absent does not exist"):
        store.read_bytes("step-1/absent")
    store.delete(["step-1/.metadata", "step-1/__0_0.distcp", "step-1/never-was"])
    assert store.list() == ["step-2/x"]
    store.delete([])
    with store.new_file("step-3/streamed") as out:
        out.write(b"written ")
        out.write(b"in pieces")
    assert store.read_bytes("step-3/streamed") == b"written in pieces"
    with pytest.raises(RuntimeError), store.new_file("step-3/dropped") as out:
        raise RuntimeError("the writer died")
    assert store.list("step-3") == ["step-3/streamed"]


def test_multipart_uploads_send_parts_and_leave_nothing_behind(s3: S3TestServer, tmp_path: Path) -> None:
    s3.bucket("parts")
    store = open_writes("s3://parts/run", s3.storage_options)
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(40 << 20))
    store.put_file("a.bin", big)
    stats = s3.stats()
    assert stats["requests"]["PUT"] >= 3 and stats["requests"]["POST"] == 2  # parts; create + complete
    assert stats["bytes_received"] == 40 << 20
    assert store.read_bytes("a.bin") == big.read_bytes()
    assert os.listdir(s3.root / ".uploads") == []  # no part or body left waiting


@pytest.mark.parametrize("key", ["", "..", "a/../../x", "/etc/passwd", "a//b", "a/", "./a", "a/./b", "a\0b", "a\\b"])
def test_keys_that_leave_the_folder_are_refused_in_one_line(key: str, local_writes: Maker) -> None:
    store, _ = local_writes()
    for call in (lambda: store.put_bytes(key, b"x"), lambda: store.read_bytes(key), lambda: store.delete([key])):
        with pytest.raises(ValueError, match=r"^invalid key .*: give a path below the folder") as raised:
            call()
        assert "\n" not in str(raised.value)
    with pytest.raises(ValueError, match="invalid key"):
        checked_key(key)


def test_a_folder_swapped_for_a_symlink_before_a_write_never_redirects_it(local_writes: Maker, tmp_path: Path) -> None:
    store, folder = local_writes()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim").write_bytes(b"keep")
    store.put_bytes("step-1/a", b"1")
    os.rename(folder / "step-1", tmp_path / "moved")
    os.symlink(outside, folder / "step-1")
    with pytest.raises(EscapesVolume, match=r"^cannot write /Volumes/main/ml/vol/run: run/step-1 is a symbolic link"):
        store.put_bytes("step-1/victim", b"overwritten")
    with pytest.raises(EscapesVolume):
        store.delete(["step-1/victim"])
    with pytest.raises(EscapesVolume):
        store.read_bytes("step-1/victim")
    assert store.list() == []  # the link is not followed into outside/
    assert (outside / "victim").read_bytes() == b"keep"
    assert sorted(os.listdir(outside)) == ["victim"]
    # The volume's own folder (the walk's start below the root) swapped too.
    os.rename(folder, tmp_path / "run-moved")
    os.symlink(outside, folder)
    with pytest.raises(EscapesVolume, match="run is a symbolic link"):
        store.put_bytes("victim", b"overwritten")
    assert (outside / "victim").read_bytes() == b"keep"


def test_a_folder_swapped_during_a_write_keeps_it_inside(local_writes: Maker, tmp_path: Path) -> None:
    store, folder = local_writes()
    outside = tmp_path / "outside"
    outside.mkdir()
    with store.new_file("step-1/shard") as out:
        out.write(b"half")
        os.rename(folder / "step-1", tmp_path / "moved")  # swapped while the file is being written
        os.symlink(outside, folder / "step-1")
        out.write(b" and half")
    assert os.listdir(outside) == []  # landed in the folder it was walked to, never through the link
    assert (tmp_path / "moved/shard").read_bytes() == b"half and half"


def test_symlinks_named_by_keys_are_links_never_their_targets(local_writes: Maker, tmp_path: Path) -> None:
    store, folder = local_writes()
    target = tmp_path / "secret"
    target.write_bytes(b"secret")
    store.put_bytes("a", b"1")
    os.symlink(target, folder / "link")
    with pytest.raises(EscapesVolume, match="link: it is a symbolic link"):
        store.read_bytes("link")
    assert store.list() == ["a"]
    store.put_bytes("link", b"mine")  # replaces the link itself
    assert target.read_bytes() == b"secret" and not (folder / "link").is_symlink()
    os.unlink(folder / "link")
    os.symlink(target, folder / "link")
    store.delete(["link"])
    assert target.read_bytes() == b"secret" and not os.path.lexists(folder / "link")


def test_a_failed_write_leaves_nothing(local_writes: Maker) -> None:
    store, folder = local_writes()

    def dies() -> None:
        with store.new_file("step-1/shard") as out:
            out.write(b"partial")
            raise RuntimeError("the writer died")

    with pytest.raises(RuntimeError):
        dies()
    assert store.list() == [] and os.listdir(folder / "step-1") == []


def test_a_folder_outside_its_root_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="is not below its volume's root"):
        open_writes(f"file://{tmp_path}/other", {}, where="/Volumes/c/s/v", root=f"file://{tmp_path}/vol")


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoIam]:
    with moto_iam(["signed"]) as running:
        yield running


@pytest.mark.in_a_fork
def test_signed_writes_on_moto(moto: MotoIam, tmp_path: Path) -> None:
    store = open_writes("s3://signed/run", moto.options(), where="/Volumes/main/ml/signed/run")
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(20 << 20))
    store.put_file("step-1/shard", big)
    store.put_bytes("step-1/.metadata", b"m")
    assert store.list() == ["step-1/.metadata", "step-1/shard"]
    assert store.read_bytes("step-1/shard") == big.read_bytes()
    store.delete(["step-1/shard", "step-1/absent"])
    assert store.list() == ["step-1/.metadata"]
    wrong = open_writes("s3://signed/run", {**moto.options(), "secret": "wrong"}, where="/Volumes/main/ml/signed/run")
    with pytest.raises(PermissionError, match=r"^cannot write /Volumes/main/ml/signed/run/x: the storage refused"):
        wrong.put_bytes("x", b"1")


@pytest.mark.in_a_fork
def test_a_delete_refused_key_by_key_is_a_permission_error_and_deletes_nothing(moto: MotoIam, tmp_path: Path) -> None:
    """Keys vended for ``scoped/`` may not delete ``other/``: the multi-object delete's answer lists the key
    as AccessDenied, which is one PermissionError line, and the object stays. (moto authorises the whole
    multi-object request against the bucket, where S3 checks s3:DeleteObject key by key, so on moto such
    keys are refused in their own prefix too: tests/checkpoint/test_rest.py meets it as keep_last's warning.)"""
    vended = Vendor(tmp_path, lifetime_s=600, reaper=False).vend(
        "s3://signed/scoped", moto.options(vending="iam-role-per-vend"), write=True, credential="moto_role"
    )
    assert vended.aws is not None
    keys = {"key": vended.aws.access_key_id, "secret": vended.aws.secret_access_key, "token": vended.aws.session_token}
    admin = moto.admin_client("s3")
    admin.put_object(Bucket="signed", Key="other/c", Body=b"1")
    outside = open_writes("s3://signed/other", {**moto.options(), **keys}, where="/Volumes/main/ml/signed/other")
    refused = r"^cannot delete /Volumes/main/ml/signed/other/c: the storage refused the credentials \(Generic S3 error"
    with pytest.raises(PermissionError, match=refused):
        outside.delete(["c"])
    assert [o["Key"] for o in admin.list_objects_v2(Bucket="signed", Prefix="other/")["Contents"]] == ["other/c"]


def test_a_forked_child_of_a_process_that_wrote_is_refused(s3: S3TestServer) -> None:
    s3.bucket("forked")
    store = open_writes("s3://forked/run", s3.storage_options, where="/Volumes/main/ml/f/run")
    store.put_bytes("a", b"1")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        message = b"wrote"
        try:
            store.put_bytes("b", b"2")
        except OSError as exc:
            message = str(exc).encode()
        os.write(write, message)
        os._exit(0)
    os.close(write)
    answer = os.read(read, 4096).decode()
    os.waitpid(pid, 0)
    os.close(read)
    assert answer.startswith("cannot write /Volumes/main/ml/f/run/b: this process was forked"), answer


def test_reads_and_listings_leave_a_clean_process_clean(s3: S3TestServer) -> None:
    from uc_jupyter.storage.objects import fork_safe

    (s3.bucket("clean") / "run").mkdir(exist_ok=True)
    (s3.bucket("clean") / "run/_manifest.json").write_bytes(b"{}")
    store = open_writes("s3://clean/run", s3.storage_options, where="/Volumes/main/ml/c/run")
    assert fork_safe()
    assert store.read_bytes("_manifest.json") == b"{}"
    assert store.list() == ["_manifest.json"]
    with pytest.raises(FileNotFoundError, match="run/absent does not exist"):
        store.read_bytes("absent")
    assert fork_safe()  # a dataset's maker that read a manifest can still fork its workers
    store.put_bytes("b", b"1")
    assert not fork_safe()


def test_deletes_remove_the_folders_they_empty_and_nothing_else(local_writes: Maker, tmp_path: Path) -> None:
    store, folder = local_writes()
    store.put_bytes("a/b/c/x", b"1")
    store.put_bytes("a/keep", b"2")
    (folder / "a/b/empty-already").mkdir()
    outside = tmp_path / "outside"
    (outside / "inner").mkdir(parents=True)
    os.symlink(outside / "inner", folder / "a/b/c/link")
    store.delete(["a/b/c/x"])
    assert (folder / "a/b/c/link").is_symlink()  # c is not empty: stays
    os.unlink(folder / "a/b/c/link")
    store.put_bytes("a/b/c/x", b"1")
    store.delete(["a/b/c/x"])
    assert sorted(os.listdir(folder / "a")) == ["b", "keep"] and os.listdir(folder / "a/b") == ["empty-already"]
    assert (outside / "inner").is_dir()
    store.delete(["a/keep"])
    assert os.path.isdir(folder / "a")  # a still holds b: only folders this delete emptied go
    assert os.path.isdir(folder)  # never the writes' own folder
