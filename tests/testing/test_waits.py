"""The tests' one poll loop, on an injected clock (nothing here sleeps): it returns the condition's
value, polls at its interval, asks once more at the deadline, fails naming what it awaited, and lets
the condition's own error through."""

from __future__ import annotations

import doctest

import pytest

from uc_jupyter.testing import waits
from uc_jupyter.testing.clocks import ManualClock
from uc_jupyter.testing.waits import wait_until


class Clock(ManualClock):
    """Monotonic seconds that pass only when the wait sleeps; records each sleep."""

    def __init__(self) -> None:
        super().__init__()
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        super().sleep(seconds)


def test_a_condition_that_holds_at_once_returns_its_value_without_sleeping() -> None:
    clock = Clock()
    assert wait_until(lambda: {"state": "up"}, "the server", clock=clock, sleep=clock.sleep) == {"state": "up"}
    assert clock.slept == []


def test_it_polls_at_its_interval_until_the_condition_holds() -> None:
    clock = Clock()
    asked: list[float] = []

    def ready() -> int:
        asked.append(clock.now)
        return 7 if clock.now >= 0.3 else 0

    assert wait_until(ready, "the state", interval_s=0.1, clock=clock, sleep=clock.sleep) == 7
    assert asked == pytest.approx([0.0, 0.1, 0.2, 0.3])


def test_after_the_deadline_it_fails_naming_what_it_awaited_and_the_deadline() -> None:
    clock = Clock()
    asked: list[float] = []

    def never() -> bool:
        asked.append(clock.now)
        return False

    with pytest.raises(AssertionError, match=r"^timed out after 1\.5 s waiting for the reaper to end the vend$"):
        wait_until(never, "the reaper to end the vend", timeout_s=1.5, interval_s=1.0, clock=clock, sleep=clock.sleep)
    assert clock.slept == pytest.approx([1.0, 0.5])  # never past the deadline
    assert asked == pytest.approx([0.0, 1.0, 1.5])  # and asked once more at it


def test_a_condition_met_exactly_at_the_deadline_counts() -> None:
    clock = Clock()
    assert wait_until(lambda: clock.now >= 2.0, "it", timeout_s=2.0, interval_s=0.7, clock=clock, sleep=clock.sleep)


def test_a_message_made_by_a_callable_is_made_only_on_failure_and_says_the_state_then() -> None:
    clock = Clock()
    made: list[float] = []

    def what() -> str:
        made.append(clock.now)
        return f"the file to appear (state at {clock.now:g} s: none)"

    assert wait_until(lambda: clock.now >= 0.1, what, clock=clock, sleep=clock.sleep)
    assert made == []
    with pytest.raises(AssertionError, match=r"waiting for the file to appear \(state at 30.1 s: none\)$"):
        wait_until(lambda: False, what, timeout_s=30, clock=clock, sleep=clock.sleep)


def test_an_error_raised_by_the_condition_ends_the_wait_at_once() -> None:
    clock = Clock()

    def died() -> bool:
        raise RuntimeError("the server exited with 1")

    with pytest.raises(RuntimeError, match="exited with 1"):
        wait_until(died, "the server", clock=clock, sleep=clock.sleep)
    assert clock.slept == []


def test_a_zero_timeout_asks_once() -> None:
    clock = Clock()
    with pytest.raises(AssertionError, match="after 0 s"):
        wait_until(lambda: None, "nothing", timeout_s=0, clock=clock, sleep=clock.sleep)
    assert clock.slept == []


def test_docstring_examples() -> None:
    result = doctest.testmod(waits)
    assert result.attempted > 0 and result.failed == 0
