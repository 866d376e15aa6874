"""The sidebar's REST API over HTTP, served by a real ``jupyter server`` subprocess with the extension."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from .conftest import ADMIN, ALICE, Server

ROUTES = {
    "catalogs": {},
    "schemas": {"catalog": "main"},
    "objects": {"schema": "main.ml"},
    "table": {"name": "main.ml.iris"},
    "volume": {"path": "/Volumes/main/ml/images"},
    "load-line": {"source": "main.ml.iris"},
    "pools": {},
    "who": {},
}


def test_an_admin_browses_the_catalog(admin_server: Server) -> None:
    catalogs = admin_server.api("catalogs")
    assert (catalogs.status, catalogs.content_type.split(";")[0]) == (200, "application/json")
    assert catalogs.body == {"items": [{"name": "main", "full_name": "main", "kind": "catalog", "comment": None}]}
    assert admin_server.api("schemas", catalog="main").body == {
        "items": [{"name": "ml", "full_name": "main.ml", "kind": "schema", "comment": None}]
    }
    objects = admin_server.api("objects", schema="main.ml").body
    assert objects == {
        "tables": [
            {
                "name": "iris",
                "full_name": "main.ml.iris",
                "kind": "table",
                "comment": "generated iris measurements",
                "readable": True,
            }
        ],
        "volumes": [
            {
                "name": "images",
                "full_name": "main.ml.images",
                "kind": "volume",
                "comment": "generated PNG shapes in class folders",
                "readable": True,
            }
        ],
    }


def test_a_table_shows_its_columns_and_first_rows(admin_server: Server) -> None:
    reply = admin_server.api("table", name="Main.ML.Iris", rows="3")
    assert reply.status == 200
    table = reply.body
    assert (table["full_name"], table["version"], table["rows"]) == ("main.ml.iris", 0, 300)
    names = ["sepal_length", "sepal_width", "petal_length", "petal_width", "species", "label"]
    assert [c["name"] for c in table["columns"]] == names
    assert table["columns"][4] == {"name": "species", "type": "string", "nullable": True}
    assert table["preview"]["columns"] == names
    assert len(table["preview"]["rows"]) == 3
    assert all(
        isinstance(r[0], float) and r[4] in ("setosa", "versicolor", "virginica") for r in table["preview"]["rows"]
    )
    assert len(admin_server.api("table", name="main.ml.iris").body["preview"]["rows"]) == 10  # the default
    assert admin_server.api("table", name="main.ml.iris", rows="0").body["preview"]["rows"] == []


def test_who_says_the_principal_and_the_catalog_the_browser_lists(
    admin_server: Server, alice_server: Server, server_home: Path
) -> None:
    for server, principal in ((admin_server, ADMIN), (alice_server, ALICE)):
        reply = server.api("who")
        assert reply.status == 200
        assert reply.body == {"principal": principal, "catalog": f"embedded catalog in {server_home.resolve()}"}


def test_a_volume_folder_lists_folders_first_without_hidden_files_or_escapes(admin_server: Server) -> None:
    root = admin_server.api("volume", path="/Volumes/main/ml/images/")
    assert root.status == 200
    assert root.body["path"] == "/Volumes/main/ml/images"
    assert [(e["name"], e["kind"]) for e in root.body["entries"]] == [
        ("circle", "directory"),
        ("square", "directory"),
        ("triangle", "directory"),
        ("labels.csv", "file"),
    ]  # not .hidden, _SUCCESS, nor the symlink "outside" that leads out of the volume
    assert root.body["entries"][0] == {
        "name": "circle",
        "path": "/Volumes/main/ml/images/circle",
        "kind": "directory",
        "size": None,
    }
    assert root.body["entries"][3]["size"] > 0 and (root.body["total"], root.body["next"]) == (4, None)
    circle = admin_server.api("volume", path="/Volumes/main/ml/images/circle").body
    assert [e["name"] for e in circle["entries"]] == [f"circle_{i:05d}.png" for i in range(5)]
    assert all(e["kind"] == "file" and e["size"] > 0 for e in circle["entries"])


def test_a_big_folder_comes_in_pages(admin_server: Server) -> None:
    first = admin_server.api("volume", path="/Volumes/main/ml/images", limit="3")
    assert (first.status, len(first.body["entries"]), first.body["total"]) == (200, 3, 4)
    rest = admin_server.api("volume", path="/Volumes/main/ml/images", limit="3", after=first.body["next"]).body
    assert [e["name"] for e in rest["entries"]] == ["labels.csv"] and rest["next"] is None


def test_load_lines_for_a_table_and_the_image_volume(admin_server: Server) -> None:
    assert admin_server.api("load-line", source="main.ml.iris").body == {
        "source": "main.ml.iris",
        "line": "df = %uc_load main.ml.iris --to pandas",
    }
    assert admin_server.api("load-line", source="/Volumes/main/ml/images").body == {
        "source": "/Volumes/main/ml/images",
        "line": "loader = %uc_load /Volumes/main/ml/images --decode image --labels folder --shuffle",
    }


def test_a_principal_without_select_sees_the_table_unreadable_and_gets_403(alice_server: Server) -> None:
    objects = alice_server.api("objects", schema="main.ml").body
    assert [(t["full_name"], t["readable"]) for t in objects["tables"]] == [("main.ml.iris", False)]
    assert [(v["full_name"], v["readable"]) for v in objects["volumes"]] == [("main.ml.images", True)]
    denied = alice_server.api("table", name="main.ml.iris")
    assert (denied.status, denied.body["message"]) == (403, "alice lacks SELECT on main.ml.iris")
    assert alice_server.api("volume", path="/Volumes/main/ml/images/square").status == 200


@pytest.mark.parametrize(
    ("route", "params", "status", "message"),
    [
        ("schemas", {}, 400, "missing query parameter 'catalog' (e.g. ?catalog=main)"),
        ("schemas", {"catalog": "main.ml"}, 400, "invalid name 'main.ml': expected 'catalog', got 2 part(s)"),
        ("schemas", {"catalog": "mian"}, 404, "catalog mian does not exist; did you mean main?"),
        ("objects", {"schema": "main..ml"}, 400, "invalid name 'main..ml': part 2 is empty"),
        ("objects", {"schema": "main.nope"}, 404, "schema main.nope does not exist"),
        ("table", {}, 400, "missing query parameter 'name' (e.g. ?name=main.ml.iris)"),
        ("table", {"name": "main.ml.irsi"}, 404, "table main.ml.irsi does not exist; did you mean main.ml.iris?"),
        ("table", {"name": "main.ml.images"}, 404, "table main.ml.images does not exist (main.ml.images is a volume)"),
        ("table", {"name": "main.ml.iris", "rows": "abc"}, 400, "rows must be an integer from 0 to 100, got 'abc'"),
        ("table", {"name": "main.ml.iris", "rows": "101"}, 400, "rows must be an integer from 0 to 100, got '101'"),
        ("table", {"name": "main.ml.iris", "rows": "-1"}, 400, "rows must be an integer from 0 to 100, got '-1'"),
        ("volume", {"path": "main.ml.images"}, 400, "invalid volume path 'main.ml.images': must start with"),
        ("volume", {"path": "/Volumes/main/ml/images/../../x"}, 400, "'..' may not climb out of the volume"),
        ("volume", {"path": "/Volumes/main/ml/images/outside"}, 400, "leads outside volume main.ml.images"),
        ("volume", {"path": "/Volumes/main/ml/images/labels.csv"}, 400, "is a file, not a folder"),
        ("volume", {"path": "/Volumes/main/ml/images/nope"}, 404, "/Volumes/main/ml/images/nope does not exist"),
        ("volume", {"path": "/Volumes/main/ml/images/100%"}, 404, "/Volumes/main/ml/images/100% does not exist"),
        ("volume", {"path": "/Volumes/main/ml/nope"}, 404, "volume main.ml.nope does not exist"),
        ("volume", {"path": "/Volumes/main/ml/images", "limit": "0"}, 400, "limit must be an integer from 1 to 1000"),
        ("volume", {"path": "/Volumes/main/ml/images", "after": "forged"}, 400, "after must be the 'next' token"),
        ("load-line", {}, 400, "missing query parameter 'source' (e.g. ?source=main.ml.iris)"),
        ("load-line", {"source": "main.ml.irsi"}, 404, "did you mean main.ml.iris?"),
        ("load-line", {"source": "/Volumes/main/ml/images/nope"}, 404, "/Volumes/main/ml/images/nope does not exist"),
        ("load-line", {"source": "/Volumes/main/ml/images/outside"}, 400, "leads outside volume main.ml.images"),
    ],
)
def test_bad_input_gets_a_status_and_a_one_line_message(
    admin_server: Server, route: str, params: dict[str, str], status: int, message: str
) -> None:
    reply = admin_server.api(route, **params)
    assert reply.status == status, reply.body
    assert reply.content_type.startswith("application/json")
    assert message in reply.body["message"] and "\n" not in reply.body["message"]


def test_a_percent_encoded_dot_dot_is_refused_too(admin_server: Server) -> None:
    reply = admin_server.request("GET", "uc-jupyter/api/volume?path=/Volumes/main/ml/images/%2E%2E/%2e%2e/secret")
    assert reply.status == 400 and "'..' may not climb out" in reply.body["message"]


@pytest.mark.parametrize("route", list(ROUTES))
@pytest.mark.parametrize("token", [None, "wrong-token"])
def test_every_route_needs_the_token(admin_server: Server, route: str, token: str | None) -> None:
    reply = admin_server.api(route, token=token, **ROUTES[route])
    assert reply.status in (401, 403)
    assert "items" not in reply.body and "pools" not in reply.body and "entries" not in reply.body


def test_pools_lists_the_rank_pool_of_a_kernel_the_server_runs(admin_server: Server) -> None:
    assert admin_server.api("pools").body == {"pools": []}
    # A status file of a live process that is no kernel of this server is not listed.
    folder = admin_server.home / "pools"
    folder.mkdir(exist_ok=True)
    foreign = {
        "kernel_id": "not-ours",
        "pid": os.getpid(),
        "pool": 1,
        "updated": time.time(),
        "size": 1,
        "state": "idle",
        "devices": "cpu",
        "backend": "gloo",
        "master_port": None,
        "ranks": [],
    }
    (folder / "not-ours.1.json").write_text(json.dumps(foreign))
    # Files that are no status of a pool (each made the route answer 500, or hang): skipped, never fatal.
    (folder / "broken.1.json").write_text("{not json")
    (folder / "wrong.1.json").write_text(json.dumps({**foreign, "kernel_id": ["a", "list"], "pid": "abc"}))
    (folder / "deep.1.json").write_text("[" * 100_000 + "]" * 100_000)
    os.mkfifo(folder / "fifo.1.json")
    started = admin_server.request("POST", "api/kernels", body={"name": "python3"})
    assert started.status == 201, started.body
    kernel_id = started.body["id"]
    try:
        admin_server.execute(
            kernel_id,
            "from uc_jupyter.distributed import RankPool\npool = RankPool(2, devices='cpu')\npool.start()",
            timeout=120,
        )
        [record] = admin_server.api("pools").body["pools"]
        assert (record["kernel_id"], record["size"], record["state"], record["backend"]) == (
            kernel_id,
            2,
            "idle",
            "gloo",
        )
        assert record["devices"] == "cpu" and isinstance(record["master_port"], int)
        assert [(r["rank"], r["alive"]) for r in record["ranks"]] == [(0, True), (1, True)]
        assert {"pid", "pool", "updated"} <= record.keys()
        admin_server.execute(kernel_id, "pool.shutdown()")
        assert admin_server.api("pools").body == {"pools": []}
    finally:
        admin_server.request("DELETE", f"api/kernels/{kernel_id}")
        for name in ("not-ours", "broken", "wrong", "deep", "fifo"):
            (folder / f"{name}.1.json").unlink(missing_ok=True)
