"""Attacks through the notebook features: the sidebar's paged volume listing (``after`` tokens, symlinks,
sizes), the server-made "Insert %uc_load" line, include/exclude globs, decode errors and the local Spark
server's stamp file.

The attackers: a principal of the same catalog without READ VOLUME on a volume, who asks the server
for its folders and lines anyway (forged tokens, other spellings of the path); and someone who chooses
the names of files and folders in a volume (or may plant symlinks in its storage), whose prize is code
run in another person's kernel, or names, sizes and paths outside the volume.

These attempts succeeded against the code as first written and are fixed:

- a file, folder, volume or table name holding ``{...}`` (or ``$name``) ran code in the kernel (or
  changed the line) when the line "Insert %uc_load" wrote for it was run: IPython evaluates these in a
  line magic's arguments, quotes or not (``uc_jupyter.server.load_lines._word`` now refuses such names,
  and line breaks);
- a comma in a file name split the line's --include into other files' patterns, and white space at
  either end of the name was stripped (the line read ``a.txt`` for `` a.txt``): ``file_line`` refuses
  the comma and ``_glob_escape`` brackets that white space;
- a folder swapped for a symlink out of the volume after ``resolve_volume_path`` checked it was
  listed, with the sizes of the files outside; a file swapped for a symlink after the listing showed
  the size of the file outside (``uc_jupyter.server.listing`` now lists and sizes through handles
  checked to lie inside the volume);
- an ``after`` token nested past json's recursion limit was a 500 with a traceback, not a 400.

Every other attempt here was held already (a line break in a name: by the quoting, see its test).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from IPython.core.interactiveshell import InteractiveShell

from uc_jupyter.catalog import InvalidName, NotFound, PermissionDenied, as_principal
from uc_jupyter.catalog.embedded.external import ReservedStorage
from uc_jupyter.catalog.embedded.local import EscapesVolume, LocalCatalog
from uc_jupyter.data import UCVolumeDataset, decode_image
from uc_jupyter.data.volume.decode import DecodeError
from uc_jupyter.jupyter.args import parse
from uc_jupyter.jupyter.magics import LOAD_OPTIONS
from uc_jupyter.server.browse import status_of
from uc_jupyter.server.listing import BadRequest, Entry, page_token, volume_entries
from uc_jupyter.server.load_lines import file_line, load_line

ALICE = "alice"
SECRET_NAME = "SECRET_NAME.key"
SECRET_SIZE = 12345
# Code in a name: no period or space (a volume or table name may hold neither), no single quote.
PAYLOAD = '{setattr(__import__("sys"),"uc_pwned",1)}'


@pytest.fixture
def world(catalog: LocalCatalog, tmp_path: Path) -> dict[str, Any]:
    """Volumes main.ml.open (alice may read it: a.txt, d/ok.txt) and main.ml.secret (she may not:
    plans/, hidden.txt), and a folder outside every volume holding a secret file."""
    catalog.create_principal(ALICE)
    catalog.grant("main", "USE CATALOG", ALICE)
    catalog.grant("main.ml", "USE SCHEMA", ALICE)
    for name in ("open", "secret"):
        catalog.create_volume(f"main.ml.{name}")
    catalog.grant("main.ml.open", "READ VOLUME", ALICE)
    open_root = Path(catalog.resolve_volume_path("/Volumes/main/ml/open").path)
    secret_root = Path(catalog.resolve_volume_path("/Volumes/main/ml/secret").path)
    (open_root / "a.txt").write_text("a")
    (open_root / "d").mkdir()
    (open_root / "d" / "ok.txt").write_text("ok")
    (secret_root / "plans").mkdir()
    (secret_root / "plans" / "p.txt").write_text("p")
    (secret_root / "hidden.txt").write_text("hidden")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / SECRET_NAME).write_bytes(b"x" * SECRET_SIZE)
    return {"cat": catalog, "open": open_root, "secret": secret_root, "outside": outside}


def leaks(text: str, world: dict[str, Any], asked: str = "") -> list[str]:
    """What of the storage (paths, names outside, names in the secret volume) ``text`` gives away,
    beyond what the caller ``asked`` for (an error may repeat the path it was given)."""
    secrets = [str(world["open"]), str(world["secret"]), str(world["outside"]), SECRET_NAME, "plans", "hidden.txt"]
    return [s for s in secrets if s in text and s not in asked]


def outcome_of(call: Any) -> Any:
    """What ``call()`` returns, or the error it raises."""
    try:
        return call()
    except Exception as exc:
        return exc


# ------------------------------------------------------------------ the listing: grants and spellings


SECRET_SOURCES = [
    "/Volumes/main/ml/secret",
    "/Volumes/main/ml/secret/",
    "/Volumes/main/ml/secret/plans",
    "/Volumes/main/ml/secret/plans/p.txt",
    "/Volumes/main/ml/secret/hidden.txt",
    "/Volumes/main/ml/secret/no-such-folder",
    "/Volumes/MAIN/ML/SECRET/plans",
    "/Volumes/main/ml/secret/./plans/",
]


@pytest.mark.parametrize("source", SECRET_SOURCES)
def test_without_read_volume_a_folder_listing_and_a_load_line_tell_nothing(world: dict[str, Any], source: str) -> None:
    """Every path into the volume, existing or not, folder or file, gets the same 403 naming the
    privilege: no names, counts, kinds, storage path, nor whether the path exists."""
    answers = []
    with as_principal(ALICE):
        calls: list[Callable[[], object]] = [
            lambda: volume_entries(world["cat"], source),
            lambda: load_line(world["cat"], source),
        ]
        for call in calls:
            with pytest.raises(PermissionDenied) as caught:
                call()
            assert status_of(caught.value) == 403
            assert not leaks(str(caught.value), world)
            answers.append(str(caught.value))
    assert answers[0] == answers[1] == str(PermissionDenied(ALICE, "READ VOLUME", "main.ml.secret"))


@st.composite
def spellings_of_the_secret_volume(draw: st.DrawFn) -> str:
    """Other spellings of a path into main.ml.secret, reached from main.ml.open or directly."""
    volume = "".join(c.upper() if draw(st.booleans()) else c for c in "secret")
    into = draw(st.sampled_from(["", "/plans", "/plans/", "/hidden.txt", "/./plans"]))
    start = draw(
        st.sampled_from(
            [
                f"/Volumes/main/ml/{volume}",
                f"/Volumes/main/ml/open/../{volume}",
                f"/Volumes/main/ml/open/%2e%2e/{volume}",
                f"/Volumes/main/ml/open/..%2f{volume}",
                f"/Volumes/main/ml/open//../{volume}",
                f"/Volumes//main/ml/{volume}",
                f"/volumes/main/ml/{volume}",
                f"/Volumes/main/ml/open/{volume}/..",
                f"/Volumes/main/ml/open/\\..\\{volume}",
                f"//Volumes/main/ml/{volume}",
                f"/Volumes/main/ml/open/d/../../{volume}",
            ]
        )
    )
    return start + into


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(source=spellings_of_the_secret_volume())
def test_no_spelling_of_a_path_lists_the_unreadable_volume(world: dict[str, Any], source: str) -> None:
    """A spelling is refused (400), denied (403) or names nothing in main.ml.open (404); it never
    lists or writes a line for what main.ml.secret holds."""
    with as_principal(ALICE):
        calls: list[Callable[[], object]] = [
            lambda: volume_entries(world["cat"], source),
            lambda: load_line(world["cat"], source),
        ]
        for call in calls:
            answer = outcome_of(call)
            if isinstance(answer, Exception):
                assert isinstance(answer, (InvalidName, PermissionDenied, NotFound, EscapesVolume)), answer
                assert status_of(answer) in (400, 403, 404)
                assert not leaks(str(answer), world, asked=repr(source)), answer
            else:
                assert not leaks(json.dumps(answer), world), answer


def test_a_symlink_in_a_readable_volume_into_the_unreadable_one_is_neither_listed_nor_followed(
    world: dict[str, Any],
) -> None:
    (world["open"] / "peek").symlink_to(world["secret"], target_is_directory=True)
    (world["open"] / "peek.txt").symlink_to(world["secret"] / "hidden.txt")
    with as_principal(ALICE):
        page = volume_entries(world["cat"], "/Volumes/main/ml/open")
        assert [e["name"] for e in page["entries"]] == ["d", "a.txt"] and page["total"] == 2
        for source in ("/Volumes/main/ml/open/peek", "/Volumes/main/ml/open/peek/plans"):
            for call in (volume_entries, load_line):
                with pytest.raises(EscapesVolume) as caught:
                    call(world["cat"], source)
                assert status_of(caught.value) == 400 and not leaks(str(caught.value), world, asked=source)
        # The look into a folder behind a load line does not follow it either.
        line = load_line(world["cat"], "/Volumes/main/ml/open")["line"]
        assert line == "ds = %uc_load /Volumes/main/ml/open --recursive --to dataset"


# ------------------------------------------------------------------ after tokens


def token_of(kind: int, name: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps([kind, name]).encode()).decode().rstrip("=")


FORGED = [
    token_of(0, "../secret"),
    token_of(1, "/Volumes/main/ml/secret/plans"),
    token_of(0, ""),
    token_of(1, "\x00"),
    token_of(0, "../../../../etc"),
    page_token(Entry("plans", directory=True)),  # a token the secret volume's listing would hand out
]


@pytest.mark.parametrize("after", FORGED)
def test_a_forged_or_replayed_after_token_only_moves_through_the_folder_asked_for(
    world: dict[str, Any], after: str
) -> None:
    """A token is a place in the folder named by ``path`` (READ VOLUME checked there), never a path: it
    cannot list another folder or volume, and it opens no unreadable one."""
    with as_principal(ALICE):
        page = volume_entries(world["cat"], "/Volumes/main/ml/open", limit=10, after=after)
        assert {e["path"].rsplit("/", 1)[0] for e in page["entries"]} <= {"/Volumes/main/ml/open"}
        assert page["total"] == 2 and not leaks(json.dumps(page), world)
        with pytest.raises(PermissionDenied):
            volume_entries(world["cat"], "/Volumes/main/ml/secret", limit=1, after=after)


@pytest.mark.parametrize(
    "after",
    [
        token_of(2, "a"),
        token_of(0, 5),
        "bm90IGpzb24",
        "%%%",
        token_of(0, "x")[:-1] + "!",
        "W10",
        # Nested past json's recursion limit: was a RecursionError, a 500 with a traceback in the log.
        base64.urlsafe_b64encode(b"[" * 5000).decode(),
    ],
)
def test_a_malformed_after_token_is_a_bad_request_for_anyone(world: dict[str, Any], after: str) -> None:
    """Checked before the catalog is asked: the same 400 for a readable, an unreadable and a missing
    volume, so a bad token tells nothing about which exists."""
    messages = set()
    with as_principal(ALICE):
        for path in ("/Volumes/main/ml/open", "/Volumes/main/ml/secret", "/Volumes/main/ml/nothing"):
            with pytest.raises(BadRequest) as caught:
                volume_entries(world["cat"], path, after=after)
            messages.add(str(caught.value))
    assert len(messages) == 1


# ------------------------------------------------------------------ symlinks swapped in


class SwapAfterCheck:
    """The catalog, with the attacker's move made right after ``resolve_volume_path`` checked the
    path: the moment between the check and the listing."""

    def __init__(self, catalog: LocalCatalog, move: Any) -> None:
        self._catalog, self._move = catalog, move

    def resolve_volume_path(self, path: str, **options: Any) -> Any:
        resolved = self._catalog.resolve_volume_path(path, **options)
        self._move()
        return resolved


def test_a_folder_swapped_for_a_symlink_out_after_the_check_is_not_listed(world: dict[str, Any]) -> None:
    """Failed before the fix: the listing showed SECRET_NAME.key and its size from outside the volume."""
    folder = world["open"] / "d"

    def swap() -> None:
        shutil.rmtree(folder)
        folder.symlink_to(world["outside"], target_is_directory=True)

    with as_principal(ALICE), pytest.raises(EscapesVolume) as caught:
        volume_entries(SwapAfterCheck(world["cat"], swap), "/Volumes/main/ml/open/d")  # type: ignore[arg-type]
    assert status_of(caught.value) == 400 and not leaks(str(caught.value), world)
    assert "/Volumes/main/ml/open/d" in str(caught.value)


def test_a_volume_folder_swapped_for_a_symlink_out_is_not_sampled_for_a_load_line(world: dict[str, Any]) -> None:
    folder = world["open"] / "d"
    (world["outside"] / "x.png").write_bytes(b"png")

    def swap() -> None:
        if folder.is_dir() and not folder.is_symlink():
            shutil.rmtree(folder)
            folder.symlink_to(world["outside"], target_is_directory=True)

    with as_principal(ALICE), pytest.raises(EscapesVolume):
        load_line(SwapAfterCheck(world["cat"], swap), "/Volumes/main/ml/open/d")  # type: ignore[arg-type]


def test_a_file_swapped_for_a_symlink_out_after_the_listing_is_not_sized(
    world: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The swap lands between the folder's listing (os.scandir done) and the sizing of its page.
    Failed before the fix: a.txt showed the size of the file outside."""
    real_scandir = os.scandir
    target = world["open"] / "a.txt"

    class Listing:
        def __init__(self, *args: Any) -> None:
            self._inner = real_scandir(*args)

        def __enter__(self) -> Iterator[os.DirEntry[str]]:
            return self._inner.__enter__()

        def __exit__(self, *exc: object) -> None:
            self._inner.__exit__(*exc)
            target.unlink()
            target.symlink_to(world["outside"] / SECRET_NAME)

        def __iter__(self) -> Iterator[os.DirEntry[str]]:
            return iter(self._inner)

    monkeypatch.setattr(os, "scandir", Listing)
    with as_principal(ALICE):
        page = volume_entries(world["cat"], "/Volumes/main/ml/open")
    sizes = {e["name"]: e["size"] for e in page["entries"]}
    assert sizes["a.txt"] != SECRET_SIZE, page
    assert not leaks(json.dumps(page), world)


# ------------------------------------------------------------------ the line "Insert %uc_load" writes


@pytest.fixture
def shell(world: dict[str, Any]) -> Iterator[InteractiveShell]:
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "uc_jupyter")
    ip.run_line_magic("config", "UCMagics.monitor = False")
    yield ip
    ip.run_line_magic("unload_ext", "uc_jupyter")
    ip.run_line_magic("config", "UCMagics.monitor = True")  # the shell is the process's one: its default back
    if hasattr(sys, "uc_pwned"):
        delattr(sys, "uc_pwned")


def insert_and_run(shell: InteractiveShell, catalog: LocalCatalog, source: str) -> Any:
    """What the victim gets from "Insert %uc_load" on ``source`` and running the cell: the refusal
    (a 400 the sidebar shows), or the cell's result."""
    answer = outcome_of(lambda: load_line(catalog, source))
    if isinstance(answer, Exception):
        assert isinstance(answer, BadRequest), answer
        assert status_of(answer) == 400 and "\n" not in str(answer)
        return answer
    line = answer["line"]
    result = shell.run_cell(line)  # type: ignore[no-untyped-call]
    error = result.error_before_exec or result.error_in_exec
    return error if error is not None else shell.user_ns.get(line.split(" = ", 1)[0])


def test_a_file_name_holding_code_runs_nothing_when_its_load_line_is_run(
    world: dict[str, Any], shell: InteractiveShell
) -> None:
    """Failed before the fix: IPython evaluated ``{...}`` inside the quoted --include value."""
    (world["open"] / f"{PAYLOAD}.csv").write_text("a,b\n")
    outcome = insert_and_run(shell, world["cat"], f"/Volumes/main/ml/open/{PAYLOAD}.csv")
    assert not hasattr(sys, "uc_pwned")
    assert isinstance(outcome, BadRequest) or outcome == [str(world["open"] / f"{PAYLOAD}.csv")]


def test_a_folder_name_holding_code_runs_nothing_when_its_load_line_is_run(
    world: dict[str, Any], shell: InteractiveShell
) -> None:
    (world["open"] / PAYLOAD).mkdir()
    (world["open"] / PAYLOAD / "rows.txt").write_text("1")
    insert_and_run(shell, world["cat"], f"/Volumes/main/ml/open/{PAYLOAD}")
    assert not hasattr(sys, "uc_pwned")


def test_a_volume_name_holding_code_runs_nothing_when_its_load_line_is_run(
    world: dict[str, Any], shell: InteractiveShell
) -> None:
    """Anyone with CREATE VOLUME in a shared schema names volumes others click on."""
    world["cat"].create_volume(f"main.ml.`{PAYLOAD}`")
    root = Path(world["cat"].resolve_volume_path(f"/Volumes/main/ml/{PAYLOAD}").path)
    (root / "rows.txt").write_text("1")
    insert_and_run(shell, world["cat"], f"/Volumes/main/ml/{PAYLOAD}")
    assert not hasattr(sys, "uc_pwned")


def test_a_table_name_holding_code_runs_nothing_when_its_load_line_is_run(
    world: dict[str, Any], shell: InteractiveShell
) -> None:
    """Anyone with CREATE TABLE in a shared schema names tables others click on. Failed before the fix."""
    import pyarrow as pa

    world["cat"].create_table(f"main.ml.`{PAYLOAD}`", pa.table({"x": [1]}))
    insert_and_run(shell, world["cat"], f"main.ml.`{PAYLOAD}`")
    assert not hasattr(sys, "uc_pwned")


def test_a_dollar_in_a_file_name_does_not_widen_its_load_line(world: dict[str, Any], shell: InteractiveShell) -> None:
    """IPython replaced ``$pattern`` by the kernel's variable (quotes or not): the line for one file
    read every file matching the variable's value. Failed before the fix."""
    for name in ("$pattern'x.csv", "other'x.csv"):
        (world["open"] / name).write_text("a")
    shell.user_ns["pattern"] = "*"
    outcome = insert_and_run(shell, world["cat"], "/Volumes/main/ml/open/$pattern'x.csv")
    assert isinstance(outcome, BadRequest) or outcome == [str(world["open"] / "$pattern'x.csv")], outcome


@pytest.mark.parametrize(
    "name",
    [
        'x\nimport sys; setattr(sys, "uc_pwned", 1)#',
        'x\'\nimport sys; setattr(sys, "uc_pwned", 1)#',
        'x\rimport sys; setattr(sys, "uc_pwned", 1)#',
        'x\u2028import sys; setattr(sys, "uc_pwned", 1)#',
    ],
)
def test_a_line_break_in_a_file_name_does_not_end_its_load_line(
    world: dict[str, Any], shell: InteractiveShell, name: str
) -> None:
    """The rest of the name would be a second line of Python in the cell, run once the first line's
    --include (``x``, a file that exists) has loaded. Held before: the quoted name left the first line
    with an unclosed quote, so the magic failed and the cell stopped; now no line is written (400)."""
    for first_line_matches in ("x", "x'"):
        (world["open"] / first_line_matches).write_text("the first line's --include matches this one")
    (world["open"] / name).write_text("a")
    outcome = insert_and_run(shell, world["cat"], f"/Volumes/main/ml/open/{name}")
    assert not hasattr(sys, "uc_pwned")
    assert isinstance(outcome, BadRequest)


# Names that try to become options, close quotes, or pass for a glob (no {, }, $ or comma: refused, below).
tricky_names = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="/{}$,", exclude_categories=("Cc", "Cs", "Zl", "Zp")),
    min_size=1,
    max_size=30,
).filter(lambda n: n not in (".", "..") and n.isprintable())


@settings(max_examples=300, deadline=None)
@given(
    name=st.one_of(
        st.sampled_from(
            [
                "--to spark",
                "-h",
                "--help",
                "a' --exclude '*",
                'a" --to "pandas',
                "; rm -rf ~",
                "`id`",
                "a\\' b",
                "*",
                "[!a]*",
                "#not a comment",
                "--include=*",
                "a?b",
                " a",
                "b\u3000",
            ]
        ),
        tricky_names,
    )
)
def test_a_load_line_for_a_file_parses_back_to_that_file_alone(name: str) -> None:
    """Shell metacharacters, quotes, ``--`` and glob characters in a name stay one word of the line:
    the magic's parser gets the folder, --to paths and a glob that matches only this name."""
    import fnmatch

    line = file_line(f"/Volumes/main/ml/open/{name}")
    prefix = "paths = %uc_load "
    assert line.startswith(prefix) and "\n" not in line
    positional, options = parse(line.removeprefix(prefix), LOAD_OPTIONS)
    assert positional == ["/Volumes/main/ml/open"]
    assert set(options) == {"to", "include"} and options["to"] == "paths"
    assert len(options["include"]) == 1, options  # the magic splits --include at commas
    (pattern,) = options["include"]
    assert fnmatch.fnmatchcase(name, pattern)
    for other in {name + "x", "x" + name, "a", "*x", name.strip(), name.replace("?", "x")} - {name}:
        assert not fnmatch.fnmatchcase(other, pattern), other


@pytest.mark.parametrize("name", ["a,b.csv", "a, b.csv", ",.csv"])
def test_a_comma_in_a_file_name_does_not_split_its_load_line_into_other_files(
    world: dict[str, Any], shell: InteractiveShell, name: str
) -> None:
    """--include takes patterns separated by commas: the line for ``a,b.csv`` read ``a`` and ``b.csv``
    (or failed on an empty pattern) instead. Failed before the fix."""
    for other in (name, "a", "b.csv", ".csv"):
        (world["open"] / other).write_text("x")
    outcome = insert_and_run(shell, world["cat"], f"/Volumes/main/ml/open/{name}")
    assert isinstance(outcome, BadRequest) or outcome == [str(world["open"] / name)], outcome


def test_white_space_around_a_file_name_does_not_point_its_load_line_at_another_file(
    world: dict[str, Any], shell: InteractiveShell
) -> None:
    """--include strips each pattern: the line for `` a.txt `` read ``a.txt``. Failed before the fix."""
    (world["open"] / " a.txt ").write_text("spaced")
    assert insert_and_run(shell, world["cat"], "/Volumes/main/ml/open/ a.txt ") == [str(world["open"] / " a.txt ")]


# ------------------------------------------------------------------ include / exclude globs


@pytest.mark.parametrize(
    "include",
    ["../*", "../secret/*", "/etc/*", "**/../..", "*/../../*", "../../*/*", str(Path("/etc/passwd"))],
)
def test_include_patterns_never_reach_outside_the_folder(world: dict[str, Any], include: str) -> None:
    """Globs only narrow the folder's own listing: a pattern naming a parent, another volume or an
    absolute path matches nothing (one line, no storage path)."""
    (world["open"] / "d" / "evil.txt").write_text("e")
    with as_principal(ALICE):
        for recursive in (False, True):
            dataset = outcome_of(
                lambda: UCVolumeDataset("/Volumes/main/ml/open/d", include=include, recursive=recursive)  # noqa: B023
            )
            if isinstance(dataset, Exception):
                assert isinstance(dataset, ValueError) and "holds no matching files" in str(dataset), dataset
                assert not leaks(str(dataset), world)
            else:
                read = [Path(p).resolve() for p in dataset]
                assert all(p.is_relative_to(world["open"].resolve() / "d") for p in read), read


def test_exclude_patterns_cannot_add_files(world: dict[str, Any]) -> None:
    with as_principal(ALICE):
        dataset = UCVolumeDataset("/Volumes/main/ml/open/d", exclude=["../*", "/etc/*", "!*"])
        assert [Path(p).name for p in dataset] == ["ok.txt"]


# ------------------------------------------------------------------ decode errors


@pytest.mark.parametrize("cache", ["auto", "always"])
def test_a_decode_error_names_the_volume_path_not_the_storage_or_cache(
    world: dict[str, Any], tmp_path: Path, cache: str
) -> None:
    (world["open"] / "d" / "broken.png").write_bytes(b"not a png at all")
    cache_dir = tmp_path / "cache"
    extra = {"cache_dir": str(cache_dir), "cache_max_bytes": 10**6, "min_free_bytes": 0} if cache == "always" else {}
    with as_principal(ALICE):
        dataset = UCVolumeDataset(
            "/Volumes/main/ml/open/d", include="broken.png", transform=decode_image, cache=cache, **extra
        )
        with pytest.raises(DecodeError) as caught:
            list(dataset)
    message = str(caught.value)
    assert message.startswith("/Volumes/main/ml/open/d/broken.png: ")
    assert not leaks(message, world) and str(cache_dir) not in message and str(tmp_path) not in message
    assert caught.value.__cause__ is None  # Pillow's own message (with the path it read) is not chained


# ------------------------------------------------------------------ the Spark server's stamp file


def test_no_location_may_cover_the_spark_folder_to_plant_its_stamp(catalog: LocalCatalog, isolated_home: Path) -> None:
    """``spark/used`` is touched (following symlinks) and ``spark/watchdog.json`` is read as written:
    whoever could plant a symlink or a record there could touch another file or mislead the status.
    The folder lies in the home, which no external location (so no volume or table) may cover, even
    for the admin; with none, no principal can write there through the catalog."""
    spark = isolated_home / "spark"
    (spark / "logs").mkdir(parents=True, exist_ok=True)
    spellings = [str(spark), f"file://{spark}", f"{spark}/", f"{isolated_home}/./spark", f"{spark}/logs/.."]
    for url in [*spellings, str(spark / "logs"), str(isolated_home.parent)]:
        with pytest.raises(ReservedStorage):
            catalog.create_external_location("spark_area", url)


def test_a_symlink_planted_at_the_spark_stamp_is_refused_not_followed(
    spark_server: Any, spark_home: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from uc_jupyter.tables.spark import local_server

    victim = tmp_path / "victim"
    victim.write_text("kept")
    os.utime(victim, (0, 0))
    stamp = Path(spark_home) / "spark" / "used"
    saved = stamp.stat().st_mtime
    stamp.unlink()
    stamp.symlink_to(victim)
    monkeypatch.setenv("UC_JUPYTER_HOME", spark_home)
    try:
        with pytest.raises(OSError, match="Too many levels of symbolic links"):  # ELOOP: O_NOFOLLOW
            local_server(progress=lambda _line: None)
        assert victim.stat().st_mtime == 0 and victim.read_text() == "kept"
    finally:
        stamp.unlink()
        stamp.touch()
        os.utime(stamp, (saved, saved))
