"""RankError and friends: the rank's report (its error, then its own frames), IPython rendering, the
plain-Python traceback, verbose, pickling, exit descriptions. No ranks here: failures are built from
exceptions raised in this process, as a rank builds them."""

from __future__ import annotations

import pickle
import traceback
from collections.abc import Iterator

import pytest
import torch

from uc_jupyter.catalog import NotFound
from uc_jupyter.distributed.checks import rank_count  # raises from inside uc_jupyter: an internal frame
from uc_jupyter.distributed.errors import (
    RankDied,
    RankError,
    RankTimeout,
    RemoteFailure,
    carrying,
    describe_exit,
    failure_from,
    hide_internal_frames,
    interrupted,
    set_verbose,
    verbose,
)


@pytest.fixture(autouse=True)
def quiet(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts with the default (not verbose) and leaves it so."""
    monkeypatch.delenv("UC_JUPYTER_VERBOSE", raising=False)
    set_verbose(None)
    yield
    set_verbose(None)


def user_code(batch: int) -> None:
    raise ValueError(f"bad batch {batch}")


def calls_into_uc_jupyter() -> None:
    rank_count(0, "n")


def raised(fn: object, *args: object, rank: int = 1) -> RemoteFailure:
    """The failure a rank sends back after ``fn(*args)`` raised, with the exception pickled."""
    try:
        fn(*args)  # type: ignore[operator]
    except Exception as exc:
        return failure_from(exc, rank, exc.__traceback__, pickle.dumps(exc))
    raise AssertionError("did not raise")


def failure(rank: int, message: str = "boom") -> RemoteFailure:
    return RemoteFailure(rank=rank, type_name="builtins.ValueError", message=message, traceback="")


# ---------------------------------------------------------------- the report
def test_the_report_starts_with_the_rank_and_error_then_its_own_frames() -> None:
    report = raised(user_code, 3).report()
    assert report[0] == "[rank 1] ValueError: bad batch 3"
    assert report[1].startswith('  File "') and report[1].endswith("in raised")
    assert report[-2].endswith(", in user_code") and report[-1] == '    raise ValueError(f"bad batch {batch}")'
    assert len(report) == 5  # the headline and two frames of two lines each


def test_uc_jupyters_own_frames_are_hidden_unless_verbose() -> None:
    failed = raised(calls_into_uc_jupyter)
    short = "\n".join(failed.report())
    assert short.startswith("[rank 1] ValueError: n must be a positive whole number of ranks, got 0")
    assert "in calls_into_uc_jupyter" in short and "uc_jupyter/distributed/checks.py" not in short
    full = "\n".join(failed.report(full=True))
    assert "uc_jupyter/distributed/checks.py" in full and ", in rank_count" in full


def test_the_cause_and_the_notes_follow_the_frames() -> None:
    def chained() -> None:
        try:
            {}["key"]
        except KeyError as exc:
            error = RuntimeError("lookup failed")
            error.add_note("check the key")
            raise error from exc

    report = raised(chained).report()
    assert report[0] == "[rank 1] RuntimeError: lookup failed"
    assert report[-2:] == ["  raised from KeyError: 'key'", "check the key"]
    assert "check the key" not in raised(chained).report(notes=False)


def test_frames_of_installed_libraries_are_hidden_like_ours_and_the_users_are_shown() -> None:
    def users_step() -> None:
        torch.nn.Linear(2, 3)(torch.zeros(4))  # raises inside torch, through its Python frames

    try:
        users_step()
    except RuntimeError as exc:
        shown = failure_from(exc, 0, exc.__traceback__, None).report()
        full = failure_from(exc, 0, exc.__traceback__, None).report(full=True)
    assert shown[0].startswith("[rank 0] RuntimeError: mat1 and mat2 shapes cannot be multiplied")
    assert any("torch.nn.Linear(2, 3)(torch.zeros(4))" in line for line in shown)  # the user's line
    assert not any("site-packages" in line for line in shown), shown
    assert any("torch/nn/modules" in line for line in full)  # verbose: every frame


def test_a_dead_rank_shows_its_last_log_lines() -> None:
    dead = RemoteFailure(0, "RankDied", "died: its process killed by signal SIGKILL", "loading shard 3\n")
    assert dead.report() == ["[rank 0] RankDied: died: its process killed by signal SIGKILL", "  loading shard 3"]


# ---------------------------------------------------------------- RankError
def test_messages_name_the_ranks_in_order() -> None:
    assert str(RankError([failure(1)], world_size=4)) == "rank 1 of 4 raised ValueError: boom"
    both = RankError([failure(3, "b"), failure(0, "a")], world_size=4)
    assert str(both) == "2 of 4 ranks failed: rank 0: ValueError: a; rank 3: ValueError: b"
    assert both.ranks == (0, 3)
    assert str(RankError([failure(0)], world_size=2, summary="custom")) == "custom"


def test_a_notebook_shows_each_ranks_report_and_a_summary_only_when_it_adds_something() -> None:
    both = RankError([raised(user_code, 1, rank=1), raised(user_code, 0, rank=0)], world_size=2)
    lines = both._render_traceback_()
    assert lines[0] == "[rank 0] ValueError: bad batch 0"
    assert "[rank 1] ValueError: bad batch 1" in lines and not any("RankError" in line for line in lines)
    timed_out = RankTimeout([], world_size=2, summary="the call ran past timeout=2 s; ranks 0, 1 were stopped")
    assert timed_out._render_traceback_() == ["RankTimeout: the call ran past timeout=2 s; ranks 0, 1 were stopped"]


def test_plain_python_prints_the_report_as_a_note() -> None:
    error = RankError([raised(user_code, 2)], world_size=2)
    printed = "".join(traceback.format_exception(error))
    assert printed.endswith(
        "errors.RankError: rank 1 of 2 raised ValueError: bad batch 2\n[rank 1] ValueError: bad batch 2\n"
        + "\n".join(error.failures[0].report()[1:])
        + "\n"
    )


def test_verbose_leaves_the_rendering_to_ipython_with_every_frame_in_the_note(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("UC_JUPYTER_VERBOSE", "1")
    assert verbose()
    error = RankError([raised(calls_into_uc_jupyter)], world_size=2)
    assert not hasattr(error, "_render_traceback_")  # IPython then prints its own full traceback
    assert "uc_jupyter/distributed/checks.py" in "\n".join(error.__notes__)
    set_verbose(False)  # %config UCMagics.verbose = False wins over the environment
    assert not verbose() and hasattr(RankError([failure(0)], world_size=2), "_render_traceback_")


@pytest.mark.parametrize("cls", [RankError, RankDied, RankTimeout])
def test_errors_pickle_with_their_failures(cls: type[RankError]) -> None:
    error = cls([failure(1)], world_size=2, summary="rank 1 went away")
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is cls and str(back) == "rank 1 went away" and back.failures == error.failures
    plain = pickle.loads(pickle.dumps(RankError([failure(1)], world_size=2)))
    assert str(plain) == "rank 1 of 2 raised ValueError: boom" and not plain.summarised


def test_the_original_exception_comes_back_when_it_unpickles() -> None:
    original = raised(lambda: {}["k"]).original()
    assert isinstance(original, KeyError) and original.args == ("k",)
    assert failure(0).original() is None
    broken = RemoteFailure(0, "mod.Gone", "", "", exception=b"not a pickle")
    assert broken.original() is None and broken.headline == "Gone"


def test_the_original_carries_the_report_for_both_notebooks_and_plain_python() -> None:
    failed = raised(user_code, 5)
    original = failed.original()
    assert original is not None
    error = RankError([failed], world_size=2)
    shown = carrying(original, error)
    assert shown is original and original.rank_error is error  # type: ignore[attr-defined]
    assert original._render_traceback_() == failed.report()  # type: ignore[attr-defined]
    assert original.__notes__ == ["\n".join(failed.report())]


def missing_table() -> None:
    raise NotFound("table main.ml.nope does not exist")


def test_a_catalog_error_from_a_rank_is_shown_as_the_ranks_report_not_as_its_own_line() -> None:
    """Catalog errors show as one line of their own in IPython (errors.OneLine); one a rank raised
    carries the rank's report instead, as any other exception does."""
    failed = raised(missing_table)
    original = failed.original()
    assert isinstance(original, NotFound)
    assert original._render_traceback_() == ["NotFound: table main.ml.nope does not exist"]
    carrying(original, RankError([failed], world_size=2))
    assert original._render_traceback_() == failed.report()
    assert failed.report()[0] == "[rank 1] NotFound: table main.ml.nope does not exist"


# ---------------------------------------------------------------- interrupts and the kernel's frames
def test_an_interrupt_is_a_keyboard_interrupt_shown_as_one_line() -> None:
    stop = interrupted("interrupted 2 ranks; the pool is still warm")
    assert isinstance(stop, KeyboardInterrupt) and str(stop) == "interrupted 2 ranks; the pool is still warm"
    assert stop._render_traceback_() == ["interrupted 2 ranks; the pool is still warm"]  # type: ignore[attr-defined]


@hide_internal_frames
def public_call(error: BaseException) -> None:
    def engine() -> None:  # stands for the pool's own frames
        raise error

    engine()


def frame_names(exc: BaseException) -> list[str]:
    return [frame.name for frame in traceback.extract_tb(exc.__traceback__)]


def test_a_rank_error_leaves_the_public_call_without_the_frames_below_it() -> None:
    with pytest.raises(RankError) as caught:
        public_call(RankError([failure(1)], world_size=2))
    assert frame_names(caught.value)[-1] == "entry" and "engine" not in frame_names(caught.value)
    with pytest.raises(KeyboardInterrupt) as stopped:
        public_call(interrupted("interrupted 2 ranks; the pool is still warm"))
    assert "engine" not in frame_names(stopped.value)


def test_other_errors_and_verbose_keep_every_frame() -> None:
    with pytest.raises(ZeroDivisionError) as caught:
        public_call(ZeroDivisionError("ours, a bug: keep the frames"))
    assert "engine" in frame_names(caught.value)
    set_verbose(True)
    with pytest.raises(RankError) as verbose_error:
        public_call(RankError([failure(1)], world_size=2))
    assert "engine" in frame_names(verbose_error.value)


def test_exits_in_words() -> None:
    assert describe_exit(-11) == "killed by signal SIGSEGV (a crash in native code)"
    assert describe_exit(-15) == "killed by signal SIGTERM"
    assert describe_exit(0) == "exited with code 0"
    assert describe_exit(None) == "stopped answering"
    assert describe_exit(-99) == "killed by signal signal 99"


def test_a_failed_checkpoint_says_which_ranks_and_the_first_ones_error_in_its_line() -> None:
    """torch's CheckpointException lists the ranks, then their tracebacks: its first line names no error."""
    from torch.distributed.checkpoint.api import CheckpointException

    from uc_jupyter.storage.errors import VolumeReadError

    lost = VolumeReadError("cannot write /Volumes/main/ml/runs/a/step-4/__0_0.distcp: No space left on device")
    try:
        raise CheckpointException("save failed", {1: (lost, None), 0: (lost, None)})  # a BaseException
    except CheckpointException as exc:
        failed = failure_from(exc, 0, exc.__traceback__, None)
    assert failed.headline == (
        "CheckpointException: the checkpoint failed on ranks [0, 1]: VolumeReadError: cannot write "
        "/Volumes/main/ml/runs/a/step-4/__0_0.distcp: No space left on device"
    )
    assert "Traceback (most recent call last): (RANK 0)" in failed.traceback  # torch's whole text is kept
    error = RankError([failed], world_size=2)
    assert str(error).startswith("rank 0 of 2 raised CheckpointException: the checkpoint failed on ranks [0, 1]: ")
