"""Running floe: named warehouses, health, Prometheus metrics, request ids and JSON logs. Readiness
following PostgreSQL and several worker processes are in tests/e2e/test_operations.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import pyarrow as pa

from devtools.catalog_server import CatalogProcess


def _floe(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "catalog.cli", *args],
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


def test_health_metrics_and_request_ids(catalog_server: CatalogProcess, http: httpx.Client) -> None:
    assert http.get("/healthz").json() == {"status": "ok"}
    assert http.get("/readyz").json() == {"status": "ready"}

    request_id = f"test-{uuid.uuid4().hex}"
    response = http.get("/v1/default/namespaces", headers={"X-Request-Id": request_id})
    assert response.status_code == 200
    assert response.headers["x-request-id"] == request_id
    assert http.get("/v1/config").headers["x-request-id"]  # generated when not sent

    metrics = http.get("/metrics").text
    assert 'floe_http_requests_total{method="GET",route="/v1/{prefix}/namespaces",status="200"}' in metrics
    assert "floe_http_request_duration_seconds_bucket" in metrics
    assert "floe_commit_retries_total" in metrics
    assert "floe_commit_conflicts_total" in metrics

    # Logs are JSON lines carrying the request id.
    logged = [json.loads(line) for line in catalog_server.log_text().splitlines() if line.startswith("{")]
    mine = [entry for entry in logged if entry.get("request_id") == request_id]
    assert mine
    assert mine[0]["path"] == "/v1/{prefix}/namespaces"
    assert mine[0]["status"] == 200
