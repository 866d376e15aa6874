"""uc_jupyter.testing.soak.injections: the driver's fault lands when rank 0 has reached its step, is
undone when the call ends, and an injection that fails is reported, never lost in its thread."""

from __future__ import annotations

import threading
from pathlib import Path

from uc_jupyter.testing.soak.injections import during, meet


def test_the_fault_is_injected_once_the_rank_reached_its_step_and_undone_at_the_calls_end(tmp_path: Path) -> None:
    events: list[str] = []
    with during(
        lambda: events.append("inject") or "filled", lambda: events.append("undo"), handshake=tmp_path, hold_s=600
    ) as injected:
        assert meet(tmp_path)  # the rank's side: returns once the driver said go
        assert events == ["inject"]
    assert events == ["inject", "undo"]  # the call ended long before hold_s
    assert (injected.done, injected.said, injected.error) == (True, "filled", "")


def test_a_call_that_ends_before_the_step_injects_nothing(tmp_path: Path) -> None:
    events: list[str] = []
    with during(lambda: events.append("inject") or "x", lambda: events.append("undo"), handshake=tmp_path, hold_s=1):
        pass
    assert events == []


def test_a_failing_injection_is_reported_and_the_rank_still_goes_on(tmp_path: Path) -> None:
    def inject() -> str:
        raise OSError("no such server")

    undone = threading.Event()
    with during(inject, undone.set, handshake=tmp_path, hold_s=600) as injected:
        assert meet(tmp_path)
    assert (injected.done, injected.error) == (False, "OSError: no such server")
    assert undone.is_set()


def test_a_rank_waits_no_longer_than_its_timeout_for_a_driver_that_never_comes(tmp_path: Path) -> None:
    assert not meet(tmp_path, timeout_s=0.0)
    assert (tmp_path / "reached").exists()
