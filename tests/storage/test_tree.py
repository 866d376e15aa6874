"""A folder's recursive listing with its sub-folders listed at once: every object once, in key order,
in pages of the asked size, whatever the concurrency; a listing left early stops its threads."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import pytest

from uc_jupyter.storage.pages import Entry
from uc_jupyter.storage.tree import list_tree

pytestmark = pytest.mark.in_a_fork  # obstore's runtime stays out of the test process

KEYS = [
    "a.txt",
    "b/1",
    "b/2/deep/x",
    "b/3",
    "b-.txt",  # "-" sorts before "/": before the block of folder b, though "b" does not
    "c/only",
    "m.txt",
    *(f"n/part-{i:03d}" for i in range(25)),
    "z.txt",
]


def _entry(meta: Mapping[str, Any]) -> Entry:
    return (str(meta["path"]), int(meta["size"]), meta.get("e_tag"))


def _store() -> Any:
    import obstore
    from obstore.store import MemoryStore

    store = MemoryStore()
    for key in KEYS:
        obstore.put(store, key, key.encode())
    return store


@pytest.mark.parametrize(("concurrency", "page"), [(1, 1000), (16, 1000), (4, 3), (2, 1)])
def test_every_object_once_in_key_order_in_pages(concurrency: int, page: int) -> None:
    pages = list(list_tree(_store(), _entry, concurrency=concurrency, page=page))
    listed = [entry for batch in pages for entry in batch]
    assert [key for key, _, _ in listed] == sorted(KEYS)
    assert all(size == len(key) for key, size, _ in listed)
    assert all(len(batch) == page for batch in pages[:-1]) and 0 < len(pages[-1]) <= page


def test_a_listing_left_early_stops_its_listing_threads() -> None:
    pages = list_tree(_store(), _entry, concurrency=4, page=2)
    first = next(pages)
    assert [key for key, _, _ in first] == sorted(KEYS)[:2]
    pages.close()
    for thread in threading.enumerate():
        if thread.name.startswith("uc-jupyter-list"):
            thread.join(timeout=30)
            assert not thread.is_alive()
