"""notice(): one plain line on stderr, once per key per process, never a warning."""

from __future__ import annotations

import doctest
import io
import sys
import threading
import warnings
from collections.abc import Iterator

import pytest

from uc_jupyter import notices
from uc_jupyter.notices import notice


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    notices.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a notice is never a warning
        yield
    notices.reset()


def test_a_notice_prints_one_line_once_per_key(capsys: pytest.CaptureFixture[str]) -> None:
    assert notice("running 2 CPU ranks with gloo", key="cpu") is True
    assert notice("running 4 CPU ranks with gloo", key="cpu") is False  # the same key: said already
    assert notice("using 2 workers instead of 6") is True
    assert notice("using 2 workers instead of 6") is False  # no key: the text is the key
    out = capsys.readouterr()
    assert out.err == "running 2 CPU ranks with gloo\nusing 2 workers instead of 6\n" and out.out == ""


def test_a_notice_is_always_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    notice("first part\nsecond   part\n")
    assert capsys.readouterr().err == "first part second part\n"


def test_reset_lets_each_notice_print_again(capsys: pytest.CaptureFixture[str]) -> None:
    notice("again", key="k")
    notices.reset()
    notice("again", key="k")
    assert capsys.readouterr().err == "again\nagain\n"


def test_threads_racing_on_one_key_print_it_once(capsys: pytest.CaptureFixture[str]) -> None:
    start = threading.Barrier(8)

    def say() -> None:
        start.wait()
        notice("said once", key="race")

    threads = [threading.Thread(target=say) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert capsys.readouterr().err == "said once\n"


def test_a_closed_stderr_does_not_break_the_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    closed = io.StringIO()
    closed.close()
    monkeypatch.setattr(sys, "stderr", closed)
    assert notice("nobody hears this") is True
    monkeypatch.setattr(sys, "stderr", None)
    assert notice("nor this") is True


def test_docstring_examples() -> None:
    result = doctest.testmod(notices)
    assert result.attempted > 0 and result.failed == 0
