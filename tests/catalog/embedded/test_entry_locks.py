"""uc_jupyter.catalog.embedded.entry_locks: one lock per catalog entry, across threads and processes."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from uc_jupyter.catalog.embedded.entry_locks import EntryBusy, EntryLocks
from uc_jupyter.catalog.model import CatalogError


class FakeTime:
    """A clock that moves only when the code under test sleeps; records each sleep."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def locks(root: Path, timeout: float = 1.0, time: FakeTime | None = None) -> EntryLocks:
    time = time or FakeTime()
    return EntryLocks(root, timeout=timeout, clock=time.clock, sleep=time.sleep)


def take(lock: EntryLocks, keys: list[str], what: str) -> None:
    """Hold ``keys`` with ``lock`` for an empty block."""
    with lock.hold(keys, what=what):
        pass


def free(root: Path, key: str) -> bool:
    """Whether another holder (a lock of its own, no waiting) could take ``key`` now."""
    try:
        with locks(root, timeout=0.0).hold([key], what=key):
            return True
    except EntryBusy:
        return False


def test_a_held_entry_is_busy_for_another_holder_until_released(tmp_path: Path) -> None:
    first = locks(tmp_path)
    with first.hold(["main.ml.t"], what="table main.ml.t"):
        assert not free(tmp_path, "main.ml.t")
    assert free(tmp_path, "main.ml.t")


def test_busy_names_the_entry_and_the_wait_after_waiting_it_out(tmp_path: Path) -> None:
    time = FakeTime()
    busy_message = r"^table main\.ml\.t is busy: .* for over 2\.5 s; try again"
    with locks(tmp_path).hold(["main.ml.t"], what="x"), pytest.raises(EntryBusy, match=busy_message) as busy:
        take(locks(tmp_path, timeout=2.5, time=time), ["main.ml.t"], "table main.ml.t")
    assert isinstance(busy.value, CatalogError)
    assert time.now >= 2.5 and time.slept  # it waited the whole timeout, by the injected clock
    assert all(0 < s <= 2.5 for s in time.slept)


def test_a_zero_timeout_refuses_at_once(tmp_path: Path) -> None:
    time = FakeTime()
    with locks(tmp_path).hold(["k"], what="k"), pytest.raises(EntryBusy):
        take(locks(tmp_path, timeout=0.0, time=time), ["k"], "k")
    assert time.slept == []


def test_other_entries_are_not_held(tmp_path: Path) -> None:
    with locks(tmp_path).hold(["main.ml.t"], what="t"):
        assert free(tmp_path, "main.ml.u")
        assert free(tmp_path, "main.ml")  # a container is an entry of its own
        assert free(tmp_path, "main.ml.t2")


def test_a_key_given_twice_is_held_once_not_waited_on_by_itself(tmp_path: Path) -> None:
    with locks(tmp_path, timeout=0.0).hold(["a", "b", "a"], what="drop"):
        assert not free(tmp_path, "a") and not free(tmp_path, "b")
    assert free(tmp_path, "a") and free(tmp_path, "b")


def test_an_error_in_the_block_releases_every_lock(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), locks(tmp_path).hold(["a", "b"], what="x"):
        raise RuntimeError("boom")
    assert free(tmp_path, "a") and free(tmp_path, "b")


def test_a_busy_second_entry_releases_the_first_already_taken(tmp_path: Path) -> None:
    with locks(tmp_path).hold(["b"], what="b"):
        with pytest.raises(EntryBusy):
            take(locks(tmp_path, timeout=0.0), ["a", "b"], "a and b")
        assert free(tmp_path, "a")  # not left held by the failed attempt
    assert free(tmp_path, "b")


def test_entries_are_taken_in_sorted_order_whatever_order_they_are_given(tmp_path: Path) -> None:
    # While "a" is taken, whoever asks for ["b", "a"] must wait on "a" holding nothing: were "b" taken
    # first, a holder of "a" waiting on "b" would wait in a circle with it.
    b_free_while_waiting: list[bool] = []
    time = FakeTime()

    def sleep(seconds: float) -> None:
        b_free_while_waiting.append(free(tmp_path, "b"))
        time.sleep(seconds)

    with locks(tmp_path).hold(["a"], what="a"):
        waiter = EntryLocks(tmp_path, timeout=0.05, clock=time.clock, sleep=sleep)
        with pytest.raises(EntryBusy):
            take(waiter, ["b", "a"], "b and a")
    assert b_free_while_waiting and all(b_free_while_waiting)


def test_lock_files_stay_private_inside_the_locks_folder_whatever_the_key(tmp_path: Path) -> None:
    root = tmp_path / "home"
    root.mkdir()
    keys = ["../../escape", "/etc/passwd", "a/b", "main.ml.t", "x" * 5000, "é\n\0"]
    with locks(root).hold(keys, what="odd keys"):
        pass
    assert sorted(os.listdir(root)) == ["locks"]
    assert stat.S_IMODE((root / "locks").stat().st_mode) == 0o700
    files = sorted((root / "locks").iterdir())
    assert len(files) == len(keys)
    assert all(f.suffix == ".lock" and stat.S_IMODE(f.stat().st_mode) == 0o600 for f in files)
    assert not (tmp_path / "escape").exists()


def test_a_thread_waits_for_another_threads_hold_then_gets_it(tmp_path: Path) -> None:
    order: list[str] = []
    release = threading.Event()
    released = threading.Event()
    holding = threading.Event()

    def holder() -> None:
        with locks(tmp_path).hold(["t"], what="t"):
            order.append("first holds")
            holding.set()
            release.wait(10)
            order.append("first releases")
        released.set()

    def waiting_sleep(_seconds: float) -> None:  # the waiter found it taken: let the holder finish
        release.set()
        released.wait(10)

    thread = threading.Thread(target=holder)
    thread.start()
    assert holding.wait(10)
    with EntryLocks(tmp_path, timeout=60.0, sleep=waiting_sleep).hold(["t"], what="t"):
        order.append("second holds")
    thread.join(10)
    assert order == ["first holds", "first releases", "second holds"]


def _hold_in_a_child(root: Path, key: str) -> subprocess.Popen[str]:
    code = (
        "import sys\n"
        "from uc_jupyter.catalog.embedded.entry_locks import EntryLocks\n"
        "with EntryLocks(sys.argv[1]).hold([sys.argv[2]], what='x'):\n"
        "    print('held', flush=True)\n"
        "    sys.stdin.read()\n"  # until the parent closes it, or the process is killed
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code, str(root), key], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None and child.stdout.readline() == "held\n"
    return child


@pytest.mark.parametrize(
    "end",
    [
        pytest.param(lambda child: child.stdin.close(), id="released"),
        pytest.param(lambda child: os.kill(child.pid, signal.SIGKILL), id="killed"),
    ],
)
def test_another_process_holds_the_entry_until_it_releases_or_dies(
    tmp_path: Path, end: Callable[[subprocess.Popen[str]], None]
) -> None:
    child = _hold_in_a_child(tmp_path, "main.ml.t")
    try:
        assert not free(tmp_path, "main.ml.t")
        assert free(tmp_path, "main.ml.u")
        end(child)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert free(tmp_path, "main.ml.t")  # a kill -9 leaves no entry locked: the kernel drops the flock
