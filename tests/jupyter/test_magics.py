"""%uc_load and %%uc_distributed through a real InteractiveShell: results, config, errors, completion.

The tests marked ``both_backends`` (what %uc_load and completion ask of the catalog) also run with
RestCatalog + a served home (tests/conftest.py)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from IPython.core.completer import provisionalcompleter
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.lib.pretty import pretty

from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.data import DataLoader, UCTableDataset, UCVolumeDataset
from uc_jupyter.distributed import RankError
from uc_jupyter.distributed.shared import current_shared_pool
from uc_jupyter.jupyter.args import parse
from uc_jupyter.jupyter.magics import DISTRIBUTED_OPTIONS, LOAD_OPTIONS
from uc_jupyter.processes import free_port
from uc_jupyter.testing.ray_cluster import RayTestCluster

README = Path(__file__).parents[2] / "README.md"


def run(shell: InteractiveShell, source: str) -> object:
    """Run a cell; re-raise what it raised (run_cell only prints it)."""
    result = shell.run_cell(source)
    if result.error_before_exec is not None:
        raise result.error_before_exec
    if result.error_in_exec is not None:
        raise result.error_in_exec
    return result.result


def test_every_documented_magic_line_parses() -> None:
    lines = re.findall(r"^(?:\w+ = )?(%%?uc_\w+)(.*)$", README.read_text(), flags=re.MULTILINE)
    assert len(lines) >= 8
    for magic, rest in lines:
        spec = LOAD_OPTIONS if magic == "%uc_load" else DISTRIBUTED_OPTIONS
        parse(rest.split("#", 1)[0], spec)


# ---------------------------------------------------------------- %uc_load, tables
@pytest.mark.both_backends
@pytest.mark.usefixtures("spark_remote")
def test_tables_in_every_form(shell: InteractiveShell, catalog: LocalCatalog) -> None:
    run(shell, "result = %uc_load main.ml.points --to pandas --columns id,tag --where \"tag = 't1'\" --limit 5")
    frame = shell.user_ns["result"]
    assert isinstance(frame, pd.DataFrame) and list(frame.columns) == ["id", "tag"]
    assert len(frame) == 5 and set(frame["tag"]) == {"t1"}
    numbers = shell.run_line_magic("uc_load", "ml.points --to numpy --columns x")  # schema.table in "main"
    assert isinstance(numbers, np.ndarray) and numbers.shape == (50, 1)
    spark = shell.run_line_magic("uc_load", "main.ml.points")
    from pyspark.sql.connect.dataframe import DataFrame as SparkFrame

    assert isinstance(spark, SparkFrame) and spark.count() == 50
    arrow = shell.run_line_magic("uc_load", "main.ml.points --to arrow --version 0")
    assert arrow.num_rows == 50
    hf = shell.run_line_magic("uc_load", "main.ml.points --to hf --columns id")
    assert hf.num_rows == 50 and hf.column_names == ["id"]
    torch_rows = shell.run_line_magic("uc_load", "main.ml.points --to torch --batch-size 8 --shuffle --seed 3")
    assert isinstance(torch_rows, UCTableDataset) and len(torch_rows) == 50
    assert len(next(iter(torch_rows))["id"]) == 8


@pytest.mark.usefixtures("spark_remote")
def test_config_defaults_and_variable_expansion(shell: InteractiveShell, catalog: LocalCatalog) -> None:
    shell.run_line_magic("config", "UCMagics.default_to = {'table': 'pandas'}")
    try:
        shell.user_ns["name"] = "points"
        shell.user_ns["n"] = 3
        frame = run(shell, "%uc_load main.ml.{name} --limit {n}")
        assert isinstance(frame, pd.DataFrame) and len(frame) == 3
    finally:
        shell.run_line_magic("config", "UCMagics.default_to = {'table': 'spark', 'volume': 'loader'}")


def test_config_names_the_defaults(shell: InteractiveShell) -> None:
    magics = shell.magics_manager.registry["UCMagics"]
    assert (magics.nprocs, magics.default_catalog, magics.monitor) == (2, "main", True)
    shell.run_line_magic("config", "UCMagics.nprocs = 3")
    assert magics.nprocs == 3
    shell.run_line_magic("config", "UCMagics.nprocs = 2")


# ---------------------------------------------------------------- %uc_load, volumes
@pytest.mark.both_backends
def test_volumes_as_loader_dataset_and_paths(shell: InteractiveShell, catalog: LocalCatalog) -> None:
    loader = shell.run_line_magic(
        "uc_load", "/Volumes/main/ml/docs --recursive --decode text --batch-size 4 --num-workers 0 --no-monitor"
    )
    assert isinstance(loader, DataLoader) and loader.batch_size == 4 and not loader.monitor
    texts = sorted(t for batch in loader for t in batch)
    assert texts == sorted(f"document {i}" for i in range(12))
    # UCMagics.monitor is on by default for loaders
    assert shell.run_line_magic("uc_load", "/Volumes/main/ml/docs --recursive --num-workers 0").monitor
    dataset = shell.run_line_magic("uc_load", "/Volumes/main/ml/docs/cats --to dataset --shuffle --seed 1")
    assert isinstance(dataset, UCVolumeDataset) and len(dataset) == 6
    paths = shell.run_line_magic("uc_load", "'/Volumes/main/ml/docs/dogs' --to paths")
    assert sorted(Path(p).read_text() for p in paths) == sorted(f"document {i}" for i in range(0, 12, 2))


def test_several_sources_on_the_line_load_one_mix_by_weight(shell: InteractiveShell, catalog: LocalCatalog) -> None:
    line = "/Volumes/main/ml/docs/cats /Volumes/main/ml/docs/dogs --weights 2,1 --until first_exhausted --decode text"
    loader = shell.run_line_magic("uc_load", f"{line} --batch-size 3 --num-workers 0")
    assert isinstance(loader, DataLoader) and loader.monitor  # UCMagics.monitor, as for one volume
    texts = [t for batch in loader for t in batch]
    cats = {f"document {i}" for i in range(1, 12, 2)}
    assert [t in cats for t in texts] == [True, False, True] * 3  # 2:1, until the 6 cats have come
    mix = shell.run_line_magic("uc_load", f"{line} --to dataset")
    assert repr(mix).startswith("Mix(/Volumes/main/ml/docs/cats x 2, /Volumes/main/ml/docs/dogs x 1")


@pytest.mark.both_backends
def test_volumes_with_labels_include_and_exclude(shell: InteractiveShell, catalog: LocalCatalog) -> None:
    pairs = shell.run_line_magic("uc_load", "/Volumes/main/ml/docs --labels folder --decode text --to dataset")
    assert pairs.classes == ("cats", "dogs")  # --labels folder reads the class folders without --recursive
    assert sorted(pairs) == sorted((f"document {i}", 1 - i % 2) for i in range(12))
    picked = shell.run_line_magic(
        "uc_load", "/Volumes/main/ml/docs --recursive --include 'cats/*,dogs/doc00*' --to paths"
    )
    assert sorted(Path(p).name for p in picked) == sorted([*(f"doc{i:02d}.txt" for i in range(1, 12, 2)), "doc00.txt"])
    left = shell.run_line_magic("uc_load", "/Volumes/main/ml/docs/cats --exclude '*1.txt,*3.txt' --to dataset")
    assert len(left) == 3 and left.skipped == 3  # doc01, doc11, doc03 left out
    with pytest.raises(UsageError, match=r"^/Volumes/main/ml/docs holds no files at its top, only in sub-folders"):
        shell.run_line_magic("uc_load", "/Volumes/main/ml/docs --decode text")


@pytest.mark.both_backends
@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("", "give a table name (catalog.schema.table or schema.table) or a /Volumes/... path"),
        ("main.ml.points extra", "give weights= for the 2 sources, one number each (e.g. weights=[3, 1])"),
        ("main.ml.points extra --weights 1,x", "--weights needs a valid value, got '1,x': give numbers separated by"),
        ("main.ml.points --batchsize 3", "unknown option --batchsize; did you mean --batch-size?"),
        ("main.ml.pionts", "table main.ml.pionts does not exist; did you mean main.ml.points?"),
        ("main.ml.points --decode image", "--decode applies to /Volumes paths only, not to main.ml.points"),
        ("/Volumes/main/ml/docs --limit 3", "--limit applies to tables only, not to /Volumes/main/ml/docs"),
        ("/Volumes/main/ml/docs --to pandas", "--to for volumes must be one of loader, dataset, paths; got 'pandas'"),
        ("/tmp/data", "/tmp/data is not a volume path: they start with /Volumes/<catalog>/<schema>/<volume>"),
        ("/Volumes/main/ml/nope", "volume main.ml.nope does not exist"),
        ("main.ml.points --to torch --limit 3", "--limit does not apply to --to torch (a dataset streaming every row)"),
        ("/Volumes/main/ml/docs --batch-size 0", "invalid batch_size 0: give a whole number >= 1"),
        ("/Volumes/main/ml/docs --prefetch-factor 0", "invalid prefetch_factor 0"),
        ("/Volumes/main/ml/docs --num-workers 0 --prefetch-factor 2", "invalid prefetch_factor with num_workers=0"),
        ("/Volumes/main/ml/docs --num-workers -1", "invalid num_workers -1"),
        ("/Volumes/main/ml/docs --seed -1", "invalid seed -1"),
        ("main.ml.points --to torch --batch-size 0", "invalid batch_size 0"),
        ("main.ml.points --limit -1", "invalid limit -1"),
        ("main.ml.points --version -2", "invalid version -2"),
        # Lines Spark analyses (the session's Spark server: marked, as a parameter that starts one).
        pytest.param(
            "main.ml.points --to pandas --columns idx",
            "table main.ml.points has no column 'idx'; did you mean 'id'?",
            marks=pytest.mark.servers,
        ),
        pytest.param(
            "main.ml.points --to pandas --where 'idd > 1'",
            "table main.ml.points has no column 'idd'; did you mean 'id'?",
            marks=pytest.mark.servers,
        ),
        pytest.param(
            "main.ml.points --to pandas --where 'tag > array(1)'",
            'Cannot resolve "(tag > array(1))" due to data type',
            marks=pytest.mark.servers,
        ),
    ],
)
def test_bad_lines_are_one_line_usage_errors(
    shell: InteractiveShell, catalog: LocalCatalog, line: str, message: str, request: pytest.FixtureRequest
) -> None:
    # The lines Spark analyses use the session's server, not one started for this test's home.
    if line.startswith("main.ml.points --to pandas"):
        request.getfixturevalue("spark_remote")
    with pytest.raises(UsageError) as caught:
        shell.run_line_magic("uc_load", line)
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)


@pytest.mark.both_backends
def test_a_missing_grant_names_the_principal(shell: InteractiveShell, catalog: LocalCatalog) -> None:
    catalog.create_principal("bob")
    with catalog.as_principal("bob"), pytest.raises(UsageError, match="bob lacks USE CATALOG on main"):
        shell.run_line_magic("uc_load", "main.ml.points --to torch")


# ---------------------------------------------------------------- completion
def completions(shell: InteractiveShell, line: str) -> list[str]:
    """What the notebook's Tab offers at the end of ``line``."""
    with provisionalcompleter():
        return [c.text for c in shell.Completer.completions(line, len(line))]


@pytest.mark.both_backends
def test_completion_of_names_paths_and_options(shell: InteractiveShell, catalog: LocalCatalog) -> None:
    assert "main.ml.points" in completions(shell, "%uc_load main.ml.po")
    assert completions(shell, "%uc_load main.m") == ["main.ml."]
    assert "ml.points" in completions(shell, "%uc_load ml.p")  # schema.table in the default catalog
    assert completions(shell, "%uc_load /Vol") == ["/Volumes/"]
    assert completions(shell, "%uc_load /Volumes/main/ml/d") == ["/Volumes/main/ml/docs/"]
    assert completions(shell, "%uc_load /Volumes/main/ml/docs/c") == ["/Volumes/main/ml/docs/cats/"]
    assert "/Volumes/main/ml/docs/cats/doc01.txt" in completions(shell, "%uc_load /Volumes/main/ml/docs/cats/")
    assert completions(shell, "%uc_load main.ml.points --batch") == ["--batch-size"]
    assert completions(shell, "%uc_load main.ml.points --to pa") == ["pandas"]  # paths: a volume's
    assert completions(shell, "%uc_load /Volumes/main/ml/docs --labels f") == ["folder"]
    assert completions(shell, "%uc_load /Volumes/main/ml/docs --inc") == ["--include"]


@pytest.mark.both_backends
def test_completion_works_where_the_result_is_assigned_as_every_example_writes_it(
    shell: InteractiveShell, catalog: LocalCatalog
) -> None:
    assert "main.ml.points" in completions(shell, "df = %uc_load main.ml.po")
    assert "main.ml.points" in completions(shell, "df=%uc_load main.ml.po")
    assert completions(shell, "x, y = %uc_load /Volumes/main/ml/d") == ["/Volumes/main/ml/docs/"]
    assert completions(shell, "loader = %uc_load /Volumes/main/ml/docs --lab") == ["--labels"]
    # A comparison or a string is no %uc_load line: Python's completions, never ours.
    assert "main.ml.points" not in completions(shell, "x == %uc_load main.ml.po")
    assert "main.ml.points" not in completions(shell, "s = '%uc_load main.ml.po")


def test_options_are_those_of_the_sources_kind_once_it_is_named(shell: InteractiveShell, catalog: LocalCatalog) -> None:
    table = completions(shell, "df = %uc_load main.ml.points -")
    volume = completions(shell, "ds = %uc_load /Volumes/main/ml/docs -")
    assert {"--columns", "--where", "--limit", "--version"} <= set(table)
    assert not {"--decode", "--labels", "--include", "--recursive", "--cache-dir", "--num-workers"} & set(table)
    assert {"--decode", "--labels", "--include", "--recursive", "--num-workers"} <= set(volume)
    assert not {"--columns", "--where", "--limit", "--version"} & set(volume)
    assert {"--to", "--batch-size", "--shuffle", "--monitor"} <= set(table) & set(volume)
    assert completions(shell, "%uc_load /Volumes/main/ml/docs --to ") == ["dataset", "loader", "paths"]
    assert "--columns" in completions(shell, "%uc_load --co")  # no source yet: every option


@pytest.mark.both_backends
def test_completion_shows_only_what_the_principal_may_use(shell: InteractiveShell, catalog: LocalCatalog) -> None:
    catalog.create_principal("carol")
    with catalog.as_principal("carol"):
        assert completions(shell, "%uc_load main.ml.po") == []


# ---------------------------------------------------------------- %%uc_distributed
def test_a_cell_runs_on_every_rank_with_push_and_pull(shell: InteractiveShell) -> None:
    shell.user_ns["scale"] = 10
    values = run(shell, "%%uc_distributed -n 2 --push scale --pull mine\nmine = (rank + 1) * scale\nmine * 2")
    assert values == [20, 40]
    assert shell.user_ns["mine"] == [10, 20]
    assert run(shell, "%%uc_distributed -n 2\nmine + 1") == [11, 21]  # the ranks keep their namespaces
    assert run(shell, "%%uc_distributed\nworld_size") == [2, 2]  # UCMagics.nprocs ranks by default
    status = shell.run_line_magic("uc_distributed", "--status")
    assert status.size == 2 and status.state == "idle"
    shown = pretty(status).splitlines()  # what the notebook shows, not PoolStatus(...)
    assert shown[0] == f"2 ranks, idle, cpu with gloo, port {status.master_port}"
    assert [line.split(":")[0] for line in shown[1:]] == ["  rank 0", "  rank 1"]
    assert shell.run_line_magic("uc_distributed", "--restart").state == "idle"
    with pytest.raises(RankError, match="NameError: name 'mine' is not defined"):
        run(shell, "%%uc_distributed -n 2\nmine")  # a fresh pool after --restart
    assert shell.run_line_magic("uc_distributed", "--shutdown") is None
    assert current_shared_pool() is None


def test_cell_output_can_be_limited_to_some_ranks(shell: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    run(shell, "%%uc_distributed -n 2 --show 1\nprint('hello from', rank)")
    assert capsys.readouterr().out.splitlines() == ["[rank 1] hello from 1"]


def test_an_error_on_one_rank_is_raised_with_its_traceback(shell: InteractiveShell) -> None:
    with pytest.raises(ZeroDivisionError) as caught:
        run(shell, "%%uc_distributed -n 2\nx = 1\nif rank == 1:\n    x = 1 / 0")
    report = caught.value.__notes__[-1].splitlines()  # plain Python prints it after the error
    assert report == ["[rank 1] ZeroDivisionError: division by zero", report[1], "    x = 1 / 0"]
    assert re.fullmatch(r'  File "<rank cell \d+>", line 3, in <module>', report[1])
    assert caught.value._render_traceback_() == report  # type: ignore[attr-defined]  # what a notebook shows


def test_verbose_is_a_config_trait_that_rank_errors_follow(shell: InteractiveShell) -> None:
    from uc_jupyter.distributed.errors import verbose

    magics = shell.magics_manager.registry["UCMagics"]
    assert magics.verbose is False and not verbose()
    shell.run_line_magic("config", "UCMagics.verbose = True")
    try:
        assert verbose()
        with pytest.raises(ZeroDivisionError) as caught:
            run(shell, "%%uc_distributed -n 2\nif rank == 1:\n    1 / 0")
        assert not hasattr(caught.value, "_render_traceback_")  # IPython's own full traceback, then the note
        assert "Traceback (most recent call last):" in caught.value.__notes__[-1]
    finally:
        shell.run_line_magic("config", "UCMagics.verbose = False")
    assert not verbose()


@pytest.mark.parametrize(
    ("line", "cell", "message"),
    [
        ("-n 2", "x = 1\n%time y = 2", "line 2 ('%time y = 2') uses IPython syntax, which ranks cannot run"),
        ("-n 2", "!ls", "line 1 ('!ls') uses IPython syntax"),
        ("-n 2", "   ", "the cell is empty"),
        ("-n 2", "x = 1\ny = = 2", "line 2 ('y = = 2'): invalid syntax"),
        ("-n 2", "if x:\nprint(x)", "line 2 ('print(x)'): expected an indented block after 'if' statement on line 1"),
        ("-n 2 --gpus 2", "x = 1", "give either -n (ranks) or --gpus (GPU ranks), not both"),
        ("-n 0", "x = 1", "n must be a positive whole number of ranks, got 0"),
        ("-n 2 --push nothing_here", "x = 1", "--push nothing_here: no variable of that name in the notebook"),
        ("-n 2 --show 0,5", "x = 1", "show: rank 5 is not one of this pool's ranks 0..1"),
        ("-n 2 --show some", "x = 1", "--show needs a valid value, got 'some'"),
        ("--gpus 2 --gpu-type Z80", "x = 1", "unknown gpu_type 'Z80'"),
        ("-n 2 --status", "x = 1", "--status is for the line magic %uc_distributed, not for a cell"),
        ("-n 2 extra", "x = 1", "unexpected argument 'extra': options only (e.g. -n 2)"),
        ("-n 2 --cluster yarn", "x = 1", "cluster must be None (this machine), 'ray' (the address in"),
        ("--gpus 12 --gpu-type GPU_8xH100", "x = 1", "gpus=12 is not a multiple of 8, the GPUs per node of"),
    ],
)
def test_bad_cells_are_one_line_usage_errors(shell: InteractiveShell, line: str, cell: str, message: str) -> None:
    with pytest.raises(UsageError) as caught:
        shell.run_cell_magic("uc_distributed", line, cell)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)


def test_the_cluster_is_a_config_trait_a_cells_option_overrides(
    shell: InteractiveShell,
    ray_cluster: RayTestCluster,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("UC_JUPYTER_RAY_ADDRESS", ray_cluster.address)
    magics = shell.magics_manager.registry["UCMagics"]
    assert magics.cluster is None  # this machine
    shell.run_line_magic("config", "UCMagics.cluster = 'yarn'")  # refused when set, in one logged line
    assert magics.cluster is None
    # (once per UCMagics the shell has configured: each %load_ext of the session made one)
    assert {r.getMessage() for r in caplog.records if r.levelname == "ERROR"} == {
        "UCMagics.cluster must be None (this machine), 'ray' (the address in UC_JUPYTER_RAY_ADDRESS or "
        "RAY_ADDRESS) or 'ray://host:port' (Ray Client), got 'yarn'"
    }
    nobody = f"ray://127.0.0.1:{free_port()}"
    shell.run_line_magic("config", f"UCMagics.cluster = {nobody!r}")
    try:
        with pytest.raises(UsageError, match=f"^no Ray cluster answers at {nobody} "):
            shell.run_cell_magic("uc_distributed", "-n 2", "rank")
        values = run(shell, "%%uc_distributed -n 2 --cluster ray\nimport os\nos.environ['NODE_RANK']")
        assert values == ["0", "0"]  # the cell's --cluster won; 2 ranks fit one node
        status = shell.run_line_magic("uc_distributed", "--status")
        assert (status.cluster, status.size) == (ray_cluster.address, 2)
    finally:
        shell.run_line_magic("config", "UCMagics.cluster = None")


def test_the_line_magic_only_manages_the_pool(shell: InteractiveShell) -> None:
    with pytest.raises(UsageError, match="one of --status, --restart, --shutdown"):
        shell.run_line_magic("uc_distributed", "-n 2")
    assert shell.run_line_magic("uc_distributed", "--status") is None  # no pool yet
