"""uc_jupyter.telemetry.producer: the one publisher of a producer process, nudged by the data code."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from uc_jupyter.telemetry.producer import install, notify


@pytest.fixture(autouse=True)
def no_publisher_after() -> Iterator[None]:
    """Each test starts and ends with no publisher installed (the module keeps one per process)."""
    install(None)
    yield
    install(None)


def test_notify_without_a_publisher_does_nothing() -> None:
    notify()
    notify(final=True)  # nothing to call, nothing raised


def test_each_notify_reaches_the_publisher_with_its_final_flag() -> None:
    sent: list[bool] = []
    install(sent.append)
    notify()
    notify(final=True)
    notify(False)
    assert sent == [False, True, False]


def test_installing_replaces_the_previous_publisher() -> None:
    first: list[bool] = []
    second: list[bool] = []
    install(first.append)
    notify()
    install(second.append)
    notify(final=True)
    assert (first, second) == ([False], [True])


def test_installing_none_stops_publishing() -> None:
    sent: list[bool] = []
    install(sent.append)
    install(None)
    notify(final=True)
    assert sent == []


def test_a_publishers_error_reaches_the_code_that_notified() -> None:
    # Unlike uplink.forward, notify guards nothing: the publisher (a worker's reporter) owns its errors.
    def broken(final: bool) -> None:
        raise RuntimeError(f"channel closed (final={final})")

    install(broken)
    with pytest.raises(RuntimeError, match=r"final=True"):
        notify(final=True)
