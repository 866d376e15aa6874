"""Every tutorial notebook runs top to bottom in a real kernel (nbclient) on the demo catalog.

The checks read the executed notebook: printed outputs, and the widget state nbclient stores in the
notebook's metadata (what a saved notebook shows of the live dashboards).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).parents[2] / "notebooks"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def execute(name: str, cwd: Path) -> Any:
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = NotebookClient(notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(cwd)}})
    client.execute()
    return notebook


def text_of(notebook: Any) -> str:
    """Everything the cells printed or displayed as text, and the errors of cells that raised."""
    parts = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            parts.append(output.get("text", ""))
            parts.append(output.get("data", {}).get("text/plain", ""))
            if output.get("output_type") == "error":
                parts.append(f"{output.get('ename', '')}: {output.get('evalue', '')}")
    return "\n".join(parts)


def noise(notebook: Any) -> list[str]:
    """What a person would read as something gone wrong: anything on stderr (shown in red), and
    errors shown as Python tracebacks rather than the one-line errors the tutorials demonstrate."""
    found = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream" and output.get("name") == "stderr":
                found.append(output.get("text", ""))
            elif output.get("output_type") == "error":
                shown = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(output.get("traceback", [])))
                if "Traceback (most recent call last)" in shown or re.search(r'^\s*File "', shown, re.MULTILINE):
                    found.append(shown)
    return found


def widget_models(notebook: Any) -> list[dict[str, Any]]:
    state = notebook.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    return list(state.values())


VERDICTS = ("no training step:", "input-bound:", "compute-bound:", "start-up:")


def verdicts(notebook: Any) -> list[str]:
    """The dashboards' verdicts as the saved notebook shows them (their HTML's text)."""
    texts = [re.sub(r"<[^>]+>", "", str(m["state"].get("value", ""))) for m in widget_models(notebook)]
    return [text for text in texts if text.startswith(VERDICTS)]


def test_tutorials_are_all_here() -> None:
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == [
        "01_tables_with_spark_connect.ipynb",
        "02_volumes_to_pytorch.ipynb",
        "03_distributed_training.ipynb",
        "04_governance.ipynb",
        "05_checkpoints_and_resume.ipynb",
    ]
    for path in NOTEBOOKS.glob("*.ipynb"):  # committed clean: no outputs
        assert all(not cell.get("outputs") for cell in json.loads(path.read_text())["cells"])


@pytest.mark.usefixtures("spark_remote")
def test_tables_with_spark_connect(tmp_path: Path) -> None:
    notebook = execute("01_tables_with_spark_connect.ipynb", tmp_path)
    out = text_of(notebook)
    assert noise(notebook) == []
    # The export's load says it is under way in our progress line; no Hugging Face bar is left behind.
    assert not any("Generating train split" in json.dumps(m["state"]) for m in widget_models(notebook))
    assert "Generating train split" not in out
    assert "| setosa|" in out.replace("  ", " ") or "setosa" in out
    assert "features (3000, 4) float64 labels (3000,)" in out
    assert "UsageError:" in out and "sepal_lenght" in out
    assert "rows exported and loaded: 3000" in out


@pytest.mark.servers  # runs the notebook in a Jupyter kernel
def test_volumes_to_pytorch(tmp_path: Path) -> None:
    notebook = execute("02_volumes_to_pytorch.ipynb", tmp_path)
    out = text_of(notebook)
    assert noise(notebook) == []
    assert "1000 files; the first is cached at" in out
    assert "main.ml.remote_images, its location and its credential dropped; the server stopped" in out
    assert "6000 samples in 2 epochs" in out
    assert "dataloader/fetch_seconds/rank_0" in out and "dataloader/cache_hit_rate/rank_0" in out
    assert "32 files in the first batch" in out
    # A mix of circles and squares, 3:1: exact in every window, resumed with new weights.
    assert "1333 samples: {'circle': 1000, 'square': 333}" in out
    assert "every window of 8 samples holds {(('circle', 6), ('square', 2))}" in out
    assert "before the checkpoint, 3:1: {'circle': 36, 'square': 12}" in out
    assert "after the resume, 1:1: {'circle': 321, 'square': 321}" in out  # until the squares owed are given
    assert "every sample once: True" in out
    # Each source timed: the squares' 2 ms decode makes them the source the loop waits on.
    assert re.search(r"/Volumes/main/ml/images/square: 100 samples, 25.0% of the mix \(asked 25.0%\), its epoch 0, "
                     r"[\d.]+ ms a sample", out), out  # fmt: skip
    assert "the loop waits most for /Volumes/main/ml/images/square." in out
    # The loop counts labels, no training step: waiting is its design, not a pipeline to fix.
    judged = verdicts(notebook)
    assert judged and all(v.startswith(("no training step:", "compute-bound:", "start-up:")) for v in judged), judged
    images = [m for m in widget_models(notebook) if m["model_name"] == "ImageModel"]
    assert len(images) >= 2  # the shard chart and the latency chart of the dashboard
    bars = [m for m in widget_models(notebook) if m["model_name"] in ("FloatProgressModel", "IntProgressModel")]
    assert any(m["state"].get("value", 0) > 0 for m in bars)  # the cache filled


@pytest.mark.servers  # runs the notebook in a Jupyter kernel
def test_distributed_training(tmp_path: Path) -> None:
    notebook = execute("03_distributed_training.ipynb", tmp_path)
    out = text_of(notebook)
    assert noise(notebook) == []
    assert "[rank 0] rank 0: trained on 1500 rows of its shard" in out
    assert "[rank 1] rank 1: trained on 1500 rows of its shard" in out
    assert "accuracy per rank: [" in out
    assert "[(0, 1500), (1, 1500)]" in out  # the 3000 images, half each (labels.csv left out)
    assert any(m["model_name"] == "ImageModel" for m in widget_models(notebook))
    # A table on 2 ranks: input-bound only with where the wait went (its stages), the rank that sets the
    # step named, and never advice about files.
    (judged,) = verdicts(notebook)
    if judged.startswith("input-bound:"):
        assert re.match(r"input-bound: rank \d waited for data \d+% of the time \(\w+ \d+%", judged), judged
    advice = " ".join(re.sub(r"<[^>]+>", " ", str(m["state"].get("value", ""))) for m in widget_models(notebook))
    assert "smaller files" not in advice and "cache_max_bytes" not in advice


@pytest.mark.servers  # runs the notebook in a Jupyter kernel
def test_governance(tmp_path: Path) -> None:
    notebook = execute("04_governance.ipynb", tmp_path)
    out = text_of(notebook)
    assert noise(notebook) == []
    assert "alice may read 1000 files of /Volumes/main/ml/images/circle" in out
    assert "UsageError: alice lacks SELECT on main.ml.iris" in out
    assert "alice may now read 3000 rows of main.ml.iris" in out


@pytest.mark.servers  # runs the notebook in a Jupyter kernel
def test_checkpoints_and_resume(tmp_path: Path) -> None:
    notebook = execute("05_checkpoints_and_resume.ipynb", tmp_path)
    out = text_of(notebook)
    assert noise(notebook) == []
    assert "[rank 0] step 60 (epoch 1): saved" in out
    assert "rank 1 died: its process killed by signal SIGKILL" in out  # the lost rank, as the pool reports it
    # What the notebook shows for it: the cause first, then at most one line for the rank that failed
    # because of it (its gloo error, no torch frames; none when the pool stopped it first), each once.
    (shown,) = [
        output["traceback"]
        for cell in notebook.cells
        for output in cell.get("outputs", [])
        if output.get("output_type") == "error"
    ]
    shown = [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in shown]
    assert shown[0].startswith("rank 1 died: its process killed by signal SIGKILL"), shown
    after = [line for line in shown if line.startswith("rank 0 ")]
    assert len(after) <= 1 and all(line.startswith("rank 0 failed after rank 1 was lost: ") for line in after), shown
    assert shown[-1] == "the pool was stopped (the next call starts a fresh one)", shown
    assert sum("SIGKILL" in line for line in shown) == 1, shown
    assert not any(line.lstrip().startswith("File ") for line in shown), shown
    newest = re.search(r"newest complete checkpoint: (/Volumes/main/ml/checkpoints/run-[\w-]+)/step-60\n", out)
    assert newest, out
    assert "files left in epoch 1: 2400" in out  # 3000 files, 2 ranks x 10 steps x 30 before the checkpoint
    assert f"[rank 0] resumed from {newest[1]}/step-60: epoch 1, step 60" in out
    assert "epoch 1: 600 files before the checkpoint on 2 ranks, 2400 after the resume on 3 ranks" in out
    assert "every file of the interrupted epoch seen exactly once: True" in out
    tables = [m["state"].get("value", "") for m in widget_models(notebook) if m["model_name"] == "HTMLModel"]
    assert any(re.search(r"<td[^>]*>epoch 1 \(resumed\)</td>", table) for table in tables)
