"""uc_jupyter.distributed.outcome: what came back from each rank, turned into values or one error."""

from __future__ import annotations

import pickle
import sys

import pytest

from uc_jupyter.distributed.errors import RankDied, RankError, RankTimeout, RemoteFailure, failure_from
from uc_jupyter.distributed.outcome import Outcome, listing, results
from uc_jupyter.distributed.payload import pack
from uc_jupyter.distributed.protocol import Reply

CALL = 7


def value(result: object) -> Reply:
    return Reply(CALL, value=pack(result))


def raised(rank: int, exc: BaseException, *, pickles: bool = True) -> Reply:
    """The reply of a rank whose call raised ``exc`` (made the way a rank makes it)."""
    try:
        raise exc
    except BaseException as caught:
        failure = failure_from(caught, rank, sys.exc_info()[2], pickle.dumps(caught) if pickles else None)
    return Reply(CALL, failure=failure)


def stopped(rank: int) -> Reply:
    """A rank that answered our interrupt with KeyboardInterrupt."""
    return raised(rank, KeyboardInterrupt())


def outcome_of(size: int, replies: dict[int, Reply], **fields: object) -> Outcome:
    outcome = Outcome(size)
    outcome.replies.update(replies)
    for name, given in fields.items():
        setattr(outcome, name, given)
    return outcome


# ---------------------------------------------------------------- pending
def test_every_rank_is_pending_until_it_replies_or_dies() -> None:
    outcome = Outcome(4)
    assert outcome.pending == [0, 1, 2, 3]
    outcome.replies[2] = value(None)
    outcome.died[0] = "its process exited with code 1"
    assert outcome.pending == [1, 3]


def test_listing_joins_ranks_in_the_order_given() -> None:
    assert listing([0, 2, 3]) == "0, 2, 3"
    assert listing(()) == ""


# ---------------------------------------------------------------- values
def test_values_come_back_in_rank_order_whatever_order_they_arrived_in() -> None:
    outcome = outcome_of(3, {2: value("c"), 0: value({"loss": 0.5}), 1: value([1, 2])})
    assert results(outcome, None, 5.0) == [{"loss": 0.5}, [1, 2], "c"]


def test_a_value_that_cannot_be_unpickled_here_is_a_rank_error_naming_the_rank() -> None:
    # A pickle naming a module the kernel does not have (a class defined only on the rank, say).
    foreign = Reply(CALL, value=b"cnowhere_on_this_machine\nThing\n.")
    outcome = outcome_of(2, {0: value(1), 1: foreign})
    with pytest.raises(RankError) as caught:
        results(outcome, None, 5.0)
    assert caught.value.ranks == (1,)
    assert str(caught.value).startswith("rank 1's result cannot be unpickled here (ModuleNotFoundError: ")
    assert str(caught.value).endswith("return plain data (numbers, lists, arrays, tensors, state dicts)")
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


# ---------------------------------------------------------------- failures
def test_one_failing_rank_raises_its_own_exception_carrying_the_rank_report() -> None:
    outcome = outcome_of(2, {0: value(1), 1: raised(1, ValueError("bad batch"))}, reason="failure")
    with pytest.raises(ValueError, match="^bad batch") as caught:
        results(outcome, None, 5.0)
    assert str(caught.value) == "bad batch"  # its own message; the rank report is its note
    rank_error = caught.value.rank_error  # type: ignore[attr-defined]
    assert isinstance(rank_error, RankError) and str(rank_error) == "rank 1 of 2 raised ValueError: bad batch"


def test_one_failure_the_kernel_cannot_rebuild_is_a_rank_error() -> None:
    outcome = outcome_of(2, {0: raised(0, ValueError("bad"), pickles=False), 1: value(1)}, reason="failure")
    with pytest.raises(RankError) as caught:
        results(outcome, None, 5.0)
    assert str(caught.value) == "rank 0 of 2 raised ValueError: bad"


def test_several_failures_are_one_rank_error_listing_each_in_rank_order() -> None:
    replies = {2: raised(2, KeyError("k")), 0: raised(0, ValueError("v")), 1: value(1)}
    with pytest.raises(RankError) as caught:
        results(outcome_of(3, replies, reason="failure"), None, 5.0)
    assert type(caught.value) is RankError
    assert caught.value.ranks == (0, 2)
    assert str(caught.value) == "2 of 3 ranks failed: rank 0: ValueError: v; rank 2: KeyError: 'k'"


def test_ranks_that_did_not_stop_after_a_failure_are_named_and_the_pool_is_restarted() -> None:
    outcome = outcome_of(3, {0: raised(0, ValueError("v"), pickles=False)}, reason="failure", killed=(1, 2))
    with pytest.raises(RankError) as caught:
        results(outcome, None, 5.0)
    assert str(caught.value) == (
        "rank 0 of 3 raised ValueError: v; ranks 1, 2 did not stop, "
        "so the pool was stopped (the next call starts a fresh one)"
    )


def test_our_own_interrupt_of_the_other_ranks_is_not_counted_as_their_failure() -> None:
    # Rank 0 failed; the pool interrupted rank 1, which answered KeyboardInterrupt: one failure only.
    outcome = outcome_of(2, {0: raised(0, ValueError("v")), 1: stopped(1)}, reason="failure")
    with pytest.raises(ValueError, match="^v") as caught:
        results(outcome, None, 5.0)
    assert str(caught.value) == "v"
    assert caught.value.rank_error.ranks == (0,)  # type: ignore[attr-defined]


def test_a_keyboard_interrupt_the_users_code_raised_by_itself_is_a_failure() -> None:
    outcome = outcome_of(2, {0: value(1), 1: raised(1, KeyboardInterrupt("mine"), pickles=False)})
    with pytest.raises(RankError) as caught:
        results(outcome, None, 5.0)
    assert caught.value.ranks == (1,)


# ---------------------------------------------------------------- deaths
def test_a_dead_rank_is_rank_died_with_how_it_died_and_its_last_log_lines() -> None:
    outcome = outcome_of(3, {0: value(1)}, reason="died")
    outcome.died[2] = "its process killed by signal SIGKILL"
    outcome.tails[2] = "allocating 80 GB\n"
    outcome.replies[1] = stopped(1)  # interrupted because rank 2 died: not a failure of its own
    with pytest.raises(RankDied) as caught:
        results(outcome, None, 5.0)
    assert str(caught.value) == "rank 2 died: its process killed by signal SIGKILL; the pool was stopped"
    (death,) = caught.value.failures
    assert (death.rank, death.type_name, death.traceback) == (2, "RankDied", "allocating 80 GB\n")


def test_deaths_outrank_failures_and_both_are_reported() -> None:
    outcome = outcome_of(3, {0: raised(0, ValueError("v"))}, reason="died")
    outcome.died.update({2: "exited with code 1", 1: "exited with code 3"})
    with pytest.raises(RankDied) as caught:
        results(outcome, None, 5.0)
    assert caught.value.ranks == (0, 1, 2)
    assert str(caught.value) == "rank 1 died: exited with code 3; rank 2 died: exited with code 1; the pool was stopped"


def test_a_lost_rank_is_shown_first_and_the_ranks_that_failed_after_it_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("UC_JUPYTER_VERBOSE", raising=False)
    peer_gone = RuntimeError("[gloo/transport/tcp/pair.cc:537] Read error: Connection reset by peer")
    outcome = outcome_of(3, {0: raised(0, peer_gone), 2: raised(2, peer_gone)}, reason="died")
    outcome.died[1] = "its process killed by signal SIGKILL"
    outcome.tails[1] = "step 65\n"
    with pytest.raises(RankDied) as caught:
        results(outcome, None, 5.0)
    assert caught.value.report() == [
        "rank 1 died: its process killed by signal SIGKILL",
        "  step 65",
        "ranks 0, 2 failed after rank 1 was lost: RuntimeError: [gloo/transport/tcp/pair.cc:537] Read error: "
        "Connection reset by peer (and 1 more: verbose shows each)",
        "the pool was stopped (the next call starts a fresh one)",
    ]
    assert caught.value._render_traceback_() == caught.value.report()  # what a notebook shows
    monkeypatch.setenv("UC_JUPYTER_VERBOSE", "1")  # verbose: every rank's own report, in rank order
    with pytest.raises(RankDied) as verbose:
        results(outcome, None, 5.0)
    assert [line for line in verbose.value.report() if line.startswith("[rank")][:1] == [
        "[rank 0] RuntimeError: [gloo/transport/tcp/pair.cc:537] Read error: Connection reset by peer"
    ]


# ---------------------------------------------------------------- timeouts
def test_a_timeout_names_every_rank_it_stopped() -> None:
    # Rank 0 answered, rank 1 answered our interrupt, rank 2 never answered.
    outcome = outcome_of(3, {0: value(1), 1: stopped(1)}, reason="timeout")
    with pytest.raises(RankTimeout) as caught:
        results(outcome, 2.5, 5.0)
    assert isinstance(caught.value, TimeoutError)
    assert str(caught.value) == "the call ran past timeout=2.5 s; ranks 1, 2 were stopped"
    assert caught.value.failures == ()


def test_a_timeout_whose_ranks_had_to_be_killed_says_the_pool_restarts_and_keeps_real_failures() -> None:
    outcome = outcome_of(2, {0: raised(0, ValueError("v"))}, reason="timeout", killed=(1,))
    with pytest.raises(RankTimeout) as caught:
        results(outcome, 60.0, 5.0)
    assert str(caught.value) == (
        "the call ran past timeout=60 s; ranks 1 were stopped, "
        "so the pool was stopped (the next call starts a fresh one)"
    )
    assert caught.value.ranks == (0,)


# ---------------------------------------------------------------- Ctrl-C
def test_ctrl_c_on_every_rank_is_one_line_and_the_pool_stays_warm() -> None:
    outcome = outcome_of(2, {0: stopped(0), 1: stopped(1)}, reason="interrupt", interrupted=(0, 1))
    with pytest.raises(KeyboardInterrupt) as caught:
        results(outcome, None, 5.0)
    assert str(caught.value) == "interrupted 2 ranks; the pool is still warm"
    assert caught.value._render_traceback_() == ["interrupted 2 ranks; the pool is still warm"]  # type: ignore[attr-defined]


def test_ctrl_c_on_some_ranks_says_how_many_of_the_pool() -> None:
    outcome = outcome_of(3, {0: value(1), 1: value(2), 2: stopped(2)}, reason="interrupt", interrupted=(2,))
    with pytest.raises(KeyboardInterrupt, match="^interrupted 1 rank of 3; the pool is still warm$"):
        results(outcome, None, 5.0)


def test_ctrl_c_with_ranks_that_would_not_stop_says_they_were_killed_within_the_grace() -> None:
    outcome = outcome_of(2, {0: stopped(0)}, reason="interrupt", interrupted=(0, 1), killed=(1,))
    with pytest.raises(KeyboardInterrupt) as caught:
        results(outcome, None, 2.0)
    assert str(caught.value) == (
        "interrupted 2 ranks; ranks 1 did not stop within 2 s and were killed (the next call starts a fresh pool)"
    )


def test_ctrl_c_wins_over_a_failure_that_came_back_meanwhile() -> None:
    outcome = outcome_of(2, {0: raised(0, ValueError("v")), 1: stopped(1)}, reason="interrupt", interrupted=(1,))
    with pytest.raises(KeyboardInterrupt, match="^interrupted 1 rank of 2; the pool is still warm$"):
        results(outcome, None, 5.0)


def test_a_remote_failure_made_by_hand_still_reads_as_its_rank() -> None:
    failure = RemoteFailure(rank=0, type_name="builtins.OSError", message="disk full", traceback="")
    with pytest.raises(RankError) as caught:
        results(outcome_of(1, {0: Reply(CALL, failure=failure)}), None, 5.0)
    assert str(caught.value) == "rank 0 of 1 raised OSError: disk full"
