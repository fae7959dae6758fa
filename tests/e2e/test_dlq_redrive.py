"""`floe dlq redrive` end to end: real Kafka, the real shared ingestion writing the same tables while
the redrive runs, floe on PostgreSQL, and the redrive killed (SIGKILL) just before and just after its
commit: every record ends in the data table or the dead-letter table exactly once."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest
from click.testing import CliRunner
from pyiceberg.catalog.rest import RestCatalog

from catalog import faults
from catalog.pipelines import dlq_schema
from devtools.catalog_server import CatalogProcess
from devtools.kafka_broker import LocalKafka
from devtools.postgres import LocalPostgres
from floe.cli import main
from ingest.dlq_redrive import CRASH_AFTER_COMMIT, CRASH_BEFORE_COMMIT, FAULT_ENV
from tests.e2e.ingest_harness import (
    IngestProcess,
    Pipeline,
    Produced,
    admin_client,
    committed_offsets,
    produce,
    wait_until_committed,
)

pytestmark = pytest.mark.e2e

CLUSTER = "redrive"
BIG = 3_000_000_000  # does not fit an int: a dead letter until `amount` is widened to long


def _schema(amount: str) -> dict[str, Any]:
    return {
        "fields": [
            {"name": "id", "id": 1, "type": "long"},
            {"name": "amount", "id": 2, "type": amount, "optional": True},
        ]
    }


@pytest.fixture(scope="module")
def server(postgres: LocalPostgres, tmp_path_factory: pytest.TempPathFactory) -> Iterator[CatalogProcess]:
    url = postgres.create_database(f"floe_redrive_{uuid.uuid4().hex[:8]}")
    with CatalogProcess(url, home=tmp_path_factory.mktemp("redrive-floe")) as process:
        yield process


@pytest.fixture(scope="module")
def admin(server: CatalogProcess) -> Iterator[httpx.Client]:
    with admin_client(server) as client:
        yield client


@pytest.fixture(scope="module")
def pipeline(kafka: LocalKafka, admin: httpx.Client) -> Pipeline:
    return Pipeline(kafka.bootstrap_servers, admin, [CLUSTER], CLUSTER)


def _environment(server: CatalogProcess) -> dict[str, str]:
    """The command's environment as a user sets it: credentials there, never on the command line."""
    return {
        "FLOE_URL": server.url,
        "FLOE_CLIENT_ID": server.admin_client_id,
        "FLOE_CLIENT_SECRET": server.admin_client_secret,
    }


def _redrive_killed(server: CatalogProcess, table: str, fault: str) -> subprocess.CompletedProcess[str]:
    """`floe dlq redrive` in a process of its own that kills itself (SIGKILL) at `fault`."""
    env = {**os.environ, **_environment(server), FAULT_ENV: fault}
    command = [sys.executable, "-m", "floe.cli", "dlq", "redrive", "--table", table]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=False)


def _redrive(server: CatalogProcess, table: str, *args: str) -> dict[str, Any]:
    """`floe dlq redrive --json` (in this process: a process start is seconds on a busy machine)."""
    result = CliRunner().invoke(
        main, ["dlq", "redrive", "--table", table, "--json", *args], env=_environment(server)
    )
    assert result.exit_code == 0, result.output
    counts: dict[str, Any] = json.loads(result.stdout)
    return counts


class _Producing:
    """Records to `topic` on a thread, a few of them dead letters (ingestion commits both tables meanwhile),
    until stopped."""

    def __init__(self, kafka: LocalKafka, topic: str, produced: Produced) -> None:
        self._stop = threading.Event()

        def run() -> None:
            i = 10_000
            while not self._stop.is_set():
                # Every third batch starts with a new dead letter: the dead-letter table moves too.
                values = [
                    json.dumps({"id": i + j, "amount": "abc" if j == 0 and i % 30 == 0 else 1}).encode()
                    for j in range(10)
                ]
                produce(kafka.bootstrap_servers, topic, values, into=produced)
                i += 10
                time.sleep(0.2)

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


def test_redrive_after_widening_lands_each_record_once_across_kill_9(
    kafka: LocalKafka, server: CatalogProcess, admin: httpx.Client, pipeline: Pipeline, tmp_path: Path
) -> None:
    topic = f"redrive-orders.{uuid.uuid4().hex[:6]}"
    kafka.create_topic(topic, 2)
    table = topic.replace(".", "_").replace("-", "_")
    name, dlq_name = f"{CLUSTER}.{table}", f"{CLUSTER}.{table}_dlq"
    table_config = {"source_topic": topic, "source_format": "json", "schema_mode": "inline"}
    pipeline.add(**table_config, schema=_schema("int"))
    catalog: RestCatalog = server.catalog()
    args = ["--commit-interval", "1", "--cluster", CLUSTER]
    with IngestProcess(server, tmp_path / "ingest", args=args) as ingest:
        values = []
        for i in range(120):
            values.append(json.dumps({"id": i, "amount": i}).encode())
            if i % 6 == 0:  # 20 records whose amount does not fit an int
                values.append(json.dumps({"id": 1000 + i, "amount": BIG}).encode())
            if i % 24 == 0:  # 5 whose amount is no number at all
                values.append(json.dumps({"id": 2000 + i, "amount": "abc"}).encode())
        produced = produce(kafka.bootstrap_servers, topic, values)
        wait_until_committed(admin, CLUSTER, table, topic, produced.end_offsets(), ingest=ingest)
        assert len(catalog.load_table(dlq_name).scan().to_arrow()) == 25

        pipeline.add(**table_config, schema=_schema("long"))  # the fix: amount widened to long
        producing = _Producing(kafka, topic, produced)
        try:
            counts = _redrive(server, name, "--dry-run")
            assert (counts["redriven"], counts["commits"]) == (20, 0)
            assert counts["still-failing"] >= 5

            # Killed with its files written, before the commit: nothing of it lands.
            killed = _redrive_killed(server, name, CRASH_BEFORE_COMMIT)
            assert killed.returncode == -signal.SIGKILL, killed.stderr
            assert _ids_with_big_amounts(catalog, name) == []
            assert len(catalog.load_table(dlq_name).scan().to_arrow()) >= 25

            # Killed just after floe accepted the commit: it landed, once.
            killed = _redrive_killed(server, name, CRASH_AFTER_COMMIT)
            assert killed.returncode == -signal.SIGKILL, killed.stderr
            assert sorted(_ids_with_big_amounts(catalog, name)) == [1000 + i for i in range(0, 120, 6)]

            # Run again: nothing left to redrive, nothing lands twice.
            counts = _redrive(server, name)
            assert (counts["redriven"], counts["reasons-changed"]) == (0, 0)
        finally:
            producing.stop()
        wait_until_committed(admin, CLUSTER, table, topic, produced.end_offsets(), ingest=ingest)

    rows = catalog.load_table(name).scan().to_arrow().to_pylist()
    dead = catalog.load_table(dlq_name).scan().to_arrow().to_pylist()
    landed = [(r["_kafka"]["partition"], r["_kafka"]["offset"]) for r in rows]
    kept = [(d["partition"], d["offset"]) for d in dead]
    # Every produced record exactly once, in the data table or the dead-letter table.
    assert len(landed) == len(set(landed))
    assert sorted(landed + kept) == sorted(produced.records)
    # The redriven rows carry the record's own Kafka columns, as ingestion's rows do.
    for row in rows:
        partition, offset = row["_kafka"]["partition"], row["_kafka"]["offset"]
        key, value = produced.records[(partition, offset)]
        assert json.loads(value or b"")["id"] == row["id"]
        assert row["_kafka"]["key"] == key
    # What still fails stays, with the reason under the current schema: every "abc" record.
    assert {d["error"] for d in dead} == {"field 'amount': expected long, got string \"abc\""}
    failing = {k for k, (_, v) in produced.records.items() if json.loads(v or b"")["amount"] == "abc"}
    assert set(kept) == failing
    # The offsets fence is untouched: both tables' offsets are where ingestion took them.
    assert committed_offsets(admin, CLUSTER, table, topic) == produced.end_offsets()
    dlq_ends: dict[int, int] = {}  # after the last record that was ever a dead letter, per partition
    for (partition, offset), (_, value) in produced.records.items():
        if json.loads(value or b"")["amount"] not in ("abc", BIG):
            continue
        dlq_ends[partition] = max(dlq_ends.get(partition, 0), offset + 1)
    assert committed_offsets(admin, CLUSTER, f"{table}_dlq", topic) == dlq_ends
    # The audit log shows the redrive's commit with its counts.
    audit = admin.get(
        "/management/v1/audit", params={"action": "commitTransaction", "target": "redriven="}
    ).json()["entries"]
    targets = [entry["target"] for entry in audit]
    redrives = [t for t in targets if name in t and f"{table}_dlq" in t and "redriven=20 still-failing=" in t]
    assert redrives, targets
    # A table that is not in floe.yaml is refused, saying so.
    refused = CliRunner().invoke(
        main, ["dlq", "redrive", "--table", f"{CLUSTER}.nope"], env=_environment(server)
    )
    assert refused.exit_code == 1
    assert "not a table of the applied floe.yaml" in refused.output


def _ids_with_big_amounts(catalog: RestCatalog, name: str) -> list[int]:
    rows = catalog.load_table(name).scan(selected_fields=("id", "amount")).to_arrow().to_pylist()
    return [r["id"] for r in rows if r["amount"] == BIG]


def test_a_catalog_killed_after_committing_the_redrive_leaves_it_landed_once(
    kafka: LocalKafka, server: CatalogProcess, pipeline: Pipeline
) -> None:
    """floe killed (SIGKILL) right after the redrive's transaction committed, before answering: the
    redrive cannot learn the outcome and says so; run again against floe, it finds the commit landed."""
    topic = f"redrive-lost.{uuid.uuid4().hex[:6]}"
    kafka.create_topic(topic, 1)
    table = topic.replace(".", "_").replace("-", "_")
    name, dlq_name = f"{CLUSTER}.{table}", f"{CLUSTER}.{table}_dlq"
    pipeline.add(source_topic=topic, source_format="json", schema_mode="inline", schema=_schema("long"))
    catalog: RestCatalog = server.catalog()
    at = dt.datetime(2026, 11, 28, 9, tzinfo=dt.UTC)
    values = [b'{"id": 1, "amount": 3000000000}', b'{"id": 2, "amount": 4000000000}', b'{"id": "x"}']
    letters = [
        {
            "topic": topic,
            "partition": 0,
            "offset": n,
            "timestamp": at,
            "key": None,
            "value": value,
            "headers": None,
            "error": "field 'amount': expected int (does not fit int)",
            "failed_at": at,
        }
        for n, value in enumerate(values)
    ]
    catalog.load_table(dlq_name).append(pa.Table.from_pylist(letters, schema=dlq_schema().as_arrow()))
    env = {
        "FLOE_ADMIN_CLIENT_ID": server.admin_client_id,
        "FLOE_ADMIN_CLIENT_SECRET": server.admin_client_secret,
        faults.FAULT_ENV: faults.CRASH_AFTER_COMMIT,
    }
    doomed = CatalogProcess(server.database_url, home=server.home, env=env).start(timeout=300)
    try:
        lost = CliRunner().invoke(
            main, ["dlq", "redrive", "--table", name], env={**_environment(server), "FLOE_URL": doomed.url}
        )
        assert lost.exit_code == 1, lost.output
        assert "answer to the redrive commit was lost" in lost.output
        assert doomed.process is not None
        assert doomed.process.wait(timeout=30) == -signal.SIGKILL
    finally:
        doomed.stop()
    counts = _redrive(server, name)
    assert (counts["redriven"], counts["still-failing"], counts["commits"]) == (0, 1, 0)
    rows = catalog.load_table(name).scan().to_arrow().to_pylist()
    assert sorted((r["id"], r["_kafka"]["offset"]) for r in rows) == [(1, 0), (2, 1)]
    assert [d["offset"] for d in catalog.load_table(dlq_name).scan().to_arrow().to_pylist()] == [2]
