"""The DataLoader's arguments before torch sees them (uc_jupyter.data.loader.defaults): the tuned
defaults fill only what the caller left out, the worker count is clamped to the CPUs this process
may use with one notice, and wrong arguments are refused in one line, by keyword or by position."""

from __future__ import annotations

import os
from typing import Any

import pytest
import torch.utils.data

from uc_jupyter import notices
from uc_jupyter.data.loader.defaults import (
    DEFAULT_PREFETCH,
    DEFAULT_WORKERS,
    apply_defaults,
    check_arguments,
    check_dataset,
    worker_start_method,
)


@pytest.fixture(autouse=True)
def _fresh_notices() -> None:
    notices.reset()


def _cpus() -> int:
    return len(os.sched_getaffinity(0))


def test_the_defaults_fill_what_the_caller_left_out(capsys: pytest.CaptureFixture[str]) -> None:
    kwargs: dict[str, Any] = {}
    apply_defaults(kwargs)
    workers = min(DEFAULT_WORKERS, _cpus())
    assert kwargs == {"num_workers": workers, "prefetch_factor": DEFAULT_PREFETCH, "persistent_workers": True}
    said = capsys.readouterr().err
    if _cpus() < DEFAULT_WORKERS:  # one line, naming both numbers and what to pass
        assert said == (
            f"uc_jupyter DataLoader: using {workers} workers instead of {DEFAULT_WORKERS} (this process may use "
            f"{workers} CPUs); pass num_workers= to choose\n"
        )
        apply_defaults({})
        assert capsys.readouterr().err == ""  # once per process
    else:
        assert said == ""


@pytest.mark.parametrize(
    ("given", "made"),
    [
        ({"num_workers": 0}, {"num_workers": 0}),  # no workers: nothing to fetch ahead or keep
        (
            {"num_workers": 3, "prefetch_factor": 1},
            {"num_workers": 3, "prefetch_factor": 1, "persistent_workers": True},
        ),
        (
            {"num_workers": 1, "persistent_workers": False},
            {"num_workers": 1, "prefetch_factor": 4, "persistent_workers": False},
        ),
    ],
)
def test_what_the_caller_gives_wins(
    given: dict[str, Any], made: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    apply_defaults(given)
    assert given == made
    assert capsys.readouterr().err == ""  # a count the caller chose is never clamped or commented


@pytest.mark.parametrize("dataset", [[1, 2, 3], torch.utils.data.TensorDataset(torch.zeros(2))])
def test_sequences_and_torch_datasets_are_datasets(dataset: Any) -> None:
    check_dataset(dataset)


def test_anything_else_is_refused_naming_its_type() -> None:
    with pytest.raises(TypeError, match=r"^DataLoader needs a torch Dataset, .* got generator$"):
        check_dataset(x for x in range(3))


@pytest.mark.parametrize(
    ("args", "kwargs", "kind", "error"),
    [
        ((), {"shuffle": "no"}, TypeError, r"^invalid shuffle 'no': give True or False$"),
        ((0,), {}, ValueError, r"^invalid batch_size 0: give a whole number >= 1$"),  # by position: batch_size first
        ((4, "yes"), {}, TypeError, r"^invalid shuffle 'yes'"),
        ((), {"num_workers": -1}, ValueError, r"^invalid num_workers -1: give a whole number >= 0$"),
        ((), {"batchsize": 4}, TypeError, r"^DataLoader: got an unexpected keyword argument 'batchsize'$"),
    ],
)
def test_wrong_arguments_are_refused_in_one_line(
    args: tuple[Any, ...], kwargs: dict[str, Any], kind: type[Exception], error: str
) -> None:
    with pytest.raises(kind, match=error) as raised:
        check_arguments([1, 2], args, kwargs)
    assert "\n" not in str(raised.value)


def test_a_process_that_has_made_no_object_store_request_forks_its_workers() -> None:
    assert worker_start_method([1, 2], None, None) is None
