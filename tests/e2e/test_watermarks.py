"""Completeness watermarks end to end (docs/watermarks.md): real Kafka, `floe ingest` (the shared
consumer) reporting the broker's end offsets, floe on PostgreSQL deriving the watermark, `floe wait`
as an orchestrator runs it (a subprocess under a reader key), and a DuckDB query started only once
the wait returns, which must see every record timestamped before the waited-for time.

One scenario, kept short: records in both partitions, wait; ingestion killed, records in partition 0
only (partition 1 idle from then on), a wait that times out with exit 2 and the current watermark,
a wait started while ingestion is down that returns after it restarts — through the idle partition.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from confluent_kafka import KafkaError, Message, Producer

from devtools.catalog_server import CatalogProcess
from devtools.kafka_broker import LocalKafka
from devtools.postgres import LocalPostgres
from tests.e2e.duckdb_client import attach_catalog, connect
from tests.e2e.ingest_harness import IngestProcess, Pipeline, admin_client

pytestmark = pytest.mark.e2e

CLUSTER = "wm"
ID_SCHEMA = {"fields": [{"name": "id", "id": 1, "type": "long"}]}


@pytest.fixture(scope="module")
def server(postgres: LocalPostgres, tmp_path_factory: pytest.TempPathFactory) -> Iterator[CatalogProcess]:
    url = postgres.create_database(f"floe_wm_{uuid.uuid4().hex[:8]}")
    with CatalogProcess(url, home=tmp_path_factory.mktemp("wm-floe")) as process:
        yield process


@pytest.fixture(scope="module")
def admin(server: CatalogProcess) -> Iterator[httpx.Client]:
    with admin_client(server) as client:
        yield client


# (partition, offset) → Kafka timestamp (epoch ms), as the broker acknowledged each record.
Produced = dict[tuple[int, int], int]


def produce(bootstrap: str, topic: str, ids: range, partition: int | None = None) -> Produced:
    """Produce `{"id": i}` for each id (to `partition`, else by key), waiting for every acknowledgement."""
    produced: Produced = {}
    errors: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})

    def delivered(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            errors.append(error)
            return
        produced[(message.partition() or 0, message.offset() or 0)] = message.timestamp()[1]

    for i in ids:
        producer.produce(
            topic,
            value=json.dumps({"id": i}).encode(),
            key=str(i).encode(),
            on_delivery=delivered,
            partition=-1 if partition is None else partition,
        )
    producer.flush(60)
    assert not errors, errors
    return produced


def floe_wait(
    server: CatalogProcess, key_file: Path, table: str, until_ms: int, timeout: str
) -> subprocess.Popen[str]:
    env = {**os.environ, "FLOE_URL": server.url}
    for name in ("FLOE_CLIENT_ID", "FLOE_CLIENT_SECRET"):
        env.pop(name, None)
    command = [sys.executable, "-m", "floe.cli", "wait", "--key-file", str(key_file), "--table", table]
    command += ["--until", str(until_ms), "--timeout", timeout]
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finished(process: subprocess.Popen[str], timeout: float) -> tuple[int, str]:
    output, _ = process.communicate(timeout=timeout)
    return process.returncode, output


def test_floe_wait_then_duckdb_sees_every_record_before_the_time(
    kafka: LocalKafka, server: CatalogProcess, admin: httpx.Client, tmp_path: Path
) -> None:
    topic = f"wm-events.{uuid.uuid4().hex[:6]}"
    kafka.create_topic(topic, 2)
    table = topic.replace(".", "_").replace("-", "_")
    pipeline = Pipeline(kafka.bootstrap_servers, admin, [CLUSTER], CLUSTER)
    pipeline.add(source_topic=topic, source_format="json", schema_mode="inline", schema=ID_SCHEMA)
    created = admin.post("/management/v1/keys", json={"role": "reader", "cluster": CLUSTER})
    assert created.status_code == 201, created.text
    key_file = tmp_path / "reader.json"
    key_file.write_text(json.dumps({k: created.json()[k] for k in ("client_id", "client_secret")}))
    name = f"{CLUSTER}.{table}"
    args = ["--commit-interval", "1", "--cluster", CLUSTER]

    ingest = IngestProcess(server, tmp_path / "ingest-1", args=args).start()
    try:
        produced = produce(kafka.bootstrap_servers, topic, range(40))
        assert {p for p, _ in produced} == {0, 1}
        first_until = max(produced.values()) + 1
        code, output = finished(floe_wait(server, key_file, name, first_until, "120s"), 150)
        assert code == 0, output + ingest.log_text()[-3000:]
        assert f"{name} is complete through" in output
    finally:
        ingest.kill()

    # Ingestion down: records in partition 0 only; partition 1 stays idle from here on.
    produced |= produce(kafka.bootstrap_servers, topic, range(40, 60), partition=0)
    until = max(produced.values()) + 1
    code, output = finished(floe_wait(server, key_file, name, until, "2s"), 60)
    assert code == 2, output
    assert "timed out after 2s" in output
    assert "watermark " in output
    assert "no time yet" not in output

    waiting = floe_wait(server, key_file, name, until, "180s")  # started before ingestion returns
    with IngestProcess(server, tmp_path / "ingest-2", args=args) as ingest:
        code, output = finished(waiting, 200)
        assert code == 0, output + ingest.log_text()[-3000:]
        # The orchestrated query, started only now: every record timestamped before `until` is there.
        duck = connect(tmp_path / "duckdb")
        attach_catalog(
            duck,
            endpoint=server.url,
            warehouse="default",
            client_id=created.json()["client_id"],
            client_secret=created.json()["client_secret"],
        )
        rows = duck.execute(
            f'SELECT _kafka.partition, _kafka.offset FROM floe.{CLUSTER}."{table}" '
            "WHERE epoch_ms(_kafka.timestamp) < ?",
            [until],
        ).fetchall()
    expected = {position for position, at in produced.items() if at < until}
    assert len(expected) == 60
    assert sorted(rows) == sorted(expected)
    watermark = admin.get(
        "/management/v1/watermark", params={"warehouse": "default", "namespace": CLUSTER, "table": table}
    ).json()
    assert watermark["watermark-ms"] >= until
    idle = next(p for p in watermark["topics"][0]["partitions"] if p["partition"] == 1)
    assert idle["committed-offset"] == idle["end-offset"]  # caught up, nothing new since the restart
