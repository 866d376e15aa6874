"""Issue 32's run: 2 ranks over a volume and a table mixed 3:1, checkpointed as they go, a rank killed
mid-epoch; resumed on 3 ranks from the newest checkpoint, each source's samples left arrive once.

Twice: as ``%%uc_distributed`` cells in a real Jupyter kernel (what a person runs), and as the same
cell source executed by a RankPool in this process (the layer under the magic, where the error's
type and its rank can be checked). Both over the embedded catalog the test made; a rank SIGKILLs
itself, so the pool sees a real death.
"""

from __future__ import annotations

import ast
import json
import os
import textwrap
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest

from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.checkpoint import latest
from uc_jupyter.distributed.errors import RankDied
from uc_jupyter.distributed.pool import RankPool
from uc_jupyter.testing.kernels import kernel_env, running_kernel

VOLUME = "/Volumes/main/ml/docs"
TABLE = "main.ml.captions"
RUN = "/Volumes/main/ml/runs/run-1"
DOCS, ROWS = 12, 4  # a mix epoch (all_seen, 3:1): 16 samples, 4 steps of 2 ranks x batches of 2


@pytest.fixture
def mixed(catalog: LocalCatalog, local_volume: Callable[..., tuple[str, Path]]) -> LocalCatalog:
    """A volume of 12 text files, a table of 4 rows, and a volume for the run's checkpoints."""
    _, folder = local_volume("docs")
    for i in range(DOCS):
        (folder / f"d{i:02d}.txt").write_text(f"doc {i}")
    catalog.create_table(TABLE, pa.table({"id": list(range(ROWS))}))
    catalog.create_volume("main.ml.runs")
    return catalog


# Every rank builds the same loader; a sample is known by what it is ("d03.txt", "row 1").
MAKE = f"""
import json, os, signal
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from uc_jupyter.checkpoint import UCVolumeReader, UCVolumeWriter, latest
from uc_jupyter.data import DataLoader, Mix, UCTableDataset, UCVolumeDataset

sources = [UCVolumeDataset({VOLUME!r}, shuffle=True, seed=1), UCTableDataset({TABLE!r}, shuffle=True, seed=2)]
mix = Mix(sources, weights=[3, 1], on_uneven="allow")  # "allow": no padding repeats a sample
loader = DataLoader(mix, batch_size=2, num_workers=0, collate_fn=list, mlflow=False)

def known(sample):
    return f"row {{int(sample['id'])}}" if isinstance(sample, dict) else os.path.basename(sample)
"""


def first_run(kept: Path) -> str:
    """Two checkpoints (after steps 1 and 2), each rank writing what it had taken at each; then rank 1
    is killed in step 3, after a batch the newest checkpoint does not hold."""
    return MAKE + textwrap.dedent(
        f"""
        taken = []
        for step, batch in enumerate(loader, start=1):
            taken += [known(sample) for sample in batch]
            if step <= 2:
                dcp.save({{"data": loader}}, storage_writer=UCVolumeWriter(f"{RUN}/step-{{step}}"))
                with open(os.path.join({str(kept)!r}, f"rank-{{dist.get_rank()}}-step-{{step}}.json"), "w") as out:
                    json.dump(taken, out)
            elif dist.get_rank() == 1:
                os.kill(os.getpid(), signal.SIGKILL)
        """
    )


RESUMED = MAKE + textwrap.dedent(
    f"""
    dcp.load({{"data": loader}}, storage_reader=UCVolumeReader(latest({RUN!r})))
    [known(sample) for batch in loader for sample in batch]
    """
)


def delivered_once(before: list[str], rest: list[list[str]]) -> None:
    """What the killed run had taken at its newest checkpoint and what the 3 ranks resumed with make
    up each source's epoch, every sample once."""
    assert len(before) == 8  # 2 steps of 2 ranks x 2 samples, the step the kill cut short not among them
    assert len(rest) == 3 and all(rest), rest  # each of the 3 ranks had its part of what was left
    delivered = Counter(before + [sample for rank in rest for sample in rank])
    whole = [f"d{i:02d}.txt" for i in range(DOCS)] + [f"row {i}" for i in range(ROWS)]
    assert delivered == Counter(whole)  # every sample of each source's epoch once: none repeated, none lost


def taken_at_the_checkpoint(kept: Path) -> list[str]:
    newest = latest(RUN)
    assert newest is not None and newest.endswith("/step-2")
    return [sample for rank in (0, 1) for sample in json.loads((kept / f"rank-{rank}-step-2.json").read_text())]


@pytest.mark.servers  # a Jupyter kernel and its rank pools
@pytest.mark.usefixtures("mixed")
def test_uc_distributed_cells_killed_mid_epoch_on_2_ranks_resume_on_3_with_each_sample_left_once(
    tmp_path: Path,
) -> None:
    env = kernel_env(
        UC_JUPYTER_HOME=os.environ["UC_JUPYTER_HOME"], UC_JUPYTER_PRINCIPAL=os.environ["UC_JUPYTER_PRINCIPAL"]
    )
    with running_kernel(env=env, cwd=tmp_path, load_extension=True) as kernel:
        killed = kernel.run("%%uc_distributed --gpus 2\n" + first_run(tmp_path))
        assert killed.reply["status"] == "error", killed.failure
        assert "rank 1 died: its process killed by signal SIGKILL" in "\n".join(killed.errors[0]), killed.errors
        resumed = kernel.run("%%uc_distributed --gpus 3\n" + RESUMED)
        assert resumed.failure is None, resumed.failure
        kernel.run("%uc_distributed --shutdown")
    delivered_once(taken_at_the_checkpoint(tmp_path), ast.literal_eval(resumed.results[-1]))


@pytest.mark.usefixtures("mixed")
def test_a_mix_killed_mid_epoch_on_2_ranks_resumes_on_3_with_each_sources_samples_left_once(tmp_path: Path) -> None:
    two = RankPool(2, devices="cpu", stop_grace=2.0)
    try:
        with pytest.raises(RankDied, match="rank 1 died: its process killed by signal SIGKILL") as died:
            two.execute(first_run(tmp_path), timeout=240)
    finally:
        two.shutdown()
    assert died.value.ranks[0] == 1
    before = taken_at_the_checkpoint(tmp_path)
    three = RankPool(3, devices="cpu", stop_grace=2.0)
    try:
        rest = three.execute(RESUMED, timeout=240)
    finally:
        three.shutdown()
    delivered_once(before, rest)
