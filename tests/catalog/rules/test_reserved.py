"""uc_jupyter.catalog.rules.reserved: the folders that belong to uc_jupyter and the record of them."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

from uc_jupyter.catalog.rules.reserved import MARKER, inside_marked_folder, mark, reserve, reserved_folders


def test_mark_makes_a_private_folder_holding_its_kind(tmp_path: Path) -> None:
    folder = tmp_path / "a" / "cache"
    mark(folder, "cache")
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    marker = folder / MARKER
    assert marker.read_text() == "cache"
    assert stat.S_IMODE(marker.stat().st_mode) == 0o600
    assert sorted(os.listdir(folder)) == [MARKER]  # no temporary file left beside it


def test_marking_again_keeps_the_first_kind(tmp_path: Path) -> None:
    mark(tmp_path, "home")
    mark(tmp_path, "cache")
    assert (tmp_path / MARKER).read_text() == "home"


def test_a_folder_and_everything_below_it_are_inside_its_mark(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    mark(cache, "cache")
    assert inside_marked_folder(str(cache)) == ("cache", str(cache))
    assert inside_marked_folder(str(cache) + "/") == ("cache", str(cache))
    assert inside_marked_folder(str(cache / "objects" / "ab" / "missing.bin")) == ("cache", str(cache))


def test_a_sibling_whose_name_only_starts_like_the_folder_is_not_inside(tmp_path: Path) -> None:
    mark(tmp_path / "cache", "cache")
    assert inside_marked_folder(str(tmp_path / "cache2" / "x")) is None
    assert inside_marked_folder(str(tmp_path / "cach")) is None
    assert inside_marked_folder(str(tmp_path)) is None  # the parent of a marked folder is not inside it


def test_the_nearest_mark_names_the_folder(tmp_path: Path) -> None:
    mark(tmp_path / "home", "home")
    mark(tmp_path / "home" / "cache", "cache")
    assert inside_marked_folder(str(tmp_path / "home" / "cache" / "x")) == ("cache", str(tmp_path / "home" / "cache"))
    assert inside_marked_folder(str(tmp_path / "home" / "storage")) == ("home", str(tmp_path / "home"))


def test_a_folder_named_like_the_marker_is_no_mark(tmp_path: Path) -> None:
    (tmp_path / "x" / MARKER).mkdir(parents=True)
    assert inside_marked_folder(str(tmp_path / "x" / "y")) is None


def test_an_empty_marker_still_marks_its_folder(tmp_path: Path) -> None:
    (tmp_path / MARKER).write_text("")
    assert inside_marked_folder(str(tmp_path / "y")) == ("folder", str(tmp_path))


def test_reserve_records_the_real_path_once_and_marks_it(tmp_path: Path) -> None:
    home, real = tmp_path / "home", tmp_path / "real_cache"
    real.mkdir()
    alias = tmp_path / "alias"
    alias.symlink_to(real)
    reserve(home, alias, "cache")
    reserve(home, real, "cache")  # the same folder by another spelling: already recorded
    reserve(home, alias, "cache")
    assert reserved_folders(home) == [("cache", str(real.resolve()))]
    assert (real / MARKER).read_text() == "cache"
    assert not (alias / MARKER).is_symlink()  # the marker went into the real folder, not a link
    assert stat.S_IMODE((home / "reserved").stat().st_mode) == 0o600


def test_reserved_folders_keep_recording_order_and_kinds(tmp_path: Path) -> None:
    home = tmp_path / "home"
    for name, kind in (("h", "home"), ("c1", "cache"), ("c2", "cache")):
        reserve(home, tmp_path / name, kind)
    real = tmp_path.resolve()
    assert reserved_folders(home) == [
        ("home", str(real / "h")),
        ("cache", str(real / "c1")),
        ("cache", str(real / "c2")),
    ]


def test_a_home_without_a_record_reserves_nothing(tmp_path: Path) -> None:
    assert reserved_folders(tmp_path / "nowhere") == []


def test_malformed_and_repeated_lines_of_the_record_are_skipped(tmp_path: Path) -> None:
    (tmp_path / "reserved").write_bytes(
        b"cache\t/data/cache\n"
        b"no tab here\n"
        b"cache\trelative/path\n"  # never an absolute real path: not a folder to honour
        b"\n"
        b"cache\t/data/cache\n"
        b"home\t/data/\xff\xfehome\n"  # undecodable bytes do not stop the reading
    )
    assert reserved_folders(tmp_path) == [("cache", "/data/cache"), ("home", "/data/\ufffd\ufffdhome")]


def test_concurrent_reservations_never_interleave_inside_a_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    folders = [tmp_path / f"cache{i:02d}" for i in range(24)]
    threads = [threading.Thread(target=reserve, args=(home, folder, "cache")) for folder in folders]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    lines = (home / "reserved").read_text().splitlines()
    assert all(line.startswith("cache\t/") and line.count("\t") == 1 for line in lines)
    assert {path for _, path in reserved_folders(home)} == {str(f.resolve()) for f in folders}


def test_threads_marking_one_folder_at_once_all_succeed(tmp_path: Path) -> None:
    errors: list[str] = []
    for attempt in range(30):
        folder = tmp_path / str(attempt)
        barrier = threading.Barrier(4)

        def go(folder: Path = folder, barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            try:
                mark(folder, "home")
            except Exception as exc:  # collected: the assertion below names it
                errors.append(repr(exc))

        threads = [threading.Thread(target=go) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(os.listdir(folder)) == [MARKER]
    assert errors == []


def test_a_symlink_planted_where_a_temporary_would_be_is_never_written_through(tmp_path: Path) -> None:
    folder = tmp_path / "shared_cache"
    folder.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious data")
    (folder / f"{MARKER}.{os.getpid()}").symlink_to(victim)  # the name an earlier version wrote through
    mark(folder, "cache")
    assert victim.read_text() == "precious data"
    assert (folder / MARKER).read_text() == "cache" and not (folder / MARKER).is_symlink()
