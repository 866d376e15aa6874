"""RankError and friends: messages, IPython rendering, pickling, exit descriptions (pure)."""

from __future__ import annotations

import pickle

import pytest

from uc_jupyter.distributed.errors import RankDied, RankError, RankTimeout, RemoteFailure, describe_exit


def failure(rank: int, message: str = "boom", exc: BaseException | None = None) -> RemoteFailure:
    return RemoteFailure(
        rank=rank,
        type_name="builtins.ValueError",
        message=message,
        traceback=f'Traceback (most recent call last):\n  File "<cell>", line 1, in <module>\nValueError: {message}\n',
        exception=pickle.dumps(exc) if exc is not None else None,
    )


def test_messages_name_the_ranks_in_order() -> None:
    assert str(RankError([failure(1)], world_size=4)) == "rank 1 of 4 raised ValueError: boom"
    both = RankError([failure(3, "b"), failure(0, "a")], world_size=4)
    assert str(both) == "2 of 4 ranks failed: rank 0: ValueError: a; rank 3: ValueError: b"
    assert both.ranks == (0, 3)
    assert str(RankError([failure(0)], world_size=2, summary="custom")) == "custom"


def test_ipython_rendering_shows_each_remote_traceback_prefixed() -> None:
    lines = RankError([failure(0, "a"), failure(1, "b")], world_size=2)._render_traceback_()
    assert lines[0] == "[rank 0] Traceback (most recent call last):"
    assert "[rank 0] ValueError: a" in lines and "[rank 1] ValueError: b" in lines
    assert lines[-1] == "RankError: 2 of 2 ranks failed: rank 0: ValueError: a; rank 1: ValueError: b"


@pytest.mark.parametrize("cls", [RankError, RankDied, RankTimeout])
def test_errors_pickle_with_their_failures(cls: type[RankError]) -> None:
    error = cls([failure(1)], world_size=2, summary="rank 1 went away")
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is cls and str(back) == "rank 1 went away" and back.failures == error.failures


def test_the_original_exception_comes_back_when_it_unpickles() -> None:
    original = failure(0, exc=KeyError("k")).original()
    assert isinstance(original, KeyError) and original.args == ("k",)
    assert failure(0).original() is None
    broken = RemoteFailure(0, "mod.Gone", "", "", exception=b"not a pickle")
    assert broken.original() is None and broken.headline == "Gone"


def test_exits_in_words() -> None:
    assert describe_exit(-11) == "killed by signal SIGSEGV (a crash in native code)"
    assert describe_exit(-15) == "killed by signal SIGTERM"
    assert describe_exit(0) == "exited with code 0"
    assert describe_exit(None) == "stopped answering"
    assert describe_exit(-99) == "killed by signal signal 99"
