"""read_arrow and open_delta: catalog tables straight from their Delta files, no Spark; on both catalog
backends (the embedded catalog, and RestCatalog + a served home: tests/conftest.py)."""

from __future__ import annotations

import pytest

from uc_jupyter.catalog.local import LocalCatalog
from uc_jupyter.tables.delta import open_delta, read_arrow

pytestmark = pytest.mark.both_backends


def test_columns_and_versions_are_read(catalog: LocalCatalog) -> None:
    assert read_arrow("main.ml.points", columns=["id", "tag"]).column_names == ["id", "tag"]
    assert read_arrow("main.ml.points", columns="tag").column_names == ["tag"]  # one str: one column
    assert open_delta("main.ml.points", version=0).version() == 0


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"columns": []}, ValueError, r"invalid columns \[\]: give at least one column name"),
        ({"columns": "idx"}, ValueError, "table main.ml.points has no column 'idx'; its columns are id, x, tag"),
        ({"columns": ["id", 3]}, TypeError, "3 is not a str"),
        ({"version": True}, TypeError, "invalid version True"),
        ({"version": -1}, ValueError, "invalid version -1"),
    ],
)
def test_bad_values_are_one_line_errors(
    catalog: LocalCatalog, kwargs: dict[str, object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message) as caught:
        read_arrow("main.ml.points", **kwargs)  # type: ignore[arg-type]
    assert "\n" not in str(caught.value)
