"""Running floe with PostgreSQL: readiness follows the database (stopped under a running server), and
several worker processes share it. Named warehouses, health, metrics and logs are in
tests/api/test_operations.py."""

from __future__ import annotations

import uuid

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


def test_several_workers_share_postgres(postgres: LocalPostgres) -> None:
    with CatalogProcess(postgres.create_database(f"floe_{uuid.uuid4().hex[:8]}"), workers=2) as server:
        catalog = server.catalog()
        catalog.create_namespace("multi")
        data = pa.table({"n": pa.array(range(10), pa.int64())})
        table = catalog.create_table("multi.t", schema=data.schema)
        for _ in range(5):
            table.append(data)
        # Every worker answers with the same, latest state: nothing lives in a worker's memory.
        locations = set()
        for _ in range(20):
            loaded = server.catalog().load_table("multi.t")
            assert len(loaded.metadata.snapshots) == 5
            locations.add(loaded.metadata_location)
        assert len(locations) == 1
        assert catalog.load_table("multi.t").scan().to_arrow().num_rows == 50
        metrics = httpx.get(f"{server.url}/metrics").text
        assert "floe_http_requests_total" in metrics
