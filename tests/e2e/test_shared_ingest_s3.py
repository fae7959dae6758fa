"""The shared consumer writing to an S3 warehouse (moto's server on loopback), with a real `floe serve` and
`floe ingest`: each table's files are uploads, one `PUT` each (catalog/s3_files.py), and a
transaction's tables are written side by side (`OBJECT_STORE_WRITERS`); every record lands once, its
files in the bucket under its table's folder; and a kill -9 while tables are being uploaded loses and
duplicates nothing (PostgreSQL behind the catalog)."""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from pyiceberg.catalog.rest import RestCatalog

from devtools.catalog_server import CatalogProcess
from devtools.kafka_broker import LocalKafka
from devtools.moto_server import threaded_moto
from devtools.postgres import LocalPostgres
from tests.e2e.ingest_harness import (
    IngestProcess,
    Pipeline,
    admin_client,
    apply_pipeline,
    produce,
    wait_until_committed,
)
from tests.e2e.test_ingest import _table_name, _topic
from tests.e2e.test_s3_warehouse import AWS_ENV, _keys
from tests.e2e.test_shared_ingest import _id_tables, assert_each_record_once, kill_9_while_records_flow

pytestmark = pytest.mark.e2e

CLUSTER = "shared_s3"
CRASH_CLUSTER = "shared_s3_crash"
ID_SCHEMA = {"fields": [{"name": "id", "id": 1, "type": "long"}]}


class _Requests(logging.Handler):
    """The S3 requests moto's server logs (werkzeug's access log), as (method, path with query)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.seen: list[tuple[str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        found = re.search(r'"(GET|PUT|POST|HEAD|DELETE) (\S+) HTTP', record.getMessage())
        if found:
            self.seen.append((found[1], found[2]))


@dataclass(frozen=True)
class Lake:
    """A bucket on moto's S3 server and a `floe serve` (on PostgreSQL) whose default warehouse is in it."""

    bucket: str
    s3: Any
    server: CatalogProcess
    admin: httpx.Client
    pipeline: Pipeline


@pytest.fixture(scope="module")
def lake(
    kafka: LocalKafka, postgres: LocalPostgres, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Lake]:
    with threaded_moto() as endpoint:
        bucket = f"floe-{uuid.uuid4().hex[:8]}"
        s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", **_keys())
        s3.create_bucket(Bucket=bucket)
        env = {
            **AWS_ENV,
            "FLOE_WAREHOUSE": f"s3://{bucket}/lake",
            "FLOE_S3_ENDPOINT": endpoint,
            "FLOE_S3_REGION": "us-east-1",
            "FLOE_S3_PATH_STYLE_ACCESS": "true",
        }
        url = postgres.create_database(f"floe_shared_s3_{uuid.uuid4().hex[:8]}")
        home = tmp_path_factory.mktemp("floe")
        with CatalogProcess(url, env=env, home=home) as server, admin_client(server) as admin:
            pipeline = Pipeline(kafka.bootstrap_servers, admin, [CLUSTER, CRASH_CLUSTER], CLUSTER)
            yield Lake(bucket, s3, server, admin, pipeline)


def _catalog(lake: Lake) -> RestCatalog:
    return lake.server.catalog(
        warehouse="default", **{"s3.access-key-id": "testing", "s3.secret-access-key": "testing"}
    )


def test_tables_on_s3_get_every_record_once_their_files_written_side_by_side(
    kafka: LocalKafka, lake: Lake, tmp_path: Path
) -> None:
    bucket, s3, server, admin, pipeline = lake.bucket, lake.s3, lake.server, lake.admin, lake.pipeline
    topics = [_topic(kafka, f"shared-s3-{i}", partitions=2) for i in range(6)]
    pipeline.config["tables"] += [
        {
            "source_cluster_name": CLUSTER,
            "source_topic": topic,
            "source_format": "json",
            "schema_mode": "inline",
            "schema": ID_SCHEMA,
        }
        for topic in topics
    ]
    apply_pipeline(admin, pipeline.config)
    # Records waiting before ingestion starts: the six tables are due together, one transaction.
    produced = {
        t: produce(kafka.bootstrap_servers, t, (json.dumps({"id": i}).encode() for i in range(150)))
        for t in topics
    }
    args = ["--commit-interval", "1", "--cluster", CLUSTER]
    requests = _Requests()
    access_log = logging.getLogger("werkzeug")
    level = access_log.level
    access_log.setLevel(logging.INFO)
    access_log.addHandler(requests)
    with IngestProcess(server, tmp_path / "ingest", args=args, env=AWS_ENV) as ingest:
        for topic in topics:
            wait_until_committed(
                admin, CLUSTER, _table_name(topic), topic, produced[topic].end_offsets(), ingest=ingest
            )
        for topic in topics:  # and records that come while it runs
            more = produce(
                kafka.bootstrap_servers, topic, (json.dumps({"id": i}).encode() for i in range(150, 300))
            )
            produced[topic].records.update(more.records)
        for topic in topics:
            wait_until_committed(
                admin, CLUSTER, _table_name(topic), topic, produced[topic].end_offsets(), ingest=ingest
            )
        assert "shared consumer" in ingest.log_text()
    access_log.removeHandler(requests)
    access_log.setLevel(level)
    # Ingestion's files (Parquet, manifests, manifest lists; the catalog writes the metadata JSON):
    # one PUT each, no multipart upload, no HEAD asking a just-written file's length.
    written = [(m, p) for m, p in requests.seen if p.split("?")[0].endswith((".parquet", ".avro"))]
    puts = [p for m, p in written if m == "PUT"]
    assert len(puts) >= 6 * 3
    assert all("?" not in p for p in puts), puts[:3]
    assert [(m, p) for m, p in written if m in ("POST", "HEAD")] == []
    # The catalog's metadata files: one PUT each too, with no HEAD and LIST first asking whether
    # the (UUID-named) file exists.
    metadata = [(m, p) for m, p in requests.seen if ".metadata.json" in p]
    assert len([p for m, p in metadata if m == "PUT"]) >= 6 * 2  # two commits a table at least
    assert all(m == "PUT" and "?" not in p for m, p in metadata), metadata[:3]
    catalog = _catalog(lake)
    for topic in topics:
        table = catalog.load_table(f"{CLUSTER}.{_table_name(topic)}")
        rows = table.scan().to_arrow().to_pylist()
        positions = sorted((r["_kafka"]["partition"], r["_kafka"]["offset"]) for r in rows)
        assert positions == sorted(produced[topic].records), topic
        assert sorted(r["id"] for r in rows) == list(range(300))
        location = table.location()
        assert location.startswith(f"s3://{bucket}/lake/{CLUSTER}/")
        prefix = location.removeprefix(f"s3://{bucket}/") + "/"
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        keys = {o["Key"] for page in pages for o in page.get("Contents", [])}
        files = {f.file.file_path.removeprefix(f"s3://{bucket}/") for f in table.scan().plan_files()}
        assert files
        assert files <= keys


def test_kill_9_while_tables_are_written_side_by_side_to_s3_loses_and_duplicates_nothing(
    kafka: LocalKafka, lake: Lake, tmp_path: Path
) -> None:
    """kill -9 of `floe ingest` three times while records flow to eight tables on S3 (PostgreSQL behind
    the catalog): each kill lands in a round, with some tables' uploads done, others under way and a
    transaction perhaps in flight. A fresh instance then brings every table to the end of its topic,
    each record once."""
    topics = _id_tables(kafka, lake.pipeline, CRASH_CLUSTER, "shared-s3-crash", 8, partitions=2)
    produced = kill_9_while_records_flow(
        kafka, lake.server, lake.admin, CRASH_CLUSTER, topics, tmp_path / "crash", env=AWS_ENV
    )
    assert_each_record_once(_catalog(lake), CRASH_CLUSTER, topics, produced)
