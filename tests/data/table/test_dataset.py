"""UCTableDataset over real Delta tables written through the catalog, with real DataLoader workers, on
both catalog backends (the embedded catalog, and RestCatalog + a served home: tests/conftest.py)."""

from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import torch

from uc_jupyter.catalog import NotFound, PermissionDenied
from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.data import DataLoader, UCTableDataset
from uc_jupyter.testing.deletion_vectors import delete_with_deletion_vector

pytestmark = pytest.mark.both_backends


def rows(n: int, start: int = 0) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": ids,
            "x": [i / 2 for i in ids],
            "flag": [i % 2 == 0 for i in ids],
            "name": [f"row{i}" for i in ids],
            "maybe": [None if i % 3 == 0 else i for i in ids],
        }
    )


@pytest.fixture
def table(catalog: LocalCatalog) -> str:
    catalog.create_table("main.ml.events", rows(23))
    return "main.ml.events"


def ids(batches: list[dict[str, Any]]) -> list[int]:
    return [int(i) for batch in batches for i in batch["id"]]


def test_batches_are_dicts_of_tensors_and_lists(table: str) -> None:
    first = next(iter(UCTableDataset(table, batch_size=10)))
    assert first["id"].dtype == torch.int64 and first["id"].tolist() == list(range(10))
    assert first["x"].dtype == torch.float64 and first["flag"].dtype == torch.bool
    assert first["name"][:2] == ["row0", "row1"]
    assert first["maybe"][:4] == [None, 1, 2, None]  # a column with nulls stays a list
    first["id"] += 1  # tensors own their memory


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("workers", [0, 1, 2, 3])
@pytest.mark.parametrize("ranks", [1, 2, 3])
def test_every_row_exactly_once_across_ranks_and_workers(
    table: str, monkeypatch: pytest.MonkeyPatch, ranks: int, workers: int, shuffle: bool
) -> None:
    seen: list[int] = []
    for rank in range(ranks):
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", str(ranks))
        dataset = UCTableDataset(table, batch_size=4, shuffle=shuffle, seed=2, on_uneven="allow")
        loader = torch.utils.data.DataLoader(
            dataset, batch_size=None, num_workers=workers, multiprocessing_context="fork" if workers else None
        )
        seen += ids(list(loader))
    assert sorted(seen) == list(range(23))


def test_padded_ranks_have_equal_counts(table: str, monkeypatch: pytest.MonkeyPatch) -> None:
    counts, everything = [], collections.Counter[int]()
    for rank in range(2):
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", "2")
        dataset = UCTableDataset(table, batch_size=5)
        got = ids(list(dataset))
        assert len(dataset) == len(got)
        counts.append(len(got))
        everything.update(got)
    assert counts == [12, 12] and set(everything) == set(range(23))


def test_columns_filter_and_version(table: str, catalog: LocalCatalog) -> None:
    narrow = next(iter(UCTableDataset(table, columns=["id", "name"], filter="id >= 20", batch_size=100)))
    assert set(narrow) == {"id", "name"} and narrow["id"].tolist() == [20, 21, 22]
    catalog.create_table(table, rows(5, start=100), mode="append")
    latest, first = UCTableDataset(table, batch_size=100), UCTableDataset(table, batch_size=100, version=0)
    assert (latest.version, len(latest), first.version, len(first)) == (1, 28, 0, 23)
    assert ids(list(first)) == list(range(23))


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"columns": ["nope"]}, ValueError, "table main.ml.events has no column 'nope'; its columns are id, x"),
        ({"filter": "id === 3"}, ValueError, "cannot apply filter 'id === 3'"),
        ({"filter": "id > 1000"}, ValueError, "has no rows matching 'id > 1000'"),
        ({"version": 7}, LookupError, "table main.ml.events: cannot open version 7: "),  # tables.delta_snapshot's
        ({"batch_size": 0}, ValueError, "invalid batch_size 0"),
        ({"batch_size": 2.5}, TypeError, "invalid batch_size 2.5"),
        ({"batch_size": True}, TypeError, "invalid batch_size True"),
        ({"columns": []}, ValueError, r"invalid columns \[\]: give at least one column name, or None"),
        ({"columns": ["id", "id"]}, ValueError, "'id' is listed twice"),
        ({"columns": [5]}, TypeError, "5 is not a str"),
        ({"columns": {"id"}}, TypeError, "invalid columns {'id'}"),
        ({"filter": 5}, TypeError, "invalid filter 5: give a str or None"),
        # Text after a complete condition is refused, never dropped (it read every row with id > 3).
        ({"filter": "id > 3 name = 'row5'"}, ValueError, "cannot apply filter \"id > 3 name = 'row5'\": .*found: name"),
        ({"filter": "id > 3; DROP"}, ValueError, "found: ;"),
        ({"filter": "id > 3)"}, ValueError, r"has a '\)' at character 7 that closes nothing"),
        ({"version": -1}, ValueError, "invalid version -1"),
        ({"version": "0"}, TypeError, "invalid version '0'"),
        ({"shuffle": "no"}, TypeError, "invalid shuffle 'no'"),
        ({"seed": 1.5}, TypeError, "invalid seed 1.5"),
    ],
)
def test_bad_input_gets_one_line_errors(table: str, kwargs: dict[str, Any], error: type, message: str) -> None:
    with pytest.raises(error, match=message) as caught:
        UCTableDataset(table, **kwargs)
    assert "\n" not in str(caught.value)


def test_one_str_is_one_column(table: str, catalog: LocalCatalog) -> None:
    batch = next(iter(UCTableDataset(table, columns="name", batch_size=2)))
    assert list(batch) == ["name"] and batch["name"] == ["row0", "row1"]
    with pytest.raises(ValueError, match="has no column 'id,x'"):
        UCTableDataset(table, columns="id,x")  # not split on commas either: one name


def test_names_and_grants_are_checked(table: str, catalog: LocalCatalog) -> None:
    with pytest.raises(NotFound, match="table main.ml.event does not exist; did you mean main.ml.events?"):
        UCTableDataset("main.ml.event")
    with pytest.raises(ValueError, match="that is a path; tables and schemas are named like 'catalog.schema.table'"):
        UCTableDataset("/Volumes/main/ml/events")
    catalog.create_principal("alice")
    catalog.grant("main", "USE CATALOG", "alice")
    catalog.grant("main.ml", "USE SCHEMA", "alice")
    with catalog.as_principal("alice"), pytest.raises(PermissionDenied, match="alice lacks SELECT on main.ml.events"):
        UCTableDataset(table)


@pytest.mark.parametrize(("before", "after"), [(0, 0), (2, 2), (2, 3), (0, 2)])
def test_the_dataloader_resumes_rows_exactly_on_any_worker_count(table: str, before: int, after: int) -> None:
    def fresh(workers: int) -> DataLoader:
        dataset = UCTableDataset(table, batch_size=3, shuffle=True, seed=4)
        context = "fork" if workers else None
        return DataLoader(dataset, batch_size=None, num_workers=workers, multiprocessing_context=context)

    first = fresh(before)
    stream = iter(first)
    taken = [next(stream) for _ in range(3)]
    state = json.loads(json.dumps(first.state_dict()))
    del stream
    second = fresh(after)
    second.load_state_dict(state)
    assert sorted(ids(taken + list(second))) == list(range(23))


def test_a_position_in_another_version_of_the_table_is_refused(table: str, catalog: LocalCatalog) -> None:
    loader = DataLoader(UCTableDataset(table, batch_size=3), batch_size=None, num_workers=0)
    next(iter(loader))
    state = loader.state_dict()
    catalog.create_table(table, rows(3, start=500), mode="append")
    later = DataLoader(UCTableDataset(table, batch_size=3), batch_size=None, num_workers=0)
    refused = r"cannot resume main\.ml\.events: the checkpoint's version is 'v0:.*this dataset's is 'v1:"
    with pytest.raises(ValueError, match=refused):
        later.load_state_dict(state)


def test_spawned_workers_read_the_pinned_snapshot(table: str, catalog: LocalCatalog) -> None:
    dataset = UCTableDataset(table, batch_size=4)
    catalog.create_table(table, rows(3, start=500), mode="append")  # a later version: not read
    loader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=2, multiprocessing_context="spawn")
    assert sorted(ids(list(loader))) == list(range(23))


def test_deletion_vectors_are_honoured(table: str, catalog: LocalCatalog) -> None:
    import pyarrow.parquet as pq

    location = catalog.get_table(table).storage_location.removeprefix("file://")
    version = delete_with_deletion_vector(location, {0: [2, 5, 7, 20]})
    raw = sum(pq.read_table(f).num_rows for f in Path(location).glob("*.parquet"))
    assert raw == 23  # the rows are still in the file: only the log says they are gone
    dataset = UCTableDataset(table, batch_size=100)
    assert dataset.version == version
    assert ids(list(dataset)) == [i for i in range(23) if i not in (2, 5, 7, 20)]
    assert len(UCTableDataset(table, batch_size=100, version=version - 1)) == 23


def test_its_repr_says_what_it_reads_in_one_line(table: str) -> None:
    assert repr(UCTableDataset(table, batch_size=10)) == (
        "UCTableDataset('main.ml.events' version 0, 23 rows, 5 columns, batch_size=10)"
    )
    narrowed = UCTableDataset(table, batch_size=4, columns=["id", "x"], filter="id > 3")
    assert (
        repr(narrowed)
        == "UCTableDataset('main.ml.events' version 0, 19 rows, 2 columns, filter 'id > 3', batch_size=4)"
    )
