"""The shared components of the ingestion benchmark: PostgreSQL, floe's catalog and a Kafka broker,
clients of them, floe.yaml applied through the control plane, and CPU sampling of each."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import httpx
from pyiceberg.catalog.rest import RestCatalog

from benchmarks.catalog.procstat import postmaster_pid
from benchmarks.ingest.freshness import connect_to_floe
from benchmarks.ingest.ingesters import Ingester
from benchmarks.ingest.sampling import CpuSampler
from catalog.client import FloeClient
from devtools.catalog_server import CatalogProcess
from devtools.kafka_broker import LocalKafka
from devtools.postgres import LocalPostgres


@dataclass
class Environment:
    """The shared components: PostgreSQL, floe's catalog, the Kafka broker, and clients of them."""

    work: Path
    postgres: LocalPostgres
    server: CatalogProcess
    kafka: LocalKafka
    catalog: RestCatalog
    control: FloeClient

    def duckdb(self, directory: Path, threads: int = 1) -> duckdb.DuckDBPyConnection:
        """An in-memory DuckDB (offline extensions under `directory`) with floe attached as `floe`,
        authenticated with the admin key."""
        return connect_to_floe(
            directory,
            endpoint=self.server.url,
            client_id=self.server.admin_client_id,
            client_secret=self.server.admin_client_secret,
            threads=threads,
        )

    def sampler(self, ingester: Ingester | None) -> CpuSampler:
        """CPU of the ingester's process tree, the broker, and floe's catalog with PostgreSQL."""
        kafka, server = self.kafka, self.server
        postmaster = postmaster_pid(self.postgres.data)
        return CpuSampler(
            {
                "ingester": lambda: [p for p in (ingester.pid if ingester else None,) if p],
                "broker": lambda: [p for p in (kafka.process.pid if kafka.process else None,) if p],
                "catalog": lambda: [
                    p for p in (server.process.pid if server.process else None, postmaster) if p
                ],
            }
        )


def apply_pipeline(server: CatalogProcess, config: dict[str, Any]) -> None:
    """`floe apply`: PUT the whole floe.yaml (as JSON) to the control plane."""
    response = httpx.put(
        f"{server.url}/management/v1/pipeline",
        json={"config": config, "dry_run": False},
        headers={"Authorization": f"Bearer {server.token()}"},
        timeout=600,  # a thousand tables on a loaded machine took over two minutes
    )
    if response.status_code != 200:
        raise RuntimeError(f"applying floe.yaml failed ({response.status_code}): {response.text}")


def floe_table(cluster: str, topic: str) -> str:
    """`namespace.table` of a topic's table: the cluster's namespace, the topic with `.`/`-` as `_`."""
    return f"{cluster}.{topic.replace('.', '_').replace('-', '_')}"


@contextlib.contextmanager
def environment(work: Path, kafka_heap: str, kafka_request_log: bool = False) -> Iterator[Environment]:
    """A throwaway PostgreSQL, `floe serve` on it (warehouse in `work/floe`) and a Kafka broker (its log
    in `work/kafka/server.log`, every request in it with `kafka_request_log`)."""
    with LocalPostgres() as postgres:
        database = postgres.create_database(f"floe_ingest_bench_{uuid.uuid4().hex[:6]}")
        with (
            CatalogProcess(database, home=work / "floe") as server,
            LocalKafka(data_dir=work / "kafka", heap=kafka_heap, request_log=kafka_request_log) as kafka,
        ):
            control = FloeClient(server.url, server.admin_client_id, server.admin_client_secret)
            try:
                yield Environment(work, postgres, server, kafka, server.catalog(), control)
            finally:
                control.close()
