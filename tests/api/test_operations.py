"""Running floe: health, Prometheus metrics, request ids and JSON logs. Named warehouses (made on the
command line), readiness following PostgreSQL and several worker processes are in
tests/e2e/test_operations.py."""

from __future__ import annotations

import json
import uuid

import httpx

from devtools.catalog_server import CatalogProcess


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
    # The garbage collector's full-collection pauses (catalog/collector.py), a series per kind of scan.
    assert 'floe_gc_full_collection_seconds_count{scan="whole"}' in metrics

    # Logs are JSON lines carrying the request id.
    logged = [json.loads(line) for line in catalog_server.log_text().splitlines() if line.startswith("{")]
    mine = [entry for entry in logged if entry.get("request_id") == request_id]
    assert mine
    assert mine[0]["path"] == "/v1/{prefix}/namespaces"
    assert mine[0]["status"] == 200
