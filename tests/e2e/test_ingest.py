"""Ingestion end to end: a real Kafka broker, `floe ingest` (PySpark + Iceberg's Spark runtime) and a real
floe server on PostgreSQL; tables read back with pyiceberg, DuckDB and Spark.

One `floe ingest` runs for the module; each test applies its own tables (picked up without a restart)
on its own topics. Every table here says `ingest_path: spark`: this module tests the Spark query path
(tests/e2e/test_shared_ingest.py tests the shared consumer's). The crash tests run their own ingest
processes. The web console's browser test over real ingestion lives here too (the catalog reads that
ingest's metrics), sharing the running components.
"""

from __future__ import annotations

import datetime as dt
import io
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fastavro
import httpx
import pytest
from pyiceberg.catalog.rest import RestCatalog

from devtools.catalog_server import CatalogProcess
from devtools.kafka_broker import LocalKafka
from devtools.ports import free_port
from devtools.postgres import LocalPostgres
from devtools.schema_registry import CCOMPAT_PATH, LocalSchemaRegistry
from ingest.batch_rows import DEAD_LETTER_FOUND
from ingest.registry_client import BasicAuth, RegistryClient, RegistryConnection, encode_confluent
from tests.e2e.duckdb_client import attach_catalog, connect
from tests.e2e.ingest_harness import (
    IngestProcess,
    Pipeline,
    Produced,
    committed_offsets,
    produce,
    wait_until_committed,
)
from tests.e2e.registry_proxy import REGISTRY_PASSWORD, REGISTRY_USER, BasicAuthProxy

# A Kafka broker, the schema registry and Spark (`floe ingest`): `pytest -m "not e2e"` skips them.
pytestmark = pytest.mark.e2e

CLUSTER = "ingest"
# The crash test's tables: only the ingest processes it kills (`--cluster crash`) write them.
CRASH_CLUSTER = "crash"
# The compaction test's tables: the module's ingest writes them while `floe maintain` compacts them.
COMPACT_CLUSTER = "compact"
# The backlog test's table: only its own ingest process (a long commit interval, small batches) reads it.
BACKLOG_CLUSTER = "backlog"
# The registry-authentication test's refused tables: only its ingest process (wrong password) reads them.
REFUSED_CLUSTER = "refused"
# The variables floe.yaml's schema_registry.basic_auth_*_env name in the registry-authentication test.
REGISTRY_USER_ENV = "FLOE_TEST_REGISTRY_USER"
REGISTRY_PASSWORD_ENV = "FLOE_TEST_REGISTRY_PASSWORD"


@pytest.fixture(scope="module")
def ingest_metrics_port() -> int:
    """The module's `floe ingest` metrics port, known before the catalog starts: its console shows the lag."""
    return free_port()


@pytest.fixture(scope="module")
def server(
    postgres: LocalPostgres, ingest_metrics_port: int, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CatalogProcess]:
    url = postgres.create_database(f"floe_ingest_{uuid.uuid4().hex[:8]}")
    env = {"FLOE_CONSOLE_INGEST_METRICS_URL": f"http://127.0.0.1:{ingest_metrics_port}/metrics"}
    with CatalogProcess(url, home=tmp_path_factory.mktemp("ingest-floe"), env=env) as process:
        yield process


@pytest.fixture(scope="module")
def admin(server: CatalogProcess) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {server.token()}"}, timeout=60
    ) as client:
        yield client


@pytest.fixture(scope="module")
def pipeline(kafka: LocalKafka, admin: httpx.Client) -> Pipeline:
    clusters = [CLUSTER, CRASH_CLUSTER, COMPACT_CLUSTER, REFUSED_CLUSTER, BACKLOG_CLUSTER]
    return Pipeline(kafka.bootstrap_servers, admin, clusters, CLUSTER, defaults={"ingest_path": "spark"})


@pytest.fixture(scope="module")
def ingest(
    server: CatalogProcess,
    pipeline: Pipeline,
    ingest_metrics_port: int,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[IngestProcess]:
    args = [
        "--commit-interval",
        "1",
        "--cluster",
        CLUSTER,
        "--cluster",
        COMPACT_CLUSTER,
    ]
    registry_credentials = {REGISTRY_USER_ENV: REGISTRY_USER, REGISTRY_PASSWORD_ENV: REGISTRY_PASSWORD}
    with IngestProcess(
        server,
        tmp_path_factory.mktemp("ingest"),
        args=args,
        env=registry_credentials,
        metrics_port=ingest_metrics_port,
    ) as process:
        yield process


@pytest.fixture(scope="module")
def catalog(server: CatalogProcess) -> RestCatalog:
    return server.catalog()


def _topic(kafka: LocalKafka, name: str, partitions: int = 3) -> str:
    topic = f"{name}.{uuid.uuid4().hex[:6]}"
    kafka.create_topic(topic, partitions)
    return topic


def _table_name(topic: str) -> str:
    return topic.replace(".", "_").replace("-", "_")


def _id_table(
    kafka: LocalKafka, pipeline: Pipeline, name: str, cluster: str, partitions: int
) -> tuple[str, str]:
    """A new topic of JSON records `{"id": N}` and its table in `cluster`: (topic, table)."""
    topic = _topic(kafka, name, partitions=partitions)
    pipeline.add(
        cluster=cluster,
        source_topic=topic,
        source_format="json",
        schema_mode="inline",
        schema={"fields": [{"name": "id", "id": 1, "type": "long"}]},
    )
    return topic, _table_name(topic)


EVENT_FIELDS = [
    {"name": "id", "id": 1, "type": "long"},
    {"name": "name", "id": 2, "type": "string"},
    {"name": "score", "id": 3, "type": "double", "optional": True},
    {"name": "at", "id": 4, "type": "timestamptz", "optional": True},
    {
        "name": "device",
        "id": 5,
        "type": "struct",
        "optional": True,
        "fields": [
            {"name": "os", "id": 6, "type": "string"},
            {"name": "version", "id": 7, "type": "int", "optional": True},
        ],
    },
    {
        "name": "tags",
        "id": 8,
        "type": "list",
        "optional": True,
        "fields": [{"name": "element", "id": 9, "type": "string"}],
    },
    {
        "name": "attributes",
        "id": 10,
        "type": "map",
        "optional": True,
        "fields": [
            {"name": "key", "id": 11, "type": "string"},
            {"name": "value", "id": 12, "type": "string"},
        ],
    },
]


def _event(i: int) -> dict[str, Any]:
    return {
        "id": i,
        "name": f"user-{i}",
        "score": i / 4,
        "at": f"2026-11-21T10:{i % 60:02d}:00Z",
        "device": {"os": "linux", "version": i % 7},
        "tags": [f"t{i % 3}", "x"],
        "attributes": {"k": str(i)},
    }


def test_json_records_become_rows_exactly(
    kafka: LocalKafka,
    pipeline: Pipeline,
    ingest: IngestProcess,
    admin: httpx.Client,
    catalog: RestCatalog,
    tmp_path: Path,
) -> None:
    duck_dir = tmp_path / "duckdb"
    topic = _topic(kafka, "orders-json")
    table = _table_name(topic)
    plan = pipeline.add(
        source_topic=topic,
        source_format="json",
        schema_mode="inline",
        partitioning_scheme="hour",
        schema={"fields": EVENT_FIELDS},
    )
    assert plan["revision"] >= 1
    count = 600
    # Two waves: the query's first batch takes its range from the records, later ones from Spark's
    # offset log (a staged append).
    first = produce(
        kafka.bootstrap_servers,
        topic,
        (json.dumps(_event(i)).encode() for i in range(count // 2)),
        headers=lambda i: [("source", b"test"), ("n", str(i).encode())],
    )
    wait_until_committed(admin, CLUSTER, table, topic, first.end_offsets(), ingest=ingest)
    produced = produce(
        kafka.bootstrap_servers,
        topic,
        (json.dumps(_event(i)).encode() for i in range(count // 2, count)),
        headers=lambda i: [("source", b"test"), ("n", str(count // 2 + i).encode())],
    )
    produced.records.update(first.records)
    wait_until_committed(admin, CLUSTER, table, topic, produced.end_offsets(), ingest=ingest)

    loaded = catalog.load_table(f"{CLUSTER}.{table}")
    assert [f.field_id for f in loaded.schema().fields][:7] == [1, 2, 3, 4, 5, 8, 10]
    assert str(loaded.spec().fields[0].transform) == "hour"
    rows = loaded.scan().to_arrow().to_pylist()
    assert len(rows) == count
    by_position = {(r["_kafka"]["partition"], r["_kafka"]["offset"]): r for r in rows}
    assert set(by_position) == set(produced.records)
    for (partition, offset), (key, value) in produced.records.items():
        row = by_position[(partition, offset)]
        expected = json.loads(value or b"")
        assert row["id"] == expected["id"]
        assert row["name"] == expected["name"]
        assert row["score"] == expected["score"]
        assert row["at"] == dt.datetime.fromisoformat(expected["at"])
        assert row["device"] == expected["device"]
        assert row["tags"] == expected["tags"]
        assert dict(row["attributes"]) == expected["attributes"]
        assert row["_kafka"]["key"] == key
        assert [(h["key"], h["value"]) for h in row["_kafka"]["headers"]] == [
            ("source", b"test"),
            ("n", str(expected["id"]).encode()),
        ]

    # DuckDB, through floe's REST catalog, sees the same table.
    duck = connect(duck_dir)
    attach_catalog(
        duck,
        endpoint=ingest.server.url,
        warehouse="default",
        client_id=ingest.credential[0],
        client_secret=ingest.credential[1],
    )
    total, distinct, max_id = duck.execute(
        f'SELECT count(*), count(DISTINCT id), max(id) FROM floe.{CLUSTER}."{table}"'
    ).fetchone() or (0, 0, 0)
    assert (total, distinct, max_id) == (count, count, count - 1)
    # Clean batches are written in one pass (each value decoded once, no persist, no statistics job);
    # after the query's first batch, in one job (the append staged, then committed).
    batches = _batches_by_path(ingest, f"{CLUSTER}.{table}")
    assert batches.get("one_pass_staged", 0) >= 1, batches
    assert set(batches) <= {"one_pass", "one_pass_staged"}, batches
    # Every snapshot, whichever path wrote it, carries the offsets it covers (starting where the one
    # before ended) and the record-time range of its records.
    snapshots = sorted(loaded.metadata.snapshots, key=lambda s: s.sequence_number)
    covered: dict[str, int] = {}
    for snapshot in snapshots:
        summary = snapshot.summary.additional_properties if snapshot.summary else {}
        start = json.loads(summary["floe.kafka.start-offsets"])
        end = json.loads(summary["floe.kafka.end-offsets"])
        # A snapshot covers the partitions of its end offsets: a micro-batch may hold new records of
        # some partitions only (seen: the second wave as one snapshot of partition 1, then one of 0 and
        # 2). Each partition the table already had starts exactly where the table's offsets ended.
        assert start == {p: covered[p] for p in end if p in covered}, (start, end, covered)
        added = int(summary["added-records"])
        low, high = int(summary["floe.kafka.min-timestamp-ms"]), int(summary["floe.kafka.max-timestamp-ms"])
        in_snapshot = [
            r["_kafka"]["timestamp"]
            for r in rows
            if str(r["_kafka"]["partition"]) in end
            and start.get(str(r["_kafka"]["partition"]), 0)
            <= r["_kafka"]["offset"]
            < end[str(r["_kafka"]["partition"])]
        ]
        covered.update(end)
        assert len(in_snapshot) == added
        assert (low, high) == (
            min(int(t.timestamp() * 1000) for t in in_snapshot),
            max(int(t.timestamp() * 1000) for t in in_snapshot),
        )
    assert covered == {str(p): o for p, o in produced.end_offsets().items()}
    assert duck.execute(
        f'SELECT device.os, tags[1] FROM floe.{CLUSTER}."{table}" WHERE id = 7'
    ).fetchone() == (
        "linux",
        "t1",
    )


def test_spark_reads_the_ingested_table_through_floe(
    kafka: LocalKafka, pipeline: Pipeline, ingest: IngestProcess, admin: httpx.Client, catalog: RestCatalog
) -> None:
    from runtime.spark import CatalogConnection, spark_session

    topic = _topic(kafka, "spark-read", partitions=2)
    table = _table_name(topic)
    pipeline.add(
        source_topic=topic, source_format="json", schema_mode="inline", schema={"fields": EVENT_FIELDS}
    )
    produced = produce(kafka.bootstrap_servers, topic, (json.dumps(_event(i)).encode() for i in range(100)))
    wait_until_committed(admin, CLUSTER, table, topic, produced.end_offsets(), ingest=ingest)
    connection = CatalogConnection(ingest.server.url, "default", *ingest.credential)
    spark = spark_session(
        "floe-test-read", connection, master="local[1]", conf={"spark.driver.memory": "512m"}
    )
    try:
        frame = spark.table(f"floe.{CLUSTER}.{table}")
        assert frame.count() == 100
        row = frame.where("id = 42").select("name", "device.os", "_kafka.offset").collect()[0]
        assert row["name"] == "user-42"
        assert row["os"] == "linux"
        summaries = spark.sql(f"SELECT summary FROM floe.{CLUSTER}.{table}.snapshots").collect()
        assert all("floe.kafka.end-offsets" in s["summary"] for s in summaries)

        # The good rows' plan parses each value once (the optimizer inlined from_json 10 times before).
        from pyspark.sql import functions as F

        from ingest.decode import ERROR_COLUMN, decode_json, source_columns

        raw = (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
            .option("subscribe", topic)
            .option("includeHeaders", "true")
            .load()
        )
        schema = catalog.load_table(f"{CLUSTER}.{table}").schema()
        good = decode_json(source_columns(raw), schema).where(F.col(ERROR_COLUMN).isNull())
        plan = good._jdf.queryExecution().executedPlan().toString()
        # Each value decoded once (floe's JSON decoder), not once per field and filter.
        assert plan.count("floe_json_decode_") == 1, plan
        assert "from_json(" not in plan
        assert good.count() == 100
    finally:
        spark.stop()


def test_malformed_records_go_to_the_dead_letter_table(
    kafka: LocalKafka, pipeline: Pipeline, ingest: IngestProcess, admin: httpx.Client, catalog: RestCatalog
) -> None:
    topic = _topic(kafka, "mixed", partitions=2)
    table = _table_name(topic)
    pipeline.add(
        source_topic=topic,
        source_format="json",
        schema_mode="inline",
        schema={
            "fields": [
                {"name": "id", "id": 1, "type": "long"},
                {"name": "note", "id": 2, "type": "string", "optional": True},
            ]
        },
    )
    bad_values: list[bytes | None] = [
        b"not json",
        b'{"note": "no id"}',
        b'{"id": "abc"}',
        b"[1,2]",
        None,
        b'{"id": 12',
    ]
    values: list[bytes | None] = []
    for i in range(300):
        values.append(json.dumps({"id": i, "note": "ok"}).encode())
        if i % 50 == 0:
            values.append(bad_values[(i // 50) % len(bad_values)])
    log_before = len(ingest.log_text())
    produced = produce(kafka.bootstrap_servers, topic, values)
    wait_until_committed(admin, CLUSTER, table, topic, produced.end_offsets(), ingest=ingest)
    logged = ingest.log_text()[log_before:]

    good = catalog.load_table(f"{CLUSTER}.{table}").scan().to_arrow()
    dead = catalog.load_table(f"{CLUSTER}.{table}_dlq").scan().to_arrow().to_pylist()
    assert good.num_rows == 300
    assert sorted(good.column("id").to_pylist()) == list(range(300))
    assert len(dead) == len(bad_values)
    assert good.num_rows + len(dead) == len(produced.records)
    produced_bad = {
        (p, o): value
        for (p, o), (_, value) in produced.records.items()
        if value is None or b'"ok"' not in value
    }
    assert {(d["partition"], d["offset"]): d["value"] for d in dead} == produced_bad
    # Each reason says which field and why, or where the value stops parsing.
    assert {d["value"]: d["error"] for d in dead} == {
        b"not json": "not valid JSON: Expecting value at byte 0",
        b'{"note": "no id"}': "required field id is missing or null",
        b'{"id": "abc"}': "field 'id': expected long, got string \"abc\"",
        b"[1,2]": "not a JSON object (got array)",
        None: "record has no value (tombstone)",
        b'{"id": 12': "not valid JSON: Expecting ',' delimiter at byte 9",
    }
    assert all(d["topic"] == topic and d["failed_at"] is not None for d in dead)
    # A dead letter stopped a one-pass append (nothing committed by it); the batch went two-pass.
    batches = _batches_by_path(ingest, f"{CLUSTER}.{table}")
    assert batches.get("two_pass", 0) >= 1, batches
    assert batches.get("one_pass_aborted", 0) >= 1, batches
    # That stop is expected: a healthy run with bad records logs no error, no stack trace for it.
    alarming = [line for line in logged.splitlines() if re.search(r"ERROR|Exception|^\s+at ", line)]
    assert not alarming, logged[-6000:]
    assert DEAD_LETTER_FOUND not in logged


def _batches_by_path(ingest: IngestProcess, table: str) -> dict[str, int]:
    """`floe_ingest_batches_total` of `table` by path, scraped from the ingest service."""
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(ingest.metrics_url, timeout=10).text
    return {
        sample.labels["path"]: int(sample.value)
        for family in text_string_to_metric_families(text)
        if family.name == "floe_ingest_batches"
        for sample in family.samples
        if sample.name == "floe_ingest_batches_total" and sample.labels.get("table") == table
    }


# Every column of Spark's Kafka source: a table may have fields of these names too.
KAFKA_SOURCE_NAMES = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]


def test_fields_named_like_the_kafka_source_columns_are_ingested(
    kafka: LocalKafka, pipeline: Pipeline, ingest: IngestProcess, admin: httpx.Client, catalog: RestCatalog
) -> None:
    topic = _topic(kafka, "kafka-names", partitions=2)
    table = _table_name(topic)
    fields = [{"name": n, "id": i + 1, "type": "string"} for i, n in enumerate(KAFKA_SOURCE_NAMES)]
    fields[4] = {"name": "offset", "id": 5, "type": "long"}  # a non-string one: its own type is kept
    pipeline.add(source_topic=topic, source_format="json", schema_mode="inline", schema={"fields": fields})
    records = [{n: f"{n}-{i}" for n in KAFKA_SOURCE_NAMES} | {"offset": 1000 + i} for i in range(50)]
    values = [json.dumps(r).encode() for r in records] + [b'{"offset": "x"}']
    produced = produce(kafka.bootstrap_servers, topic, values)
    wait_until_committed(admin, CLUSTER, table, topic, produced.end_offsets(), ingest=ingest)

    rows = catalog.load_table(f"{CLUSTER}.{table}").scan().to_arrow().to_pylist()
    assert {r["offset"]: {n: r[n] for n in KAFKA_SOURCE_NAMES} for r in rows} == {
        r["offset"]: r for r in records
    }
    # floe's own Kafka metadata is still the record's, not the fields of the same names.
    good_positions = {pos for pos, (_, value) in produced.records.items() if value != values[-1]}
    assert {(r["_kafka"]["partition"], r["_kafka"]["offset"]) for r in rows} == good_positions
    (dead,) = catalog.load_table(f"{CLUSTER}.{table}_dlq").scan().to_arrow().to_pylist()
    assert dead["value"] == b'{"offset": "x"}'
    assert dead["error"] == "field 'offset': expected long, got string \"x\""
    assert dead["topic"] == topic


AVRO_FIELDS = [
    {"name": "event_id", "id": 1, "type": "string"},
    {"name": "user_id", "id": 2, "type": "long"},
    {"name": "session_id", "id": 3, "type": "string", "optional": True},
    {
        "name": "profile",
        "id": 4,
        "type": "struct",
        "fields": [
            {"name": "country", "id": 5, "type": "string"},
            {"name": "language", "id": 6, "type": "string"},
        ],
    },
]


def _avro_bytes(schema: dict[str, Any], record: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def _avro_record(i: int) -> dict[str, Any]:
    return {
        "event_id": f"e{i}",
        "user_id": i,
        "session_id": None if i % 5 == 0 else f"s{i}",
        "profile": {"country": "NO", "language": "nb"},
    }


def test_avro_inline_with_confluent_framing(
    kafka: LocalKafka, pipeline: Pipeline, ingest: IngestProcess, admin: httpx.Client, catalog: RestCatalog
) -> None:
    from catalog.pipelines import avro_schema, parse_config

    topic = _topic(kafka, "avro-inline", partitions=2)
    table = _table_name(topic)
    pipeline.add(
        source_topic=topic, source_format="avro", schema_mode="inline", schema={"fields": AVRO_FIELDS}
    )
    writer = avro_schema(parse_config(pipeline.config).table(CLUSTER, table))
    # WarpStream's inline mode: a Confluent-framed value whose schema id is ignored.
    values = [bytes([0, 0, 0, 0, 42]) + _avro_bytes(writer, _avro_record(i)) for i in range(200)]
    values.append(b"\x01garbage")
    produced = produce(kafka.bootstrap_servers, topic, values)
    wait_until_committed(admin, CLUSTER, table, topic, produced.end_offsets(), ingest=ingest)
    rows = catalog.load_table(f"{CLUSTER}.{table}").scan().to_arrow().to_pylist()
    assert sorted(r["user_id"] for r in rows) == list(range(200))
    assert {r["user_id"]: r["session_id"] for r in rows}[5] is None
    assert rows[0]["profile"] == {"country": "NO", "language": "nb"}
    dead = catalog.load_table(f"{CLUSTER}.{table}_dlq").scan().to_arrow().to_pylist()
    assert [d["value"] for d in dead] == [b"\x01garbage"]


def test_avro_raw_binary_values(
    kafka: LocalKafka, pipeline: Pipeline, ingest: IngestProcess, admin: httpx.Client, catalog: RestCatalog
) -> None:
    from catalog.pipelines import avro_schema, parse_config

    topic = _topic(kafka, "avro-raw", partitions=1)
    table = _table_name(topic)
    pipeline.add(
        source_topic=topic,
        source_format="avro",
        avro_framing="raw",
        schema_mode="inline",
        schema={"fields": AVRO_FIELDS},
    )
    writer = avro_schema(parse_config(pipeline.config).table(CLUSTER, table))
    values = [_avro_bytes(writer, _avro_record(i)) for i in range(100)]
    produced = produce(kafka.bootstrap_servers, topic, values)
    wait_until_committed(admin, CLUSTER, table, topic, produced.end_offsets(), ingest=ingest)
    rows = catalog.load_table(f"{CLUSTER}.{table}").scan().to_arrow().to_pylist()
    assert sorted(r["event_id"] for r in rows) == sorted(f"e{i}" for i in range(100))
    assert catalog.load_table(f"{CLUSTER}.{table}_dlq").scan().to_arrow().num_rows == 0


def test_avro_registry_mode_decodes_every_writer_schema(
    kafka: LocalKafka,
    pipeline: Pipeline,
    ingest: IngestProcess,
    admin: httpx.Client,
    catalog: RestCatalog,
    schema_registry: LocalSchemaRegistry,
) -> None:
    from catalog.pipelines import avro_schema, parse_config

    topic = _topic(kafka, "avro-registry", partitions=2)
    table = _table_name(topic)
    fields = [*AVRO_FIELDS, {"name": "referrer", "id": 20, "type": "string", "optional": True}]
    pipeline.add(
        source_topic=topic,
        source_format="avro",
        schema_mode="registry",
        schema_registry_url=schema_registry.url,
        schema={"fields": fields},
    )
    full = avro_schema(parse_config(pipeline.config).table(CLUSTER, table))
    # A producer's own schemas: v1 without `referrer`, v2 with it, under the producer's record name.
    v2 = {**full, "name": "com.example.Visit"}
    v1 = {**v2, "fields": [f for f in v2["fields"] if f["name"] != "referrer"]}
    client = RegistryClient(schema_registry.url)
    id1 = client.register(f"{topic}-value", json.dumps(v1))
    id2 = client.register(f"{topic}-value", json.dumps(v2))
    assert id1 != id2
    values = [encode_confluent(id1, _avro_bytes(v1, _avro_record(i))) for i in range(100)]
    values += [
        encode_confluent(id2, _avro_bytes(v2, {**_avro_record(i), "referrer": f"r{i}"}))
        for i in range(100, 200)
    ]
    # v3 adds a field the table does not declare: its records are ingested, the field counted.
    v3 = {**v2, "fields": [*v2["fields"], {"name": "campaign", "type": ["null", "string"], "default": None}]}
    id3 = client.register(f"{topic}-value", json.dumps(v3))
    values += [
        encode_confluent(id3, _avro_bytes(v3, {**_avro_record(i), "campaign": "c"})) for i in range(200, 210)
    ]
    values.append(encode_confluent(999_999, b"\x02"))  # a schema id the registry does not know
    values.append(b"no framing")
    values.append(encode_confluent(id1, b"\x06ab"))  # event_id: a string of 3 bytes, 2 given
    produced = produce(kafka.bootstrap_servers, topic, values)
    wait_until_committed(admin, CLUSTER, table, topic, produced.end_offsets(), ingest=ingest)
    rows = catalog.load_table(f"{CLUSTER}.{table}").scan().to_arrow().to_pylist()
    assert sorted(r["user_id"] for r in rows) == list(range(210))
    referrers = {r["user_id"]: r["referrer"] for r in rows}
    assert referrers[3] is None
    assert referrers[150] == "r150"
    dead = catalog.load_table(f"{CLUSTER}.{table}_dlq").scan().to_arrow().to_pylist()
    assert sorted(d["error"] for d in dead) == [
        "not valid Avro: field 'event_id': Avro string of 3 bytes needs 3 bytes, the value has 2 left "
        "(at byte 6)",
        "value is not in the Confluent wire format (magic byte 0 + schema id)",
        "value's schema id 999999 is not registered",
    ]
    deadline = time.monotonic() + 30
    while "campaign" not in ingest.log_text() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert f"{CLUSTER}.{table}: records carry fields the table does not declare, not kept: campaign" in (
        ingest.log_text()
    )


def test_avro_registry_mode_through_a_registry_that_requires_basic_auth(
    kafka: LocalKafka,
    pipeline: Pipeline,
    ingest: IngestProcess,
    server: CatalogProcess,
    admin: httpx.Client,
    catalog: RestCatalog,
    authenticated_registry: BasicAuthProxy,
    tmp_path: Path,
) -> None:
    from catalog.pipelines import avro_schema, parse_config

    # floe.yaml's top-level registry, with the variables holding its credentials; the module's ingest
    # process has them set right.
    seen = len(authenticated_registry.requests)  # the proxy is the session's: earlier tests' requests
    pipeline.config["schema_registry"] = {
        "url": authenticated_registry.url,
        "basic_auth_username_env": REGISTRY_USER_ENV,
        "basic_auth_password_env": REGISTRY_PASSWORD_ENV,
    }
    topic = _topic(kafka, "avro-registry-auth", partitions=2)
    table = _table_name(topic)
    registry_table: dict[str, Any] = {
        "source_format": "avro",
        "schema_mode": "registry",
        "schema": {"fields": AVRO_FIELDS},
    }
    pipeline.add(source_topic=topic, **registry_table)
    writer = {**avro_schema(parse_config(pipeline.config).table(CLUSTER, table)), "name": "com.example.Visit"}
    credentials = BasicAuth(REGISTRY_USER, REGISTRY_PASSWORD, REGISTRY_USER_ENV, REGISTRY_PASSWORD_ENV)
    with RegistryClient(RegistryConnection(authenticated_registry.url, credentials)) as client:
        schema_id = client.register(f"{topic}-value", json.dumps(writer))
    values = [encode_confluent(schema_id, _avro_bytes(writer, _avro_record(i))) for i in range(100)]
    produced = produce(kafka.bootstrap_servers, topic, values)
    wait_until_committed(admin, CLUSTER, table, topic, produced.end_offsets(), ingest=ingest)
    rows = catalog.load_table(f"{CLUSTER}.{table}").scan().to_arrow().to_pylist()
    assert sorted(r["user_id"] for r in rows) == list(range(100))
    assert catalog.load_table(f"{CLUSTER}.{table}_dlq").scan().to_arrow().num_rows == 0
    # The writer schema was read through the proxy, with the credentials.
    requests = authenticated_registry.requests[seen:]
    assert ("GET", f"{CCOMPAT_PATH}/schemas/ids/{schema_id}", True) in requests
    assert not [r for r in requests if not r[2]]

    # The same registry, a wrong password: one clear error naming the settings, nothing committed.
    refused_topic = _topic(kafka, "avro-registry-refused", partitions=1)
    refused_table = _table_name(refused_topic)
    pipeline.add(REFUSED_CLUSTER, source_topic=refused_topic, **registry_table)
    produce(kafka.bootstrap_servers, refused_topic, values[:10])
    wrong = {REGISTRY_USER_ENV: REGISTRY_USER, REGISTRY_PASSWORD_ENV: "not the password"}
    args = ["--commit-interval", "1", "--cluster", REFUSED_CLUSTER]
    with IngestProcess(server, tmp_path / "refused", args=args, env=wrong) as refused:
        deadline = time.monotonic() + 240
        while "cannot start ingestion" not in refused.log_text():
            assert time.monotonic() < deadline, refused.log_text()[-4000:]
            assert refused.process is not None
            assert refused.process.poll() is None, refused.log_text()[-4000:]
            time.sleep(0.5)
        time.sleep(3)  # time for a batch to commit, were one started
        log = refused.log_text()
    errors = [line for line in log.splitlines() if "cannot start ingestion" in line]
    assert errors[0].endswith(
        f"{REFUSED_CLUSTER}.{refused_table}: cannot start ingestion: "
        f"Schema registry {authenticated_registry.url} (schema_registry.url): GET /schemas/types: "
        "HTTP 401: Unauthorized (the registry refused the "
        f"credentials of user '{REGISTRY_USER}', from the environment variables {REGISTRY_USER_ENV} and "
        f"{REGISTRY_PASSWORD_ENV} that floe.yaml's schema_registry.basic_auth_username_env and "
        "schema_registry.basic_auth_password_env name)"
    ), errors
    assert "not the password" not in log
    assert "ingestion query stopped" not in log  # no streaming query ran and failed
    assert committed_offsets(admin, REFUSED_CLUSTER, refused_table, refused_topic) == {}
    assert catalog.load_table(f"{REFUSED_CLUSTER}.{refused_table}").current_snapshot() is None
    assert catalog.load_table(f"{REFUSED_CLUSTER}.{refused_table}_dlq").current_snapshot() is None


def test_schema_evolves_while_ingesting_and_destructive_changes_are_refused(
    kafka: LocalKafka, pipeline: Pipeline, ingest: IngestProcess, admin: httpx.Client, catalog: RestCatalog
) -> None:
    topic = _topic(kafka, "evolving", partitions=1)
    table = _table_name(topic)
    v1 = [
        {"name": "id", "id": 1, "type": "int"},
        {"name": "label", "id": 2, "type": "string"},
        {"name": "ratio", "id": 3, "type": "float", "optional": True},
    ]
    pipeline.add(source_topic=topic, source_format="json", schema_mode="inline", schema={"fields": v1})
    first = produce(
        kafka.bootstrap_servers,
        topic,
        (json.dumps({"id": i, "label": "a", "ratio": 0.5}).encode() for i in range(50)),
    )
    wait_until_committed(admin, CLUSTER, table, topic, first.end_offsets(), ingest=ingest)

    # Widen int → long and float → double, make `label` optional, add `comment`.
    v2 = [
        {"name": "id", "id": 1, "type": "long"},
        {"name": "label", "id": 2, "type": "string", "optional": True},
        {"name": "ratio", "id": 3, "type": "double", "optional": True},
        {"name": "comment", "id": 4, "type": "string", "optional": True},
    ]
    log_before = ingest.log_path.stat().st_size
    pipeline.add(source_topic=topic, source_format="json", schema_mode="inline", schema={"fields": v2})
    big = 2**40
    second = produce(
        kafka.bootstrap_servers,
        topic,
        (json.dumps({"id": big + i, "comment": f"c{i}"}).encode() for i in range(50)),
    )
    wait_until_committed(admin, CLUSTER, table, topic, second.end_offsets(), ingest=ingest, timeout=300)
    with ingest.log_path.open("rb") as log_file:
        log_file.seek(log_before)
        restart_log = log_file.read().decode(errors="replace")
    assert "restarting its ingestion" in restart_log
    # No interrupted Spark job logged as an error (the restart waits for a running batch to end).
    assert "InterruptedException" not in restart_log, restart_log[-3000:]
    loaded = catalog.load_table(f"{CLUSTER}.{table}")
    assert [(f.name, str(f.field_type), f.required) for f in loaded.schema().fields][:4] == [
        ("id", "long", True),
        ("label", "string", False),
        ("ratio", "double", False),
        ("comment", "string", False),
    ]
    rows = loaded.scan().to_arrow().to_pylist()
    assert len(rows) == 100
    assert sorted(r["comment"] for r in rows if r["id"] >= big) == sorted(f"c{i}" for i in range(50))
    assert all(r["comment"] is None and r["label"] == "a" for r in rows if r["id"] < big)
    dead = catalog.load_table(f"{CLUSTER}.{table}_dlq").scan().to_arrow()
    assert dead.num_rows == 0

    # Dropping a column or narrowing a type is refused; nothing changes.
    before = catalog.load_table(f"{CLUSTER}.{table}").metadata_location
    for destructive in (v2[:3], [{**v2[0], "type": "int"}, *v2[1:]]):
        config = json.loads(json.dumps(pipeline.config))
        for entry in config["tables"]:
            if entry["source_topic"] == topic:
                entry["schema"] = {"fields": destructive}
        response = admin.put("/management/v1/pipeline", json={"config": config, "dry_run": False})
        assert response.status_code == 400, response.text
        assert response.json()["error"]["type"] == "BadRequestException"
    assert catalog.load_table(f"{CLUSTER}.{table}").metadata_location == before


def test_status_shows_lag_and_dead_letters(
    kafka: LocalKafka, pipeline: Pipeline, ingest: IngestProcess, admin: httpx.Client
) -> None:
    from click.testing import CliRunner

    from floe.cli.status import status_command

    topic = _topic(kafka, "observed", partitions=2)
    table = _table_name(topic)
    pipeline.add(
        source_topic=topic,
        source_format="json",
        schema_mode="inline",
        schema={"fields": [{"name": "id", "id": 1, "type": "long"}]},
    )
    # Every 4th record carries a field the table does not declare; every 8th a second one.
    values = [
        json.dumps({"id": i} | ({"color": "red"} if i % 4 == 0 else {}) | ({"size": 1} if i % 8 == 0 else {}))
        for i in range(40)
    ]
    produced = produce(kafka.bootstrap_servers, topic, [*(v.encode() for v in values), b"oops"])
    wait_until_committed(admin, CLUSTER, table, topic, produced.end_offsets(), ingest=ingest)
    deadline = time.monotonic() + 60
    entry: dict[str, Any] = {}
    while time.monotonic() < deadline:
        result = CliRunner().invoke(status_command, ["--metrics-url", ingest.metrics_url, "--output", "json"])
        assert result.exit_code == 0, result.output
        status = json.loads(result.output)
        entry = next((t for t in status["tables"] if t["table"] == f"{CLUSTER}.{table}"), {})
        parts = entry.get("partitions", [])
        if (
            len(parts) == 2
            and all(p.get("offset_lag") == 0 for p in parts)
            and entry.get("dead_letters") == 1
        ):
            break
        time.sleep(1)
    assert entry.get("records") == 40, entry
    assert entry.get("dead_letters") == 1, entry
    assert entry.get("records_with_undeclared_fields") == 10, entry
    assert entry.get("undeclared_fields") == {"color": 10, "size": 5}, entry
    assert f"{CLUSTER}.{table}: records carry fields the table does not declare, not kept: color, size" in (
        ingest.log_text()
    )
    assert sorted(p["committed_offset"] for p in entry["partitions"]) == sorted(
        produced.end_offsets().values()
    )
    assert all(p["offset_lag"] == 0 and p["time_lag_seconds"] == 0 for p in entry["partitions"]), entry
    table_view = CliRunner().invoke(
        status_command, ["--metrics-url", ingest.metrics_url], env={"COLUMNS": "200"}
    )
    assert table_view.exit_code == 0
    assert table in table_view.output


def test_the_console_shows_real_ingestion_to_an_admin_and_only_its_cluster_to_a_reader(
    kafka: LocalKafka,
    pipeline: Pipeline,
    ingest: IngestProcess,
    server: CatalogProcess,
    admin: httpx.Client,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The web console over this module's real ingestion: the overview's lag (from `floe ingest`'s
    metrics) and freshness, the snapshots' Kafka offsets, the dead letters' reasons; a cluster reader
    sees its cluster only; a form posted without its CSRF token is refused. Screenshots of each page."""
    from playwright.sync_api import expect

    from catalog.ingest_metrics import ingest_status
    from tests.e2e.browser import launched_chromium, screenshot_directory, shoot, sign_in

    topic = _topic(kafka, "console", partitions=2)
    table = _table_name(topic)
    pipeline.add(
        source_topic=topic,
        source_format="json",
        schema_mode="inline",
        schema={"fields": [{"name": "id", "id": 1, "type": "long"}]},
    )
    values = [json.dumps({"id": i}).encode() for i in range(100)]
    produced = produce(kafka.bootstrap_servers, topic, [*values, b"not json", b'{"id": "abc"}'])
    ends = produced.end_offsets()
    wait_until_committed(admin, CLUSTER, table, topic, ends, ingest=ingest)
    # The metrics catch up with the commit within a poll or two; the console reads them on each page.
    deadline = time.monotonic() + 60
    entry: dict[str, Any] = {}
    while time.monotonic() < deadline:
        status = ingest_status(httpx.get(ingest.metrics_url, timeout=10).text)
        entry = next((t for t in status["tables"] if t["table"] == f"{CLUSTER}.{table}"), {})
        parts = entry.get("partitions", [])
        caught_up = all(p.get("offset_lag") == 0 and p.get("time_lag_seconds") == 0 for p in parts)
        if len(parts) == 2 and caught_up and "records_per_second" in entry:
            break
        time.sleep(1)
    assert all(p.get("offset_lag") == 0 for p in entry.get("partitions", [])), entry

    reader = admin.post("/management/v1/keys", json={"role": "reader", "cluster": CLUSTER}).json()
    screenshots = screenshot_directory(tmp_path_factory)
    end_offsets = " ".join(f"{p}:{o}" for p, o in sorted(ends.items()))
    with launched_chromium() as browser:
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        try:
            sign_in(page, server.url, server.admin_client_id, server.admin_client_secret)
            expect(page.get_by_role("heading", name="Overview")).to_be_visible()
            expect(page.get_by_role("heading", name=f"Cluster {COMPACT_CLUSTER}")).to_be_visible()
            row = page.get_by_role("row").filter(has=page.get_by_role("link", name=f"{CLUSTER}.{table}"))
            expect(row.locator('[data-label="Ingestion"]')).to_have_text("in floe.yaml")
            expect(row.locator('[data-label="Offset lag"]')).to_have_text("0")
            expect(row.locator('[data-label="Time lag"]')).to_have_text("0 s")
            expect(row.locator('[data-label="Records/s"]')).to_have_text(re.compile(r"^\d+(\.\d+)?$"))
            expect(row.locator('[data-label="Last commit"]')).to_contain_text(re.compile(r"\d+ (s|min) ago"))
            expect(row.locator('[data-label="Records"]')).to_have_text("100")
            expect(row.locator('[data-label="Dead letters (1 h)"]')).to_have_text("2")
            expect(row).to_contain_text("amber")
            shoot(page, screenshots, "ingested-overview")

            page.get_by_role("link", name=f"{CLUSTER}.{table}").click()
            snapshots = page.get_by_role("region", name="Snapshots")
            expect(snapshots).to_contain_text(f"{topic} ")
            # The newest commit ends where the producer stopped.
            expect(snapshots).to_contain_text(f"→ {end_offsets}")
            shoot(page, screenshots, "ingested-table")
            page.get_by_role("link", name="Dead-letter table").click()
            expect(page.get_by_role("heading", name=f"{CLUSTER}.{table}_dlq", exact=True)).to_be_visible()
            page.get_by_role("link", name="Load files and rows").click()
            dead_letters = page.get_by_role("region", name="Files and latest dead letters")
            expect(dead_letters).to_contain_text("not valid JSON: Expecting value at byte 0")
            expect(dead_letters).to_contain_text("field 'id': expected long, got string \"abc\"")
            shoot(page, screenshots, "ingested-dead-letters")

            # The create-key form posted by the browser with its CSRF token removed: refused, nothing made.
            page.get_by_role("link", name="Keys & clusters").click()
            form = page.locator("form").filter(has=page.get_by_role("button", name="Create key"))
            form.locator("input[name=csrf_token]").evaluate("input => input.remove()")
            page.get_by_label("Description").fill(f"no csrf {table}")
            with page.expect_response(lambda r: r.request.method == "POST") as posted:
                page.get_by_role("button", name="Create key").click()
            assert posted.value.status == 403
            expect(page.get_by_role("alert")).to_contain_text("CSRF token is missing or does not match")
            shoot(page, screenshots, "csrf-refused")
            assert f"no csrf {table}" not in admin.get("/management/v1/keys").text
        finally:
            context.close()

        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        try:
            sign_in(page, server.url, reader["client_id"], reader["client_secret"])
            expect(page.get_by_role("heading", name="Overview")).to_be_visible()
            expect(page.get_by_role("heading", name=f"Cluster {CLUSTER}")).to_be_visible()
            expect(page.get_by_role("link", name=f"{CLUSTER}.{table}")).to_be_visible()
            # Every other cluster of this catalog stays out of the reader's overview.
            expect(page.get_by_role("heading", name=re.compile("^Cluster "))).to_have_count(1)
            expect(page.get_by_role("link", name="Keys & clusters")).to_have_count(0)
            shoot(page, screenshots, "cluster-reader-overview")
        finally:
            context.close()


def _positions(catalog: RestCatalog, table: str, cluster: str = CLUSTER) -> list[tuple[int, int]]:
    rows = catalog.load_table(f"{cluster}.{table}").scan(selected_fields=("_kafka",)).to_arrow().to_pylist()
    return [(r["_kafka"]["partition"], r["_kafka"]["offset"]) for r in rows]


def test_kill_9_and_lost_checkpoints_never_duplicate_or_lose_records(
    kafka: LocalKafka,
    pipeline: Pipeline,
    server: CatalogProcess,
    admin: httpx.Client,
    catalog: RestCatalog,
    tmp_path: Path,
) -> None:
    topic, table = _id_table(kafka, pipeline, "crashy", CRASH_CLUSTER, partitions=3)
    produced = Produced()
    stop = threading.Event()

    def keep_producing() -> None:
        i = 0
        while not stop.is_set():
            produce(
                kafka.bootstrap_servers,
                topic,
                (json.dumps({"id": i + j}).encode() for j in range(50)),
                into=produced,
            )
            i += 50
            time.sleep(0.05)

    producer = threading.Thread(target=keep_producing, daemon=True)
    producer.start()
    args = ["--commit-interval", "1", "--cluster", CRASH_CLUSTER]
    try:
        for round_ in range(3):
            process = IngestProcess(server, tmp_path / "crash", args=args).start()
            # Wait for at least one commit in this round, then crash mid-flow.
            before = sum(committed_offsets(admin, CRASH_CLUSTER, table, topic).values())
            deadline = time.monotonic() + 180
            while sum(committed_offsets(admin, CRASH_CLUSTER, table, topic).values()) <= before:
                assert time.monotonic() < deadline, process.log_text()[-4000:]
                assert process.process is not None
                assert process.process.poll() is None, process.log_text()[-4000:]
                time.sleep(0.5)
            time.sleep(1.3)
            process.kill()
            if round_ == 1:
                shutil.rmtree(process.state_dir, ignore_errors=True)  # the Spark checkpoint is gone
    finally:
        stop.set()
        producer.join(60)
    # A last restart, left to finish the topic.
    with IngestProcess(server, tmp_path / "crash", args=args) as process:
        wait_until_committed(
            admin, CRASH_CLUSTER, table, topic, produced.end_offsets(), timeout=300, ingest=process
        )
    positions = _positions(catalog, table, CRASH_CLUSTER)
    assert len(positions) == len(set(positions)), "a record was committed twice"
    assert sorted(positions) == sorted(produced.records), "a record was lost"


def test_a_backlog_commits_full_batches_back_to_back_and_a_trickle_waits_for_the_interval(
    kafka: LocalKafka,
    pipeline: Pipeline,
    server: CatalogProcess,
    admin: httpx.Client,
    catalog: RestCatalog,
    tmp_path: Path,
) -> None:
    """The commit interval bounds how long a record waits, not the pace of a backlog: full batches
    (--max-records-per-batch) are committed one after the other; fewer records wait for the interval.
    A second backlog has dead letters in batches written in one pass while the one before still
    commits (`CommitQueue`): each such batch is written again in two passes, exactly once."""
    interval, batch, backlog = 30, 500, 3_000
    topic, table = _id_table(kafka, pipeline, "backlog", BACKLOG_CLUSTER, partitions=2)
    produced = produce(
        kafka.bootstrap_servers, topic, (json.dumps({"id": i}).encode() for i in range(backlog))
    )
    mixed_topic, mixed_table = _id_table(kafka, pipeline, "backlog-dead", BACKLOG_CLUSTER, partitions=2)
    bad = {1_300, 2_200, 2_210}  # past the first batches, which are written before any is queued
    mixed = produce(
        kafka.bootstrap_servers,
        mixed_topic,
        (b"not json" if i in bad else json.dumps({"id": i}).encode() for i in range(backlog)),
    )
    args = ["--commit-interval", str(interval), "--max-records-per-batch", str(batch)]
    with IngestProcess(server, tmp_path / "backlog", args=[*args, "--cluster", BACKLOG_CLUSTER]) as process:
        wait_until_committed(admin, BACKLOG_CLUSTER, table, topic, produced.end_offsets(), ingest=process)
        wait_until_committed(
            admin, BACKLOG_CLUSTER, mixed_table, mixed_topic, mixed.end_offsets(), ingest=process
        )
        paths = _batches_by_path(process, f"{BACKLOG_CLUSTER}.{mixed_table}")
        assert paths.get("one_pass_staged", 0) >= 1, paths  # queued batches
        assert paths.get("one_pass_aborted", 0) >= 1, paths  # a queued one met a dead letter
        snapshots = sorted(
            catalog.load_table(f"{BACKLOG_CLUSTER}.{table}").snapshots(), key=lambda s: s.sequence_number
        )
        assert len(snapshots) >= backlog // batch  # batches of at most `batch` records
        assert all(int(s.summary["added-records"]) <= batch for s in snapshots if s.summary)
        # Back to back: each batch of the backlog commits less than an interval after the one before (a
        # trigger every interval spaced them by the interval: 100 s for this backlog); at most the last
        # batch, if Spark's per-partition rounding left it short, waits. Gaps, not the backlog's total
        # time, so a machine busy with other tests (E2E_WORKERS) slows it without failing it.
        gaps = [(b.timestamp_ms - a.timestamp_ms) / 1000 for a, b in itertools.pairwise(snapshots)]
        assert all(gap < interval for gap in gaps[:-1]), gaps
        assert sum(int(s.summary["added-records"]) for s in snapshots[:-1] if s.summary) >= backlog - batch
        # A few records: committed once the interval has passed since the last batch, not at once.
        trickle = produce(kafka.bootstrap_servers, topic, (json.dumps({"id": -i}).encode() for i in range(5)))
        wait_until_committed(
            admin, BACKLOG_CLUSTER, table, topic, trickle.end_offsets(), timeout=90, ingest=process
        )
        last = catalog.load_table(f"{BACKLOG_CLUSTER}.{table}").current_snapshot()
        assert last is not None
        assert last.summary is not None
        assert int(last.summary["added-records"]) == 5
        waited = (last.timestamp_ms - snapshots[-1].timestamp_ms) / 1000
        assert waited > interval - 5, waited
    assert "falling behind" not in process.log_text()  # batches run back to back: no trigger period
    positions = _positions(catalog, table, BACKLOG_CLUSTER)
    assert sorted(positions) == sorted({**produced.records, **trickle.records})
    good = _positions(catalog, mixed_table, BACKLOG_CLUSTER)
    dead = catalog.load_table(f"{BACKLOG_CLUSTER}.{mixed_table}_dlq").scan().to_arrow().to_pylist()
    bad_positions = {position for position, (_, value) in mixed.records.items() if value == b"not json"}
    assert len(good) == len(set(good)) == backlog - len(bad)
    assert set(good) == set(mixed.records) - bad_positions
    assert sorted((d["partition"], d["offset"]) for d in dead) == sorted(bad_positions)


def test_compaction_while_ingesting_keeps_every_record_exactly_once(
    kafka: LocalKafka,
    pipeline: Pipeline,
    ingest: IngestProcess,
    server: CatalogProcess,
    admin: httpx.Client,
    catalog: RestCatalog,
    tmp_path: Path,
) -> None:
    topic = _topic(kafka, "compacted", partitions=2)
    table = _table_name(topic)
    pipeline.add(
        cluster=COMPACT_CLUSTER,
        source_topic=topic,
        source_format="json",
        schema_mode="inline",
        schema={"fields": [{"name": "id", "id": 1, "type": "long"}]},
        # Compact even the partition being written, and expire what compaction replaced.
        maintenance={
            "cold_after": "0s",
            "hot_partition_max_files": 2,
            "snapshot_retention": "0s",
            "min_snapshots_to_keep": 1,
        },
    )
    produced = Produced()
    stop = threading.Event()

    def keep_producing() -> None:
        i = 0
        while not stop.is_set():
            values = (json.dumps({"id": i + j}).encode() for j in range(20))
            produce(kafka.bootstrap_servers, topic, values, into=produced)
            i += 20
            time.sleep(0.1)

    producer = threading.Thread(target=keep_producing, daemon=True)
    producer.start()
    try:
        # Let ingestion write a few small files first.
        deadline = time.monotonic() + 120
        while len(catalog.load_table(f"{COMPACT_CLUSTER}.{table}").snapshots()) < 6:
            assert time.monotonic() < deadline, ingest.log_text()[-4000:]
            time.sleep(0.5)
        env = {
            **os.environ,
            "FLOE_URL": server.url,
            "FLOE_CLIENT_ID": server.admin_client_id,
            "FLOE_CLIENT_SECRET": server.admin_client_secret,
        }
        command = [
            sys.executable,
            "-m",
            "floe.cli",
            "maintain",
            "--once",
            "--namespace",
            COMPACT_CLUSTER,
            "--metrics-port",
            "0",
            "--driver-memory",
            "768m",
        ]
        maintain = subprocess.run(command, env=env, capture_output=True, timeout=600, check=False)
        assert maintain.returncode == 0, maintain.stdout.decode()[-3000:] + maintain.stderr.decode()[-3000:]
    finally:
        stop.set()
        producer.join(60)
    wait_until_committed(admin, COMPACT_CLUSTER, table, topic, produced.end_offsets(), ingest=ingest)
    positions = _positions(catalog, table, COMPACT_CLUSTER)
    assert len(positions) == len(set(positions)), "a record is in the table twice"
    assert sorted(positions) == sorted(produced.records), "a record was lost"

    passes = admin.get(
        "/management/v1/maintenance/passes", params={"namespace": COMPACT_CLUSTER, "table": table}
    ).json()["passes"]
    compactions = [
        a for p in passes for a in p["actions"] if a["name"] == "rewrite_data_files" and not a.get("error")
    ]
    assert compactions, passes
    # Ingestion kept adding files during the pass; what compaction itself did is in its result.
    rewritten = sum(int(a["result"].get("rewritten_data_files_count", 0)) for a in compactions)
    added = sum(int(a["result"].get("added_data_files_count", 0)) for a in compactions)
    assert rewritten > added >= 1, compactions

    # floe status shows the pass beside the ingestion metrics.
    from click.testing import CliRunner

    from floe.cli.status import status_command

    env = {"FLOE_URL": server.url, "FLOE_CLIENT_ID": server.admin_client_id}
    env["FLOE_CLIENT_SECRET"] = server.admin_client_secret
    result = CliRunner().invoke(status_command, ["--metrics-url", ingest.metrics_url, "-o", "json"], env=env)
    assert result.exit_code == 0, result.output
    maintained = {entry["table"]: entry for entry in json.loads(result.output).get("maintenance", [])}
    assert f"{COMPACT_CLUSTER}.{table}" in maintained, result.output
    assert "rewrite_data_files" in [a["name"] for a in maintained[f"{COMPACT_CLUSTER}.{table}"]["actions"]]


def test_a_missing_topic_waits_with_one_warning_and_is_ingested_once_it_exists(
    kafka: LocalKafka, pipeline: Pipeline, ingest: IngestProcess, admin: httpx.Client
) -> None:
    # Issue 12: no restart loop of stack traces while a topic does not exist on an external cluster; one
    # WARNING (at most one a minute), the topic_missing metric (floe status), then ingestion once it exists.
    topic = f"not-yet.{uuid.uuid4().hex[:6]}"
    table = _table_name(topic)
    pipeline.add(
        source_topic=topic, source_format="json", schema_mode="inline", schema={"fields": EVENT_FIELDS}
    )
    gauge = f'floe_ingest_topic_missing{{table="{CLUSTER}.{table}",topic="{topic}"}}'

    def metrics_text() -> str:
        try:
            return httpx.get(ingest.metrics_url, timeout=10).text
        except httpx.TransportError:  # the service (started with the module) is not serving metrics yet
            return ""

    deadline = time.monotonic() + 240
    while f"{gauge} 1.0" not in metrics_text():
        assert time.monotonic() < deadline, ingest.log_text()[-4000:]
        time.sleep(0.5)
    time.sleep(12)  # a few reconciliations: still one warning, and no query started on the missing topic
    log = ingest.log_text()
    assert log.count(f"topic {topic} does not exist") == 1, log[-4000:]
    assert f"{CLUSTER}.{table}: ingestion query stopped" not in log
    kafka.create_topic(topic, 1)
    produced = produce(kafka.bootstrap_servers, topic, [json.dumps(_event(i)).encode() for i in range(3)])
    wait_until_committed(admin, CLUSTER, table, topic, produced.end_offsets(), ingest=ingest, timeout=90)
    assert f"{gauge} 0.0" in metrics_text()
