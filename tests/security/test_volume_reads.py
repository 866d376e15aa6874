"""Attacks on volume reads: symlinks out of a volume, swaps after the listing, FIFOs, and bad option values.

Each test here failed on the code before reads walked from the volume's root without following
symlinks (``uc_jupyter.storage.local_volume``) and before the options were checked
(``uc_jupyter.options``), except where a docstring says the attempt was held already. The
attacker is a principal who may write files into a volume (or the volume's storage) that another
principal, or the same one later, trains on; the prize is a file outside the volume: another
owner's table, the metastore with its storage credentials, a file of the OS user.

Not covered, by design (see the module docstring of ``uc_jupyter.storage.local_volume``): a *hard link*
inside the volume to a file outside is a regular file of the volume and is read. Making one needs
write access to the volume and, with Linux's ``fs.protected_hardlinks``, ownership of or read and
write access to the target, so its maker could read the target anyway.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from uc_jupyter.catalog import InvalidName
from uc_jupyter.catalog.embedded.local import EscapesVolume, LocalCatalog
from uc_jupyter.data import DataLoader, UCTableDataset, UCVolumeDataset, decode_bytes, labelled_folder, map_paths
from uc_jupyter.loading import load
from uc_jupyter.storage.errors import VolumeReadError

SECRET = b"OUTSIDE-SECRET"
CACHE_MODES = ["auto", "always"]


@pytest.fixture
def volume(catalog: LocalCatalog) -> tuple[str, Path]:
    """A managed volume holding a.txt and b.txt; returns (its /Volumes path, its folder)."""
    info = catalog.create_volume("main.ml.shared")
    folder = Path(info.storage_location.removeprefix("file://"))
    (folder / "a.txt").write_bytes(b"inside-a")
    (folder / "b.txt").write_bytes(b"inside-b")
    return info.path, folder


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder outside every volume, with a secret of the same size as the volume's files' names."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_bytes(SECRET)
    (folder / "a.txt").write_bytes(b"OUTSIDE!")  # the size of inside-a: a swap keeps the listed size
    (folder / "b.txt").write_bytes(b"OUTSIDE!")
    return folder


def contents(items: list[Any]) -> list[bytes]:
    """What a consumer reads from the yielded items (paths, or bytes already decoded)."""
    return [item if isinstance(item, bytes) else Path(item).read_bytes() for item in items]


def quietly(make: Callable[[], UCVolumeDataset]) -> UCVolumeDataset:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return make()


def dataset(path: str, cache: str, **options: Any) -> UCVolumeDataset:
    extra = {"cache_max_bytes": 10**6, "min_free_bytes": 0} if cache == "always" else {}
    return UCVolumeDataset(path, cache=cache, **extra, **options)


# ------------------------------------------------------------------ symlinks present when listed


@pytest.mark.parametrize("cache", CACHE_MODES)
def test_a_symlink_to_an_outside_file_is_not_read(volume: tuple[str, Path], outside: Path, cache: str) -> None:
    path, folder = volume
    (folder / "c.txt").symlink_to(outside / "secret.txt")
    with pytest.warns(UserWarning, match=r"skipped 1 entry that is not a regular file, e\.g\. 'c\.txt'"):
        ds = dataset(path, cache)
    read = contents(list(ds))
    assert read == [b"inside-a", b"inside-b"]
    assert all(SECRET not in r for r in read)


@pytest.mark.parametrize("cache", CACHE_MODES)
def test_a_symlinked_sub_folder_is_not_entered(volume: tuple[str, Path], outside: Path, cache: str) -> None:
    path, folder = volume
    (folder / "sub").symlink_to(outside, target_is_directory=True)
    (folder / "real").mkdir()
    (folder / "real" / "c.txt").write_bytes(b"inside-c")
    with pytest.warns(UserWarning, match="'sub'"):
        ds = dataset(path, cache, recursive=True)
    assert [f.relative for f in ds.listing.files] == ["a.txt", "b.txt", "real/c.txt"]
    assert all(SECRET not in r and b"OUTSIDE" not in r for r in contents(list(ds)))


def test_a_symlink_to_the_metastore_does_not_reach_it(volume: tuple[str, Path], isolated_home: Path) -> None:
    """Pointing a volume file at our own files: the metastore holds every principal's grants."""
    path, folder = volume
    metastore = isolated_home / "metastore.db"
    assert metastore.exists()
    (folder / "m.db").symlink_to(metastore)
    ds = quietly(lambda: UCVolumeDataset(path))
    assert [f.relative for f in ds.listing.files] == ["a.txt", "b.txt"]
    assert b"SQLite format" not in b"".join(contents(list(ds)))


def test_a_labelled_folder_skips_symlinked_classes_and_files(volume: tuple[str, Path], outside: Path) -> None:
    path, folder = volume
    (folder / "cats").mkdir()
    (folder / "cats" / "c.txt").write_bytes(b"meow")
    (folder / "cats" / "d.txt").symlink_to(outside / "secret.txt")
    (folder / "dogs").symlink_to(outside, target_is_directory=True)
    pairs = quietly(lambda: labelled_folder(path, decode=decode_bytes))
    assert pairs.classes == ("cats",)
    assert list(pairs) == [(b"meow", 0)]


def test_a_dataset_folder_through_a_symlink_is_refused(volume: tuple[str, Path]) -> None:
    """Even a link that stays inside the volume: datasets follow none (one rule, no exceptions)."""
    path, folder = volume
    (folder / "real").mkdir()
    (folder / "real" / "c.txt").write_bytes(b"inside-c")
    (folder / "alias").symlink_to(folder / "real", target_is_directory=True)
    with pytest.raises(EscapesVolume, match="/Volumes/main/ml/shared/alias goes through the symbolic link") as caught:
        UCVolumeDataset(f"{path}/alias")
    assert "\n" not in str(caught.value)


def test_a_fifo_is_not_listed(volume: tuple[str, Path]) -> None:
    """A FIFO looks like a file of size 0 to a listing that follows types loosely; opening it for
    reading waits for a writer for ever."""
    path, folder = volume
    os.mkfifo(folder / "pipe.txt")
    ds = quietly(lambda: UCVolumeDataset(path))
    assert [f.relative for f in ds.listing.files] == ["a.txt", "b.txt"]


# ------------------------------------------------------------------ swaps after the listing


def swap_for_symlink(path: Path, target: Path) -> None:
    path.unlink()
    path.symlink_to(target)


@pytest.mark.parametrize("cache", CACHE_MODES)
def test_a_file_swapped_for_a_symlink_after_the_listing_is_refused(
    volume: tuple[str, Path], outside: Path, cache: str
) -> None:
    path, folder = volume
    ds = dataset(path, cache)
    swap_for_symlink(folder / "a.txt", outside / "a.txt")  # same size as the listed file
    with pytest.raises(VolumeReadError, match=r"/Volumes/main/ml/shared/a\.txt.*symbolic link") as caught:
        contents(list(ds))
    assert "\n" not in str(caught.value)


def test_a_decoder_never_reads_a_file_swapped_after_the_listing(volume: tuple[str, Path], outside: Path) -> None:
    path, folder = volume
    decoded = map_paths(UCVolumeDataset(path), decode_bytes)
    swap_for_symlink(folder / "b.txt", outside / "b.txt")
    stream = iter(decoded)
    assert next(stream) == b"inside-a"
    with pytest.raises(VolumeReadError, match="b.txt"):
        next(stream)


def test_a_path_resolved_then_swapped_for_a_symlink_is_never_read_outside(
    catalog: LocalCatalog, volume: tuple[str, Path], outside: Path
) -> None:
    """Issue 29's attempt: resolve_volume_path checked a.txt, then a.txt became a symlink to a file of
    the same size outside. What the resolved path teaches to read with, open(), refuses it."""
    path, folder = volume
    resolved = catalog.resolve_volume_path(f"{path}/a.txt")
    swap_for_symlink(folder / "a.txt", outside / "a.txt")
    with pytest.raises(VolumeReadError) as caught:
        resolved.open()
    assert str(caught.value).startswith(f"cannot read {path}/a.txt: {path}/a.txt is a symbolic link now")
    assert "\n" not in str(caught.value) and b"OUTSIDE" not in str(caught.value).encode()


@pytest.mark.parametrize("cache", CACHE_MODES)
def test_a_folder_swapped_for_a_symlink_after_the_listing_is_refused(
    volume: tuple[str, Path], outside: Path, cache: str
) -> None:
    """The intermediate component: the dataset's folder (or a folder below it) becomes a symlink."""
    path, folder = volume
    (folder / "data" / "cls").mkdir(parents=True)
    (folder / "data" / "cls" / "a.txt").write_bytes(b"inside-a")
    (outside / "cls").mkdir()
    (outside / "cls" / "a.txt").write_bytes(b"OUTSIDE!")
    whole = dataset(f"{path}/data", cache, recursive=True)
    below = dataset(f"{path}/data", cache, recursive=True)
    os.rename(folder / "data", folder / "data.old")
    (folder / "data").symlink_to(outside, target_is_directory=True)
    with pytest.raises(VolumeReadError, match="/Volumes/main/ml/shared/data is a symbolic link now"):
        contents(list(whole))
    os.unlink(folder / "data")
    os.rename(folder / "data.old", folder / "data")
    os.rename(folder / "data" / "cls", folder / "data" / "cls.old")
    (folder / "data" / "cls").symlink_to(outside / "cls", target_is_directory=True)
    with pytest.raises(VolumeReadError, match="/Volumes/main/ml/shared/data/cls is a symbolic link now"):
        contents(list(below))


def test_a_fifo_swapped_in_after_the_listing_is_refused_not_waited_on(volume: tuple[str, Path]) -> None:
    path, folder = volume
    decoded = map_paths(UCVolumeDataset(path), decode_bytes)
    (folder / "a.txt").unlink()
    os.mkfifo(folder / "a.txt")
    outcome: list[BaseException | list[Any]] = []

    def read() -> None:
        try:
            outcome.append(list(decoded))
        except BaseException as exc:
            outcome.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=30)  # not a measured duration: a guard, so the old behaviour fails instead of hanging
    if reader.is_alive():
        os.close(os.open(folder / "a.txt", os.O_WRONLY | os.O_NONBLOCK))  # let the blocked reader go
        reader.join()
        pytest.fail("the read waited on a FIFO swapped in for a listed file")
    assert isinstance(outcome[0], VolumeReadError)
    assert "a.txt: it is not a regular file now" in str(outcome[0])


def test_a_transform_that_reads_files_reads_the_checked_file_even_if_swapped_meanwhile(
    volume: tuple[str, Path], outside: Path
) -> None:
    """Between the check and the read: the swap comes while the transform runs, before it reads."""
    path, folder = volume

    class SwapThenRead:
        reads_files = True

        def __call__(self, source: IO[bytes] | str) -> bytes:
            name = "a.txt" if not seen else "b.txt"
            seen.append(name)
            swap_for_symlink(folder / name, outside / name)
            if isinstance(source, str):
                return Path(source).read_bytes()
            return source.read()

    seen: list[str] = []
    assert list(UCVolumeDataset(path, transform=SwapThenRead())) == [b"inside-a", b"inside-b"]


def test_every_path_yielded_in_place_stays_inside_the_volume(volume: tuple[str, Path], outside: Path) -> None:
    path, folder = volume
    (folder / "link.txt").symlink_to(outside / "secret.txt")
    ds = quietly(lambda: UCVolumeDataset(path))
    yielded = list(ds)
    assert len(yielded) == 2
    assert all(os.path.realpath(item).startswith(os.path.realpath(folder) + os.sep) for item in yielded)


# ------------------------------------------------------------------ '..' (held before too)


@pytest.mark.parametrize("relative", ["..", "../shared", "x/../../secret", "a/../.."])
def test_dot_dot_cannot_climb_out_of_a_volume(volume: tuple[str, Path], relative: str) -> None:
    """Held before as well: the /Volumes grammar refuses '..' segments; kept as a regression test."""
    path, _ = volume
    with pytest.raises(InvalidName, match="'..' may not climb out of the volume"):
        UCVolumeDataset(f"{path}/{relative}")


# ------------------------------------------------------------------ symlinks anywhere in a tree

_NAMES = st.sampled_from(["a", "b", "c", "d"])
_TREES = st.lists(
    st.tuples(st.lists(_NAMES, min_size=1, max_size=3), st.sampled_from(["file", "link-file", "link-dir"])),
    min_size=1,
    max_size=8,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tree=_TREES)
def test_no_placement_of_symlinks_lets_a_recursive_listing_read_outside(
    catalog: LocalCatalog, outside: Path, tree: list[tuple[list[str], str]]
) -> None:
    info = catalog.create_volume(f"main.ml.v{os.urandom(4).hex()}")
    folder = Path(info.storage_location.removeprefix("file://"))
    (folder / "anchor.txt").write_bytes(b"inside")
    for parts, kind in tree:
        target = folder.joinpath(*parts)
        above = [p for p in target.parents if str(p).startswith(str(folder))]
        if os.path.lexists(target) or any(p.is_symlink() or p.is_file() for p in above):
            continue  # taken already, or below a link or a file
        target.parent.mkdir(parents=True, exist_ok=True)
        if kind == "file":
            target.write_bytes(b"inside")
        elif kind == "link-file":
            target.symlink_to(outside / "secret.txt")
        else:
            target.symlink_to(outside, target_is_directory=True)
    ds = quietly(lambda: UCVolumeDataset(info.path, recursive=True))
    for item in ds:
        assert Path(item).read_bytes() == b"inside"
        assert os.path.realpath(item).startswith(os.path.realpath(folder) + os.sep)


# ------------------------------------------------------------------ bad option values


def _whole(minimum: int) -> Callable[[Any], bool]:
    return lambda v: type(v) is int and v >= minimum


def _patterns(empty_list: bool) -> Callable[[Any], bool]:
    def allowed(v: Any) -> bool:
        if v is None or (type(v) is str and v):
            return True
        return type(v) in (list, tuple) and (empty_list or bool(v)) and all(type(p) is str and p for p in v)

    return allowed


# What each option allows, as a rule; the values tried mix allowed ones with every kind of wrong one.
_ALLOWED: dict[str, Callable[[Any], bool]] = {
    "shuffle": lambda v: type(v) is bool,
    "recursive": lambda v: type(v) is bool,
    "seed": _whole(0),
    "prefetch": lambda v: v is None or _whole(1)(v),
    "pin_window": _whole(1),
    "include": _patterns(empty_list=False),
    "exclude": _patterns(empty_list=True),
}
_VALUES: list[Any] = [
    *("no", "yes", "", "*.txt", "a*"),
    *(0, 1, 7, -1, 0.0, 1.5, 2.0, float("nan"), True, False, None),
    *([], [5], ["*.txt"], ("a*", "b*"), [""], {"a*"}, b"*.txt", object()),
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(option=st.sampled_from(sorted(_ALLOWED)), value=st.sampled_from(_VALUES))
def test_every_option_value_is_taken_as_meant_or_refused_in_one_line(
    volume: tuple[str, Path], option: str, value: Any
) -> None:
    """A value is either one the option allows (and then means what it says) or a one-line
    TypeError/ValueError naming the option: never coerced (shuffle="no" shuffled, include=5 crashed)."""
    path, _ = volume
    if _ALLOWED[option](value):
        try:
            ds = UCVolumeDataset(path, **{option: value})
        except ValueError as exc:
            refused = str(exc)
        else:
            refused = ""
            if option in ("shuffle", "seed"):
                assert getattr(ds, option) == value and type(getattr(ds, option)) is type(value)
        # An allowed pattern may leave no file: said so, naming the folder.
        assert not refused or (option in ("include", "exclude") and "holds no matching files" in refused)
        return
    with pytest.raises((TypeError, ValueError)) as caught:
        UCVolumeDataset(path, **{option: value})
    message = str(caught.value)
    assert f"invalid {option} " in message and "\n" not in message


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p, t: load(p, batch_size=0), "invalid batch_size 0"),
        (lambda p, t: load(p, batch_size=-3), "invalid batch_size -3"),
        (lambda p, t: load(p, batch_size=2.5), "invalid batch_size 2.5"),  # type: ignore[arg-type]
        (lambda p, t: load(p, batch_size=True), "invalid batch_size True"),
        (lambda p, t: load(p, shuffle="no"), "invalid shuffle 'no'"),  # type: ignore[arg-type]
        (lambda p, t: load(p, prefetch_factor=0), "invalid prefetch_factor 0"),
        (lambda p, t: load(p, num_workers=0, prefetch_factor=2), "invalid prefetch_factor with num_workers=0"),
        (lambda p, t: load(p, num_workers=1.5), "invalid num_workers 1.5"),  # type: ignore[arg-type]
        (lambda p, t: load(p, recursive="no"), "invalid recursive 'no'"),  # type: ignore[arg-type]
        (lambda p, t: load(t, to="torch", batch_size=0), "invalid batch_size 0"),
        (lambda p, t: load(t, to="torch", columns=[]), "invalid columns []"),
        (lambda p, t: UCTableDataset(t, columns=[]), "invalid columns []"),
        (lambda p, t: UCTableDataset(t, shuffle="no"), "invalid shuffle 'no'"),
        (lambda p, t: UCTableDataset(t, version=True), "invalid version True"),
        (lambda p, t: UCVolumeDataset(p, include=5), "invalid include 5"),
        (lambda p, t: UCVolumeDataset(p, exclude=5), "invalid exclude 5"),
        (lambda p, t: UCVolumeDataset(p, include=[]), "invalid include []"),
        (lambda p, t: labelled_folder(p, include=5), "invalid include 5"),
        (lambda p, t: DataLoader(UCVolumeDataset(p), batch_size=0), "invalid batch_size 0"),
        (lambda p, t: DataLoader(UCVolumeDataset(p), num_workers=2, prefetch_factor=0), "invalid prefetch_factor 0"),
        (lambda p, t: DataLoader(list(range(4)), shuffle="no", num_workers=0), "invalid shuffle 'no'"),
        (lambda p, t: DataLoader(list(range(4)), 2, "no", num_workers=0), "invalid shuffle 'no'"),
    ],
)
def test_bad_values_are_one_line_errors_wherever_they_are_given(
    volume: tuple[str, Path], catalog: LocalCatalog, make: Callable[[str, str], Any], message: str
) -> None:
    import pyarrow as pa

    catalog.create_table("main.ml.t", pa.table({"ab": [1, 2], "a": [3, 4], "b": [5, 6]}))
    path, _ = volume
    with pytest.raises((TypeError, ValueError)) as caught:
        make(path, "main.ml.t")
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)


def test_columns_given_as_one_str_is_one_column(catalog: LocalCatalog) -> None:
    """``columns="ab"`` was read as the columns a and b: a silent wrong result."""
    import pyarrow as pa

    catalog.create_table("main.ml.t", pa.table({"ab": [1, 2], "a": [3, 4], "b": [5, 6]}))
    batch = next(iter(UCTableDataset("main.ml.t", columns="ab")))
    assert list(batch) == ["ab"]
    batch = next(iter(load("main.ml.t", to="torch", columns="ab")))
    assert list(batch) == ["ab"]
