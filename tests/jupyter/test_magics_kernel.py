"""What a person sees in a real Jupyter kernel (jupyter_client, as JupyterLab talks to it) when a rank
fails, when they press Ctrl-C during a distributed cell, and when uc_jupyter has something to say:
rank errors in three lines, one line for an interrupt, notices once, no MLflow INFO lines."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from uc_jupyter.testing.kernels import Cell, Kernel, kernel_env, running_kernel


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kernel]:
    """One kernel for the module (a rank pool is started once, as in a notebook), with its own home."""
    env = kernel_env(UC_JUPYTER_HOME=str(tmp_path_factory.mktemp("kernel_home")), UC_JUPYTER_PRINCIPAL="admin")
    with running_kernel(env=env, cwd=tmp_path_factory.mktemp("kernel_cwd"), load_extension=True) as shell:
        defined = shell.run(FUNCTIONS)
        assert not defined.errors, defined.errors
        yield shell
        shell.run("%uc_distributed --shutdown")


CPU_RANKS = "no CUDA device is visible: running 2 CPU ranks with gloo instead of GPUs\n"
FUNCTIONS = """\
from uc_jupyter.distributed import distributed
@distributed(gpus=2)
def train(batch):
    import torch.distributed as dist
    if dist.get_rank() == 1:
        raise ValueError(f'bad batch {batch}')
@distributed(gpus=2)
def spin():
    import time
    print('spinning', flush=True)
    while True:
        time.sleep(0.05)
"""


def both_ranks_said(word: str) -> Callable[[Cell], bool]:
    return lambda cell: all(f"[rank {r}] {word}" in cell.text("stdout") for r in (0, 1))


FAILING_CELL = "%%uc_distributed --gpus 2\nfrom uc_jupyter.distributed.pool import rank_count\nif rank == 1:\n"
FAILING_CELL += "    rank_count(0, 'n')  # raises inside uc_jupyter: a frame of ours the user need not see\n"


def test_a_failing_rank_reads_in_three_lines(kernel: Kernel) -> None:
    cell = kernel.run(FAILING_CELL)
    assert cell.reply["status"] == "error" and cell.reply["ename"] == "ValueError"
    assert len(cell.errors) == 1
    lines = cell.errors[0]
    assert len(lines) == 3, lines
    assert lines[0] == "[rank 1] ValueError: n must be a positive whole number of ranks, got 0"
    assert re.fullmatch(r'  File "<rank cell \d+>", line 3, in <module>', lines[1])
    assert lines[2].startswith("    rank_count(0, 'n')")
    assert cell.text("stdout") in ("", CPU_RANKS)  # the module's first ranks say, once, that they run on CPU


def test_a_failing_decorated_function_reads_the_same_way(kernel: Kernel) -> None:
    cell = kernel.run("train.distributed(3)")
    assert cell.reply["ename"] == "ValueError"
    lines = cell.errors[0]
    assert lines[0] == "[rank 1] ValueError: bad batch 3" and len(lines) == 3, lines
    assert lines[1].endswith(", line 6, in train") and lines[2] == "    raise ValueError(f'bad batch {batch}')"


def test_verbose_shows_uc_jupyters_own_frames(kernel: Kernel) -> None:
    assert not kernel.run("%config UCMagics.verbose = True").errors
    try:
        cell = kernel.run(FAILING_CELL)
    finally:
        kernel.run("%config UCMagics.verbose = False")
    text = "\n".join(cell.errors[0])
    assert "uc_jupyter/distributed/pool.py" in text  # the kernel's side: IPython's own traceback
    assert "in rank_count" in text  # the rank's side: the frame inside uc_jupyter
    assert "[rank 1] ValueError: n must be a positive whole number of ranks, got 0" in text
    assert len(kernel.run(FAILING_CELL).errors[0]) == 3  # and back to three lines


def test_ctrl_c_prints_one_line_and_the_pool_stays_warm(kernel: Kernel) -> None:
    kernel.run("%%uc_distributed --gpus 2\nx = 0")  # a warm pool, as after a notebook's first cells
    before = kernel.run("%uc_distributed --status").results
    assert before[0].startswith("2 ranks, idle, cpu with gloo")
    cell = kernel.run(
        "%%uc_distributed --gpus 2\nimport time\nprint('started', flush=True)\nwhile True:\n    time.sleep(0.05)",
        interrupt_when=both_ranks_said("started"),
    )
    assert cell.reply["status"] == "error" and cell.reply["ename"] == "KeyboardInterrupt"  # the cell stopped
    assert cell.errors == [["interrupted 2 ranks; the pool is still warm"]]
    assert cell.text("stderr") == ""
    assert sorted(cell.text("stdout").splitlines()) == ["[rank 0] started", "[rank 1] started"]
    # the same ranks (same pids) answer the next cell
    assert kernel.run("%uc_distributed --status").results == before
    assert kernel.run("%%uc_distributed --gpus 2\nrank").results == ["[0, 1]"]


def test_ctrl_c_during_a_decorated_function_prints_one_line(kernel: Kernel) -> None:
    cell = kernel.run("spin.distributed()", interrupt_when=both_ranks_said("spinning"))
    assert cell.reply["ename"] == "KeyboardInterrupt"
    assert cell.errors == [["interrupted 2 ranks; the pool is still warm"]] and cell.text("stderr") == ""


def test_notices_print_once_as_one_plain_line_of_information(kernel: Kernel) -> None:
    """On the cell's stdout: its stderr is drawn as a pink error band, and a notice is no error."""
    kernel.run("from uc_jupyter import notices\nnotices.reset()")
    first = kernel.run("%%uc_distributed --gpus 2\nx = 1")
    again = kernel.run("%%uc_distributed --gpus 2\nx = 2")
    also = kernel.run("train.distributed(0)")
    assert first.text("stdout") == CPU_RANKS
    assert first.text("stderr") == again.text("stderr") == also.text("stderr") == ""
    assert again.text("stdout") == "" and "Warning" not in first.text("stdout")


def test_mlflow_info_lines_stay_out_of_the_notebook(kernel: Kernel, tmp_path: Path) -> None:
    cell = kernel.run(
        "import mlflow\n"
        f"mlflow.set_tracking_uri('sqlite:///{tmp_path}/mlflow.db')\n"
        "mlflow.set_experiment('first-hour')\n"
        "with mlflow.start_run():\n"
        "    mlflow.log_metric('x', 1.0)\n"
    )
    assert not cell.errors, cell.errors
    assert cell.streams == []  # no "Created MLflow experiment", no alembic migrations, no run link


def test_a_catalog_mistake_from_the_python_api_is_one_line_unless_verbose(kernel: Kernel) -> None:
    """As the magic says it: no traceback through uc_jupyter's modules before the message."""
    code = "from uc_jupyter.tables import table\ntable('nowhere.ml.points')"
    cell = kernel.run(code)
    assert cell.errors == [["NotFound: catalog nowhere does not exist"]], cell.errors
    kernel.run("%config UCMagics.verbose = True")
    try:
        shown = kernel.run(code).errors
    finally:
        kernel.run("%config UCMagics.verbose = False")
    assert len(shown) == 1 and len(shown[0]) > 1 and "frames.py" in "".join(shown[0])  # the whole traceback


def test_tab_completes_a_uc_load_line_assigned_as_people_type_it_with_the_sources_options(kernel: Kernel) -> None:
    made = kernel.run(
        "from uc_jupyter.catalog import get_catalog\n"
        "catalog = get_catalog()\n"
        "catalog.create_catalog('main'); catalog.create_schema('main.ml'); catalog.create_volume('main.ml.images')"
    )
    assert made.failure is None, made.failure
    assert kernel.complete("images = %uc_load /Volumes/main/ml/im") == ["/Volumes/main/ml/images/"]
    assert kernel.complete("x, y = %uc_load /Volumes/main/ml/images --la") == ["--labels"]
    offered = kernel.complete("loader = %uc_load /Volumes/main/ml/images --")
    assert "--shuffle" in offered and "--columns" not in offered and "--where" not in offered
