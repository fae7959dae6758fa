"""Upsert tables end to end: a real Kafka broker, `floe ingest` (Spark MERGE, merge-on-read) and a real
floe server on PostgreSQL; the tables read back with pyiceberg and DuckDB (and, where noted, Spark and
Trino 476) equal the latest-state model computed here from what the broker acknowledged.

The issue's stream (100,000 records over 10,000 keys with updates and tombstones) is `keyed_stream`,
encoded as registry Avro, inline JSON and Debezium JSON with and without JsonConverter schemas; two
topics of it are ingested side by side per test (two streams merge in about the time of one) and read
by all four engines (`assert_read_by_every_engine`).

One `floe ingest` runs for the module (the restart test kills it and starts it again); each test
applies its own tables on their own topics. One Spark session in this process runs the maintenance worker
and reads tables; Trino is started only for the test that asks for it.
"""

from __future__ import annotations

import functools
import io
import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import fastavro
import httpx
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.table.snapshots import Snapshot

from catalog.kafka_offsets import END_OFFSETS, START_OFFSETS, TOPIC
from catalog.pipelines.maintenance import DEFAULT_POLICY, UPSERT_DEFAULTS
from devtools.catalog_server import CatalogProcess
from devtools.kafka_broker import LocalKafka
from devtools.postgres import LocalPostgres
from devtools.schema_registry import LocalSchemaRegistry
from devtools.trino import LocalTrino
from ingest.registry_client import RegistryClient, encode_confluent
from tests.e2e.duckdb_client import attach_catalog, connect
from tests.e2e.ingest_harness import (
    IngestProcess,
    Pipeline,
    Produced,
    apply_pipeline,
    committed_offsets,
    produce,
    wait_until_committed,
)
from tests.e2e.readme_blocks import engine_block, filled

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.e2e

CLUSTER = "shop"
CUSTOMER_FIELDS = [
    {"name": "customer_id", "id": 1, "type": "long"},
    {"name": "region", "id": 2, "type": "string"},
    {"name": "version", "id": 3, "type": "int"},
    {"name": "email", "id": 4, "type": "string", "optional": True},
]


@pytest.fixture(scope="module")
def server(postgres: LocalPostgres, tmp_path_factory: pytest.TempPathFactory) -> Iterator[CatalogProcess]:
    url = postgres.create_database(f"floe_upsert_{uuid.uuid4().hex[:8]}")
    with CatalogProcess(url, home=tmp_path_factory.mktemp("upsert-floe")) as process:
        yield process


@pytest.fixture(scope="module")
def admin(server: CatalogProcess) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {server.token()}"}, timeout=60
    ) as client:
        yield client


@pytest.fixture(scope="module")
def pipeline(kafka: LocalKafka, admin: httpx.Client) -> Pipeline:
    return Pipeline(kafka.bootstrap_servers, admin, [CLUSTER], CLUSTER, {"source_format": "json"})


@pytest.fixture(scope="module")
def ingest(
    server: CatalogProcess, pipeline: Pipeline, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[IngestProcess]:
    with IngestProcess(
        server, tmp_path_factory.mktemp("upsert-ingest"), args=["--commit-interval", "1"]
    ) as process:
        yield process


@pytest.fixture(scope="module")
def catalog(server: CatalogProcess) -> RestCatalog:
    return server.catalog()


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    """One Spark session (local[1]) in the test process: the maintenance worker's, and a reader."""
    from runtime.spark import CatalogConnection, spark_session

    session = spark_session(
        "floe-upsert-tests",
        # Never used: the worker and the tests register a catalog per floe URL and warehouse.
        CatalogConnection("http://127.0.0.1:9", "default", "unused", "unused"),
        master="local[1]",
        conf={
            "spark.driver.memory": "768m",
            "spark.ui.showConsoleProgress": "false",
            # Resolving a procedure's table argument initializes the default catalog: Spark's own.
            "spark.sql.defaultCatalog": "spark_catalog",
        },
    )
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="module")
def trino(server: CatalogProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalTrino]:
    """Trino 476 with README's `trino-local` block as written (floe's URL and the admin key filled in)."""
    key = (server.admin_client_id, server.admin_client_secret)
    block = filled(engine_block("trino-local"), url=server.url, client_id=key[0], client_secret=key[1])
    with LocalTrino(tmp_path_factory.mktemp("trino"), {"floe": block}, heap="1G") as process:
        yield process


def _topic(kafka: LocalKafka, name: str, partitions: int = 3) -> str:
    topic = f"{name}.{uuid.uuid4().hex[:6]}"
    kafka.create_topic(topic, partitions)
    return topic


def _table(topic: str) -> str:
    return topic.replace(".", "_").replace("-", "_")


def latest_state(produced: Produced, key_of: Any) -> dict[Any, tuple[int, int, dict[str, Any] | None]]:
    """key → (partition, offset, value or None) of its last record: records of a key share a partition,
    so its last offset is its current state (None: deleted)."""
    state: dict[Any, tuple[int, int, dict[str, Any] | None]] = {}
    for (partition, offset), (key, value) in sorted(produced.records.items()):
        found = key_of(key, value)
        if found is None:
            continue
        state[found] = (partition, offset, json.loads(value) if value is not None else None)
    return state


def assert_offsets_chain(catalog: RestCatalog, name: str, ends: dict[int, int]) -> None:
    """Exactly once: every snapshot starts where the previous one ended, and the last ends at `ends`.
    The oldest ingestion snapshot left starts from nothing, unless the history has been expired."""
    table = catalog.load_table(name)
    # The table's first snapshot has sequence number 1 (format v2 and later); expiry drops it.
    expired = min((s.sequence_number or 0 for s in table.snapshots()), default=0) > 1
    committed: dict[int, int] | None = None
    for snapshot in sorted(table.snapshots(), key=lambda s: s.sequence_number or 0):
        summary = snapshot.summary
        if summary is None or summary[TOPIC] is None:
            continue
        start = {int(p): o for p, o in json.loads(summary[START_OFFSETS] or "{}").items()}
        end = {int(p): o for p, o in json.loads(summary[END_OFFSETS] or "{}").items()}
        if committed is None:
            committed = dict(start) if expired else {}
        if expired:
            # A partition whose last progress before this snapshot is in an expired snapshot (the
            # oldest batches left need not have touched every partition): known from here on.
            for partition, offset in start.items():
                committed.setdefault(partition, offset)
        assert start == {p: committed[p] for p in end if p in committed}, (start, committed)
        committed.update(end)
    assert committed == ends


@pytest.fixture(scope="module")
def duck_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One DuckDB extension directory for the module (installing the extensions copies ~150 MB)."""
    return tmp_path_factory.mktemp("duckdb")


def duck_rows(ingest: IngestProcess, duck_dir: Path, sql: str) -> list[tuple[Any, ...]]:
    duck = connect(duck_dir)
    attach_catalog(
        duck,
        endpoint=ingest.server.url,
        warehouse="default",
        client_id=ingest.credential[0],
        client_secret=ingest.credential[1],
    )
    return duck.execute(sql).fetchall()


def snapshot_at_cli(ingest: IngestProcess, table: str, partition: int, offset: int) -> int:
    """`floe snapshot-at` as a user runs it."""
    env = {
        **os.environ,
        "FLOE_URL": ingest.server.url,
        "FLOE_CLIENT_ID": ingest.credential[0],
        "FLOE_CLIENT_SECRET": ingest.credential[1],
    }
    command = [sys.executable, "-m", "floe.cli", "snapshot-at", table, "--partition", str(partition)]
    done = subprocess.run(
        [*command, "--offset", str(offset)], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return int(done.stdout.strip())


def _customer(key: int, version: int) -> bytes:
    return json.dumps(
        {
            "customer_id": key,
            "region": f"r{key % 7}",
            "version": version,
            "email": f"c{key}@v{version}.example",
        }
    ).encode()


def _customer_key(key: bytes | None, value: bytes | None) -> int | None:
    """The key the table reads: from the value, else (tombstones) from the record key."""
    if value is not None:
        return int(json.loads(value)["customer_id"])
    assert key is not None
    text = key.decode()
    if text.startswith("{"):
        return int(json.loads(text)["customer_id"])
    return int(text) if text.isdigit() else None


def _produce_wave(
    kafka: LocalKafka, topic: str, produced: Produced, records: list[tuple[bytes, bytes | None]]
) -> None:
    produce(
        kafka.bootstrap_servers, topic, (v for _, v in records), keys=lambda i: records[i][0], into=produced
    )


def _assert_customers(
    catalog: RestCatalog, ingest: IngestProcess, duck_dir: Path, table: str, produced: Produced
) -> dict[int, tuple[int, int, dict[str, Any] | None]]:
    state = latest_state(produced, _customer_key)
    expected = {k: v for k, (_, _, v) in state.items() if v is not None}
    loaded = catalog.load_table(f"{CLUSTER}.{table}")
    rows = loaded.scan().to_arrow().to_pylist()
    assert len(rows) == len({r["customer_id"] for r in rows}), "a key has two rows"
    assert {
        r["customer_id"]: {k: r[k] for k in ("customer_id", "region", "version", "email")} for r in rows
    } == expected
    for row in rows:  # `_kafka` is the metadata of the record that wrote the row
        partition, offset, _ = state[row["customer_id"]]
        assert (row["_kafka"]["partition"], row["_kafka"]["offset"]) == (partition, offset)
    duck = duck_rows(
        ingest,
        duck_dir,
        f'SELECT customer_id, region, version, email FROM floe.{CLUSTER}."{table}" ORDER BY 1',
    )
    assert duck == [(k, v["region"], v["version"], v["email"]) for k, v in sorted(expected.items())]
    return state


def test_compacted_topic_with_updates_and_tombstones_ends_in_its_current_state(
    kafka: LocalKafka,
    pipeline: Pipeline,
    ingest: IngestProcess,
    admin: httpx.Client,
    catalog: RestCatalog,
    duck_dir: Path,
) -> None:
    topic = _topic(kafka, "customers")
    table = _table(topic)
    pipeline.add(
        source_topic=topic,
        table_mode="upsert",
        key_fields=["customer_id"],
        partitioning_scheme=["bucket(4, customer_id)"],
        schema={"fields": CUSTOMER_FIELDS},
    )
    loaded = catalog.load_table(f"{CLUSTER}.{table}")
    assert loaded.schema().identifier_field_ids == [1]
    assert loaded.properties["write.merge.mode"] == "merge-on-read"
    rng = random.Random(13)
    keys = list(range(400))
    produced = Produced()

    # Wave 1: every key inserted; waves 2-4: updates, tombstones, deletes of keys never seen, re-inserts,
    # and one key inserted, updated and deleted within one wave. Odd keys' records carry a JSON record
    # key, even keys' the plain id (a key always the same bytes, so always the same partition).
    def record_key(k: int) -> bytes:
        return json.dumps({"customer_id": k}).encode() if k % 2 else str(k).encode()

    waves: list[list[tuple[bytes, bytes | None]]] = [[(record_key(k), _customer(k, 1)) for k in keys]]
    for wave in range(2, 5):
        records: list[tuple[bytes, bytes | None]] = []
        for k in rng.sample(keys, 150):
            records.append((record_key(k), _customer(k, wave)))
        for k in rng.sample(keys, 40):
            records.append((record_key(k), None))
        records += [(record_key(10_000 + wave), None)]  # never seen
        new = 20_000 + wave
        records += [(record_key(new), _customer(new, 1)), (record_key(new), _customer(new, 2))]
        records += [(record_key(new), None)]
        records.append((b"not-a-key", None))  # a tombstone without a usable key: a dead letter
        waves.append(records)
    for records in waves:
        _produce_wave(kafka, topic, produced, records)
        wait_until_committed(admin, CLUSTER, table, topic, produced.end_offsets(), ingest=ingest)

    state = _assert_customers(catalog, ingest, duck_dir, table, produced)
    assert 0 < len([v for *_, v in state.values() if v is None]) < len(keys)
    assert_offsets_chain(catalog, f"{CLUSTER}.{table}", produced.end_offsets())
    # Merge-on-read: the replaced rows are position deletes, not rewritten files.
    files = catalog.load_table(f"{CLUSTER}.{table}").inspect.files().to_pylist()
    assert {f["content"] for f in files} == {0, 1}
    # The unkeyed tombstones are dead letters, with the reason.
    dead = catalog.load_table(f"{CLUSTER}.{table}_dlq").scan().to_arrow().to_pylist()
    assert sorted(d["key"] for d in dead) == [b"not-a-key"] * 3
    assert all(d["error"].startswith("tombstone without a usable key") for d in dead)

    # History by Kafka position: `floe snapshot-at` names the first snapshot holding a record, as the
    # snapshots' own summaries say; reading that snapshot gives the table as of that record.
    history = sorted(
        (s for s in catalog.load_table(f"{CLUSTER}.{table}").snapshots() if s.summary and s.summary[TOPIC]),
        key=lambda s: s.sequence_number or 0,
    )
    for partition, offset in sorted(produced.records)[::211]:
        expected = next(s for s in history if _ends(s).get(partition, 0) > offset)
        found = snapshot_at_cli(ingest, f"{CLUSTER}.{table}", partition, offset)
        assert found == expected.snapshot_id, (partition, offset)
        ends: dict[int, int] = {}  # what the table holds as of that snapshot, partition by partition
        for snapshot in history[: history.index(expected) + 1]:
            ends.update(_ends(snapshot))
        covered = Produced({p: r for p, r in produced.records.items() if p[1] < ends.get(p[0], 0)})
        model = {k: v for k, (_, _, v) in latest_state(covered, _customer_key).items() if v is not None}
        as_of = catalog.load_table(f"{CLUSTER}.{table}").scan(snapshot_id=found).to_arrow().to_pylist()
        assert {r["customer_id"]: {k: r[k] for k in model.get(r["customer_id"], {})} for r in as_of} == model


def _ends(snapshot: Snapshot) -> dict[int, int]:
    assert snapshot.summary is not None
    return {int(p): o for p, o in json.loads(snapshot.summary[END_OFFSETS] or "{}").items()}


def test_kill_9_three_times_mid_stream_keeps_exactly_once(
    kafka: LocalKafka,
    pipeline: Pipeline,
    ingest: IngestProcess,
    admin: httpx.Client,
    catalog: RestCatalog,
    duck_dir: Path,
) -> None:
    topic = _topic(kafka, "accounts", partitions=2)
    table = _table(topic)
    pipeline.add(
        source_topic=topic,
        table_mode="upsert",
        key_fields=["customer_id"],
        schema={"fields": CUSTOMER_FIELDS},
    )
    produced = Produced()
    stop = threading.Event()
    rng = random.Random(7)

    def keep_producing() -> None:
        version = 0
        while not stop.is_set():
            version += 1
            records = [
                (str(k).encode(), None if rng.random() < 0.1 else _customer(k, version))
                for k in rng.sample(range(200), 60)
            ]
            _produce_wave(kafka, topic, produced, records)
            time.sleep(0.1)

    def committed() -> int:
        return sum(committed_offsets(admin, CLUSTER, table, topic).values())

    producer = threading.Thread(target=keep_producing, daemon=True)
    producer.start()
    try:
        # kill -9 three times mid-stream, each once the run has committed something: the second time
        # its state folder (Spark's checkpoints) is lost with it; the offsets come from floe either way.
        for lose_state in (False, True, False):
            before = committed()
            deadline = time.monotonic() + 180
            while committed() <= before:
                assert time.monotonic() < deadline, ingest.log_text()[-4000:]
                time.sleep(0.5)
            time.sleep(1.5)  # into the next batch
            ingest.kill()
            if lose_state:
                shutil.rmtree(ingest.state_dir, ignore_errors=True)
            ingest.start()
        time.sleep(5)  # the producer goes on while the last run starts
    finally:
        stop.set()
        producer.join(60)
    wait_until_committed(admin, CLUSTER, table, topic, produced.end_offsets(), timeout=300, ingest=ingest)
    _assert_customers(catalog, ingest, duck_dir, table, produced)
    assert_offsets_chain(catalog, f"{CLUSTER}.{table}", produced.end_offsets())


# -- maintenance while upserting -------------------------------------------------------------------


def _live_files(catalog: RestCatalog, name: str) -> dict[int, int]:
    """content (0 data, 1 position deletes, 2 equality deletes) → live files of the current snapshot."""
    counts: dict[int, int] = {}
    for f in catalog.load_table(name).inspect.files().to_pylist():
        counts[f["content"]] = counts.get(f["content"], 0) + 1
    return counts


def _ingest_counter(ingest: IngestProcess, metric: str, table: str) -> float:
    """A counter of `floe ingest`'s metrics for `table` (0 when it was never incremented)."""
    text = httpx.get(ingest.metrics_url, timeout=30).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(f"{metric}_total{{") and f'{table}"' in line
    )


def _versions(produced: Produced) -> dict[int, int]:
    """customer_id → version of the current state."""
    state = latest_state(produced, _customer_key)
    return {k: int(v["version"]) for k, (_, _, v) in state.items() if v is not None}


def _spark_versions(spark: SparkSession, ingest: IngestProcess, table: str) -> dict[int, int]:
    """customer_id → version as Spark reads the table (through floe's REST catalog)."""
    from maintenance.spark_actions import SparkActions
    from runtime.spark import CatalogConnection

    connection = CatalogConnection(ingest.server.url, "default", *ingest.credential)
    name = SparkActions(spark).catalog(connection)
    rows = spark.sql(f"SELECT customer_id, version FROM `{name}`.`{CLUSTER}`.`{table}`").collect()
    assert len(rows) == len({r["customer_id"] for r in rows}), "a key has two rows"
    return {r["customer_id"]: r["version"] for r in rows}


def test_maintenance_while_upserting_applies_and_drops_the_deletes(
    kafka: LocalKafka,
    pipeline: Pipeline,
    ingest: IngestProcess,
    admin: httpx.Client,
    catalog: RestCatalog,
    duck_dir: Path,
    spark: SparkSession,
) -> None:
    from maintenance.worker import MaintenanceWorker, WorkerOptions

    topic = _topic(kafka, "profiles", partitions=2)
    table = _table(topic)
    name = f"{CLUSTER}.{table}"
    pipeline.add(
        source_topic=topic,
        table_mode="upsert",
        key_fields=["customer_id"],
        partitioning_scheme=["bucket(4, customer_id)"],
        schema={"fields": CUSTOMER_FIELDS},
        # Hot while merged into (about every second), cold 5 s after ingestion stops; history bounded
        # below the merges' count so the pass expires some.
        maintenance={"cold_after": "5s", "max_snapshots": 8},
    )
    produced = Produced()
    rng = random.Random(29)
    keys = range(300)
    version = 0

    def wave() -> list[tuple[bytes, bytes | None]]:
        nonlocal version
        version += 1
        return [
            (str(k).encode(), None if rng.random() < 0.1 else _customer(k, version))
            for k in rng.sample(keys, 120)
        ]

    # Updates and tombstones, batch after batch: each merge leaves a position delete file per data file
    # it touched, until the hot partitions hold enough of them for a pass to compact them.
    _produce_wave(kafka, topic, produced, [(str(k).encode(), _customer(k, 0)) for k in keys])
    wait_until_committed(admin, CLUSTER, table, topic, produced.end_offsets(), ingest=ingest)
    for _ in range(10):
        _produce_wave(kafka, topic, produced, wave())
        wait_until_committed(admin, CLUSTER, table, topic, produced.end_offsets(), ingest=ingest)
    assert _live_files(catalog, name).get(1, 0) >= 4 * 10

    worker = MaintenanceWorker(spark, WorkerOptions(ingest.server.url, *ingest.credential))
    discovered = {t.name: t for t in worker.discover() if t.namespace == (CLUSTER,)}
    maintained = discovered[table]
    # The table's block over the upsert defaults; its dead-letter table is appended to: the same block
    # over the append defaults.
    assert (maintained.policy.cold_after, maintained.policy.max_snapshots) == (5, 8)
    assert maintained.policy.interval == UPSERT_DEFAULTS["interval"]
    assert maintained.policy.hot_partition_max_files == UPSERT_DEFAULTS["hot_partition_max_files"]
    dead_letters = discovered[f"{table}_dlq"].policy
    assert (dead_letters.cold_after, dead_letters.max_snapshots) == (5, 8)
    assert (dead_letters.interval, dead_letters.hot_partition_max_files) == (
        DEFAULT_POLICY.interval,
        DEFAULT_POLICY.hot_partition_max_files,
    )
    stop = threading.Event()

    def keep_producing() -> None:
        while not stop.is_set():
            _produce_wave(kafka, topic, produced, wave())
            time.sleep(0.3)

    # A pass while ingestion keeps merging into the same files: whichever of a rewrite and a merge
    # commits second loses the race (Iceberg's validation) and is planned again; nothing is lost or
    # applied twice, and the streaming query never fails.
    producer = threading.Thread(target=keep_producing, daemon=True)
    producer.start()
    try:
        racing = worker.maintain(maintained)
    finally:
        stop.set()
        producer.join(60)
    compactions = [a for a in racing.actions if a.name == "rewrite_data_files"]
    assert [a.result["kind"] for a in compactions] == ["hot"], racing.summary()
    wait_until_committed(admin, CLUSTER, table, topic, produced.end_offsets(), ingest=ingest)
    _assert_customers(catalog, ingest, duck_dir, table, produced)
    assert_offsets_chain(catalog, name, produced.end_offsets())
    assert _ingest_counter(ingest, "floe_ingest_query_restarts", table) == 0, ingest.log_text()[-4000:]
    assert _live_files(catalog, name).get(1, 0) > 0
    assert _spark_versions(spark, ingest, table) == _versions(produced)  # position deletes applied

    # Ingestion caught up and the partitions went cold: one pass applies every delete and drops the
    # delete files, and the table reads the same.
    time.sleep(6)
    quiet = worker.maintain(maintained)
    worker.close()
    assert not quiet.failed, quiet.summary()
    (compaction,) = [a for a in quiet.actions if a.name == "rewrite_data_files"]
    assert compaction.result["kind"] == "cold"
    assert compaction.result["rewritten_data_files_count"] > 0
    assert quiet.after is not None
    assert quiet.after.delete_files == 0, quiet.summary()
    assert set(_live_files(catalog, name)) == {0}
    # History beyond the newest 8 snapshots is gone, and the offsets chain of what is left is whole.
    (expired,) = [a for a in quiet.actions if a.name == "expire_snapshots"]
    assert expired.error is None, quiet.summary()
    assert len(catalog.load_table(name).snapshots()) <= 8
    assert _spark_versions(spark, ingest, table) == _versions(produced)
    _assert_customers(catalog, ingest, duck_dir, table, produced)
    assert_offsets_chain(catalog, name, produced.end_offsets())


# -- format v3: deletion vectors --------------------------------------------------------------------


def _delete_file_formats(catalog: RestCatalog, name: str) -> set[str]:
    """The file formats of the current snapshot's live delete files (PUFFIN: deletion vectors)."""
    files = catalog.load_table(name).inspect.files().to_pylist()
    return {f["file_format"] for f in files if f["content"] != 0}


def test_format_v3_upsert_table_merges_with_deletion_vectors_and_maintenance_drops_them(
    kafka: LocalKafka,
    pipeline: Pipeline,
    ingest: IngestProcess,
    admin: httpx.Client,
    catalog: RestCatalog,
    duck_dir: Path,
    spark: SparkSession,
    trino: LocalTrino,
) -> None:
    from catalog.kafka_offsets import TOPIC as TOPIC_PROPERTY
    from devtools.trino import TrinoQueryError
    from maintenance.worker import MaintenanceWorker, WorkerOptions

    topic = _topic(kafka, "loyalty", partitions=2)
    table = _table(topic)
    name = f"{CLUSTER}.{table}"
    pipeline.add(
        source_topic=topic,
        table_mode="upsert",
        key_fields=["customer_id"],
        partitioning_scheme=["bucket(4, customer_id)"],
        schema={"fields": CUSTOMER_FIELDS},
        maintenance={"cold_after": "1s"},  # cold as soon as ingestion has caught up
    )
    assert catalog.load_table(name).format_version == 2
    produced = Produced()
    rng = random.Random(41)
    keys = range(300)
    version = 0

    def wave() -> None:
        nonlocal version
        version += 1
        records = [
            (str(k).encode(), None if rng.random() < 0.15 else _customer(k, version))
            for k in rng.sample(keys, 120)
        ]
        records += [(str(90_000 + version).encode(), None)]  # a key never seen
        _produce_wave(kafka, topic, produced, records)
        wait_until_committed(admin, CLUSTER, table, topic, produced.end_offsets(), ingest=ingest)

    # Written on v2 first (position delete files), then upgraded by `floe apply` while ingestion runs.
    started = time.monotonic()
    _produce_wave(kafka, topic, produced, [(str(k).encode(), _customer(k, 0)) for k in keys])
    wait_until_committed(admin, CLUSTER, table, topic, produced.end_offsets(), ingest=ingest)
    wave()
    print(f"\nv3: two waves before the upgrade merged in {time.monotonic() - started:.1f} s")
    assert _delete_file_formats(catalog, name) == {"PARQUET"}
    pipeline.config["tables"][-1]["format_version"] = 3
    applied = apply_pipeline(pipeline.admin, pipeline.config)
    (upgrade,) = [t for t in applied["plan"] if t["table"] == table]
    assert upgrade["changes"] == ["upgrade the format version from 2 to 3"], applied
    upgraded = catalog.load_table(name)
    assert upgraded.format_version == 3
    current = upgraded.current_snapshot()
    assert current is not None
    upgraded_at = current.sequence_number or 0
    started = time.monotonic()
    for _ in range(2):
        wave()
    print(f"\nv3: two waves after the upgrade merged in {time.monotonic() - started:.1f} s")

    # The merges after the upgrade wrote deletion vectors (Puffin), none before it.
    merges = [
        s
        for s in catalog.load_table(name).snapshots()
        if s.summary is not None and s.summary[TOPIC_PROPERTY] is not None
    ]
    dvs = {s.snapshot_id: int(s.summary["added-dvs"] or 0) for s in merges if s.summary is not None}
    after = [s.snapshot_id for s in merges if (s.sequence_number or 0) > upgraded_at]
    assert sum(dvs[i] for i in after) >= 2, dvs  # every wave updates and deletes existing keys
    assert not any(dvs[s.snapshot_id] for s in merges if (s.sequence_number or 0) <= upgraded_at)
    assert "PUFFIN" in _delete_file_formats(catalog, name)
    files = catalog.load_table(name).inspect.files().to_pylist()
    vectors = [f for f in files if f["file_format"] == "PUFFIN"]
    print(
        f"\nv3 table before maintenance: {sum(1 for f in files if f['content'] == 0)} data files, "
        f"{len(vectors)} deletion vectors, "
        f"{sum(1 for f in files if f['content'] != 0 and f['file_format'] != 'PUFFIN')} position delete files"
    )
    # At most one vector per data file: a merge replaces a data file's vector instead of adding one.
    for task in catalog.load_table(name).scan().plan_files():
        assert sum(1 for d in task.delete_files if d.file_format.value == "PUFFIN") <= 1, task.file.file_path
    _assert_customers(catalog, ingest, duck_dir, table, produced)  # pyiceberg and DuckDB apply them
    assert _spark_versions(spark, ingest, table) == _versions(produced)
    assert_offsets_chain(catalog, name, produced.end_offsets())
    with pytest.raises(TrinoQueryError, match="Unexpected PUFFIN file format"):  # Trino 476 cannot
        trino.rows(f'SELECT customer_id, version FROM floe."{CLUSTER}"."{table}"')

    # Cold partitions: one pass applies every deletion vector (and any v2 position delete left) and
    # no delete file of either kind remains.
    worker = MaintenanceWorker(spark, WorkerOptions(ingest.server.url, *ingest.credential))
    (maintained,) = [t for t in worker.discover() if t.namespace == (CLUSTER,) and t.name == table]
    time.sleep(2)
    started = time.monotonic()
    quiet = worker.maintain(maintained, scan_orphans=False)
    worker.close()
    print(f"\nv3: the maintenance pass took {time.monotonic() - started:.1f} s: {quiet.summary()}")
    assert not quiet.failed, quiet.summary()
    assert quiet.after is not None
    assert quiet.after.delete_files == 0, quiet.summary()
    assert set(_live_files(catalog, name)) == {0}
    _assert_customers(catalog, ingest, duck_dir, table, produced)
    assert_offsets_chain(catalog, name, produced.end_offsets())
    # With no deletion vector left, Trino 476 reads the v3 table again.
    assert trino.rows(f'SELECT customer_id, version FROM floe."{CLUSTER}"."{table}" ORDER BY 1') == sorted(
        _versions(produced).items()
    )


# -- the issue's stream: 100,000 records over 10,000 keys, read by every engine --------------------

STREAM_KEYS = 10_000
STREAM_RECORDS = 100_000
# (key, version): the key's row at that version, or (None) the key deleted.
Change = tuple[int, int | None]
Record = tuple[bytes, bytes | None]


def keyed_stream(
    seed: int, cost: Callable[[int, int | None, bool], int], *, extra: int
) -> list[list[Change]]:
    """The issue's keyed stream as four waves of changes, `STREAM_RECORDS` records in all once encoded:
    wave 1 inserts every key (version 1); waves 2-4 are random keys' updates (each a new version) and
    deletes (about 9% of the changes), then a delete of a key never seen and a key inserted and deleted
    within the wave. `cost(key, version, exists)` is how many records the format writes for a change;
    `extra` the records the test adds itself (dead letters), left out of the count."""
    rng = random.Random(seed)
    keys = range(STREAM_KEYS)
    live = set(keys)
    waves: list[list[Change]] = [[(k, 1) for k in keys]]
    written = STREAM_KEYS + extra
    version = 1
    for wave in range(3):
        target = written + (STREAM_RECORDS - written) // (3 - wave)
        specials: list[Change] = [(50_000 + wave, None), (70_000 + wave, version + 1), (70_000 + wave, None)]
        written += cost(*specials[0], False) + cost(*specials[1], False) + cost(*specials[2], True)
        changes: list[Change] = []
        while written < target:
            version += 1
            k = rng.choice(keys)
            change: Change = (k, None if rng.random() < 0.089 else version)
            if written + cost(*change, k in live) > target:
                change = (k, version)  # an update: one record in every format
            written += cost(*change, k in live)
            (live.add if change[1] is not None else live.discard)(k)
            changes.append(change)
        waves.append(changes + specials)
    return waves


def stream_state(waves: list[list[Change]]) -> dict[int, int]:
    """key → version of the keys alive after every wave: the latest-state model."""
    state: dict[int, int] = {}
    for changes in waves:
        for k, version in changes:
            if version is None:
                state.pop(k, None)
            else:
                state[k] = version
    return state


def produce_stream(
    kafka: LocalKafka,
    admin: httpx.Client,
    ingest: IngestProcess,
    topics: dict[str, str],
    waves: list[dict[str, list[Record]]],
) -> dict[str, Produced]:
    """Produce each wave into its topics (topic → table) and wait until ingestion has merged it; prints
    how long the stream took (produced and merged) and returns what the broker acknowledged."""
    produced = {topic: Produced() for topic in topics}
    started = time.monotonic()
    for wave in waves:
        for topic, records in wave.items():
            _produce_wave(kafka, topic, produced[topic], records)
        for topic, table in topics.items():
            wait_until_committed(
                admin, CLUSTER, table, topic, produced[topic].end_offsets(), timeout=600, ingest=ingest
            )
    total = sum(len(p.records) for p in produced.values())
    print(
        f"\n{total:,} records into {', '.join(topics.values())} produced and merged in "
        f"{time.monotonic() - started:.1f} s"
    )
    return produced


def assert_read_by_every_engine(
    catalog: RestCatalog,
    ingest: IngestProcess,
    duck_dir: Path,
    spark: SparkSession,
    trino: LocalTrino,
    table: str,
    columns: list[str],
    expected: list[tuple[Any, ...]],
) -> None:
    """pyiceberg, DuckDB, Spark and Trino each read exactly `expected` (sorted rows of `columns`; a
    dotted column is a struct's field) while the table still holds position deletes."""
    from maintenance.spark_actions import SparkActions
    from runtime.spark import CatalogConnection

    assert _live_files(catalog, f"{CLUSTER}.{table}").get(1, 0) > 0  # merge-on-read, nothing compacted
    started = time.monotonic()
    rows = catalog.load_table(f"{CLUSTER}.{table}").scan().to_arrow().to_pylist()

    def value(row: dict[str, Any], column: str) -> Any:
        for name in column.split("."):
            row = row[name]
        return row

    assert sorted(tuple(value(r, c) for c in columns) for r in rows) == expected, "pyiceberg"
    selected = ", ".join(columns)
    duck = duck_rows(ingest, duck_dir, f'SELECT {selected} FROM floe.{CLUSTER}."{table}" ORDER BY ALL')
    assert duck == expected, "DuckDB"
    spark_catalog = SparkActions(spark).catalog(
        CatalogConnection(ingest.server.url, "default", *ingest.credential)
    )
    spark_rows = spark.sql(f"SELECT {selected} FROM `{spark_catalog}`.`{CLUSTER}`.`{table}`").collect()
    assert sorted(tuple(r) for r in spark_rows) == expected, "Spark"
    trino_rows = trino.rows(f'SELECT {selected} FROM floe."{CLUSTER}"."{table}" ORDER BY 1')
    assert sorted(tuple(r) for r in trino_rows) == expected, "Trino"
    print(
        f"\n{len(expected):,} rows of {table} read by the four engines in {time.monotonic() - started:.1f} s"
    )


def _one_record(_key: int, _version: int | None, _exists: bool) -> int:
    return 1


def _member(k: int, version: int) -> dict[str, Any]:
    return {"customer_id": k, "region": f"r{k % 7}", "version": version, "email": f"m{k}@v{version}"}


def _member_rows(state: dict[int, int]) -> list[tuple[Any, ...]]:
    return sorted(tuple(_member(k, v).values()) for k, v in state.items())


def _assert_stream_shape(waves: list[list[Change]], state: dict[int, int], records: int) -> None:
    """The stream is the issue's: its records, its keys, and updates and deletes of each."""
    assert records == STREAM_RECORDS
    deletes = sum(1 for changes in waves for _, v in changes if v is None)
    assert 7_000 < deletes < 8_500, deletes
    assert 8_000 < len(state) < STREAM_KEYS
    assert {k % 3 for k in range(STREAM_KEYS) if k not in state} == {0, 1, 2}  # every kind of key


def _avro(schema: Any, record: Any) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


MEMBER_COLUMNS = ["customer_id", "region", "version", "email"]


def test_keyed_stream_as_avro_registry_and_json_inline_ends_in_its_latest_state_for_every_engine(
    kafka: LocalKafka,
    pipeline: Pipeline,
    ingest: IngestProcess,
    admin: httpx.Client,
    catalog: RestCatalog,
    duck_dir: Path,
    spark: SparkSession,
    schema_registry: LocalSchemaRegistry,
    trino: LocalTrino,
) -> None:
    """The issue's stream twice, ingested side by side: registry Avro with Avro-record, bare-Avro and
    text record keys, and inline JSON with JSON-object, number and string record keys."""
    from catalog.pipelines import avro_schema, parse_config

    avro_topic, json_topic = _topic(kafka, "members"), _topic(kafka, "members-json")
    topics = {avro_topic: _table(avro_topic), json_topic: _table(json_topic)}
    table: dict[str, Any] = {
        "table_mode": "upsert",
        "key_fields": ["customer_id"],
        "schema": {"fields": CUSTOMER_FIELDS},
    }
    pipeline.add(
        source_topic=avro_topic,
        source_format="avro",
        schema_mode="registry",
        schema_registry_url=schema_registry.url,
        partitioning_scheme=["bucket(4, customer_id)"],
        **table,
    )
    pipeline.add(source_topic=json_topic, partitioning_scheme=["bucket(4, customer_id)"], **table)
    # The producer's schemas, registered as Confluent serializers do: the value's record, and the key
    # as a record holding the key field (most producers) or a bare long (a primitive key).
    config = parse_config(pipeline.config).table(CLUSTER, topics[avro_topic])
    value_schema = {**avro_schema(config), "name": "Member"}
    key_record = {"type": "record", "name": "MemberKey", "fields": [{"name": "customer_id", "type": "long"}]}
    registry = RegistryClient(schema_registry.url)
    value_id = registry.register(f"{avro_topic}-value", json.dumps(value_schema))
    record_key_id = registry.register(f"{avro_topic}-key", json.dumps(key_record))
    long_key_id = registry.register(f"{avro_topic}.long-key", json.dumps("long"))
    registry.close()
    writer = fastavro.parse_schema(value_schema)

    def avro_key(k: int) -> bytes:
        """By k: an Avro record, a bare Avro long, or the id as text (a key is always the same bytes, so
        always in the same partition)."""
        if k % 3 == 0:
            return encode_confluent(record_key_id, _avro(key_record, {"customer_id": k}))
        if k % 3 == 1:
            return encode_confluent(long_key_id, _avro("long", k))
        return str(k).encode()

    def avro_value(k: int, version: int) -> bytes:
        out = io.BytesIO()
        fastavro.schemaless_writer(out, writer, _member(k, version))
        return encode_confluent(value_id, out.getvalue())

    def json_key(k: int) -> bytes:
        """By k: a JSON object holding the key field, a JSON number, or a JSON string."""
        return [json.dumps({"customer_id": k}), str(k), json.dumps(str(k))][k % 3].encode()

    # Each wave of each topic ends with a tombstone whose key is unusable: an unregistered schema id,
    # a JSON object without customer_id. Both are dead letters.
    unusable: dict[str, Record] = {
        avro_topic: (encode_confluent(999_999, b"\x02"), None),
        json_topic: (b'{"id": 1}', None),
    }
    waves = {
        avro_topic: keyed_stream(31, _one_record, extra=4),
        json_topic: keyed_stream(37, _one_record, extra=4),
    }
    encoders: dict[str, tuple[Callable[[int], bytes], Callable[[int, int], bytes]]] = {
        avro_topic: (functools.cache(avro_key), avro_value),
        json_topic: (json_key, lambda k, v: json.dumps(_member(k, v)).encode()),
    }
    encoded = [
        {
            topic: [
                (encoders[topic][0](k), None if v is None else encoders[topic][1](k, v))
                for k, v in waves[topic][index]
            ]
            + [unusable[topic]]
            for topic in topics
        }
        for index in range(len(waves[avro_topic]))
    ]
    produced = produce_stream(kafka, admin, ingest, topics, encoded)
    for topic, name in topics.items():
        state = stream_state(waves[topic])
        _assert_stream_shape(waves[topic], state, len(produced[topic].records))
        assert_read_by_every_engine(
            catalog, ingest, duck_dir, spark, trino, name, MEMBER_COLUMNS, _member_rows(state)
        )
        dead = catalog.load_table(f"{CLUSTER}.{name}_dlq").scan().to_arrow().to_pylist()
        assert [d["key"] for d in dead] == [unusable[topic][0]] * len(encoded)
        assert all(d["error"].startswith("tombstone without a usable key") for d in dead)
        assert_offsets_chain(catalog, f"{CLUSTER}.{name}", produced[topic].end_offsets())


def _debezium_cost(_key: int, version: int | None, exists: bool) -> int:
    # A delete is the `d` event and the tombstone Debezium sends after it; a tombstone alone stands for a
    # key whose events compaction already removed (the delete of a key never seen).
    return 2 if version is None and exists else 1


def test_debezium_json_with_and_without_schemas_ends_in_the_source_tables_state_for_every_engine(
    kafka: LocalKafka,
    pipeline: Pipeline,
    ingest: IngestProcess,
    admin: httpx.Client,
    catalog: RestCatalog,
    duck_dir: Path,
    spark: SparkSession,
    trino: LocalTrino,
) -> None:
    """The same source table's changes as two connectors write them, JsonConverter's
    `schemas.enable` true (`{"schema", "payload"}` keys and values) and false (payloads only), into two
    tables ingested side by side: a snapshot (`r`), then inserts, updates and deletes."""
    from tests.e2e.debezium_json import json_event, json_key

    fields = [
        {"name": "id", "id": 1, "type": "int"},
        {"name": "first_name", "id": 2, "type": "string"},
        {"name": "last_name", "id": 3, "type": "string"},
        {"name": "email", "id": 4, "type": "string", "optional": True},
    ]
    topics: dict[str, str] = {}
    for name in ("dbserver1.inventory.customers", "dbserver2.inventory.customers"):
        topic = _topic(kafka, name)
        topics[topic] = _table(topic)
        pipeline.add(
            source_topic=topic,
            table_mode="upsert",
            key_fields=["id"],
            envelope="debezium",
            partitioning_scheme=["bucket(4, id)"],
            schema={"fields": fields},
        )
    wrapped, bare = topics

    def row(row_id: int, version: int) -> dict[str, Any]:
        email = None if version % 4 == 0 else f"u{row_id}.{version}@example.com"
        return {"id": row_id, "first_name": f"F{row_id}", "last_name": f"L{version}", "email": email}

    waves = keyed_stream(43, _debezium_cost, extra=2)
    source: dict[int, dict[str, Any]] = {}  # the source database table, as the changes leave it
    last: dict[int, tuple[str, int]] = {}  # row id → op and LSN of its last event
    lsn = 1000
    encoded: list[dict[str, list[Record]]] = []
    for index, changes in enumerate(waves):
        events: list[tuple[int, str, dict[str, Any] | None, dict[str, Any] | None, int] | int] = []
        for row_id, version in changes:
            before = source.get(row_id)
            if version is None and before is None:
                events.append(row_id)  # a tombstone alone
                continue
            lsn += 1
            op = "r" if index == 0 else "d" if version is None else "u" if before else "c"
            after = None if version is None else row(row_id, version)
            events.append((row_id, op, before, after, lsn))
            last[row_id] = (op, lsn)
            if after is None:
                del source[row_id]
            else:
                source[row_id] = after
        wave: dict[str, list[Record]] = {}
        for topic, schemas_enable in ((wrapped, True), (bare, False)):
            records: list[Record] = []
            for found in events:
                if isinstance(found, int):
                    records.append((json_key(found, schemas_enable=schemas_enable), None))
                    continue
                row_id, op, before, after, at = found
                key = json_key(row_id, schemas_enable=schemas_enable)
                records.append((key, json_event(op, before, after, at, schemas_enable=schemas_enable)))
                if op == "d":
                    records.append((key, None))  # Debezium's tombstone after a delete
            wave[topic] = records
        encoded.append(wave)
    # A truncate, and a value that is no change event: dead letters with their reasons.
    truncate = json.dumps({"op": "t", "source": {"ts_ms": 1}, "ts_ms": 2}).encode()
    for topic, schemas_enable in ((wrapped, True), (bare, False)):
        key = json_key(1, schemas_enable=schemas_enable)
        encoded[-1][topic] += [(key, truncate), (key, b'{"id": 1}')]

    produced = produce_stream(kafka, admin, ingest, topics, encoded)
    state = stream_state(waves)
    assert {k: v for k, v in state.items()} == {k: int(r["last_name"][1:]) for k, r in source.items()}
    assert {op for op, _ in last.values()} == {"r", "c", "u", "d"}
    columns = ["id", "first_name", "last_name", "email", "_cdc.op"]
    expected = sorted((*r.values(), last[i][0]) for i, r in source.items())
    for topic, table in topics.items():
        _assert_stream_shape(waves, state, len(produced[topic].records))
        assert_read_by_every_engine(catalog, ingest, duck_dir, spark, trino, table, columns, expected)
        # Each row's `_cdc` is its last event's: op, source.ts_ms and the source block (its LSN).
        rows = catalog.load_table(f"{CLUSTER}.{table}").scan().to_arrow().to_pylist()
        for r in rows:
            op, at = last[r["id"]]
            source_block = dict(r["_cdc"]["source"])
            assert (r["_cdc"]["op"], r["_cdc"]["ts_ms"]) == (op, 1_700_000_000_000 + at)
            assert (source_block["lsn"], source_block["connector"]) == (str(at), "postgresql")
        dead = catalog.load_table(f"{CLUSTER}.{table}_dlq").scan().to_arrow().to_pylist()
        assert sorted(d["error"] for d in dead) == [
            "Debezium op 't' is not applied (only c, r, u and d change rows)",
            "value is not a Debezium change event (no op; for unwrapped rows, e.g. from Debezium's "
            "ExtractNewRecordState, use envelope: none)",
        ]
        assert_offsets_chain(catalog, f"{CLUSTER}.{table}", produced[topic].end_offsets())


# -- keyed by the Kafka record key; the table as of a record time ----------------------------------


def snapshot_at_time_cli(
    ingest: IngestProcess, table: str, timestamp: str
) -> subprocess.CompletedProcess[str]:
    """`floe snapshot-at TABLE --timestamp T` as a user runs it."""
    env = {
        **os.environ,
        "FLOE_URL": ingest.server.url,
        "FLOE_CLIENT_ID": ingest.credential[0],
        "FLOE_CLIENT_SECRET": ingest.credential[1],
    }
    return subprocess.run(
        [sys.executable, "-m", "floe.cli", "snapshot-at", table, "--timestamp", timestamp, "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_record_key_bytes_are_the_key_and_snapshots_answer_by_record_time(
    kafka: LocalKafka,
    pipeline: Pipeline,
    ingest: IngestProcess,
    admin: httpx.Client,
    catalog: RestCatalog,
    duck_dir: Path,
    spark: SparkSession,
) -> None:
    """Keyed by the record key's bytes, partitioned by them (`bucket(4, _key)`): merged, answered by record
    time, then maintained (every delete applied and dropped) with the same rows."""
    from datetime import UTC, datetime

    from pyiceberg.transforms import BucketTransform

    from catalog.kafka_offsets import MAX_TIMESTAMP, MIN_TIMESTAMP
    from catalog.pipelines.columns import KEY_FIELD_ID
    from maintenance.worker import MaintenanceWorker, WorkerOptions

    topic = _topic(kafka, "sessions", partitions=2)
    table = _table(topic)
    name = f"{CLUSTER}.{table}"
    pipeline.add(
        source_topic=topic,
        table_mode="upsert",  # no key_fields: the record key's bytes are the key
        partitioning_scheme=["bucket(4, _key)"],
        schema={
            "fields": [
                {"name": "user", "id": 1, "type": "string"},
                {"name": "version", "id": 2, "type": "int"},
            ]
        },
        maintenance={"cold_after": "1s"},  # cold as soon as ingestion has caught up
    )
    created = catalog.load_table(name)
    assert created.schema().identifier_field_ids == [KEY_FIELD_ID]
    assert [(f.source_id, f.transform) for f in created.spec().fields] == [(KEY_FIELD_ID, BucketTransform(4))]
    rng = random.Random(17)
    # Text keys and binary ones (not UTF-8): the bytes are the key either way.
    keys = [f"user-{k}".encode() for k in range(60)] + [bytes([0xFF, 0x00, k]) for k in range(40)]
    model: dict[bytes, int] = {}
    produced = Produced()

    def value(key: bytes, version: int) -> bytes:
        return json.dumps({"user": key.hex(), "version": version}).encode()

    def wave(records: list[tuple[bytes | None, int | None]]) -> None:
        encoded = [(k, None if v is None else value(k or b"", v)) for k, v in records]
        produce(
            kafka.bootstrap_servers,
            topic,
            (v for _, v in encoded),
            keys=lambda i: encoded[i][0],
            into=produced,
        )
        for k, v in records:
            if k is None:
                continue
            if v is None:
                model.pop(k, None)
            else:
                model[k] = v
        wait_until_committed(admin, CLUSTER, table, topic, produced.end_offsets(), ingest=ingest)

    first: list[tuple[bytes | None, int | None]] = [(k, 1) for k in keys]
    first += [(None, 1), (None, None)]  # no record key: dead letters (a value, and a tombstone)
    wave(first)
    as_of_first = dict(model)
    time.sleep(0.05)
    between = int(time.time() * 1000)  # after every first-wave record's timestamp, before the second's
    time.sleep(0.05)
    second: list[tuple[bytes | None, int | None]] = [(k, 2) for k in rng.sample(keys, 40)]
    second += [(k, None) for k in rng.sample(keys, 25)]
    second += [(b"never-seen", None), (b"brief", 1), (b"brief", 2), (b"brief", None)]
    wave(second)

    rows = catalog.load_table(name).scan().to_arrow().to_pylist()
    assert len(rows) == len({r["_key"] for r in rows}), "a key has two rows"
    assert {r["_key"]: r["version"] for r in rows} == model
    assert all(r["_key"] == r["_kafka"]["key"] and r["user"] == r["_key"].hex() for r in rows)
    duck = duck_rows(ingest, duck_dir, f'SELECT hex(_key), version FROM floe.{CLUSTER}."{table}" ORDER BY 1')
    assert duck == sorted((k.hex().upper(), v) for k, v in model.items())
    dead = catalog.load_table(f"{name}_dlq").scan().to_arrow().to_pylist()
    assert sorted(d["error"] for d in dead) == [
        "record has no key: the table is keyed by the Kafka record key (it has no key_fields)",
        "tombstone without a record key: the table is keyed by the Kafka record key",
    ]
    assert_offsets_chain(catalog, name, produced.end_offsets())

    # Every ingestion snapshot (merges and the dead-letter table's appends) records its record-time range.
    history = sorted(
        (s for s in catalog.load_table(name).snapshots() if s.summary and s.summary[TOPIC]),
        key=lambda s: s.sequence_number or 0,
    )
    for snapshot in [*history, *catalog.load_table(f"{name}_dlq").snapshots()]:
        assert snapshot.summary is not None
        assert int(snapshot.summary[MIN_TIMESTAMP] or "") <= int(snapshot.summary[MAX_TIMESTAMP] or "")
    # The table as of `between`: the newest snapshot whose high-water record time is at or before it,
    # as the summaries say; it holds exactly the first wave's state.
    high, expected = 0, None
    for snapshot in history:
        assert snapshot.summary is not None
        high = max(high, int(snapshot.summary[MAX_TIMESTAMP] or ""))
        if high <= between:
            expected = snapshot
    assert expected is not None
    iso = datetime.fromtimestamp(between / 1000, UTC).isoformat(timespec="milliseconds")
    done = snapshot_at_time_cli(ingest, name, iso)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["snapshot-id"] == expected.snapshot_id
    assert answer["as-of-record-time-ms"] <= between
    as_of = catalog.load_table(name).scan(snapshot_id=answer["snapshot-id"]).to_arrow().to_pylist()
    assert {r["_key"]: r["version"] for r in as_of} == as_of_first
    # After the newest record: not yet (more records up to that time may still come).
    later = snapshot_at_time_cli(ingest, name, str(int(time.time() * 1000) + 60_000))
    assert later.returncode != 0
    assert "yet" in later.stderr

    # The merges spread over the key's buckets; a maintenance pass (its predicates name each bucket of
    # the binary `_key`) applies every delete and drops the delete files, and the rows stay the same.
    files = catalog.load_table(name).inspect.files().to_pylist()
    assert len({f["partition"]["_key_bucket"] for f in files if f["content"] == 0}) == 4
    assert any(f["content"] == 1 for f in files)
    worker = MaintenanceWorker(spark, WorkerOptions(ingest.server.url, *ingest.credential))
    (maintained,) = [t for t in worker.discover() if t.namespace == (CLUSTER,) and t.name == table]
    time.sleep(2)
    quiet = worker.maintain(maintained, scan_orphans=False)
    worker.close()
    assert not quiet.failed, quiet.summary()
    assert quiet.after is not None
    assert quiet.after.delete_files == 0, quiet.summary()
    assert set(_live_files(catalog, name)) == {0}
    rows = catalog.load_table(name).scan().to_arrow().to_pylist()
    assert {r["_key"]: r["version"] for r in rows} == model
    duck = duck_rows(ingest, duck_dir, f'SELECT hex(_key), version FROM floe.{CLUSTER}."{table}" ORDER BY 1')
    assert duck == sorted((k.hex().upper(), v) for k, v in model.items())


# -- Debezium Avro through the registry ------------------------------------------------------------


def test_debezium_avro_events_through_the_registry_end_in_the_source_tables_state(
    kafka: LocalKafka,
    pipeline: Pipeline,
    ingest: IngestProcess,
    admin: httpx.Client,
    catalog: RestCatalog,
    duck_dir: Path,
    schema_registry: LocalSchemaRegistry,
) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from tests.e2e.debezium_avro import ENVELOPE, KEY, event

    topic = _topic(kafka, "dbserver1.inventory.customers")
    table = _table(topic)
    pipeline.add(
        source_topic=topic,
        source_format="avro",
        schema_mode="registry",
        schema_registry_url=schema_registry.url,
        table_mode="upsert",
        key_fields=["id"],
        envelope="debezium",
        schema={
            "fields": [
                {"name": "id", "id": 1, "type": "int"},
                {"name": "first_name", "id": 2, "type": "string"},
                {"name": "last_name", "id": 3, "type": "string"},
                {"name": "email", "id": 4, "type": "string", "optional": True},
            ]
        },
    )
    # Serialized as Debezium's AvroConverter does: Confluent framing, schemas registered under
    # <topic>-key and <topic>-value.
    registry = SchemaRegistryClient({"url": schema_registry.url})
    values = AvroSerializer(registry, json.dumps(ENVELOPE))
    keys = AvroSerializer(registry, json.dumps(KEY))
    value_context = SerializationContext(topic, MessageField.VALUE)
    key_context = SerializationContext(topic, MessageField.KEY)
    source: dict[int, dict[str, Any]] = {}
    last: dict[int, tuple[str, int]] = {}
    lsn = 5000
    rng = random.Random(23)
    produced = Produced()

    def change(op: str, row_id: int, after: dict[str, Any] | None) -> list[tuple[bytes, bytes | None]]:
        nonlocal lsn
        lsn += 1
        before = source.get(row_id)
        if after is None:
            del source[row_id]
        else:
            source[row_id] = after
        last[row_id] = (op, lsn)
        key = keys({"id": row_id}, key_context)
        assert key is not None
        records: list[tuple[bytes, bytes | None]] = [
            (key, values(event(op, before, after, lsn), value_context))
        ]
        if op == "d":
            records.append((key, None))  # Debezium's tombstone after a delete
        return records

    def row(row_id: int, n: int) -> dict[str, Any]:
        email = None if n % 3 == 0 else f"u{row_id}.{n}@example.com"
        return {"id": row_id, "first_name": f"F{row_id}", "last_name": f"L{n}", "email": email}

    waves = [[r for i in range(1, 81) for r in change("r", i, row(i, 1))]]
    for wave in range(2, 4):
        records: list[tuple[bytes, bytes | None]] = []
        for _ in range(60):
            row_id = rng.randrange(1, 100)
            if row_id not in source:
                records += change("c", row_id, row(row_id, wave))
            elif rng.random() < 0.25:
                records += change("d", row_id, None)
            else:
                records += change("u", row_id, row(row_id, wave * 100 + rng.randrange(100)))
        waves.append(records)
    truncate = values({**event("t", None, None, lsn + 1)}, value_context)
    waves[-1].append((keys({"id": 1}, key_context) or b"", truncate))  # a truncate: a dead letter
    for records in waves:
        _produce_wave(kafka, topic, produced, records)
        wait_until_committed(admin, CLUSTER, table, topic, produced.end_offsets(), ingest=ingest)

    assert {op for op, _ in last.values()} >= {"r", "c", "u", "d"}
    rows = catalog.load_table(f"{CLUSTER}.{table}").scan().to_arrow().to_pylist()
    assert {r["id"]: {k: r[k] for k in ("id", "first_name", "last_name", "email")} for r in rows} == source
    for r in rows:
        op, at = last[r["id"]]
        assert r["_cdc"]["op"] == op
        assert r["_cdc"]["ts_ms"] == 1_700_000_000_000 + at
        block = dict(r["_cdc"]["source"])
        assert (block["lsn"], block["connector"], block["table"]) == (str(at), "postgresql", "customers")
        assert block["snapshot"] == ("true" if op == "r" else "false")
    duck = duck_rows(
        ingest,
        duck_dir,
        f'SELECT id, first_name, last_name, email, _cdc.op FROM floe.{CLUSTER}."{table}" ORDER BY 1',
    )
    assert duck == [
        (i, v["first_name"], v["last_name"], v["email"], last[i][0]) for i, v in sorted(source.items())
    ]
    dead = catalog.load_table(f"{CLUSTER}.{table}_dlq").scan().to_arrow().to_pylist()
    assert [d["error"] for d in dead] == ["Debezium op 't' is not applied (only c, r, u and d change rows)"]
    assert_offsets_chain(catalog, f"{CLUSTER}.{table}", produced.end_offsets())
