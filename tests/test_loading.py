"""load() without Spark: volumes as loaders, datasets and paths; tables as torch datasets; bad values."""

from __future__ import annotations

import re
import textwrap
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.data import DataLoader, UCTableDataset, UCVolumeDataset
from uc_jupyter.data.volume.decode import DecodeError
from uc_jupyter.loading import load
from uc_jupyter.testing.scripts import run_python

VOLUME = "/Volumes/main/ml/docs"
TABLE = "main.ml.t"


@pytest.fixture
def sources(catalog: LocalCatalog) -> LocalCatalog:
    """A volume of three text files and a table whose column names invite splitting ("ab", "a", "b")."""
    info = catalog.create_volume("main.ml.docs")
    folder = Path(info.storage_location.removeprefix("file://"))
    for i in range(3):
        (folder / f"d{i}.txt").write_text(f"doc {i}")
    catalog.create_table(TABLE, pa.table({"ab": [1, 2, 3], "a": [4, 5, 6], "b": [7, 8, 9]}))
    return catalog


def test_volumes_load_as_loader_dataset_or_paths(sources: LocalCatalog) -> None:
    loader = load(VOLUME, decode="text", batch_size=2, num_workers=0)
    assert isinstance(loader, DataLoader) and loader.batch_size == 2
    assert sorted(t for batch in loader for t in batch) == ["doc 0", "doc 1", "doc 2"]
    assert isinstance(load(VOLUME, to="dataset", shuffle=True, seed=3), UCVolumeDataset)
    assert [Path(p).read_text() for p in load(VOLUME, to="paths")] == ["doc 0", "doc 1", "doc 2"]


def rows_of(to: str, where: str) -> list[int]:
    frame = load(TABLE, to=to, where=where)
    return next(iter(frame))["a"].tolist() if to == "torch" else frame["a"].tolist()


# The Spark path starts Spark: marked here, since the fixture is asked for inside the test.
@pytest.mark.parametrize("to", ["torch", pytest.param("pandas", marks=pytest.mark.servers)])
def test_text_after_a_filters_condition_is_refused_never_dropped(sources: LocalCatalog, to: str, request: Any) -> None:
    """deltalake stops at the end of the first complete condition and dropped the rest (every row with
    a > 4 was read); now both paths refuse it, naming where the text goes wrong."""
    if to == "pandas":
        request.getfixturevalue("spark_remote")  # the Spark path
    said = r"found: b" if to == "torch" else r"^Syntax error at or near '=' in '\(a > 4 b = 9\)'$"
    with pytest.raises(Exception, match=said) as caught:
        rows_of(to, "a > 4 b = 9")
    assert "\n" not in str(caught.value)  # Spark's own errors too (issue 30)
    assert rows_of(to, "a > 4 AND b = 9") == [6]  # joined, it is one condition


def test_a_table_loads_as_a_torch_dataset_with_one_str_as_one_column(sources: LocalCatalog) -> None:
    rows = load(TABLE, to="torch", columns="ab", batch_size=2)
    assert isinstance(rows, UCTableDataset) and rows.columns == ["ab"]
    assert next(iter(rows))["ab"].tolist() == [1, 2]
    assert load(TABLE, to="torch").batch_size == 1024  # left out: the default, only then


@pytest.mark.parametrize(
    ("source", "options", "error", "message"),
    [
        (VOLUME, {"batch_size": 0}, ValueError, "invalid batch_size 0: give a whole number >= 1"),
        (VOLUME, {"batch_size": -1}, ValueError, "invalid batch_size -1"),
        (VOLUME, {"batch_size": 1.5}, TypeError, "invalid batch_size 1.5"),
        (VOLUME, {"batch_size": False}, TypeError, "invalid batch_size False"),
        (VOLUME, {"shuffle": "no"}, TypeError, "invalid shuffle 'no': give True or False"),
        (VOLUME, {"recursive": "yes"}, TypeError, "invalid recursive 'yes'"),
        (VOLUME, {"monitor": 1}, TypeError, "invalid monitor 1"),
        (VOLUME, {"seed": -2}, ValueError, "invalid seed -2"),
        (VOLUME, {"num_workers": -1}, ValueError, "invalid num_workers -1"),
        (VOLUME, {"prefetch_factor": 0}, ValueError, "invalid prefetch_factor 0"),
        (VOLUME, {"num_workers": 0, "prefetch_factor": 2}, ValueError, "invalid prefetch_factor with num_workers=0"),
        (VOLUME, {"cache_dir": 5}, TypeError, "invalid cache_dir 5"),
        (VOLUME, {"decode": ""}, ValueError, "--decode must be one of image, text, bytes, none; got ''"),
        (VOLUME, {"to": ""}, ValueError, "--to for volumes must be one of loader, dataset, paths; got ''"),
        (VOLUME, {"labels": "folders"}, ValueError, "invalid labels 'folders'"),
        (VOLUME, {"include": []}, ValueError, "invalid include []: it would match nothing"),
        (VOLUME, {"exclude": 3}, TypeError, "invalid exclude 3: give a glob pattern (a str) or a list of them"),
        (VOLUME, {"resume": "run-1"}, ValueError, "invalid resume 'run-1': give the /Volumes/<catalog>/<schema>/"),
        (VOLUME, {"resume": 5}, ValueError, "invalid resume 5"),
        (
            VOLUME,
            {"to": "dataset", "resume": VOLUME},
            ValueError,
            "--resume applies to --to loader, not to --to dataset",
        ),
        (VOLUME, {"to": "paths", "resume": VOLUME}, ValueError, "--resume applies to --to loader, not to --to paths"),
        (TABLE, {"to": "torch", "resume": VOLUME}, ValueError, "--resume applies to /Volumes paths only"),
        (TABLE, {"include": "*.png"}, ValueError, "--include applies to /Volumes paths only, not to main.ml.t"),
        (TABLE, {"labels": "folder"}, ValueError, "--labels applies to /Volumes paths only"),
        (TABLE, {"to": "torch", "batch_size": 0}, ValueError, "invalid batch_size 0"),
        (TABLE, {"to": "torch", "columns": []}, ValueError, "invalid columns []"),
        (TABLE, {"columns": []}, ValueError, "invalid columns []"),
        (TABLE, {"columns": ["a", 1]}, TypeError, "invalid columns ['a', 1]: 1 is not a str"),
        (TABLE, {"limit": -1}, ValueError, "invalid limit -1"),
        (TABLE, {"limit": True}, TypeError, "invalid limit True"),
        (TABLE, {"version": 1.0}, TypeError, "invalid version 1.0"),
        (TABLE, {"where": 5}, TypeError, "invalid where 5"),
        (TABLE, {"to": "pandas", "where": "a > 1)"}, ValueError, "filter 'a > 1)' has a ')' at character 6"),
        (
            TABLE,
            {"to": "pandas", "seed": 3},
            ValueError,
            "--seed applies to --to torch and to volumes, not to --to pandas",
        ),
    ],
)
def test_bad_values_are_one_line_errors_before_anything_is_read(
    sources: LocalCatalog, source: str, options: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=re.escape(message)) as caught:
        load(source, **options)
    assert "\n" not in str(caught.value)


# ------------------------------------------------------------------ the demo's image folder
IMAGES = "/Volumes/main/ml/images"


@pytest.fixture
def demo(isolated_home: Path) -> None:
    """The demo catalog, small: three class folders of 4 images (32x32 RGB PNGs) and labels.csv."""
    from uc_jupyter.demo import init_demo

    init_demo(rows=30, images_per_class=4)


@pytest.mark.usefixtures("demo")
def test_labels_folder_gives_image_and_label_batches_and_reads_sub_folders_itself() -> None:
    loader = load(IMAGES, decode="image", labels="folder", batch_size=5, shuffle=True)
    assert loader.dataset.classes == ("circle", "square", "triangle")
    batches = list(loader)
    x, y = batches[0]
    assert tuple(x.shape) == (5, 3, 32, 32) and tuple(y.shape) == (5,)
    assert sorted(int(label) for _, labels in batches for label in labels) == [0] * 4 + [1] * 4 + [2] * 4
    assert loader.stats().skipped == 1  # labels.csv
    both = load(IMAGES, decode="image", labels="folder", recursive=True, to="dataset")  # the README's form
    assert len(both) == 12 and both.skipped == 1


@pytest.mark.usefixtures("demo")
def test_decode_image_reads_images_only_and_says_when_recursive_is_missing() -> None:
    dataset = load(IMAGES, recursive=True, decode="image", to="dataset")
    assert len(dataset) == 12 and dataset.skipped == 1
    assert all(tuple(image.shape) == (3, 32, 32) for image in dataset)
    with pytest.raises(ValueError, match=re.escape(f"{IMAGES} holds no image files at its top, only in sub-folders")):
        load(IMAGES, decode="image")
    assert [Path(p).name for p in load(IMAGES, to="paths")] == ["labels.csv"]  # no decoder: every file


@pytest.mark.usefixtures("demo")
def test_include_and_exclude_pick_the_files() -> None:
    circles = load(IMAGES, recursive=True, include="circle/*", exclude=["*_00000.png"], to="paths")
    assert [Path(p).name for p in circles] == [f"circle_{i:05d}.png" for i in (1, 2, 3)]
    pairs = load(IMAGES, labels="folder", include=["square/*", "triangle/*"], to="paths")
    assert [label for _, label in pairs] == [0] * 4 + [1] * 4  # classes: the folders still read
    with pytest.raises(DecodeError, match=re.escape(f"{IMAGES}/labels.csv: decode_image could not decode it")):
        list(load(IMAGES, include="*.csv", decode="image", to="dataset"))  # include= overrides the image filter


# ------------------------------------------------------------------ resume from a run folder of checkpoints
RUN = "/Volumes/main/ml/runs/run-1"


@pytest.fixture
def runs(sources: LocalCatalog) -> LocalCatalog:
    """``sources`` and a volume for checkpoints, main.ml.runs (the run folder itself not made yet)."""
    sources.create_volume("main.ml.runs")
    return sources


def save(state: dict[str, Any], path: str) -> None:
    """``dcp.save`` in this one process (no process group), as a notebook without ranks does."""
    import torch.distributed.checkpoint as dcp

    from uc_jupyter.checkpoint import UCVolumeWriter

    with warnings.catch_warnings():  # torch's word that it saves in one process
        warnings.filterwarnings("ignore", "torch.distributed is disabled", UserWarning)
        dcp.save(state, storage_writer=UCVolumeWriter(path), no_dist=True)


def may_read_the_data_only(catalog: LocalCatalog, principal: str) -> None:
    """``principal`` may read main.ml.docs, not main.ml.runs (where the checkpoints are)."""
    catalog.create_principal(principal)
    for securable, privilege in (("main", "USE CATALOG"), ("main.ml", "USE SCHEMA"), ("main.ml.docs", "READ VOLUME")):
        catalog.grant(securable, privilege, principal)


def texts(loader: DataLoader) -> list[str]:
    return [text for batch in loader for text in batch]


def test_a_first_run_with_resume_starts_at_the_beginning_with_one_notice(
    runs: LocalCatalog, capsys: pytest.CaptureFixture[str]
) -> None:
    loader = load(VOLUME, decode="text", batch_size=1, num_workers=0, resume=RUN)
    assert texts(loader) == ["doc 0", "doc 1", "doc 2"]
    assert capsys.readouterr().err == f"no complete checkpoint under {RUN} yet: the loader starts at the beginning\n"
    assert texts(load(VOLUME, decode="text", batch_size=1, num_workers=0, resume=RUN + "/")) == texts(loader)
    assert capsys.readouterr().err == ""  # said once per run folder and process


def save_two_steps() -> None:
    """Checkpoints of a loader after its first file (step-1) and its second (step-2)."""
    loader = load(VOLUME, decode="text", batch_size=1, num_workers=0)
    stream = iter(loader)
    assert next(stream) == ["doc 0"]
    save({"data": loader}, f"{RUN}/step-1")
    assert next(stream) == ["doc 1"]
    save({"data": loader}, f"{RUN}/step-2")


def test_resume_continues_from_the_newest_checkpoint(runs: LocalCatalog, capsys: pytest.CaptureFixture[str]) -> None:
    save_two_steps()
    resumed = load(VOLUME, decode="text", batch_size=1, num_workers=0, resume=RUN)
    assert texts(resumed) == ["doc 2"]  # the rest of the epoch the checkpoint was taken in
    assert texts(resumed) == ["doc 0", "doc 1", "doc 2"]  # then whole epochs
    assert capsys.readouterr().err == f"the loader continues from {RUN}/step-2\n"


def test_resume_from_a_checkpoint_folder_itself_continues_from_it(
    runs: LocalCatalog, capsys: pytest.CaptureFixture[str]
) -> None:
    save_two_steps()
    resumed = load(VOLUME, decode="text", batch_size=1, num_workers=0, resume=f"{RUN}/step-1")  # not the newest
    assert texts(resumed) == ["doc 1", "doc 2"]
    assert capsys.readouterr().err == (
        f"the loader continues from {RUN}/step-1 (the checkpoint given itself, not a run folder of them)\n"
    )


def test_resume_from_a_checkpoint_whose_save_did_not_finish_is_refused(runs: LocalCatalog) -> None:
    loader = load(VOLUME, decode="text", batch_size=1, num_workers=0)
    next(iter(loader))
    save({"data": loader}, f"{RUN}/step-1")
    folder = Path(runs.get_volume("main.ml.runs").storage_location.removeprefix("file://")) / "run-1"
    (folder / "step-2").mkdir()
    (folder / "step-2/.metadata").write_bytes((folder / "step-1/.metadata").read_bytes())  # no _COMMITTED
    with pytest.raises(
        ValueError, match=re.escape(f"{RUN}/step-2 is a checkpoint whose save did not finish")
    ) as caught:
        load(VOLUME, decode="text", num_workers=0, resume=f"{RUN}/step-2")
    assert str(caught.value).endswith(f"resume from its run folder {RUN} (its newest committed checkpoint) instead")


def test_a_checkpoint_without_a_data_position_is_a_one_line_error(runs: LocalCatalog) -> None:
    import torch

    save({"model": {"w": torch.ones(2)}}, f"{RUN}/step-1")
    with pytest.raises(ValueError, match=re.escape(f"checkpoint {RUN}/step-1 holds no data position: save the")):
        load(VOLUME, num_workers=0, resume=RUN)


def test_a_run_folder_the_principal_may_not_read_is_refused(runs: LocalCatalog) -> None:
    loader = load(VOLUME, decode="text", batch_size=1, num_workers=0)
    next(iter(loader))
    save({"data": loader}, f"{RUN}/step-1")
    may_read_the_data_only(runs, "alice")
    with runs.as_principal("alice"):
        assert len(texts(load(VOLUME, decode="text", num_workers=0))) == 3  # alice may read the data
        with pytest.raises(PermissionError, match="alice lacks READ VOLUME on main.ml.runs"):
            load(VOLUME, decode="text", num_workers=0, resume=RUN)


def test_ranks_resume_together_from_one_checkpoint_on_another_world_size(runs: LocalCatalog) -> None:
    """A checkpoint of one process resumed on 2 ranks: each rank calls load() (rank 0 picks the
    checkpoint for all), and the ranks share the rest of the epoch, each item once; a refusal of
    rank 0 fails every rank rather than leaving the others waiting for it."""
    from uc_jupyter.distributed.errors import RankError
    from uc_jupyter.distributed.pool import RankPool

    loader = load(VOLUME, decode="text", batch_size=1, num_workers=0)
    next(iter(loader))
    save({"data": loader}, f"{RUN}/step-1")
    cell = textwrap.dedent(
        f"""
        from uc_jupyter.loading import load
        loader = load({VOLUME!r}, decode="text", batch_size=1, num_workers=0, resume={RUN!r})
        [text for batch in loader for text in batch]
        """
    )
    may_read_the_data_only(runs, "alice")
    pool = RankPool(2, devices="cpu", stop_grace=2.0)
    try:
        given = pool.execute(cell)
        assert sorted(text for rank in given for text in rank) == ["doc 1", "doc 2"]
        # Rank 0 is refused the run folder: every rank raises its refusal, none waits for rank 0.
        with runs.as_principal("alice"), pytest.raises(RankError) as refused:
            pool.execute(cell, timeout=120)
    finally:
        pool.shutdown()
    denied = "PermissionError: cannot load the checkpoint run /Volumes/main/ml/runs/run-1: alice lacks READ VOLUME"
    assert str(refused.value).startswith("2 of 2 ranks failed: ")
    assert str(refused.value).count(denied) == 2


def test_a_checkpoint_of_other_data_is_refused_in_one_line(runs: LocalCatalog) -> None:
    loader = load(VOLUME, decode="text", batch_size=1, num_workers=0)
    next(iter(loader))
    save({"data": loader}, f"{RUN}/step-1")
    with pytest.raises(ValueError, match=re.escape(f"cannot resume {VOLUME}: the checkpoint's seed is 0")) as caught:
        load(VOLUME, decode="text", batch_size=1, num_workers=0, shuffle=True, seed=3, resume=RUN)
    assert "\n" not in str(caught.value)  # the dataset's own error, not torch's wrapping of every rank's


def test_other_spellings_of_a_run_folder_name_it_or_are_refused(
    runs: LocalCatalog, capsys: pytest.CaptureFixture[str]
) -> None:
    loader = load(VOLUME, decode="text", batch_size=1, num_workers=0)
    next(iter(loader))
    save({"data": loader}, f"{RUN}/step-1")
    dotted = load(VOLUME, decode="text", batch_size=1, num_workers=0, resume="/Volumes/main/ml/runs/./run-1")
    assert texts(dotted) == ["doc 1", "doc 2"]
    assert capsys.readouterr().err == f"the loader continues from {RUN}/step-1\n"  # named in one spelling
    for spelling, refusal in (
        (f"{RUN}/../../docs", "'..' may not climb out of the volume"),  # the data volume, by climbing
        ("/Volumes/main/ml//runs/run-1", "part 3 is empty"),
    ):
        with pytest.raises(ValueError, match=re.escape(refusal)) as caught:  # InvalidName
            load(VOLUME, decode="text", num_workers=0, resume=spelling)
        assert "\n" not in str(caught.value)


RESUME_IN_A_FRESH_PROCESS = textwrap.dedent(
    """
    import json, sys
    from uc_jupyter.storage.objects import fork_safe
    from uc_jupyter.loading import load

    loader = load(sys.argv[1], decode="text", batch_size=2, num_workers=2, resume=sys.argv[2])
    clean = fork_safe()
    texts = sorted(text for batch in loader for text in batch)
    context = loader.multiprocessing_context  # as its workers were started
    print(json.dumps([clean, None if context is None else context.get_start_method(), texts]))
    """
)


def test_a_loader_resuming_from_s3_has_workers_that_can_use_object_storage(
    s3_volume: Callable[..., tuple[str, Path]],
) -> None:
    """Reading the checkpoint from object storage through object_store in this process, after the
    loader was made, would leave forked workers unable to use it (fsspec fallback, or failure for
    gs:// and Azure): the loader spawns the workers it starts after that. In a fresh interpreter:
    the test process may have used object_store."""
    data, folder = s3_volume("texts")
    for i in range(6):
        (folder / f"t{i}.txt").write_text(f"text {i}")
    runs, _ = s3_volume("runs")
    loader = load(data, decode="text", batch_size=2, num_workers=0)
    next(iter(loader))
    save({"data": loader}, f"{runs}/run-1/step-1")
    answer, run = run_python(RESUME_IN_A_FRESH_PROCESS, data, f"{runs}/run-1", timeout=240)
    clean, method, texts = answer
    assert clean or method == "spawn"  # a process that read through object_store has spawned workers
    assert texts == [f"text {i}" for i in range(2, 6)]
    assert f"the loader continues from {runs}/run-1/step-1" in run.stderr
    assert "reads through fsspec" not in run.stderr  # no worker fell back


NOTES = "/Volumes/main/ml/notes"


@pytest.fixture
def two_volumes(runs: LocalCatalog) -> LocalCatalog:
    """``runs`` and a second volume of text files, main.ml.notes."""
    info = runs.create_volume("main.ml.notes")
    folder = Path(info.storage_location.removeprefix("file://"))
    for i in range(2):
        (folder / f"n{i}.txt").write_text(f"note {i}")
    return runs


def test_several_sources_load_as_one_mix_by_weight(two_volumes: LocalCatalog) -> None:
    from uc_jupyter.data import Mix

    loader = load([VOLUME, NOTES], weights=[2, 1], decode="text", batch_size=3, num_workers=0)
    assert isinstance(loader, DataLoader) and isinstance(loader.dataset, Mix)
    assert texts(loader) == ["doc 0", "note 0", "doc 1", "doc 2", "note 1"]  # 2:1, until all_seen
    mix = load([VOLUME, TABLE], weights=[1, 1], to="dataset", columns="a", until="first_exhausted")
    assert isinstance(mix, Mix) and [s if isinstance(s, str) else int(s["a"]) for s in mix][1::2] == [4, 5]


def test_a_mix_resumes_from_a_checkpoint_of_its_loader(two_volumes: LocalCatalog) -> None:
    loader = load([VOLUME, NOTES], weights=[2, 1], decode="text", batch_size=2, num_workers=0)
    stream = iter(loader)
    assert next(stream) == ["doc 0", "note 0"]
    save({"data": loader}, f"{RUN}/step-1")
    resumed = load([VOLUME, NOTES], weights=[1, 1], decode="text", batch_size=2, num_workers=0, resume=RUN)
    # The new weights (1:1) rule from the resume point; each source gives what the epoch owed it.
    assert texts(resumed) == ["doc 1", "note 1", "doc 2"]
    assert texts(resumed) == ["doc 0", "note 0", "doc 1", "note 1", "doc 2"]


def test_a_mix_refuses_what_it_cannot_do_in_one_line(two_volumes: LocalCatalog) -> None:
    refusals: list[tuple[dict[str, Any], str]] = [
        ({"weights": None}, "give weights= for the 2 sources, one number each (e.g. weights=[3, 1])"),
        ({"weights": [1, 1], "to": "pandas"}, "--to for a mix must be one of loader, dataset; got 'pandas'"),
        ({"weights": [1, 1], "columns": ["a"]}, "--columns applies to tables, and this mix has none"),
        ({"weights": [1, 1], "to": "dataset", "batch_size": 2}, "--batch-size applies to a mix's loader, not to"),
        ({"weights": [1, 1], "until": "steps"}, 'give steps= with until="steps"'),
    ]
    for options, message in refusals:
        with pytest.raises(ValueError, match="^" + re.escape(message)):
            load([VOLUME, NOTES], **options)
    with pytest.raises(ValueError, match=r"^--weights applies to several sources mixed, not to one \(/Volumes"):
        load(VOLUME, weights=[1])
    with pytest.raises(ValueError, match=r"^the mix's sources yield different samples: .* give the DataLoader a"):
        load([VOLUME, TABLE], weights=[1, 1], num_workers=0)


def test_a_principal_who_may_not_read_one_source_is_refused_naming_it(two_volumes: LocalCatalog) -> None:
    may_read_the_data_only(two_volumes, "alice")  # main.ml.docs, not main.ml.notes
    with two_volumes.as_principal("alice"), pytest.raises(Exception, match="alice lacks READ VOLUME on main.ml.notes"):
        load([VOLUME, NOTES], weights=[1, 1], to="dataset")


def test_a_mix_saved_on_2_ranks_resumes_on_3_with_each_sample_left_once(two_volumes: LocalCatalog) -> None:
    """The job's mix position is gathered from every rank into the checkpoint, and 3 ranks share what
    the 2 had not delivered of the epoch: every sample of it once, over both runs."""
    from uc_jupyter.distributed.pool import RankPool

    make = f"load([{VOLUME!r}, {NOTES!r}], weights=[2, 1], decode='text', batch_size=1, num_workers=0"
    first = textwrap.dedent(
        f"""
        import torch.distributed.checkpoint as dcp
        from uc_jupyter.checkpoint import UCVolumeWriter
        from uc_jupyter.loading import load
        loader = {make})
        taken = next(iter(loader))
        dcp.save({{"data": loader}}, storage_writer=UCVolumeWriter({RUN!r} + "/step-1"))
        taken
        """
    )
    then = f"from uc_jupyter.loading import load\n[t for batch in {make}, resume={RUN!r}) for t in batch]"
    two = RankPool(2, devices="cpu", stop_grace=2.0)
    try:
        taken = [text for rank in two.execute(first) for text in rank]
    finally:
        two.shutdown()
    three = RankPool(3, devices="cpu", stop_grace=2.0)
    try:
        rest = [text for rank in three.execute(then) for text in rank]
    finally:
        three.shutdown()
    assert len(taken) == 2 and sorted(taken + rest) == ["doc 0", "doc 1", "doc 2", "note 0", "note 1"]
