"""The command line as a user meets it: every user error is one message and a non-zero exit (never a
Python traceback), lists print on stdout, and at 80 columns identifiers are never cut.

Commands run through click's test runner against the tier's in-process catalog; nothing here starts
Spark (the checks that fail come before it).
"""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

from devtools.catalog_server import CatalogProcess
from devtools.ports import free_port
from floe.cli import main


def floe(*args: str, env: Mapping[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, list(args), env=dict(env or {}))


def assert_user_error(result: Result, message: str) -> None:
    """One clear message on stderr, exit status 1, no traceback."""
    assert result.exit_code == 1, (result.exit_code, result.output)
    assert isinstance(result.exception, SystemExit), result.exception
    assert message in result.stderr, result.stderr
    assert "Traceback" not in result.output
    assert result.stdout == ""


@pytest.fixture
def admin_env(catalog_server: CatalogProcess, tmp_path: Path) -> dict[str, str]:
    return {
        "FLOE_URL": catalog_server.url,
        "FLOE_CLIENT_ID": catalog_server.admin_client_id,
        "FLOE_CLIENT_SECRET": catalog_server.admin_client_secret,
        "FLOE_HOME": str(tmp_path / "home"),
    }


# -- user errors, one class each -------------------------------------------------------------------


def test_missing_java(admin_env: dict[str, str], tmp_path: Path) -> None:
    env = {**admin_env, "JAVA_HOME": str(tmp_path / "no-jdk")}
    for command in (["ingest", "--metrics-port", "0"], ["maintain", "--once", "--metrics-port", "0"]):
        assert_user_error(floe(*command, env=env), f"No java found in JAVA_HOME ({tmp_path / 'no-jdk'})")


def test_unreachable_catalog(tmp_path: Path) -> None:
    env = {
        "FLOE_URL": f"http://127.0.0.1:{free_port()}",
        "FLOE_CLIENT_ID": "floe_x",
        "FLOE_CLIENT_SECRET": "y",
        "FLOE_HOME": str(tmp_path),
    }
    for command in (["keys", "list"], ["clusters", "list"], ["ingest", "--metrics-port", "0"]):
        assert_user_error(floe(*command, env=env), f"Cannot reach floe at {env['FLOE_URL']}")


def test_refused_credentials(admin_env: dict[str, str]) -> None:
    env = {**admin_env, "FLOE_CLIENT_SECRET": "wrong"}
    for command in (["keys", "list"], ["ingest", "--metrics-port", "0"]):
        assert_user_error(floe(*command, env=env), "Authentication failed (401)")


def test_missing_credentials(tmp_path: Path) -> None:
    env = {"FLOE_HOME": str(tmp_path), "FLOE_CLIENT_ID": "", "FLOE_CLIENT_SECRET": ""}
    assert_user_error(floe("keys", "list", env=env), "No admin credentials")


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_busy_port(busy_port: int, admin_env: dict[str, str], tmp_path: Path) -> None:
    env = {"FLOE_HOME": str(tmp_path)}
    assert_user_error(
        floe("serve", "--port", str(busy_port), env=env),
        f"port {busy_port} on 127.0.0.1 is in use (is floe already running?); pass --port to use another",
    )
    assert_user_error(
        floe("ingest", "--metrics-port", str(busy_port), env=admin_env),
        f"port {busy_port} on 127.0.0.1 is in use (is floe already running?); pass --metrics-port",
    )


def test_unreachable_database(tmp_path: Path) -> None:
    url = f"postgresql+asyncpg://floe:hunter2@127.0.0.1:{free_port()}/floe"
    env = {"FLOE_HOME": str(tmp_path), "FLOE_DATABASE_URL": url}
    for command in (["warehouses", "list"], ["db", "upgrade"]):
        result = floe(*command, env=env)
        assert_user_error(result, "Cannot use the database postgresql+asyncpg://floe:***@127.0.0.1:")
        assert "hunter2" not in result.output


def test_a_reader_key_cannot_take_a_lease(admin_env: dict[str, str]) -> None:
    """`--shard auto` with a key that may not hold leases: one message naming the option, exit 1."""
    cluster = f"lease_{uuid.uuid4().hex[:8]}"
    assert floe("clusters", "create", cluster, env=admin_env).exit_code == 0
    created = floe("keys", "create", "--cluster", cluster, "--role", "reader", env=admin_env)
    key = json.loads(created.stdout)
    env = admin_env | {"FLOE_CLIENT_ID": key["client_id"], "FLOE_CLIENT_SECRET": key["client_secret"]}
    command = ["maintain", "--once", "--shard", "auto", "--nice", "0", "--metrics-port", "0"]
    assert_user_error(floe(*command, env=env), "cannot take a lease for --shard auto")


def test_maintain_once_with_a_lease_ends_it(
    admin_env: dict[str, str], catalog_server: CatalogProcess
) -> None:
    """`floe maintain --once --shard auto`, alone in its group: takes every table of its namespace, then
    ends its lease (the group is empty again)."""
    import httpx

    from runtime.leases import group_name

    namespace = f"lease_ns_{uuid.uuid4().hex[:8]}"
    token = catalog_server.token()
    with httpx.Client(base_url=catalog_server.url, headers={"Authorization": f"Bearer {token}"}) as http:
        http.post("/v1/default/namespaces", json={"namespace": [namespace]})
        schema = {"type": "struct", "fields": [{"id": 1, "name": "a", "type": "long", "required": False}]}
        for name in ("t1", "t2"):
            created = http.post(
                f"/v1/default/namespaces/{namespace}/tables", json={"name": name, "schema": schema}
            )
            assert created.status_code == 200, created.text
        command = ["maintain", "--once", "--shard", "auto", "--namespace", namespace, "--nice", "0"]
        result = floe(*command, "--metrics-port", "0", env=admin_env)
        assert result.exit_code == 0, result.output
        group = group_name("maintain", [f"namespace:{namespace}"])
        assert f"of {group}, 1 live" in result.output
        passes = http.get("/management/v1/maintenance/passes", params={"namespace": namespace}).json()
        assert sorted(p["table"] for p in passes["passes"]) == ["t1", "t2"]
        alone = http.put(f"/management/v1/leases/{group}/probe", json={"ttl-seconds": 2})
        assert [m["member"] for m in alone.json()["members"]] == ["probe"]


def test_missing_file(admin_env: dict[str, str], tmp_path: Path) -> None:
    result = floe("apply", "-f", str(tmp_path / "floe.yaml"), env=admin_env)
    assert result.exit_code == 2  # click's usage error
    assert "does not exist" in result.stderr
    assert "Traceback" not in result.output


# -- output ---------------------------------------------------------------------------------------------


def test_warehouses_list_prints_on_stdout_and_takes_o(tmp_path: Path) -> None:
    env = {"FLOE_HOME": str(tmp_path)}
    created = floe("warehouses", "create", "second", "--location", str(tmp_path / "second"), env=env)
    assert created.exit_code == 0, created.output
    table = floe("warehouses", "list", env=env | {"COLUMNS": "200"})
    assert table.exit_code == 0, table.output
    assert (tmp_path / "second").as_uri() in table.stdout
    listed = floe("warehouses", "list", "-o", "json", env=env)
    assert "second" in {w["name"] for w in json.loads(listed.stdout)}


def _lines_fit(text: str, width: int = 80) -> None:
    """Every line of the printed tables fits (free text lines wrap in the terminal)."""
    tables = [line for line in text.splitlines() if any(c in line for c in "┃│━─")]
    assert tables
    assert all(len(line) <= width for line in tables), text


def test_keys_list_at_80_columns_shows_whole_key_ids(admin_env: dict[str, str]) -> None:
    cluster = f"a_rather_long_cluster_name_{uuid.uuid4().hex[:8]}"
    assert floe("clusters", "create", cluster, env=admin_env).exit_code == 0
    ids = []
    for role in ("reader", "writer"):
        created = floe(
            "keys", "create", "--cluster", cluster, "--role", role, "--expires", "90d",
            "--description", "a description long enough to need wrapping at eighty columns",
            env=admin_env,
        )  # fmt: skip
        assert created.exit_code == 0, created.output
        ids.append(json.loads(created.stdout)["client_id"])
    listed = floe("keys", "list", "--cluster", cluster, env=admin_env | {"COLUMNS": "80"})
    assert listed.exit_code == 0, listed.output
    _lines_fit(listed.stdout)
    for client_id in ids:
        assert client_id in listed.stdout  # whole, on one line: what rotate and revoke take
    assert floe("keys", "list", "-o", "json", env=admin_env).exit_code == 0


@pytest.fixture
def metrics_url() -> str:
    """An ingestion-like Prometheus endpoint with two tables of long names."""
    registry = CollectorRegistry()
    tp = ("table", "topic", "partition")
    records = Counter("floe_ingest_records", "", tp, registry=registry)
    dead = Counter("floe_ingest_dead_letters", "", tp, registry=registry)
    lag = Gauge("floe_ingest_partition_offset_lag", "", tp, registry=registry)
    committed = Gauge("floe_ingest_committed_offset", "", tp, registry=registry)
    undeclared = Counter("floe_ingest_records_with_undeclared_fields", "", tp, registry=registry)
    fields = Counter("floe_ingest_undeclared_field_records", "", ("table", "field"), registry=registry)
    for table in TABLES:
        records.labels(table, "t", "all").inc(1000)
        dead.labels(table, "t", "all").inc(3)
        for partition in ("0", "1"):
            lag.labels(table, "t", partition).set(12345)
            committed.labels(table, "t", partition).set(987654321)
    undeclared.labels(TABLES[0], "t", "all").inc(7)
    fields.labels(TABLES[0], "color").inc(7)
    port = free_port()
    start_http_server(port, addr="127.0.0.1", registry=registry)
    return f"http://127.0.0.1:{port}/metrics"


TABLES = ["production.customer_orders_by_region", "production.page_views_by_device_type"]


def test_status_at_80_columns_shows_whole_table_names(metrics_url: str, tmp_path: Path) -> None:
    env = {"FLOE_URL": f"http://127.0.0.1:{free_port()}", "FLOE_HOME": str(tmp_path), "COLUMNS": "80"}
    shown = floe("status", "--metrics-url", metrics_url, env=env)
    assert shown.exit_code == 0, shown.output
    _lines_fit(shown.stdout)
    for table in TABLES:
        assert table in shown.stdout  # whole, on one line
    assert "letters" in shown.stdout  # the dead letters column stays at 80 columns
    assert f"{TABLES[0]}: 7 records had fields the table does not declare: color (7)" in shown.stdout
    as_json = json.loads(floe("status", "--metrics-url", metrics_url, "-o", "json", env=env).stdout)
    entry = next(t for t in as_json["tables"] if t["table"] == TABLES[0])
    assert entry["records_with_undeclared_fields"] == 7
    assert entry["undeclared_fields"] == {"color": 7}
