"""Hostile requests against every route that takes a body or parameters (issue 29, round 3: the class,
not the example).

Each route is sent, as a cluster-scoped key (the global administrator where only it reaches the
parsing, and without credentials for the body cases), bodies nested 100,000 deep, bodies that are not
objects, invalid UTF-8, bodies over the size limit and Content-Lengths that lie about it, numbers
beyond int64 or a double, `NaN`, huge strings, duplicated keys and a wrong type in every field; and
hostile path and query parameters (NUL, `%2F`, `..`, very long names, misplaced 0x1F separators,
garbage page tokens and sizes). Every answer must be a 4xx with the error body of the route's
protocol (the Iceberg error JSON, OAuth2's on the token endpoint, a page on the console), must not
name a server path, a traceback or a secret, must come back within a generous bound, and the server
must still answer `/healthz` afterwards.

Requests go over a raw socket (tests/api only has the in-process server): an HTTP client would
refuse or repair a NUL in a path, a lying Content-Length or a body it cannot encode.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import httpx
import pytest

from catalog.console.session import CSRF_COOKIE, CSRF_FIELD
from catalog.kafka_offsets import END_OFFSETS, START_OFFSETS, TOPIC
from tests.api.catalog_thread import CatalogThread

MAX_BODY_BYTES = 1024 * 1024  # the server's FLOE_MAX_BODY_BYTES here: oversized bodies stay cheap
DEPTH = 100_000
# Generous: a refusal takes milliseconds; this only catches a server that walks or waits.
ANSWER_SECONDS = 15.0
HUGE_STRING = "x" * 200_000
SCHEMA: dict[str, Any] = {
    "type": "struct",
    "schema-id": 0,
    "fields": [{"id": 1, "name": "id", "type": "long", "required": False}],
}


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes
    seconds: float

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


@dataclass
class Server:
    url: str
    host: str
    port: int
    home: Path
    database_url: str
    warehouse: str
    cluster: str
    admin_token: str
    cluster_token: str
    cluster_key: tuple[str, str]
    reader_id: str
    secrets: list[str]
    # The tables' folder is the client's to know (loadTable answers it); the rest of the home is not.
    warehouse_folder: str = ""
    table_location: str = ""  # of the table `t` the commit routes change
    console_cookies: dict[str, str] = field(default_factory=dict)

    def send(
        self,
        method: str,
        target: bytes | str,
        *,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        who: str = "cluster",
        content_length: int | None = None,
    ) -> Answer:
        """One request on its own connection, exactly as given (`content_length` may lie)."""
        head = {"Host": f"{self.host}:{self.port}", "Connection": "close"}
        if who == "cluster":
            head["Authorization"] = f"Bearer {self.cluster_token}"
        elif who == "admin":
            head["Authorization"] = f"Bearer {self.admin_token}"
        elif who == "console":
            head["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.console_cookies.items())
        if body is not None:
            head.setdefault("Content-Type", "application/json")
        head.update(headers or {})
        if body is not None or content_length is not None:
            head["Content-Length"] = str(len(body or b"") if content_length is None else content_length)
        path = target.encode("latin-1") if isinstance(target, str) else target
        raw = b"%s %s HTTP/1.1\r\n" % (method.encode(), path)
        raw += b"".join(f"{k}: {v}\r\n".encode("latin-1") for k, v in head.items()) + b"\r\n"
        started = time.monotonic()
        with socket.create_connection((self.host, self.port), timeout=ANSWER_SECONDS * 2) as sock:
            sock.sendall(raw)
            # The body goes out from a thread: a server that answers before reading it all (and
            # closes) must not leave this side blocked on a full socket buffer.
            sender = threading.Thread(target=_send_quietly, args=(sock, body or b""), daemon=True)
            sender.start()
            received = bytearray()
            while True:
                try:
                    chunk = sock.recv(65536)
                except (ConnectionResetError, TimeoutError):
                    break
                if not chunk:
                    break
                received.extend(chunk)
            sender.join(timeout=5)
        return _parse(bytes(received), time.monotonic() - started)


def _send_quietly(sock: socket.socket, body: bytes) -> None:
    with contextlib.suppress(OSError):
        sock.sendall(body)


def _parse(raw: bytes, seconds: float) -> Answer:
    head, _, rest = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    match = re.match(r"HTTP/1\.[01] (\d{3})", lines[0]) if lines else None
    if match is None:
        return Answer(0, {}, raw[:2000], seconds)
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        rest = _unchunk(rest)
    return Answer(int(match.group(1)), headers, rest, seconds)


def _unchunk(data: bytes) -> bytes:
    out = bytearray()
    while data:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out.extend(data[:size])
        data = data[size + 2 :]
    return bytes(out)


# -- the server ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(new_database: Callable[[], str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    home = Path(tmp_path_factory.mktemp("hostile"))
    database_url = new_database()
    env = {"FLOE_MAX_BODY_BYTES": str(MAX_BODY_BYTES)}
    with CatalogThread(database_url, home=home, env=env) as catalog:
        admin_token = catalog.token()
        cluster = f"hc_{uuid.uuid4().hex[:6]}"
        with httpx.Client(
            base_url=catalog.url, headers={"Authorization": f"Bearer {admin_token}"}, timeout=30
        ) as admin:
            created = admin.post("/management/v1/clusters", json={"name": cluster})
            assert created.status_code == 201, created.text
            key = admin.post("/management/v1/keys", json={"role": "admin", "cluster": cluster})
            assert key.status_code == 201, key.text
            reader = admin.post("/management/v1/keys", json={"role": "reader", "cluster": cluster})
            assert reader.status_code == 201, reader.text
            warehouse = str(admin.get("/v1/config").json()["overrides"].get("prefix", "default"))
        client_id, secret = key.json()["client_id"], key.json()["client_secret"]
        cluster_token = catalog.token(client_id, secret)
        with httpx.Client(
            base_url=catalog.url, headers={"Authorization": f"Bearer {cluster_token}"}, timeout=30
        ) as http:
            ns = f"/v1/{warehouse}/namespaces/{cluster}"
            if http.get(ns).status_code == 404:
                made = http.post(f"/v1/{warehouse}/namespaces", json={"namespace": [cluster]})
                assert made.status_code == 200, made.text
            table = http.post(f"{ns}/tables", json={"name": "t", "schema": SCHEMA})
            assert table.status_code == 200, table.text
            view = http.post(f"{ns}/views", json=_view_body("v"))
            assert view.status_code == 200, view.text
            location = table.json()["metadata"]["location"]
        host, port = urlsplit(catalog.url).hostname, urlsplit(catalog.url).port
        assert host is not None
        assert port is not None
        served = Server(
            url=catalog.url,
            host=host,
            port=port,
            home=home,
            database_url=database_url,
            warehouse=warehouse,
            cluster=cluster,
            admin_token=admin_token,
            cluster_token=cluster_token,
            cluster_key=(client_id, secret),
            reader_id=reader.json()["client_id"],
            secrets=[catalog.admin_client_secret, secret, reader.json()["client_secret"]],
        )
        served.console_cookies = _console_session(catalog.url, client_id, secret)
        served.warehouse_folder = location.split(f"/{cluster}/")[0]
        served.table_location = location
        yield served


def _console_session(url: str, client_id: str, secret: str) -> dict[str, str]:
    with httpx.Client(base_url=url, timeout=30, follow_redirects=False) as browser:
        browser.get("/console/sign-in")
        csrf = browser.cookies[CSRF_COOKIE]
        signed = browser.post(
            "/console/sign-in", data={"client_id": client_id, "client_secret": secret, CSRF_FIELD: csrf}
        )
        assert signed.status_code == 303, signed.text
        return dict(browser.cookies.items())


def _view_body(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "schema": SCHEMA,
        "view-version": {
            "version-id": 1,
            "timestamp-ms": 1,
            "schema-id": 0,
            "summary": {},
            "representations": [{"type": "sql", "sql": "select 1", "dialect": "spark"}],
            "default-namespace": [],
        },
        "properties": {},
    }


# -- the routes ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Route:
    """A route that takes a body: its method, path (`{c}` is the cluster, `{w}` the warehouse), a valid
    body to mutate, who sends it, and the protocol its errors follow."""

    name: str
    method: str
    path: str
    body: Callable[[Server], dict[str, Any]]
    who: str = "cluster"
    protocol: str = "rest"  # rest | oauth | console
    form: bool = False

    def target(self, server: Server) -> str:
        return self.path.replace("{c}", server.cluster).replace("{w}", server.warehouse)


def _commit(s: Server) -> dict[str, Any]:
    return {"requirements": [], "updates": [{"action": "set-properties", "updates": {"a": "b"}}]}


def _pipeline(s: Server) -> dict[str, Any]:
    return {
        "config": {
            "source_clusters": [
                {"name": s.cluster, "bootstrap_brokers": [{"hostname": "localhost", "port": 9092}]}
            ],
            "tables": [
                {
                    "source_cluster_name": s.cluster,
                    "source_topic": "clicks",
                    "source_format": "json",
                    "schema": {"fields": [{"name": "id", "id": 1, "type": "long"}]},
                }
            ],
        },
        "dry_run": True,
    }


def _maintenance_pass(s: Server) -> dict[str, Any]:
    stats = {"data_files": 3, "data_bytes": 300, "delete_files": 0, "delete_bytes": 0, "manifests": 3}
    return {
        "warehouse": s.warehouse,
        "namespace": [s.cluster],
        "table": "t",
        "started_at": "2026-01-01T00:00:00+00:00",
        "duration_seconds": 2.5,
        "actions": [{"name": "rewrite_data_files", "duration_seconds": 2.0, "result": {"n": 3}}],
        "before": {**stats, "snapshots": 5},
        "after": {**stats, "snapshots": 2},
    }


def _table_updates(s: Server) -> dict[str, dict[str, Any]]:
    """A valid update of each kind for the table `t` (its schema 0, spec 0, sort order 0)."""
    files = f"{s.table_location}/metadata"
    wider = {
        **SCHEMA,
        "schema-id": 1,
        "fields": [*SCHEMA["fields"], {"id": 2, "name": "b", "type": "string", "required": False}],
    }
    return {
        "set-current-schema": {"action": "set-current-schema", "schema-id": 0},
        "add-schema": {"action": "add-schema", "schema": wider, "last-column-id": 2},
        "add-spec": {
            "action": "add-spec",
            "spec": {
                "spec-id": 1,
                "fields": [{"source-id": 1, "field-id": 1000, "name": "b4", "transform": "bucket[4]"}],
            },
        },
        "set-default-spec": {"action": "set-default-spec", "spec-id": 0},
        "add-sort-order": {
            "action": "add-sort-order",
            "sort-order": {
                "order-id": 1,
                "fields": [
                    {"source-id": 1, "transform": "identity", "direction": "asc", "null-order": "nulls-first"}
                ],
            },
        },
        "set-default-sort-order": {"action": "set-default-sort-order", "sort-order-id": 0},
        "add-snapshot": {
            "action": "add-snapshot",
            "snapshot": {
                "snapshot-id": 5,
                "timestamp-ms": 1_700_000_000_000,
                "manifest-list": f"{files}/snap-5.avro",
                "summary": {"operation": "append"},
                "schema-id": 0,
                "sequence-number": 1,
            },
        },
        "set-snapshot-ref": {
            "action": "set-snapshot-ref",
            "ref-name": "b",
            "type": "branch",
            "snapshot-id": 5,
        },
        "remove-snapshots": {"action": "remove-snapshots", "snapshot-ids": [5]},
        "set-location": {"action": "set-location", "location": s.table_location},
        "set-statistics": {
            "action": "set-statistics",
            "snapshot-id": 5,
            "statistics": {
                "snapshot-id": 5,
                "statistics-path": f"{files}/s.puffin",
                "file-size-in-bytes": 10,
                "file-footer-size-in-bytes": 5,
                "blob-metadata": [],
            },
        },
        "remove-statistics": {"action": "remove-statistics", "snapshot-id": 5},
        "upgrade-format-version": {"action": "upgrade-format-version", "format-version": 2},
        "remove-properties": {"action": "remove-properties", "removals": ["zz"]},
    }


TABLE_UPDATE_KINDS = (
    "set-current-schema",
    "add-schema",
    "add-spec",
    "set-default-spec",
    "add-sort-order",
    "set-default-sort-order",
    "add-snapshot",
    "set-snapshot-ref",
    "remove-snapshots",
    "set-location",
    "set-statistics",
    "remove-statistics",
    "upgrade-format-version",
    "remove-properties",
)
TABLE_REQUIREMENTS: dict[str, dict[str, Any]] = {
    "assert-ref-snapshot-id": {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": 5},
    "assert-current-schema-id": {"type": "assert-current-schema-id", "current-schema-id": 0},
    "assert-last-assigned-field-id": {"type": "assert-last-assigned-field-id", "last-assigned-field-id": 1},
    "assert-last-assigned-partition-id": {
        "type": "assert-last-assigned-partition-id",
        "last-assigned-partition-id": 999,
    },
    "assert-default-spec-id": {"type": "assert-default-spec-id", "default-spec-id": 0},
    "assert-default-sort-order-id": {"type": "assert-default-sort-order-id", "default-sort-order-id": 0},
    "assert-table-uuid": {"type": "assert-table-uuid", "uuid": "00000000-0000-0000-0000-000000000000"},
}
VIEW_UPDATES: dict[str, dict[str, Any]] = {
    "set-current-view-version": {"action": "set-current-view-version", "view-version-id": -1},
    "add-view-version": {
        "action": "add-view-version",
        "view-version": {
            "version-id": 2,
            "timestamp-ms": 2,
            "schema-id": 0,
            "summary": {},
            "representations": [{"type": "sql", "sql": "select 2", "dialect": "spark"}],
            "default-namespace": [],
        },
    },
    "set-properties": {"action": "set-properties", "updates": {"a": "b"}},
    "remove-properties": {"action": "remove-properties", "removals": ["zz"]},
    "upgrade-format-version": {"action": "upgrade-format-version", "format-version": 1},
}


def _one_update(kind: str, server: Server) -> dict[str, Any]:
    return {"requirements": [], "updates": [_table_updates(server)[kind]]}


def _fixed(body: dict[str, Any], server: Server) -> dict[str, Any]:
    return body


def _update_routes() -> list[Route]:
    """The commit routes once per kind of update or requirement, so each is mutated field by field."""
    table = f"{NS}/tables/t"
    routes = [
        Route(f"commitTable {kind}", "POST", table, partial(_one_update, kind)) for kind in TABLE_UPDATE_KINDS
    ]
    routes += [
        Route(f"commitTable {kind}", "POST", table, partial(_fixed, {"requirements": [r], "updates": []}))
        for kind, r in TABLE_REQUIREMENTS.items()
    ]
    routes += [
        Route(
            f"replaceView {kind}",
            "POST",
            f"{NS}/views/v",
            partial(_fixed, {"requirements": [], "updates": [u]}),
        )
        for kind, u in VIEW_UPDATES.items()
    ]
    return routes


NS = "/v1/{w}/namespaces/{c}"
ROUTES = [
    Route("createNamespace", "POST", "/v1/{w}/namespaces", lambda s: {"namespace": [s.cluster, "n1"]}),
    Route(
        "updateProperties",
        "POST",
        f"{NS}/properties",
        lambda s: {"removals": ["zz"], "updates": {"a": "b"}},
    ),
    Route(
        "createTable", "POST", f"{NS}/tables", lambda s: {"name": "n1", "schema": SCHEMA, "properties": {}}
    ),
    Route(
        "registerTable",
        "POST",
        f"{NS}/register",
        lambda s: {"name": "r1", "metadata-location": "file:///etc/passwd"},
    ),
    Route(
        "registerView",
        "POST",
        f"{NS}/register-view",
        lambda s: {"name": "r2", "metadata-location": "file:///etc/passwd"},
    ),
    Route("commitTable", "POST", f"{NS}/tables/t", _commit),
    Route(
        "reportMetrics",
        "POST",
        f"{NS}/tables/t/metrics",
        lambda s: {
            "report-type": "commit-report",
            "table-name": "t",
            "snapshot-id": 1,
            "sequence-number": 1,
            "operation": "append",
            "metrics": {},
        },
    ),
    Route(
        "renameTable",
        "POST",
        "/v1/{w}/tables/rename",
        lambda s: {
            "source": {"namespace": [s.cluster], "name": "t"},
            "destination": {"namespace": [s.cluster], "name": "t2"},
        },
    ),
    Route(
        "commitTransaction",
        "POST",
        "/v1/{w}/transactions/commit",
        lambda s: {
            "table-changes": [
                {"identifier": {"namespace": [s.cluster], "name": "t"}, **_commit(s)},
            ]
        },
    ),
    Route("createView", "POST", f"{NS}/views", lambda s: _view_body("v1")),
    Route("replaceView", "POST", f"{NS}/views/v", lambda s: {"requirements": [], "updates": []}),
    Route(
        "renameView",
        "POST",
        "/v1/{w}/views/rename",
        lambda s: {
            "source": {"namespace": [s.cluster], "name": "v"},
            "destination": {"namespace": [s.cluster], "name": "v2"},
        },
    ),
    Route("createCluster", "POST", "/management/v1/clusters", lambda s: {"name": "cx1"}, who="admin"),
    Route(
        "createKey",
        "POST",
        "/management/v1/keys",
        lambda s: {"role": "reader", "cluster": s.cluster, "description": "d", "expires_in_seconds": 60},
    ),
    Route("applyPipeline", "PUT", "/management/v1/pipeline", _pipeline),
    Route("recordMaintenancePass", "POST", "/management/v1/maintenance/passes", _maintenance_pass),
    Route(
        "token",
        "POST",
        "/v1/oauth/tokens",
        lambda s: {"grant_type": "client_credentials", "client_id": "nobody", "client_secret": "wrong"},
        who="none",
        protocol="oauth",
        form=True,
    ),
    Route(
        "consoleSignIn",
        "POST",
        "/console/sign-in",
        lambda s: {"client_id": "nobody", "client_secret": "wrong"},
        who="console",
        protocol="console",
        form=True,
    ),
    Route(
        "consoleCreateKey",
        "POST",
        "/console/keys",
        lambda s: {"role": "bogus", "cluster": s.cluster, "description": "d", "expires_in_days": "1"},
        who="console",
        protocol="console",
        form=True,
    ),
    Route(
        "consoleCreateCluster",
        "POST",
        "/console/clusters",
        lambda s: {"name": "cx2"},
        who="console",
        protocol="console",
        form=True,
    ),
    Route(
        "consoleApplyPipeline",
        "POST",
        "/console/pipeline",
        lambda s: {"config": "tables: 1\n", "confirm": "no"},
        who="console",
        protocol="console",
        form=True,
    ),
]


# -- what every answer must be ---------------------------------------------------------------------


LEAK_PATTERNS = ("Traceback", 'File "', "site-packages", "/root", "/work/", '.py"', "sqlite+aiosqlite")


def problems(server: Server, answer: Answer, protocol: str, method: str = "POST") -> list[str]:
    """What is wrong with an answer to a hostile request (nothing: an empty list)."""
    found = []
    if not 400 <= answer.status < 500:
        found.append(f"status {answer.status}")
    if answer.seconds > ANSWER_SECONDS:
        found.append(f"answered after {answer.seconds:.1f}s")
    text = answer.text
    if answer.status and method != "HEAD" and answer.status != 431:
        found.extend(_body_problems(answer, protocol))
    visible = text.replace(server.warehouse_folder, "<warehouse>")
    for needle in (*LEAK_PATTERNS, str(server.home), str(Path(server.database_url.split("///")[-1]).parent)):
        if needle in visible:
            found.append(f"names {needle!r}")
    found.extend(f"shows a secret ({s[:4]}…)" for s in server.secrets if s in text)
    if "root:x:0:0" in text:
        found.append("shows /etc/passwd")
    return found


def _body_problems(answer: Answer, protocol: str) -> list[str]:
    if protocol == "console":
        return []  # an HTML page (or a redirect to one); checked for leaks only
    try:
        body = json.loads(answer.body)
    except ValueError:
        return [f"not JSON: {answer.text[:200]!r}"]
    if protocol == "oauth":
        if not (isinstance(body, dict) and isinstance(body.get("error"), str)):
            return [f"not an OAuth2 error: {answer.text[:200]}"]
        return []
    error = body.get("error") if isinstance(body, dict) else None
    if not (
        isinstance(body, dict)
        and set(body) == {"error"}
        and isinstance(error, dict)
        and isinstance(error.get("message"), str)
        and isinstance(error.get("type"), str)
        and error.get("code") == answer.status
    ):
        return [f"not the Iceberg error JSON: {answer.text[:200]}"]
    return []


def _to_sign_in(answer: Answer) -> bool:
    return answer.status == 303 and answer.headers.get("location", "").endswith("/console/sign-in")


def still_healthy(server: Server) -> None:
    assert httpx.get(f"{server.url}/healthz", timeout=10).status_code == 200


@dataclass(frozen=True)
class Probe:
    """One hostile request to a route: what it is, its body, headers, sender and declared length."""

    case: str
    body: bytes
    headers: dict[str, str]
    who: str
    content_length: int | None = None
    accepted_because: str = ""  # why a success is an answer too (see `accepted_because`)
    expect_status: int | None = None  # the one 4xx it must get, when only one is right


def check(server: Server, route: Route, probes: list[Probe], *, anonymous: bool = False) -> None:
    """Send each probe to `route`; every answer must pass `problems` (or be an `ACCEPTED` success)."""
    failures = []
    target = route.target(server)
    for probe in probes:
        answer = server.send(
            route.method,
            target,
            body=probe.body,
            headers=probe.headers,
            who=probe.who,
            content_length=probe.content_length,
        )
        found = problems(server, answer, route.protocol)
        if anonymous and route.protocol == "console" and _to_sign_in(answer):
            found = [p for p in found if not p.startswith("status")]  # the console's "sign in first"
        if probe.expect_status is not None and answer.status != probe.expect_status:
            found.append(f"status {answer.status}, not {probe.expect_status}")
        # Without credentials: a declared length over the limit is refused first (413, the pipeline's
        # limits step, before any of the body is read), any other body waits for authorization (401).
        declared = len(probe.body) if probe.content_length is None else probe.content_length
        unauthorized = 413 if declared > MAX_BODY_BYTES else 401
        if anonymous and route.protocol == "rest" and answer.status != unauthorized:
            found.append(
                f"status {answer.status} without credentials, not {unauthorized}: the body was read before "
                "authorization"
            )
        if 200 <= answer.status < 300 and probe.accepted_because:
            found = [p for p in found if not p.startswith(("status", "not "))]
        if found:
            failures.append(f"{probe.case}: {', '.join(found)} -> {answer.status} {answer.text[:300]!r}")
    still_healthy(server)
    assert not failures, "\n".join(failures)


# -- bodies ----------------------------------------------------------------------------------------


def _encode(route: Route, server: Server, body: Any) -> tuple[bytes, dict[str, str]]:
    if route.form:
        pairs = body if isinstance(body, list) else list(body.items())
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        if route.protocol == "console":
            pairs = [*pairs, (CSRF_FIELD, server.console_cookies.get(CSRF_COOKIE, ""))]
        return urlencode(pairs).encode(), headers
    return (body if isinstance(body, bytes) else json.dumps(body).encode()), {}


def _raw_cases() -> dict[str, bytes]:
    """Bodies that are hostile whatever the route (sent as JSON)."""
    return {
        "array nested 100,000 deep": b"[" * DEPTH + b"]" * DEPTH,
        "object nested 100,000 deep": b'{"a":' * DEPTH + b"1" + b"}" * DEPTH,
        "body []": b"[]",
        'body "x"': b'"x"',
        "body null": b"null",
        "body 1": b"1",
        "empty body": b"",
        "truncated JSON": b'{"a": [1, 2',
        "invalid UTF-8": b'{"name": "\xff\xfe\xfd"}',
        "NaN": b'{"name": NaN}',
        "1e400": b'{"name": 1e400}',
        "byte order mark": b'\xef\xbb\xbf{"name": "x"}',
        "UTF-16": '{"name": "x"}'.encode("utf-16"),
        "trailing garbage": b'{"name": "x"} x',
        "two documents": b'{"name": "x"}{"name": "y"}',
        "lone surrogate escape": b'{"name": "\\ud800"}',
        "NUL escapes": (
            b'{"name": "a\\u0000b", "namespace": ["a\\u0000b"], "updates": {"a\\u0000b": "x"},'
            b' "removals": ["a\\u0000b"], "role": "a\\u0000b", "config": {"a\\u0000b": 1}}'
        ),
        "a million spaces": b" " * 1_000_000 + b"[]",
    }


def _mutations(template: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """(path, hostile value) for every field of `template` (six levels deep): a value of every other
    JSON type, integers beyond int64, 1e400 and, for strings, a huge one."""
    if isinstance(template, dict):
        items: list[tuple[Any, Any]] = list(template.items())
    elif isinstance(template, list):
        items = list(enumerate(template[:1]))
    else:
        return
    for key, value in items:
        here = (*path, key)
        for hostile in _wrong_values(value):
            yield here, hostile
        if len(here) < MUTATION_DEPTH:
            yield from _mutations(value, here)


class _Raw:
    """A JSON token written as is (`1e400` cannot come out of json.dumps)."""

    def __init__(self, text: str) -> None:
        self.text = text


def _wrong_values(value: Any) -> list[Any]:
    if isinstance(value, bool):
        return ["true", 1, 10**30, _Raw("1e400"), [], {}]
    if isinstance(value, int):
        return ["one", "7", True, 10**30, -(10**19), _Raw("1e400"), 1.5, [], {}]
    if isinstance(value, float):
        return ["one", True, _Raw("1e400"), [], {}]
    beyond = [10**30, -(10**19), _Raw("1e400")]
    if isinstance(value, str):
        return [*beyond, True, [], {}, HUGE_STRING]
    if isinstance(value, list):
        return ["x", *beyond, {}, True]
    if isinstance(value, dict):
        return ["x", *beyond, [], True]
    return ["x", *beyond, [], {}]


# Routes whose nested Iceberg structures pyiceberg's models (the commit core) read.
PYICEBERG_ROUTES = ("createTable", "createView", "commitTable", "replaceView", "commitTransaction")
# Text without a limit of its own but the body's: a long one is stored, not refused.
LONG_TEXT = {
    "sql": "a view's SQL text",
    "dialect": "a view's SQL dialect",
    "ref-name": "a branch or tag name (the spec sets no limit)",
    "ref": "a branch or tag name (the spec sets no limit)",
    "table-name": "a metrics report, kept as sent",
    "operation": "a metrics report, kept as sent",
}


def accepted_because(route: str, path: tuple[Any, ...], original: Any, hostile: Any) -> str:
    """Why `route` may take `hostile` in place of `original` at `path` (a 2xx; still never a 5xx or a
    leak), or "" when it must refuse it."""
    last, parent = path[-1], path[-2] if len(path) > 1 else None
    if hostile == "7" and isinstance(original, int):
        # Not refused (yet): Litestar converts bodies with msgspec's non-strict mode and pyiceberg's
        # models validate in pydantic's lax mode, both of which read a numeric string as its number.
        return "a numeric string is read as its number (msgspec non-strict, pydantic lax)"
    if route.startswith(PYICEBERG_ROUTES):
        if last in ("direction", "null-order") and hostile in ([], {}):
            return "pyiceberg's SortField takes an empty direction or null order as the default"
        if last == "last-column-id":
            return "deprecated by the spec: pyiceberg ignores it"
    if hostile == HUGE_STRING:
        if parent == "updates":
            return "a property value may be long (FLOE_MAX_PROPERTIES_BYTES bounds them)"
        if parent == "removals":
            return "removing a key that is not there changes nothing"
        if last == "name" and "fields" in path:
            return "a column name (the spec sets no limit; FLOE_MAX_SCHEMA_FIELDS bounds their number)"
        if last in LONG_TEXT:
            return LONG_TEXT[last]
    if route == "recordMaintenancePass" and "result" in path:
        return "an action's result is its own free-form report"
    return ""


def _at(template: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        template = template[key]
    return template


def _replace(template: Any, path: tuple[Any, ...], value: Any) -> Any:
    copied = json.loads(json.dumps(template))
    holder = copied
    for key in path[:-1]:
        holder = holder[key]
    holder[path[-1]] = value
    return copied


def _dumps(body: Any) -> bytes:
    marker = "@@raw@@"
    raws: list[str] = []

    def default(obj: Any) -> str:
        raws.append(obj.text)
        return f"{marker}{len(raws) - 1}"

    text = json.dumps(body, default=default)
    for index, raw in enumerate(raws):
        text = text.replace(f'"{marker}{index}"', raw)
    return text.encode()


def _describe(path: tuple[Any, ...], value: Any) -> str:
    shown = value.text if isinstance(value, _Raw) else json.dumps(value)
    if len(shown) > 30:
        shown = f"<{len(shown)} chars>"
    return f"{'.'.join(map(str, path))}={shown}"


ROUTE_IDS = [route.name for route in ROUTES]
JSON_ROUTES = [route for route in ROUTES if not route.form]
# Every field of every update and requirement too (the commit core's models, pyiceberg's, read them).
MUTATED_ROUTES = [*JSON_ROUTES, *_update_routes()]
MUTATION_DEPTH = 6
FORM_ROUTES = [route for route in ROUTES if route.form]


@pytest.mark.parametrize("route", ROUTES, ids=ROUTE_IDS)
@pytest.mark.parametrize("who", ["caller", "anonymous"])
def test_malformed_bodies(server: Server, route: Route, who: str) -> None:
    """Nested, non-object, invalid-UTF-8, truncated and non-JSON-number bodies."""
    sender = route.who if who == "caller" else "none"
    probes: list[Probe] = []
    for case, body in _raw_cases().items():
        headers = {}
        if route.form and case == "invalid UTF-8":
            body = b"client_id=\xff\xfe&grant_type=\xff"
            headers = {"Content-Type": "application/x-www-form-urlencoded"}
        probes.append(Probe(case, body, headers, sender))
    check(server, route, probes, anonymous=who == "anonymous")


@pytest.mark.parametrize("route", ROUTES, ids=ROUTE_IDS)
@pytest.mark.parametrize("who", ["caller", "anonymous"])
def test_oversized_bodies(server: Server, route: Route, who: str) -> None:
    """A body over the limit, a Content-Length that claims more than the limit but sends little, and
    one that claims less than it sends."""
    sender = route.who if who == "caller" else "none"
    valid, headers = _encode(route, server, route.body(server))
    big = b'{"name": "' + b"x" * MAX_BODY_BYTES + b'"}'
    if route.form:
        big = b"client_id=" + b"x" * MAX_BODY_BYTES
    probes = [
        Probe("body over the limit", big, headers, sender),
        Probe("Content-Length over the limit, short body", valid, headers, sender, 10**12),
        Probe("Content-Length shorter than the body", valid, headers, sender, len(valid) // 2),
    ]
    check(server, route, probes, anonymous=who == "anonymous")


@pytest.mark.parametrize("route", MUTATED_ROUTES, ids=[r.name for r in MUTATED_ROUTES])
def test_wrong_types_in_every_field(server: Server, route: Route) -> None:
    """Every field (six levels deep) holding another JSON type, an integer beyond int64, 1e400 or a
    huge string; and every top-level key duplicated with a wrong value last."""
    template = route.body(server)
    probes = [
        Probe(
            _describe(path, value),
            _dumps(_replace(template, path, value)),
            {},
            route.who,
            accepted_because=accepted_because(route.name, path, _at(template, path), value),
        )
        for path, value in _mutations(template)
    ]
    for key, value in template.items():
        # msgspec keeps the last of duplicated keys (as Jackson does): a wrong one last is refused.
        text = json.dumps(template)
        wrong = json.dumps("x" if isinstance(value, bool) else True)
        duplicated = f"{text[:-1]}, {json.dumps(key)}: {wrong}}}".encode()
        probes.append(Probe(f"duplicated {key}", duplicated, {}, route.who))
    check(server, route, probes)


@pytest.mark.parametrize("route", FORM_ROUTES, ids=[r.name for r in FORM_ROUTES])
def test_hostile_form_fields(server: Server, route: Route) -> None:
    """Every form field huge, with NUL, with invalid percent-encoding, repeated or missing."""
    template = route.body(server)
    probes: list[Probe] = []
    for name in template:
        for case, value in [
            ("huge", HUGE_STRING),
            ("NUL", "a\x00b"),
            ("separator", "a\x1fb"),
            ("line separator", "a\u2028b"),
            ("empty", ""),
        ]:
            body, headers = _encode(route, server, {**template, name: value})
            probes.append(Probe(f"{name} {case}", body, headers, route.who))
        body, headers = _encode(route, server, [*template.items(), (name, "again")])
        probes.append(Probe(f"{name} repeated", body, headers, route.who))
        body, headers = _encode(route, server, {k: v for k, v in template.items() if k != name})
        probes.append(Probe(f"{name} missing", body, headers, route.who))
    body, headers = _encode(route, server, template)
    probes.append(Probe("bad percent-encoding", body + b"&x=%zz%", headers, route.who))
    multipart = b"--b\r\nContent-Disposition: form-data\r\n\r\n" + b"x" * 1000
    probes.append(
        Probe("multipart garbage", multipart, {"Content-Type": "multipart/form-data; boundary=b"}, route.who)
    )
    check(server, route, probes)


# -- path and query parameters ---------------------------------------------------------------------


HOSTILE_SEGMENTS = {
    "NUL": "a%00b",
    "raw NUL": "a\x00b",
    "%2F": "a%2Fb",
    "..": "..",
    "%2E%2E": "%2E%2E",
    "long name": "n" * 5000,
    "very long name": "n" * 70_000,
    "leading 0x1F": "%1Fa",
    "trailing 0x1F": "a%1F",
    "double 0x1F": "a%1F%1Fb",
    "only 0x1F": "%1F",
    "line separator": quote("a\u2028b"),
    "invalid UTF-8": "a%FF%FE",
    "lone %": "a%",
    "bad escape": "a%zz",
}


@dataclass(frozen=True)
class ParamRoute:
    """A route with path segments: `{x}` marks the hostile one."""

    name: str
    method: str
    path: str
    who: str = "cluster"


PARAM_ROUTES = [
    ParamRoute("getNamespace", "GET", "/v1/{w}/namespaces/{x}"),
    ParamRoute("headNamespace", "HEAD", "/v1/{w}/namespaces/{x}"),
    ParamRoute("dropNamespace", "DELETE", "/v1/{w}/namespaces/{x}"),
    ParamRoute("updateProperties", "POST", "/v1/{w}/namespaces/{x}/properties"),
    ParamRoute("listTables", "GET", "/v1/{w}/namespaces/{x}/tables"),
    ParamRoute("listViews", "GET", "/v1/{w}/namespaces/{x}/views"),
    ParamRoute("createTable", "POST", "/v1/{w}/namespaces/{x}/tables"),
    ParamRoute("loadTable", "GET", "/v1/{w}/namespaces/{c}/tables/{x}"),
    ParamRoute("loadTable namespace", "GET", "/v1/{w}/namespaces/{x}/tables/t"),
    ParamRoute("headTable", "HEAD", "/v1/{w}/namespaces/{c}/tables/{x}"),
    ParamRoute("dropTable", "DELETE", "/v1/{w}/namespaces/{c}/tables/{x}"),
    ParamRoute("commitTable", "POST", "/v1/{w}/namespaces/{c}/tables/{x}"),
    ParamRoute("credentials", "GET", "/v1/{w}/namespaces/{c}/tables/{x}/credentials"),
    ParamRoute("unregister", "POST", "/v1/{w}/namespaces/{c}/tables/{x}/unregister"),
    ParamRoute("metrics", "POST", "/v1/{w}/namespaces/{c}/tables/{x}/metrics"),
    ParamRoute("loadView", "GET", "/v1/{w}/namespaces/{c}/views/{x}"),
    ParamRoute("dropView", "DELETE", "/v1/{w}/namespaces/{c}/views/{x}"),
    ParamRoute("prefix", "GET", "/v1/{x}/namespaces/{c}/tables/t"),
    ParamRoute("listNamespaces prefix", "GET", "/v1/{x}/namespaces"),
    ParamRoute("getCluster", "GET", "/management/v1/clusters/{x}"),
    ParamRoute("deleteCluster", "DELETE", "/management/v1/clusters/{x}", who="admin"),
    ParamRoute("revokeKey", "DELETE", "/management/v1/keys/{x}"),
    ParamRoute("rotateKey", "POST", "/management/v1/keys/{x}/rotate"),
    ParamRoute("consoleTable", "GET", "/console/tables/{w}/{c}/{x}"),
    ParamRoute("consoleRotateKey", "POST", "/console/keys/{x}/rotate"),
]


@pytest.mark.parametrize("route", PARAM_ROUTES, ids=[r.name for r in PARAM_ROUTES])
def test_hostile_path_segments(server: Server, route: ParamRoute) -> None:
    """Each hostile segment in the route's name, namespace, prefix, cluster or client id."""
    protocol = "console" if route.path.startswith("/console") else "rest"
    who = "console" if protocol == "console" else route.who
    base = route.path.replace("{w}", server.warehouse).replace("{c}", server.cluster)
    failures = []
    for case, segment in HOSTILE_SEGMENTS.items():
        target = base.replace("{x}", segment).encode("latin-1")
        body = b"{}" if route.method == "POST" and protocol == "rest" else None
        headers = {}
        if protocol == "console" and route.method == "POST":
            body = f"{CSRF_FIELD}={server.console_cookies.get(CSRF_COOKIE, '')}".encode()
            headers = {"Content-Type": "application/x-www-form-urlencoded"}
        answer = server.send(route.method, target, body=body, headers=headers, who=who)
        found = problems(server, answer, protocol, route.method)
        if found:
            failures.append(f"{case}: {', '.join(found)} -> {answer.status} {answer.text[:300]!r}")
    still_healthy(server)
    assert not failures, "\n".join(failures)


GARBAGE = ["-1", "0", str(2**63), str(10**30), "9" * 5000, "1e400", "NaN", "abc", "\x00", "%00", "%FF", "%"]


@dataclass(frozen=True)
class QueryRoute:
    name: str
    path: str
    parameters: dict[str, str]  # a valid query, each value to be replaced in turn
    protocol: str = "rest"


QUERY_ROUTES = [
    QueryRoute("listNamespaces", "/v1/{w}/namespaces", {"parent": "{c}", "pageSize": "10", "pageToken": "x"}),
    QueryRoute("listTables", "/v1/{w}/namespaces/{c}/tables", {"pageSize": "10", "pageToken": "x"}),
    QueryRoute("listTables (Litestar)", "/v1/{w}/namespaces/{c}/tables", {"pageSize": "10", "other": "1"}),
    QueryRoute("listViews", "/v1/{w}/namespaces/{c}/views", {"pageSize": "10", "pageToken": "x"}),
    QueryRoute("loadTable", "/v1/{w}/namespaces/{c}/tables/t", {"snapshots": "all"}),
    QueryRoute("loadTable (Litestar)", "/v1/{w}/namespaces/{c}/tables/t", {"snapshots": "all", "x": "1"}),
    QueryRoute("config", "/v1/config", {"warehouse": "{w}"}),
    QueryRoute("audit", "/management/v1/audit", {"cluster": "{c}", "limit": "10", "before": "5"}),
    QueryRoute("keys", "/management/v1/keys", {"cluster": "{c}"}),
    QueryRoute(
        "kafkaOffsets", "/management/v1/kafka-offsets", {"warehouse": "{w}", "namespace": "{c}", "table": "t"}
    ),
    QueryRoute(
        "maintenancePasses",
        "/management/v1/maintenance/passes",
        {"warehouse": "{w}", "namespace": "{c}", "table": "t", "limit": "10"},
    ),
    QueryRoute(
        "snapshotAtOffset",
        "/management/v1/snapshots/at",
        {
            "warehouse": "{w}",
            "namespace": "{c}",
            "table": "t",
            "topic": "clicks",
            "partition": "0",
            "offset": "5",
        },
    ),
    QueryRoute(
        "snapshotAtTime",
        "/management/v1/snapshots/at",
        {"warehouse": "{w}", "namespace": "{c}", "table": "t", "timestamp": "1700000000000"},
    ),
    QueryRoute("consoleAudit", "/console/audit", {"since": "2026-01-01", "until": "2026-01-02"}, "console"),
]


@pytest.mark.parametrize("route", QUERY_ROUTES, ids=[r.name for r in QUERY_ROUTES])
def test_hostile_query_parameters(server: Server, route: QueryRoute) -> None:
    """Each parameter in turn: garbage, out-of-range numbers, NUL, huge, a 0x1F misuse, repeated."""
    path = route.path.replace("{w}", server.warehouse).replace("{c}", server.cluster)
    valid = {
        k: v.replace("{w}", server.warehouse).replace("{c}", server.cluster)
        for k, v in route.parameters.items()
    }
    who = "console" if route.protocol == "console" else "cluster"
    failures = []
    for name in valid:
        values = [*GARBAGE, "x" * 100_000, "%1F", f"{server.cluster}%1F%1F", "a%2Fb", ".."]
        for value in values:
            query = "&".join(
                f"{k}={quote(v, safe='') if k != name else _raw_query(value)}" for k, v in valid.items()
            )
            answer = server.send("GET", f"{path}?{query}", who=who)
            found = problems(server, answer, route.protocol, "GET")
            if answer.status == 200 and not _must_refuse(name, value):
                found = [p for p in found if not p.startswith(("status", "not the"))]
            if found:
                failures.append(
                    f"{name}={value[:20]!r}: {', '.join(found)} -> {answer.status} {answer.text[:300]!r}"
                )
        repeated = "&".join(f"{k}={quote(v, safe='')}" for k, v in [*valid.items(), (name, valid[name])])
        answer = server.send("GET", f"{path}?{repeated}", who=who)
        found = problems(server, answer, route.protocol, "GET")
        leaks = [p for p in found if not p.startswith(("status", "not the"))]
        if answer.status >= 500 or leaks:
            failures.append(f"{name} repeated: {answer.status} {answer.text[:300]!r}")
    still_healthy(server)
    assert not failures, "\n".join(failures)


def _raw_query(value: str) -> str:
    """The value as sent: percent escapes kept, other bytes percent-encoded (a raw NUL too)."""
    if value.startswith("%") or "%1F" in value or "%2F" in value:
        return value
    return quote(value, safe="")


def _must_refuse(name: str, value: str) -> bool:
    """Whether `name=value` has to be an error. A filter that names nothing (a namespace, table or
    cluster that does not exist) may answer an empty result instead, and a page token is opaque."""
    return name in ("pageSize", "limit", "before", "partition", "offset", "timestamp", "snapshots")


# -- headers ---------------------------------------------------------------------------------------


HEADER_ROUTES: dict[str, tuple[str, str, dict[str, Any] | None]] = {
    "loadTable": ("GET", "/v1/{w}/namespaces/{c}/tables/t", None),
    "listTables": ("GET", "/v1/{w}/namespaces/{c}/tables", None),
    "loadTable (Litestar)": ("GET", "/v1/{w}/namespaces/{c}/tables/t?snapshots=all&x=1", None),
    "createTable": ("POST", "/v1/{w}/namespaces/{c}/tables", {"name": "h1", "schema": SCHEMA}),
    "commitTable": ("POST", "/v1/{w}/namespaces/{c}/tables/t", {"requirements": [], "updates": []}),
    "credentials": ("GET", "/v1/{w}/namespaces/{c}/tables/t/credentials", None),
    "config": ("GET", "/v1/config", None),
    "createKey": ("POST", "/management/v1/keys", {"role": "reader", "cluster": "{c}"}),
}
# (case, headers, whether it must be refused): a header a route does not read may be ignored (2xx).
HOSTILE_HEADERS: list[tuple[str, dict[str, str], bool]] = [
    ("Authorization garbage", {"Authorization": "Bearer !!!"}, True),
    ("Authorization huge", {"Authorization": "Bearer " + "a" * 60_000}, True),
    ("Authorization NUL", {"Authorization": "Bearer a\x00b"}, True),
    ("Authorization JWT garbage", {"Authorization": "Bearer e30.e30.e30"}, True),
    ("Authorization Basic garbage", {"Authorization": "Basic %%%"}, True),
    ("Authorization empty", {"Authorization": ""}, True),
    ("storage endpoint garbage", {"X-Floe-Storage-Endpoint": "../../etc"}, False),
    ("storage endpoint huge", {"X-Floe-Storage-Endpoint": "x" * 10_000}, False),
    ("access delegation garbage", {"X-Iceberg-Access-Delegation": "x" * 10_000}, False),
    ("If-None-Match huge", {"If-None-Match": '"' + "x" * 10_000 + '"'}, False),
    ("Idempotency-Key huge", {"Idempotency-Key": "k" * 10_000}, False),
    ("Idempotency-Key NUL", {"Idempotency-Key": "a\x00b"}, False),
    ("X-Request-Id huge", {"X-Request-Id": "r" * 10_000}, False),
    ("Content-Type garbage", {"Content-Type": "application/\x01; charset=nope"}, False),
    ("Content-Type form", {"Content-Type": "application/x-www-form-urlencoded"}, False),
    ("Content-Encoding gzip (not gzip)", {"Content-Encoding": "gzip"}, False),
    ("Transfer-Encoding and Content-Length", {"Transfer-Encoding": "chunked"}, False),
]


@pytest.mark.parametrize("route", list(HEADER_ROUTES), ids=list(HEADER_ROUTES))
def test_hostile_headers(server: Server, route: str) -> None:
    """Garbage, huge or NUL-holding credentials, storage endpoints, delegation, ETags, idempotency
    keys, request ids and content types: never a 5xx or a leak; credentials that are not valid are a
    4xx, and any 4xx is the spec's error JSON."""
    method, path, template = HEADER_ROUTES[route]
    target = path.replace("{w}", server.warehouse).replace("{c}", server.cluster)
    body = json.dumps(template).replace("{c}", server.cluster).encode() if template is not None else None
    failures = []
    for case, headers, refuse in HOSTILE_HEADERS:
        who = "none" if "Authorization" in headers else "cluster"
        answer = server.send(method, target, body=body, headers=headers, who=who)
        found = problems(server, answer, "rest", method)
        if answer.status < 400 and not refuse:
            found = [p for p in found if not p.startswith(("status", "not "))]
        if found:
            failures.append(f"{case}: {', '.join(found)} -> {answer.status} {answer.text[:300]!r}")
    still_healthy(server)
    assert not failures, "\n".join(failures)


def _billion_laughs() -> str:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    return "\n".join(lines) + "\ntables: *a9\n"


HOSTILE_YAML = {
    "billion laughs": _billion_laughs(),
    "flow sequence nested 100,000 deep": "tables: " + "[" * DEPTH + "]" * DEPTH,
    "block mapping nested 5,000 deep": "".join(f"{' ' * i}k{i}:\n" for i in range(5000)) + " " * 5000 + "v\n",
    "a document that is a list": "- 1\n- 2\n",
    "a tag constructing a Python object": "tables: !!python/object/apply:os.system ['true']\n",
    "an integer beyond int64": "tables:\n- source_topic: t\n  partitions: 100000000000000000000000\n",
    "invalid UTF-8 as text": "tables: \udcff\n",
    "many documents": "---\n" * 10_000,
}


@pytest.mark.parametrize("case", list(HOSTILE_YAML), ids=list(HOSTILE_YAML))
def test_hostile_yaml_on_the_console(server: Server, case: str) -> None:
    """The console's floe.yaml form (the one YAML a client sends): bombs, deep nesting and tags are a
    4xx page, at once."""
    route = next(r for r in FORM_ROUTES if r.name == "consoleApplyPipeline")
    text = HOSTILE_YAML[case].encode("utf-8", "surrogateescape")
    body = urlencode(
        {"config": text, "confirm": "no", CSRF_FIELD: server.console_cookies.get(CSRF_COOKIE, "")}
    ).encode()
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    check(server, route, [Probe(case, body, headers, "console")])


HOSTILE_OFFSETS = {
    "nested 100,000 deep": "[" * DEPTH + "]" * DEPTH,
    "object nested 100,000 deep": '{"a":' * DEPTH + "1" + "}" * DEPTH,
    "not JSON": "{0: 5",
    "a list": "[0, 5]",
    "an offset beyond int64": '{"0": 99999999999999999999}',
    "an offset of 1e400": '{"0": 1e400}',
    "a negative partition": '{"-1": 5}',
    "a partition beyond int32": '{"4294967296": 5}',
    "NaN": '{"0": NaN}',
    "a string offset": '{"0": "5"}',
    "a huge object": json.dumps({str(p): p for p in range(200_000)}),
}


@pytest.mark.parametrize("case", list(HOSTILE_OFFSETS), ids=list(HOSTILE_OFFSETS))
def test_hostile_kafka_offsets_in_a_commit(server: Server, case: str) -> None:
    """The Kafka offsets a writer puts in a snapshot summary (JSON inside a JSON string, which
    floe parses): each hostile form is a 4xx, as start or as end offsets."""
    route = Route("commitTable add-snapshot (Kafka offsets)", "POST", f"{NS}/tables/t", _commit)
    probes = []
    for which in (START_OFFSETS, END_OFFSETS):
        snapshot_id = uuid.uuid4().int >> 66
        summary = {
            "operation": "append",
            TOPIC: "clicks",
            START_OFFSETS: '{"0": 0}',
            END_OFFSETS: '{"0": 5}',
            which: HOSTILE_OFFSETS[case],
        }
        update = _table_updates(server)["add-snapshot"]
        update["snapshot"] = {**update["snapshot"], "snapshot-id": snapshot_id, "summary": summary}
        body = json.dumps({"requirements": [], "updates": [update]}).encode()
        # 400, not the 409 of offsets that do not follow the table's: refused as they are read.
        expected = None if len(body) > MAX_BODY_BYTES else 400  # else the body limit's 413 comes first
        probes.append(Probe(f"{which}: {case}", body, {}, "cluster", expect_status=expected))
    check(server, route, probes)
