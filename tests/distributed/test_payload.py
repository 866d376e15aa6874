"""What is shipped to ranks: pickling errors, the size guard, and source maps for tracebacks (pure)."""

from __future__ import annotations

import linecache
import sys
import threading
import traceback

import cloudpickle
import numpy as np
import pytest

from uc_jupyter.distributed.errors import PayloadError
from uc_jupyter.distributed.payload import human_bytes, pack, restore_sources, source_map, unpack

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # like a notebook's __main__

BIG_GLOBAL = np.ones(250_000)  # 2 MB


def uses_global() -> float:
    return float(BIG_GLOBAL.sum())


def test_round_trip_and_no_limit() -> None:
    assert unpack(pack({"a": [1, 2]})) == {"a": [1, 2]}
    assert len(pack(np.ones(10), limit=None)) > 80


def test_sizes_in_decimal_units() -> None:
    assert [human_bytes(n) for n in (999, 1000, 2_400_000, 5e9)] == ["999 B", "1.0 kB", "2.4 MB", "5.0 GB"]


def test_the_guard_names_globals_closures_defaults_and_arguments() -> None:
    with pytest.raises(PayloadError, match=r"the largest: BIG_GLOBAL \(a global, 2\.0 MB\)"):
        pack((uses_global, (), {}), limit=100_000, what=uses_global)
    payload = np.zeros(300_000)

    def closure() -> int:
        return len(payload)

    def defaults(x: np.ndarray = payload) -> int:
        return len(x)

    with pytest.raises(PayloadError, match=r"payload \(a closure variable, 2\.4 MB\)"):
        pack((closure, (), {}), limit=100_000, what=closure)
    with pytest.raises(PayloadError, match=r"default argument 0 \(a default, 2\.4 MB\)"):
        pack((defaults, (), {}), limit=100_000, what=defaults)
    with pytest.raises(PayloadError, match=r"data \(a keyword argument, 2\.4 MB\)"):
        pack((len, (), {"data": payload}), limit=100_000, what=len)
    assert len(pack((closure, (), {}), limit=10_000_000, what=closure)) > 2_400_000


def test_unpicklable_captures_are_named_by_their_error() -> None:
    lock = threading.Lock()

    def holds_lock() -> bool:
        return lock.locked()

    with pytest.raises(PayloadError, match=r"cannot send holds_lock to the ranks: .*cannot pickle '_thread.lock'"):
        pack((holds_lock, (), {}), what=holds_lock)


def test_source_maps_give_shipped_code_its_file_and_lines_back() -> None:
    source = "def cell_function(x):\n    def inner():\n        raise ValueError(x)\n    return inner()\n"
    filename = "<notebook cell 7>"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    namespace: dict[str, object] = {"__name__": "__main__"}
    exec(compile(source, filename, "exec"), namespace)
    fn = namespace["cell_function"]
    shipped = cloudpickle.loads(cloudpickle.dumps(fn))
    assert shipped.__code__.co_filename == "<dynamic-code>"  # what cloudpickle does, hence the map
    sources = source_map(fn)
    del linecache.cache[filename]  # the rank's linecache does not have the cell
    restore_sources(shipped, cloudpickle.loads(cloudpickle.dumps(sources)))
    with pytest.raises(ValueError, match="oops") as caught:
        shipped("oops")
    text = "".join(traceback.format_exception(caught.value))
    assert f'File "{filename}", line 3, in inner' in text and "raise ValueError(x)" in text
