"""Running floe: a second named warehouse made with `floe warehouses create` (a real process), readiness
following PostgreSQL (stopped under a running server), and several worker processes sharing it. Health,
metrics and logs are in tests/api/test_operations.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pyarrow as pa

from devtools.catalog_server import CatalogProcess
from devtools.postgres import LocalPostgres


def test_readiness_follows_the_database() -> None:
    pg = LocalPostgres().start()
    try:
        with CatalogProcess(pg.create_database("floe_ready")) as server:
            assert httpx.get(f"{server.url}/readyz").status_code == 200
            pg.stop()
            down = httpx.get(f"{server.url}/readyz", timeout=30)
            assert down.status_code == 503
            assert down.json()["error"]["type"] == "ServiceUnavailableException"
            assert httpx.get(f"{server.url}/healthz").status_code == 200
    finally:
        pg.stop()


def test_several_workers_share_postgres(two_worker_server: CatalogProcess) -> None:
    server = two_worker_server
    catalog = server.catalog()
    namespace = f"multi_{uuid.uuid4().hex[:6]}"  # the server is the session's: a namespace of its own
    catalog.create_namespace(namespace)
    data = pa.table({"n": pa.array(range(10), pa.int64())})
    table = catalog.create_table(f"{namespace}.t", schema=data.schema)
    for _ in range(5):
        table.append(data)
    # Every worker answers with the same, latest state: nothing lives in a worker's memory.
    locations = set()
    for _ in range(20):
        loaded = server.catalog().load_table(f"{namespace}.t")
        assert len(loaded.metadata.snapshots) == 5
        locations.add(loaded.metadata_location)
    assert len(locations) == 1
    assert catalog.load_table(f"{namespace}.t").scan().to_arrow().num_rows == 50
    metrics = httpx.get(f"{server.url}/metrics").text
    assert "floe_http_requests_total" in metrics
    # Each worker writes JSON access lines (a spawned worker has no handlers until uvicorn applies
    # floe's logging configuration in it); request ids start with their worker's random prefix. A
    # worker still starting has no listener yet and gets no connection: ask until both answered.
    deadline = time.monotonic() + 60
    while True:
        access = [
            json.loads(line)
            for line in server.log_text().splitlines()
            if line.startswith("{") and '"floe.access"' in line
        ]
        prefixes = {entry["request_id"][:20] for entry in access}
        if len(prefixes) >= 2 or time.monotonic() > deadline:
            break
        httpx.get(f"{server.url}/v1/config", headers={"Authorization": f"Bearer {server.token()}"})
    assert any(entry["path"].endswith("/tables/{table:str}") for entry in access)
    assert len(prefixes) == 2, f"access lines of {len(prefixes)} workers: {sorted(prefixes)}"


def _floe(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "floe.cli", *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
    )


def test_second_warehouse(catalog_server: CatalogProcess, database_url: str, tmp_path: Path) -> None:
    name = f"wh_{uuid.uuid4().hex[:6]}"
    location = tmp_path / "second-warehouse"
    created = _floe(
        "warehouses", "create", name, "--location", str(location),
        env={"FLOE_HOME": str(catalog_server.home), "FLOE_DATABASE_URL": database_url},
    )  # fmt: skip
    assert json.loads(created.stdout)["location"] == location.resolve().as_uri()
    listed = _floe(
        "warehouses", "list", "--output", "json",
        env={"FLOE_HOME": str(catalog_server.home), "FLOE_DATABASE_URL": database_url},
    )  # fmt: skip
    assert name in {w["name"] for w in json.loads(listed.stdout)}

    auth = {"Authorization": f"Bearer {catalog_server.token()}"}
    audit = httpx.get(f"{catalog_server.url}/management/v1/audit", params={"limit": 1000}, headers=auth)
    assert any(
        e["action"] == "createWarehouse" and e["target"] == f"name={name}" and e["outcome"] == "ok"
        for e in audit.json()["entries"]
    ), "the command line's change is in the audit log"
    config = httpx.get(f"{catalog_server.url}/v1/config", params={"warehouse": name}, headers=auth).json()
    assert config["overrides"]["prefix"] == name

    catalog = catalog_server.catalog(warehouse=name)
    ns = f"sales_{uuid.uuid4().hex[:6]}"
    catalog.create_namespace(ns)
    data = pa.table({"id": pa.array([1, 2], pa.int64())})
    table = catalog.create_table(f"{ns}.orders", schema=data.schema)
    table.append(data)
    assert table.location().startswith(location.resolve().as_uri())
    assert list(location.rglob("*.parquet")), "data files land in the second warehouse"
    # Namespaces are per warehouse: the default warehouse does not see this one's.
    default = catalog_server.catalog()
    assert not default.namespace_exists(ns)
    assert (ns,) in catalog.list_namespaces()
    assert catalog.load_table(f"{ns}.orders").scan().to_arrow().num_rows == 2

    missing = httpx.get(
        f"{catalog_server.url}/v1/config", params={"warehouse": "no-such-warehouse"}, headers=auth
    )
    assert missing.status_code == 404
    assert missing.json()["error"]["type"] == "NoSuchWarehouseException"
