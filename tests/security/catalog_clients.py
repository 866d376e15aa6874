"""Client processes for the attacks on ``uc-jupyter serve`` (tests/security/test_catalog_server.py).

Each scenario runs in its own process, with the standard library only (starts in tens of
milliseconds), on one keep-alive HTTP connection, and prints one JSON document on stdout. Scenarios
that must start together wait for a line on stdin first, so the test releases them at once.

Usage:
    python tests/security/catalog_clients.py until-revoked URL TOKEN MARKER
    python tests/security/catalog_clients.py own-volumes URL TOKEN WHO TAG COUNT
    python tests/security/catalog_clients.py writer URL TOKEN INDEX ROUNDS PLAN_JSON

Example (the shape of what ``writer`` prints, one entry per request):
    >>> Step("schema", "arena.w0_0", 200).as_json()
    {'op': 'schema', 'key': 'arena.w0_0', 'status': 200, 'code': None, 'owner': None}
"""

from __future__ import annotations

import http.client
import json
import os
import sys
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit

API = "/api/2.1/unity-catalog"


@dataclass(frozen=True)
class Step:
    """One request's outcome: what it tried (``op``, ``key``), the status, UC error code and owner."""

    op: str
    key: str
    status: int
    code: str | None = None
    owner: str | None = None

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


class Connection:
    """One keep-alive connection sending one bearer token; counts reconnects (there should be none)."""

    def __init__(self, url: str, token: str) -> None:
        parts = urlsplit(url)
        self.address = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        self.conn = http.client.HTTPConnection(*self.address, timeout=60)
        self.sockets: set[int] = set()

    def call(self, method: str, path: str, body: Any = None, query: dict[str, str] | None = None) -> tuple[int, Any]:
        target = f"{API}/{path}" + ("?" + urlencode(query) if query else "")
        data = None if body is None else json.dumps(body).encode()
        self.conn.request(method, target, body=data, headers=self.headers)
        response = self.conn.getresponse()
        raw = response.read()
        if self.conn.sock is not None:
            self.sockets.add(id(self.conn.sock))
        return response.status, (json.loads(raw) if raw else None)


def _step(op: str, key: str, answer: tuple[int, Any]) -> Step:
    status, body = answer
    body = body if isinstance(body, dict) else {}
    return Step(op, key, status, body.get("error_code"), body.get("owner"))


def until_revoked(url: str, token: str, marker: str) -> dict[str, Any]:
    """GET /catalogs in a loop; each call records whether ``marker`` existed before it was sent. The
    test makes the marker after the revocation has committed, so every call marked must be refused."""
    conn = Connection(url, token)
    calls: list[tuple[bool, int]] = []
    after = 0
    while after < 20:
        seen = os.path.exists(marker)
        status, _ = conn.call("GET", "catalogs")
        calls.append((seen, status))
        after += seen
        if len(calls) == 1:
            print("ready", flush=True)  # the test revokes only once every client is mid-session
    return {"calls": calls, "connections": len(conn.sockets)}


def own_volumes(url: str, token: str, who: str, tag: str, count: int) -> dict[str, Any]:
    """Create ``count`` managed volumes in ``main.shared``, reading each back and listing the schema
    after each: what the server answered, as this process saw it."""
    conn = Connection(url, token)
    sys.stdin.readline()  # the start signal
    steps: list[dict[str, Any]] = []
    listed: list[list[str]] = []
    for i in range(count):
        name = f"{who}_{tag}_{i}"
        body = {"catalog_name": "main", "schema_name": "shared", "name": name, "volume_type": "MANAGED"}
        steps.append(_step("create", name, conn.call("POST", "volumes", body)).as_json())
        steps.append(_step("get", name, conn.call("GET", f"volumes/main.shared.{name}")).as_json())
        status, page = conn.call("GET", "volumes", query={"catalog_name": "main", "schema_name": "shared"})
        listed.append(
            [f"{v['name']}:{v['owner']}" for v in page.get("volumes", ())] if status == 200 else [str(status)]
        )
    return {"steps": steps, "listed": listed, "connections": len(conn.sockets)}


def writer(url: str, token: str, index: int, rounds: int, plan: dict[str, Any]) -> dict[str, Any]:
    """Round after round: a schema of its own, a volume and a registered Delta table in it, a grant on
    it; a schema and a table location every writer races for; a schema where it may not write."""
    conn = Connection(url, token)
    sys.stdin.readline()  # the start signal
    steps: list[Step] = []
    for r in range(rounds):
        schema = f"w{index}_{r}"
        steps.append(
            _step("schema", f"arena.{schema}", conn.call("POST", "schemas", {"name": schema, "catalog_name": "arena"}))
        )
        volume = {"catalog_name": "arena", "schema_name": schema, "name": "v", "volume_type": "MANAGED"}
        steps.append(_step("volume", f"arena.{schema}.v", conn.call("POST", "volumes", volume)))
        table = {
            "catalog_name": "arena",
            "schema_name": schema,
            "name": "t",
            "table_type": "EXTERNAL",
            "data_source_format": "DELTA",
            "columns": [],
            "storage_location": plan["own_tables"][r],
        }
        steps.append(_step("table", f"arena.{schema}.t", conn.call("POST", "tables", table)))
        change = {"changes": [{"principal": plan["reader"], "add": ["USE SCHEMA"], "remove": []}]}
        steps.append(
            _step("grant", f"arena.{schema}", conn.call("PATCH", f"permissions/schema/arena.{schema}", change))
        )
        contested = f"contested_{r}"
        race = {"name": contested, "catalog_name": "arena"}
        steps.append(_step("contested schema", f"arena.{contested}", conn.call("POST", "schemas", race)))
        claim = {**table, "name": "claim", "storage_location": plan["contested_tables"][r]}
        steps.append(_step("contested table", f"arena.{schema}.claim", conn.call("POST", "tables", claim)))
        forbidden = {"name": f"w{index}_{r}", "catalog_name": "forbidden"}
        steps.append(_step("forbidden schema", f"forbidden.w{index}_{r}", conn.call("POST", "schemas", forbidden)))
    return {"steps": [s.as_json() for s in steps], "connections": len(conn.sockets)}


def main(argv: list[str]) -> None:
    scenario, url, token, *rest = argv
    if scenario == "until-revoked":
        result = until_revoked(url, token, rest[0])
    elif scenario == "own-volumes":
        result = own_volumes(url, token, rest[0], rest[1], int(rest[2]))
    elif scenario == "writer":
        result = writer(url, token, int(rest[0]), int(rest[1]), json.loads(rest[2]))
    else:
        raise SystemExit(f"unknown scenario {scenario!r}: use until-revoked, own-volumes or writer")
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
