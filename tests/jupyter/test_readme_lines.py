"""The README's `%uc_load` lines (section "In a notebook"), run as written in one real Jupyter kernel
over the demo catalog, each result taken through a full pass; the image folder line gives
(images, labels) batches. The lines are read from README.md itself, so the test follows the README."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from uc_jupyter.tables.spark import LocalServer
from uc_jupyter.testing.kernels import Kernel, kernel_env, running_kernel

README = Path(__file__).parents[2] / "README.md"
IMAGES_PER_CLASS = 40  # the demo's 3 classes: 120 images, two batches of 64 (the last one short)
CLASSES = ("circle", "square", "triangle")
# Notebook variables the README's lines expand ({name}), as a reader would have defined them.
VARIABLES = {"folder": "circle"}
_GUARD = 300.0  # seconds: a bound so a broken kernel fails instead of hanging, not a measured duration

# Runs in the kernel: a full pass over what a line made, summarised as JSON.
FULL_PASS = """
def _uc_full_pass(value):
    import json, os
    import torch
    kind = type(value).__name__
    summary = {"kind": kind}
    if hasattr(type(value), "toPandas"):  # a Spark Connect DataFrame (its instances make up attributes)
        summary["items"] = value.count()
    elif kind in ("DataFrame", "ndarray"):
        summary["items"] = len(value)
    elif kind == "Dataset" and hasattr(value, "num_rows"):  # Hugging Face
        summary["items"] = sum(1 for _ in value)
    elif kind == "list":  # --to paths
        summary["items"] = len(value)
        summary["files"] = all(os.path.isfile(v[0] if isinstance(v, tuple) else v) for v in value)
    else:  # loaders and datasets: iterate every element
        items, shapes, pairs = 0, set(), []
        for element in value:
            if isinstance(element, (tuple, list)) and len(element) == 2 and torch.is_tensor(element[1]):
                x, y = element
                shapes.add((tuple(x.shape[1:]), str(x.dtype)))
                pairs += y.tolist()
                items += len(y)
            elif isinstance(element, dict):  # a table dataset's batch of rows
                items += len(next(iter(element.values())))
            else:
                items += len(element) if hasattr(element, "__len__") and not isinstance(element, str) else 1
        summary.update(items=items, shapes=sorted(map(list, shapes)), labels=sorted(set(pairs)), labelled=len(pairs))
        summary["classes"] = list(getattr(getattr(value, "dataset", value), "classes", ()))
    print("UC_PASS " + json.dumps(summary))
"""


def notebook_lines(readme: str) -> list[str]:
    """The lines of the first code block of the README's "In a notebook" section, as written
    (comments removed)."""
    section = readme.split("## In a notebook", 1)[1].split("\n## ", 1)[0]
    block = section.split("```text\n", 1)[1].split("```", 1)[0]
    return [line.split("  #", 1)[0].rstrip() for line in block.splitlines() if line.strip()]


def loaded_variable(line: str) -> str | None:
    """``x`` of a line ``x = %uc_load ...``."""
    found = re.match(r"^(\w+) = %uc_load ", line)
    return found.group(1) if found else None


def test_the_readme_has_the_lines_this_test_runs() -> None:
    lines = notebook_lines(README.read_text())
    loads = [line for line in lines if loaded_variable(line)]
    assert len(loads) >= 6 and len(loads) == sum("%uc_load" in line for line in lines), lines
    assert any(line.startswith("loader = %uc_load /Volumes/main/ml/images ") for line in loads), loads


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory, spark_server: LocalServer) -> Iterator[Kernel]:
    """One kernel for every line, over a home holding the demo catalog; tables through the tests'
    Spark Connect server."""
    home = tmp_path_factory.mktemp("readme_home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("UC_JUPYTER_HOME", str(home))
        patch.setenv("UC_JUPYTER_PRINCIPAL", "admin")
        from uc_jupyter.demo import init_demo

        init_demo(rows=150, images_per_class=IMAGES_PER_CLASS)
    env = kernel_env(UC_JUPYTER_HOME=str(home), UC_JUPYTER_PRINCIPAL="admin", UC_JUPYTER_SPARK_REMOTE=spark_server.url)
    cwd = tmp_path_factory.mktemp("readme_cwd")
    with running_kernel(env=env, cwd=cwd, load_extension=True, timeout=_GUARD) as shell:
        for setup in (FULL_PASS, *(f"{k} = {v!r}" for k, v in VARIABLES.items())):
            cell = shell.run(setup)
            assert cell.failure is None, cell.failure
        yield shell


def full_pass(kernel: Kernel, variable: str) -> dict[str, Any]:
    """Iterate what ``variable`` holds in the kernel; the pass's summary."""
    cell = kernel.run(f"_uc_full_pass({variable})")
    assert cell.failure is None, (variable, cell.failure)
    out = cell.text("stdout")
    found = [json.loads(text.removeprefix("UC_PASS ")) for text in out.splitlines() if text.startswith("UC_PASS ")]
    assert len(found) == 1, out
    return dict(found[0])


def readme_passes(kernel: Kernel, readme: str) -> dict[str, dict[str, Any]]:
    """Run every line of ``readme``'s notebook block in order in ``kernel``; {line: the full pass of
    what it loaded} for each `x = %uc_load ...` line."""
    passes = {}
    for line in notebook_lines(readme):
        variable = run_line(kernel, line)
        if variable is not None:
            passes[line] = full_pass(kernel, variable)
    return passes


def run_line(kernel: Kernel, line: str) -> str | None:
    """Run ``line`` as a cell; the variable it loaded into, if it is ``x = %uc_load ...``."""
    cell = kernel.run(line)  # a UsageError (on stderr, with no error message) fails it too
    assert cell.failure is None, (line, cell.failure)
    return loaded_variable(line)


def test_every_readme_line_runs_and_its_result_takes_a_full_pass(kernel: Kernel) -> None:
    check_passes(readme_passes(kernel, README.read_text()))


def check_passes(passes: dict[str, dict[str, Any]]) -> None:
    for line, summary in passes.items():
        assert summary["items"] > 0, (line, summary)
        if summary["kind"] == "list":
            assert summary["files"], (line, summary)  # --to paths: the files are there
    images = [s for line, s in passes.items() if "/Volumes/main/ml/images " in line + " " and s["kind"] == "DataLoader"]
    assert images, "no README line loads the image folder as a loader"
    for summary in images:  # (images, labels) batches covering every image once
        assert summary["classes"] == list(CLASSES)
        assert summary["shapes"] == [[[3, 32, 32], "torch.uint8"]]
        assert summary["labels"] == [0, 1, 2] and summary["labelled"] == summary["items"] == 3 * IMAGES_PER_CLASS


def test_the_examples_of_the_help_run_too(kernel: Kernel) -> None:
    from uc_jupyter.jupyter.magics import LOAD_HELP

    examples = LOAD_HELP.split("\nExamples:\n", 1)[1].splitlines()
    passes = {line: full_pass(kernel, run_line(kernel, line.strip())) for line in examples}
    assert len(passes) == 3 and all(summary["items"] > 0 for summary in passes.values()), passes
