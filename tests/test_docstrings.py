"""The examples in the pure modules' docstrings run and print what they show."""

from __future__ import annotations

import doctest
from types import ModuleType

import pytest

from uc_jupyter import errors, lazy, processes
from uc_jupyter.catalog import names, privileges, storage
from uc_jupyter.data import partition, stream
from uc_jupyter.distributed import errors as rank_errors
from uc_jupyter.distributed import payload, protocol
from uc_jupyter.jupyter import args
from uc_jupyter.telemetry import collector, model, producer, reporter, uplink
from uc_jupyter.widgets import charts, view


@pytest.mark.parametrize(
    "module",
    [
        *(names, privileges, storage, partition, stream, model, reporter, collector, producer, uplink, lazy),
        *(processes, errors, rank_errors, payload, protocol, args, charts, view),
    ],
    ids=lambda m: m.__name__,
)
def test_docstring_examples(module: ModuleType) -> None:
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
