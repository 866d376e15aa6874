"""The ``uc-jupyter`` command line: in-process through ``main()`` for speed, and as a real subprocess
for what only a process shows (exit codes, stderr without tracebacks, the demo, import cost)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from uc_jupyter.catalog import Unauthenticated
from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.catalog.embedded.tokens import TokenStore
from uc_jupyter.cli import build_parser, main

Result = tuple[int, str, str]  # exit code, stdout, stderr


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh catalog home, used by both in-process and subprocess runs, with admin as principal."""
    path = tmp_path / "home"
    monkeypatch.setenv("UC_JUPYTER_HOME", str(path))
    monkeypatch.setenv("UC_JUPYTER_PRINCIPAL", "admin")
    return path


@pytest.fixture
def cli(home: Path, capsys: pytest.CaptureFixture[str]) -> Callable[..., Result]:
    """Run ``main(args)`` in this process and return (exit code, stdout, stderr)."""

    def run(*args: str) -> Result:
        capsys.readouterr()
        code = main(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture
def ok(cli: Callable[..., Result]) -> Callable[..., list[str]]:
    """Run a command that must succeed silently on stderr; return its stdout lines."""

    def run(*args: str) -> list[str]:
        code, out, err = cli(*args)
        assert (code, err) == (0, ""), f"uc-jupyter {' '.join(args)} failed: {err}"
        return out.splitlines()

    return run


@pytest.fixture
def ok_json(ok: Callable[..., list[str]]) -> Callable[..., Any]:
    def run(*args: str) -> Any:
        return json.loads("\n".join(ok("--json", *args)))

    return run


def run_process(*args: str) -> subprocess.CompletedProcess[str]:
    """The real console script in a child process (environment from the ``home`` fixture)."""
    return subprocess.run(
        [sys.executable, "-m", "uc_jupyter.cli", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=120,
        check=False,
    )


def assert_one_line_error(stderr: str, *fragments: str) -> None:
    assert "Traceback" not in stderr
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("uc-jupyter: error: "), stderr
    for fragment in fragments:
        assert fragment in lines[0]


@pytest.fixture
def schema(ok: Callable[..., list[str]]) -> str:
    ok("catalog", "create", "catalog", "main")
    ok("catalog", "create", "schema", "main.ml")
    return "main.ml"


# ----------------------------------------------------------------------------- catalogs and schemas
def test_catalog_and_schema_create_list_drop(ok: Callable[..., list[str]], cli: Callable[..., Result]) -> None:
    assert ok("catalog", "create", "catalog", "Main", "--comment", "team\tdata") == ["created catalog main"]
    assert ok("catalog", "create", "schema", "main.ML") == ["created schema main.ml"]
    assert ok("catalog", "list", "catalogs") == ["main\tadmin\tteam data"]
    assert ok("catalog", "list", "schemas", "main") == ["main.ml\tadmin\t"]

    code, out, err = cli("catalog", "drop", "catalog", "main")
    assert (code, out) == (1, "")
    assert_one_line_error(err, "catalog main is not empty", "1 schema")

    assert ok("catalog", "drop", "schema", "main.ml") == ["dropped schema main.ml"]
    assert ok("catalog", "list", "schemas", "main") == []
    ok("catalog", "create", "schema", "main.ml")
    assert ok("catalog", "drop", "catalog", "main", "--cascade") == ["dropped catalog main"]
    assert ok("catalog", "list", "catalogs") == []


def test_catalog_list_without_a_kind_lists_the_catalogs(
    ok: Callable[..., list[str]], ok_json: Callable[..., Any]
) -> None:
    assert ok("catalog", "list") == []
    ok("catalog", "create", "catalog", "main", "--comment", "team data")
    ok("catalog", "create", "catalog", "scratch")
    assert ok("catalog", "list") == ok("catalog", "list", "catalogs") == ["main\tadmin\tteam data", "scratch\tadmin\t"]
    assert [c["name"] for c in ok_json("catalog", "list")] == ["main", "scratch"]
    assert [c["name"] for c in ok_json("catalog", "list", "--json")] == ["main", "scratch"]


def test_json_documents_for_lists_and_changes(ok_json: Callable[..., Any]) -> None:
    created = ok_json("catalog", "create", "catalog", "main", "--comment", "c")
    assert created["action"] == "created"
    assert (created["kind"], created["name"]) == ("catalog", "main")
    assert created["catalog"]["owner"] == "admin"
    assert created["catalog"]["created_at"].startswith("20")  # an ISO timestamp
    ok_json("catalog", "create", "schema", "main.ml")

    [catalog] = ok_json("catalog", "list", "catalogs")
    assert catalog == {**created["catalog"], "full_name": "main"}
    [schema] = ok_json("catalog", "list", "schemas", "main")
    assert schema["full_name"] == "main.ml"
    assert {"catalog_name", "name", "owner", "created_at", "comment"} <= schema.keys()
    assert ok_json("catalog", "list", "volumes", "main.ml") == []
    assert ok_json("catalog", "drop", "schema", "main.ml") == {
        "action": "dropped",
        "kind": "schema",
        "name": "main.ml",
    }


# ----------------------------------------------------------------------------- volumes and tables
def test_volumes_managed_and_external(
    ok: Callable[..., list[str]], ok_json: Callable[..., Any], schema: str, tmp_path: Path
) -> None:
    external = tmp_path / "data" / "raw"
    assert ok("catalog", "create", "volume", "main.ml.images") == ["created volume main.ml.images"]
    assert ok("catalog", "create", "location", "scratch", "--url", str(tmp_path / "data")) == [
        "created external location scratch"
    ]
    assert ok("catalog", "create", "volume", "main.ml.raw", "--location", str(external)) == [
        "created volume main.ml.raw"
    ]
    images, raw = (line.split("\t") for line in ok("catalog", "list", "volumes", schema))
    assert images[:3] == ["main.ml.images", "MANAGED", "admin"]
    assert images[3].startswith("file://") and images[4] == "/Volumes/main/ml/images"
    assert raw == ["main.ml.raw", "EXTERNAL", "admin", f"file://{external}", "/Volumes/main/ml/raw"]
    [_, raw_json] = ok_json("catalog", "list", "volumes", schema)
    assert raw_json["volume_type"] == "EXTERNAL"
    assert raw_json["path"] == "/Volumes/main/ml/raw"

    assert ok("catalog", "drop", "volume", "main.ml.raw") == ["dropped volume main.ml.raw"]
    assert ok("catalog", "drop", "volume", "main.ml.images") == ["dropped volume main.ml.images"]
    assert external.is_dir()  # an external volume's files are kept
    assert ok("catalog", "list", "volumes", schema) == []


def test_credentials_and_locations(
    ok: Callable[..., list[str]], ok_json: Callable[..., Any], cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = tmp_path / "keys.json"
    keys.write_text('{"key": "AKIA-TOP", "secret": "s3cr3t-value"}')
    assert ok("catalog", "create", "credential", "lake", "--options-file", str(keys), "--option", "anon=false") == [
        "created storage credential lake"
    ]
    assert ok("catalog", "create", "location", "raw", "--url", "s3a://lake/raw/", "--credential", "lake") == [
        "created external location raw"
    ]
    assert ok("catalog", "list", "credentials") == ["lake\tadmin\tanon,key,secret\t"]
    assert ok("catalog", "list", "locations") == ["raw\ts3://lake/raw\tlake\tadmin\t"]
    [credential] = ok_json("catalog", "list", "credentials")
    assert credential["option_names"] == ["anon", "key", "secret"]
    everything = "".join(ok("--json", "catalog", "list", "credentials") + ok("catalog", "list", "locations"))
    assert "AKIA-TOP" not in everything and "s3cr3t-value" not in everything

    ok("catalog", "create", "principal", "alice")
    assert ok("catalog", "grant", "CREATE EXTERNAL VOLUME", "raw", "alice", "--on", "location") == [
        "granted CREATE EXTERNAL VOLUME on location raw to alice"
    ]
    assert ok("catalog", "show-grants", "raw", "--on", "location") == [
        "alice\tCREATE EXTERNAL VOLUME\texternal_location\traw"
    ]
    assert ok("catalog", "grant", "CREATE CATALOG", "metastore", "alice", "--on", "metastore") == [
        "granted CREATE CATALOG on metastore metastore to alice"
    ]
    assert ok("--as", "alice", "catalog", "create", "catalog", "alices") == ["created catalog alices"]
    code, _, err = cli("--as", "alice", "catalog", "create", "location", "mine", "--url", str(tmp_path / "data"))
    assert (code, err.strip()) == (1, "uc-jupyter: error: alice lacks CREATE EXTERNAL LOCATION on the metastore")
    code, _, err = cli("catalog", "drop", "credential", "lake")
    assert code == 1 and "used by external location raw" in err
    assert ok("catalog", "drop", "location", "raw") == ["dropped external location raw"]
    assert ok("catalog", "drop", "credential", "lake") == ["dropped storage credential lake"]

    monkeypatch.setattr("sys.stdin", io.StringIO('{"token": "t"}'))
    assert ok("catalog", "create", "credential", "gcs", "--options-file", "-") == ["created storage credential gcs"]
    code, _, err = cli("catalog", "create", "credential", "bad", "--option", "s3cr3t-without-a-key")
    assert (code, err.strip()) == (1, "uc-jupyter: error: --option: give KEY=VALUE (one option has no '=' or no key)")


def test_tables_from_parquet_and_csv(
    ok: Callable[..., list[str]],
    ok_json: Callable[..., Any],
    cli: Callable[..., Result],
    schema: str,
    tmp_path: Path,
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    parquet = tmp_path / "iris.parquet"
    pq.write_table(pa.table({"x": [1.0, 2.0, 3.0], "y": [1, 2, 3], "species": ["a", "b", "c"]}), parquet)
    csv = tmp_path / "labels.csv"
    csv.write_text("path,label\nc/1.png,circle\ns/1.png,square\n")

    assert ok("catalog", "create", "table", "main.ml.iris", "--from", str(parquet)) == [
        "created table main.ml.iris (3 rows)"
    ]
    created = ok_json("catalog", "create", "table", "main.ml.labels", "--from", str(csv))
    assert (created["action"], created["rows"]) == ("created", 2)
    assert [c["name"] for c in created["table"]["columns"]] == ["path", "label"]

    iris, labels = (line.split("\t") for line in ok("catalog", "list", "tables", schema))
    assert iris[:3] == ["main.ml.iris", "MANAGED", "admin"] and iris[4] == "3"
    assert labels[0] == "main.ml.labels" and labels[4] == "2"

    code, _, err = cli("catalog", "create", "table", "main.ml.iris", "--from", str(parquet))
    assert code == 1
    assert_one_line_error(err, "main.ml.iris already exists")
    assert ok("catalog", "create", "table", "main.ml.iris", "--from", str(parquet), "--mode", "append") == [
        "appended 3 rows to table main.ml.iris"
    ]
    overwritten = ok_json("catalog", "create", "table", "main.ml.iris", "--from", str(parquet), "--mode", "overwrite")
    assert (overwritten["action"], overwritten["rows"]) == ("overwritten", 3)

    location = tmp_path / "tables" / "ext_table"
    ok("catalog", "create", "location", "tables", "--url", str(tmp_path / "tables"))
    ok("catalog", "create", "table", "main.ml.ext", "--from", str(csv), "--location", str(location))
    [ext] = [t for t in ok_json("catalog", "list", "tables", schema) if t["name"] == "ext"]
    assert (ext["table_type"], ext["storage_location"]) == ("EXTERNAL", f"file://{location}")

    for name in ("main.ml.iris", "main.ml.labels", "main.ml.ext"):
        assert ok("catalog", "drop", "table", name) == [f"dropped table {name}"]
    assert ok("catalog", "list", "tables", schema) == []


@pytest.mark.parametrize(
    ("filename", "fragment"),
    [("missing.csv", "no such file"), ("data.json", "use a .parquet or .csv file")],
)
def test_table_source_errors(
    cli: Callable[..., Result], schema: str, tmp_path: Path, filename: str, fragment: str
) -> None:
    source = tmp_path / filename
    if filename.endswith(".json"):
        source.write_text("{}")
    code, out, err = cli("catalog", "create", "table", "main.ml.t", "--from", str(source))
    assert (code, out) == (1, "")
    assert_one_line_error(err, fragment)


# ----------------------------------------------------------------------------- principals and grants
def test_principals(ok: Callable[..., list[str]], ok_json: Callable[..., Any]) -> None:
    assert ok("catalog", "create", "principal", "alice") == ["created principal alice"]
    bot = ok_json("catalog", "create", "principal", "etl-bot", "--service-principal")
    assert (bot["action"], bot["kind"], bot["name"]) == ("created", "principal", "etl-bot")
    assert bot["principal"]["kind"] == "service_principal"
    assert ok("catalog", "list", "principals") == [
        "admin\tuser\tadmin",
        "alice\tuser\t",
        "etl-bot\tservice_principal\t",
    ]
    kinds = {p["name"]: (p["kind"], p["admin"]) for p in ok_json("catalog", "list", "principals")}
    assert kinds == {
        "admin": ("user", True),
        "alice": ("user", False),
        "etl-bot": ("service_principal", False),
    }
    assert ok("catalog", "drop", "principal", "etl-bot") == ["dropped principal etl-bot"]
    assert ok("catalog", "list", "principals") == ["admin\tuser\tadmin", "alice\tuser\t"]


def test_grant_revoke_show_grants_round_trip(
    ok: Callable[..., list[str]], ok_json: Callable[..., Any], schema: str
) -> None:
    ok("catalog", "create", "principal", "alice")
    assert ok("catalog", "grant", "USE CATALOG", "main", "alice") == ["granted USE CATALOG on main to alice"]
    assert ok_json("catalog", "grant", "use_schema", schema, "alice") == {
        "action": "granted",
        "privilege": "USE SCHEMA",
        "securable": "main.ml",
        "principal": "alice",
    }
    ok("catalog", "grant", "select", schema, "alice")
    assert ok("catalog", "show-grants", "main") == ["alice\tUSE CATALOG\tcatalog\tmain"]
    assert ok("catalog", "show-grants", schema) == [
        "alice\tSELECT\tschema\tmain.ml",
        "alice\tUSE SCHEMA\tschema\tmain.ml",
    ]
    grants = ok_json("catalog", "show-grants", schema)
    assert grants[0] == {
        "securable": "main.ml",
        "securable_kind": "schema",
        "principal": "alice",
        "privilege": "SELECT",
    }
    assert ok("--as", "alice", "catalog", "list", "schemas", "main") == ["main.ml\tadmin\t"]

    assert ok("catalog", "revoke", "SELECT", schema, "alice") == ["revoked SELECT on main.ml from alice"]
    assert ok("catalog", "show-grants", schema) == ["alice\tUSE SCHEMA\tschema\tmain.ml"]
    ok("catalog", "revoke", "use catalog", "main", "alice")
    assert ok("catalog", "show-grants", "main") == []


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (("catalog", "grant", "FLY", "main", "alice"), ("unknown privilege 'FLY'",)),
        (("catalog", "grant", "SELECT", "main", "nobody"), ("principal nobody does not exist",)),
        (("catalog", "grant", "READ VOLUME", "main.ml.nope", "alice"), ("main.ml.nope does not exist",)),
        (("catalog", "create", "schema", "main.ml"), ("main.ml already exists",)),
        (("catalog", "list", "tables", "main.mll"), ("schema main.mll does not exist", "did you mean")),
        (("--as", "", "catalog", "list", "catalogs"), ("invalid principal ''",)),
    ],
)
def test_errors_are_one_line(
    cli: Callable[..., Result],
    ok: Callable[..., list[str]],
    schema: str,
    args: tuple[str, ...],
    fragments: tuple[str, ...],
) -> None:
    ok("catalog", "create", "principal", "alice")
    code, out, err = cli(*args)
    assert (code, out) == (1, "")
    assert_one_line_error(err, *fragments)


# ----------------------------------------------------------------------------- tokens
def _store(home: Path) -> TokenStore:
    return TokenStore(LocalCatalog(home))


def test_token_create_prints_the_token_alone_on_its_last_line(home: Path, ok: Callable[..., list[str]]) -> None:
    ok("catalog", "create", "principal", "alice")
    lines = ok("token", "create", "alice")
    token = lines[-1]
    assert token.startswith("ucj_") and token.split() == [token]
    token_id = token.split("_")[1]
    assert lines[:-1] == [f"created token {token_id} for alice (never expires); it is shown only once:"]
    assert _store(home).authenticate(token) == "alice"
    listed = ok("token", "list")
    assert len(listed) == 1 and token not in listed[0]
    assert listed[0].split("\t")[:2] == [token_id, "alice"] and listed[0].split("\t")[3:] == ["never", ""]
    assert ok("token", "revoke", token_id) == [f"revoked token {token_id}"]
    assert ok("token", "list") == []
    with pytest.raises(Unauthenticated):
        _store(home).authenticate(token)


def test_token_json_documents_and_ttl(home: Path, ok_json: Callable[..., Any]) -> None:
    made = ok_json("token", "create", "admin", "--ttl", "3600")
    assert sorted(made) == ["expires_at", "id", "principal", "token"]
    assert made["principal"] == "admin" and made["token"].startswith(f"ucj_{made['id']}_")
    expires = datetime.fromisoformat(made["expires_at"])
    assert timedelta(minutes=59) < expires - datetime.now(timezone.utc) <= timedelta(hours=1)
    assert ok_json("token", "create", "admin")["expires_at"] is None
    listed = ok_json("token", "list")
    assert len(listed) == 2 and listed[0]["id"] == made["id"]
    assert all(sorted(t) == ["created_at", "expired", "expires_at", "id", "principal"] for t in listed)
    assert made["token"] not in json.dumps(listed)
    assert ok_json("token", "revoke", made["id"]) == {"action": "revoked", "kind": "token", "id": made["id"]}


def test_tokens_of_others_need_an_admin(ok: Callable[..., list[str]], cli: Callable[..., Result]) -> None:
    ok("catalog", "create", "principal", "alice")
    ok("catalog", "create", "principal", "bob")
    bobs = ok("token", "create", "bob")[-1].split("_")[1]
    alices = ok("--as", "alice", "token", "create", "alice")[-1].split("_")[1]
    assert [line.split("\t")[0] for line in ok("--as", "alice", "token", "list")] == [alices]
    assert sorted(line.split("\t")[0] for line in ok("token", "list")) == sorted([alices, bobs])
    assert [line.split("\t")[0] for line in ok("token", "list", "bob")] == [bobs]
    for args, fragment in (
        (("--as", "alice", "token", "create", "bob"), "alice lacks METASTORE ADMIN on the tokens of bob"),
        (("--as", "alice", "token", "list", "bob"), "alice lacks METASTORE ADMIN on the tokens of bob"),
        (("--as", "alice", "token", "revoke", bobs), f"alice lacks METASTORE ADMIN on token {bobs}"),
        (("token", "create", "carol"), "principal carol does not exist"),
        (("token", "revoke", "0123456789abcdef"), "token 0123456789abcdef does not exist"),
        (("token", "revoke", "ucj_x"), "invalid token id: give its id, not the token itself"),
    ):
        code, out, err = cli(*args)
        assert (code, out) == (1, ""), args
        assert_one_line_error(err, fragment)
    assert ok("--as", "alice", "token", "revoke", alices) == [f"revoked token {alices}"]


def test_token_usage_errors_exit_2(cli: Callable[..., Result]) -> None:
    for args in (("token",), ("token", "create"), ("token", "revoke"), ("token", "create", "admin", "--ttl", "0")):
        code, out, err = cli(*args)
        assert (code, out) == (2, ""), args
        assert "usage: uc-jupyter token" in err
    assert (
        "argument --ttl: 'soon': give a whole number of seconds above 0"
        in cli("token", "create", "a", "--ttl", "soon")[2]
    )


def test_token_create_in_a_real_process(home: Path) -> None:
    made = run_process("token", "create", "admin", "--ttl", "600")
    assert (made.returncode, made.stderr) == (0, "")
    assert _store(home).authenticate(made.stdout.splitlines()[-1]) == "admin"
    refused = run_process("--as", "nobody", "token", "create", "admin")
    assert (refused.returncode, refused.stdout) == (1, "")
    assert refused.stderr == "uc-jupyter: error: nobody lacks METASTORE ADMIN on the tokens of admin\n"


# ----------------------------------------------------------------------------- the real process
def test_denied_principal_gets_one_line_in_either_position(home: Path) -> None:
    assert run_process("catalog", "create", "catalog", "main").returncode == 0
    assert run_process("catalog", "create", "principal", "alice").returncode == 0
    for denied in (
        run_process("--as", "alice", "catalog", "list", "schemas", "main"),
        run_process("catalog", "list", "schemas", "main", "--as", "alice", "--json"),
    ):
        assert (denied.returncode, denied.stdout) == (1, "")
        assert denied.stderr == "uc-jupyter: error: alice lacks USE CATALOG on main\n"


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (("catalog", "create", "schema", "a..b"), ("invalid name 'a..b'", "part 2 is empty")),
        (("catalog", "drop", "table", "main.ml.iris"), ("catalog main does not exist",)),
        (("--json", "catalog", "show-grants", "nowhere"), ("catalog nowhere does not exist",)),
    ],
)
def test_process_errors_exit_1_without_traceback(home: Path, args: tuple[str, ...], fragments: tuple[str, ...]) -> None:
    result = run_process(*args)
    assert (result.returncode, result.stdout) == (1, "")
    assert_one_line_error(result.stderr, *fragments)


def test_usage_errors_exit_2(home: Path, cli: Callable[..., Result]) -> None:
    result = run_process("catalog", "lis")
    assert result.returncode == 2
    assert "invalid choice: 'lis'" in result.stderr and "Traceback" not in result.stderr
    usage_errors: list[tuple[str, ...]] = [
        (),
        ("catalog",),
        ("catalog", "list", "schemas"),
        ("catalog", "create", "table", "main.ml.t"),
        ("catalog", "create", "table", "main.ml.t", "--from", "x.csv", "--mode", "replace"),
    ]
    for args in usage_errors:
        code, out, err = cli(*args)
        assert (code, out) == (2, ""), args
        assert "usage: uc-jupyter" in err
    code, _, err = cli("spark", "start", "--idle-timeout", "soon")
    assert code == 2
    assert "argument --idle-timeout: 'soon': give seconds or a number with s, m or h (e.g. 30m), or never" in err
    assert cli("--help")[0] == 0


def test_help_does_not_import_heavy_libraries(home: Path) -> None:
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, uc_jupyter.cli as c; c.build_parser(); "
            "print(sorted(m for m in ('pyarrow', 'pandas', 'deltalake', 'numpy') if m in sys.modules))",
        ],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert probe.stdout.strip() == "[]"
    result = run_process("--help")
    assert result.returncode == 0
    assert "catalog" in result.stdout and "demo" in result.stdout
    script = Path(sys.executable).with_name("uc-jupyter")  # the installed console script, when present
    if script.exists():
        listed = subprocess.run(
            [str(script), "catalog", "list", "catalogs"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert (listed.returncode, listed.stdout, listed.stderr) == (0, "", "")


def test_spark_status_and_stop_without_a_server(ok: Callable[..., list[str]], ok_json: Callable[..., Any]) -> None:
    assert ok("spark", "status") == ["no local Spark Connect server"]
    assert ok_json("spark", "status") == {"running": False}
    assert ok("spark", "stop") == ["no local Spark Connect server"]


def test_global_options_parse_before_and_after_the_subcommand() -> None:
    parser = build_parser()
    before = parser.parse_args(["--json", "--as", "bob", "catalog", "list", "catalogs"])
    after = parser.parse_args(["catalog", "list", "catalogs", "--as", "bob", "--json"])
    neither = parser.parse_args(["catalog", "list", "catalogs"])
    assert (before.json, before.as_principal) == (after.json, after.as_principal) == (True, "bob")
    assert (neither.json, neither.as_principal) == (False, None)


def test_demo_init_builds_then_keeps(home: Path) -> None:
    first = run_process("demo", "init")
    assert (first.returncode, first.stderr) == (0, "")
    lines = first.stdout.splitlines()
    assert len(lines) == 3
    assert lines[0].startswith("built table main.ml.iris: ")
    assert lines[1].startswith("built volume /Volumes/main/ml/images: ")
    assert lines[2].startswith("principal alice: ")

    second = run_process("--json", "demo", "init")
    assert second.returncode == 0
    summary = json.loads(second.stdout)
    assert summary["reused"] is True and summary["table"] == "main.ml.iris"
    kept = run_process("demo", "init")
    assert [line.split()[0] for line in kept.stdout.splitlines()[:2]] == ["kept", "kept"]


# ----------------------------------------------------------------------------- a catalog server: --url / --token
@pytest.mark.servers  # uc-jupyter serve, in this process
def test_url_and_token_select_a_catalog_server(
    tmp_path: Path, ok: Callable[..., list[str]], cli: Callable[..., Result]
) -> None:
    from uc_jupyter.testing.served import serving

    with serving(tmp_path / "server_home") as served:
        remote = ("--url", served.url, "--token", served.admin_token)
        ok(*remote, "catalog", "create", "catalog", "remote")
        assert ok(*remote, "catalog", "list") == ["remote\tadmin\t"]
        assert ok("catalog", "list") == []  # the embedded catalog of $UC_JUPYTER_HOME is another one
        code, _, err = cli(*remote, "--as", "alice", "catalog", "list")
        assert code == 1
        assert_one_line_error(err, "no token for principal alice", "UC_JUPYTER_TOKEN")
        code, _, err = cli("--url", served.url, "--token", "ucj_wrong", "catalog", "list")
        assert code == 1
        assert_one_line_error(err, "token refused")
    code, _, err = cli("--token", "ucj_x", "catalog", "list")
    assert code == 1
    assert_one_line_error(err, "without a catalog URL")
