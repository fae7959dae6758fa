"""Maintenance without Spark (`maintenance.inprocess`, issue 31) while `floe ingest` commits: real Kafka,
floe on PostgreSQL, the shared consumer committing every second.

Every compaction commit here is forced to lose its race: it waits until ingestion has committed on top
of the snapshot it read, so floe refuses it (409) and pyiceberg rebuilds it on the new head. Afterwards
every Kafka position produced is in its table exactly once (`_kafka.partition`/`_kafka.offset`), the
small files were compacted, old snapshots expired and their files deleted, every file the table still
references exists, and no Spark session was ever started."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.table import Table

from devtools.catalog_server import CatalogProcess
from devtools.kafka_broker import LocalKafka
from devtools.postgres import LocalPostgres
from maintenance import inprocess, pyiceberg_rewrite
from maintenance.worker import MaintenanceWorker, WorkerOptions
from tests.e2e.ingest_harness import (
    IngestProcess,
    Pipeline,
    Produced,
    admin_client,
    apply_pipeline,
    produce,
    wait_until_committed,
)

pytestmark = pytest.mark.e2e

CLUSTER = "inproc"
TABLES = 3
POLICY = {
    "target_file_size_mb": 1,
    "cold_after": "0s",
    "hot_partition_max_files": 2,
    "snapshot_retention": "1s",
    "min_snapshots_to_keep": 2,
}


@pytest.fixture(scope="module")
def server(postgres: LocalPostgres, tmp_path_factory: pytest.TempPathFactory) -> Iterator[CatalogProcess]:
    url = postgres.create_database(f"floe_inproc_{uuid.uuid4().hex[:8]}")
    with CatalogProcess(url, home=tmp_path_factory.mktemp("inproc-floe")) as process:
        yield process


@pytest.fixture(scope="module")
def admin(server: CatalogProcess) -> Iterator[httpx.Client]:
    with admin_client(server) as client:
        yield client


def _no_spark() -> Any:
    raise AssertionError("a small append-only table needed Spark")


def _positions(table: Table) -> list[tuple[int, int]]:
    rows = table.scan(selected_fields=("_kafka",)).to_arrow().to_pylist()
    return [(r["_kafka"]["partition"], r["_kafka"]["offset"]) for r in rows]


def _referenced_exist(table: Table) -> list[str]:
    """Files the current snapshot reads that are missing on disk."""
    snapshot = table.current_snapshot()
    assert snapshot is not None
    missing = []
    for manifest in snapshot.manifests(table.io):
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            if not Path(urlsplit(entry.data_file.file_path).path).exists():
                missing.append(entry.data_file.file_path)
    return missing


def _headers_not_null_at_rest(table: Table) -> int:
    """Rows of the live data files, read straight from Parquet, whose `_kafka.headers` is not null: the
    records were produced without headers, so compaction must not have made them `[]`
    (runtime/pyiceberg_nulls.py)."""
    import pyarrow.parquet as pq

    snapshot = table.current_snapshot()
    assert snapshot is not None
    found = 0
    for manifest in snapshot.manifests(table.io):
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            read = pq.read_table(urlsplit(entry.data_file.file_path).path, columns=["_kafka"])
            headers = read.column("_kafka").combine_chunks().field("headers")
            found += len(headers) - headers.null_count
    return found


def test_in_process_compaction_races_ingestion_and_loses_nothing(
    kafka: LocalKafka,
    server: CatalogProcess,
    admin: httpx.Client,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    topics = [f"inproc{i}.{uuid.uuid4().hex[:6]}" for i in range(TABLES)]
    for topic in topics:
        kafka.create_topic(topic, 2)
    pipeline = Pipeline(kafka.bootstrap_servers, admin, [CLUSTER], CLUSTER)
    pipeline.config["tables"] = [
        {
            "source_cluster_name": CLUSTER,
            "source_topic": topic,
            "source_format": "json",
            "schema_mode": "inline",
            "schema": {"fields": [{"name": "id", "id": 1, "type": "long"}]},
            "maintenance": POLICY,
        }
        for topic in topics
    ]
    apply_pipeline(admin, pipeline.config)
    names = [t.replace(".", "_") for t in topics]
    catalog: RestCatalog = server.catalog()

    produced = {t: Produced() for t in topics}
    stop = threading.Event()

    def producing() -> None:
        i = 0
        while not stop.is_set():
            for topic in topics:
                values = (json.dumps({"id": i + j}).encode() for j in range(10))
                produce(kafka.bootstrap_servers, topic, values, into=produced[topic])
            i += 10
            time.sleep(0.2)

    # Each compaction commit waits until ingestion has committed after the snapshot it was built on.
    raced: list[tuple[str, int | None, int | None]] = []
    original = pyiceberg_rewrite.replace_files

    def replace_after_ingestion(table: Table, removed: Any, added: Any, *, merge_manifests: bool) -> None:
        if removed:
            base = table.metadata.current_snapshot_id
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                head = catalog.load_table(table.name()).metadata.current_snapshot_id
                if head != base:
                    raced.append((".".join(table.name()), base, head))
                    break
                time.sleep(0.2)
        original(table, removed, added, merge_manifests=merge_manifests)

    monkeypatch.setattr(inprocess, "replace_files", replace_after_ingestion)

    thread = threading.Thread(target=producing, daemon=True)
    args = ["--commit-interval", "1", "--cluster", CLUSTER]
    worker = MaintenanceWorker(
        _no_spark, WorkerOptions(server.url, server.admin_client_id, server.admin_client_secret)
    )
    compactions: list[dict[str, Any]] = []
    with IngestProcess(server, tmp_path / "ingest", args=args) as ingest:
        thread.start()
        try:
            for topic, name in zip(topics, names, strict=True):
                wait_until_committed(admin, CLUSTER, name, topic, {0: 1, 1: 1}, ingest=ingest)
            for _ in range(3):
                time.sleep(3)  # a few ingestion commits: small files to compact
                tables = [t for t in worker.discover() if t.name in names]
                assert len(tables) == TABLES, worker.discover()
                for result in worker.run_once(tables):
                    assert not result.failed, result.summary()
                    compactions += [a.result for a in result.actions if a.name == "rewrite_data_files"]
        finally:
            stop.set()
            thread.join(60)
        for topic, name in zip(topics, names, strict=True):
            wait_until_committed(admin, CLUSTER, name, topic, produced[topic].end_offsets(), ingest=ingest)
    worker.close()

    assert not worker.actions.started
    assert compactions
    assert all(c.get("engine") == "in-process" for c in compactions), compactions
    assert sum(c["rewritten_data_files_count"] for c in compactions) >= 2 * TABLES, compactions
    assert len(raced) >= TABLES, raced  # every compaction commit was built on a stale head
    for topic, name in zip(topics, names, strict=True):
        table = catalog.load_table((CLUSTER, name))
        positions = _positions(table)
        duplicates = [p for p, n in Counter(positions).items() if n > 1]
        assert not duplicates, duplicates[:10]
        assert set(positions) == set(produced[topic].records), (
            len(positions),
            len(produced[topic].records),
        )
        assert not _referenced_exist(table)
        assert _headers_not_null_at_rest(table) == 0
