"""`floe replay` end to end: real Kafka, the real shared ingestion writing the same tables while the
replay runs, floe on PostgreSQL, and the replay killed (SIGKILL) just before and just after its commit:
every record ends in the data table or the dead-letter table exactly once, rows outside the range are
untouched; a range the topic no longer retains is refused."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient
from pyiceberg.catalog.rest import RestCatalog

from devtools.catalog_server import CatalogProcess
from devtools.kafka_broker import LocalKafka
from devtools.postgres import LocalPostgres
from floe.cli import main
from ingest.replay import CRASH_AFTER_COMMIT, CRASH_BEFORE_COMMIT
from ingest.table_rewrite import FAULT_ENV
from tests.e2e.ingest_harness import (
    IngestProcess,
    Pipeline,
    admin_client,
    committed_offsets,
    produce,
    wait_until_committed,
)
from tests.e2e.test_dlq_redrive import BIG, _Producing, _schema

pytestmark = pytest.mark.e2e

CLUSTER = "replay"
FROM, TO = 10, 40  # the replayed offsets of every partition: [10, 40)


@pytest.fixture(scope="module")
def server(postgres: LocalPostgres, tmp_path_factory: pytest.TempPathFactory) -> Iterator[CatalogProcess]:
    url = postgres.create_database(f"floe_replay_{uuid.uuid4().hex[:8]}")
    with CatalogProcess(url, home=tmp_path_factory.mktemp("replay-floe")) as process:
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


def _replay_killed(server: CatalogProcess, table: str, fault: str) -> subprocess.CompletedProcess[str]:
    """`floe replay` in a process of its own that kills itself (SIGKILL) at `fault`."""
    env = {**os.environ, **_environment(server), FAULT_ENV: fault}
    command = [
        sys.executable,
        "-m",
        "floe.cli",
        "replay",
        "--table",
        table,
        "--from",
        str(FROM),
        "--to",
        str(TO),
    ]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=False)


def _replay(server: CatalogProcess, table: str, *args: str) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["replay", "--table", table, "--json", *args], env=_environment(server))
    assert result.exit_code == 0, result.output
    counts: dict[str, Any] = json.loads(result.stdout)
    return counts


def _state(catalog: RestCatalog, name: str) -> tuple[dict[tuple[int, int], Any], dict[tuple[int, int], Any]]:
    """The data table's rows and the dead-letter table's dead letters by (partition, offset) (lists, so
    a record held twice shows)."""
    rows: dict[tuple[int, int], Any] = {}
    for row in catalog.load_table(name).scan().to_arrow().to_pylist():
        rows.setdefault((row["_kafka"]["partition"], row["_kafka"]["offset"]), []).append(row)
    dead: dict[tuple[int, int], Any] = {}
    for letter in catalog.load_table(f"{name}_dlq").scan().to_arrow().to_pylist():
        dead.setdefault((letter["partition"], letter["offset"]), []).append(letter)
    return rows, dead


def _inside(key: tuple[int, int]) -> bool:
    return FROM <= key[1] < TO


def test_replay_after_widening_replaces_the_range_once_across_kill_9(
    kafka: LocalKafka, server: CatalogProcess, admin: httpx.Client, pipeline: Pipeline, tmp_path: Path
) -> None:
    topic = f"replay-orders.{uuid.uuid4().hex[:6]}"
    kafka.create_topic(topic, 2)
    table = topic.replace(".", "_").replace("-", "_")
    name = f"{CLUSTER}.{table}"
    table_config = {"source_topic": topic, "source_format": "json", "schema_mode": "inline"}
    pipeline.add(**table_config, schema=_schema("int"))
    catalog: RestCatalog = server.catalog()
    args = ["--commit-interval", "1", "--cluster", CLUSTER]
    with IngestProcess(server, tmp_path / "ingest", args=args) as ingest:
        # Every fifth amount does not fit an int: dead letters until the widening.
        values = [json.dumps({"id": i, "amount": BIG if i % 5 == 0 else i}).encode() for i in range(120)]
        produced = produce(kafka.bootstrap_servers, topic, values)
        wait_until_committed(admin, CLUSTER, table, topic, produced.end_offsets(), ingest=ingest)
        before_rows, before_dead = _state(catalog, name)
        inside = {k for k in produced.records if _inside(k)}
        assert any(k in before_dead for k in inside)

        pipeline.add(**table_config, schema=_schema("long"))  # the fix: amount widened to long
        producing = _Producing(kafka, topic, produced)
        try:
            counts = _replay(server, name, "--from", str(FROM), "--to", str(TO), "--dry-run")
            assert counts["records"] == len(inside)
            assert (counts["rows"], counts["dead-letters"], counts["commits"]) == (len(inside), 0, 0)
            assert counts["range"] == {"0": [FROM, TO], "1": [FROM, TO]}

            # Killed with its files written, before the commit: nothing of it lands.
            killed = _replay_killed(server, name, CRASH_BEFORE_COMMIT)
            assert killed.returncode == -signal.SIGKILL, killed.stderr
            rows, dead = _state(catalog, name)
            assert {k: v for k, v in rows.items() if _inside(k)} == {
                k: v for k, v in before_rows.items() if _inside(k)
            }
            assert {k for k in dead if _inside(k)} == {k for k in before_dead if _inside(k)}

            # Killed just after floe accepted the commit: it landed, once.
            killed = _replay_killed(server, name, CRASH_AFTER_COMMIT)
            assert killed.returncode == -signal.SIGKILL, killed.stderr
            rows, dead = _state(catalog, name)
            assert not any(_inside(k) for k in dead)
            assert all(len(rows[k]) == 1 for k in inside)

            # Run again: the range's rows replaced again, nothing doubled.
            counts = _replay(server, name, "--from", str(FROM), "--to", str(TO))
            assert (counts["rows-replaced"], counts["dead-letters-replaced"]) == (len(inside), 0)
            assert counts["commits"] == 1
        finally:
            producing.stop()
        wait_until_committed(admin, CLUSTER, table, topic, produced.end_offsets(), ingest=ingest)

    rows, dead = _state(catalog, name)
    # Every produced record exactly once, in the data table or the dead-letter table.
    assert all(len(v) == 1 for v in rows.values())
    assert all(len(v) == 1 for v in dead.values())
    assert sorted([*rows, *dead]) == sorted(produced.records)
    # The range's records decode now: their amounts, their own Kafka columns.
    for key in inside:
        [row] = rows[key]
        value = json.loads(produced.records[key][1] or b"")
        assert (row["id"], row["amount"]) == (value["id"], value["amount"])
        assert row["_kafka"]["key"] == produced.records[key][0]
    # Outside the range nothing changed: the same rows and dead letters as ingestion wrote them.
    assert {k: v for k, v in rows.items() if k in before_rows and not _inside(k)} == {
        k: v for k, v in before_rows.items() if not _inside(k)
    }
    assert {k for k in before_dead if not _inside(k)} <= set(dead)
    # The offsets fence is untouched: the table's offsets are where ingestion took them.
    assert committed_offsets(admin, CLUSTER, table, topic) == produced.end_offsets()
    # The audit log shows both replays that landed, with their counts (and any refused attempts: 409s
    # while ingestion moved the table, outcome "failed").
    audit = admin.get(
        "/management/v1/audit",
        params={"action": "commitTransaction", "target": "replayed=", "outcome": "ok"},
    ).json()["entries"]
    replays = [e["target"] for e in audit if name in e["target"] and e["outcome"] == "ok"]
    assert len(replays) == 2, replays
    assert all(f"replayed={len(inside)} rows={len(inside)} dead-letters=0" in t for t in replays)


def test_a_range_the_topic_no_longer_retains_is_refused(
    kafka: LocalKafka, server: CatalogProcess, admin: httpx.Client, pipeline: Pipeline, tmp_path: Path
) -> None:
    topic = f"replay-gone.{uuid.uuid4().hex[:6]}"
    kafka.create_topic(topic, 1)
    table = topic.replace(".", "_").replace("-", "_")
    name = f"{CLUSTER}.{table}"
    pipeline.add(source_topic=topic, source_format="json", schema_mode="inline", schema=_schema("long"))
    with IngestProcess(
        server, tmp_path / "ingest", args=["--commit-interval", "1", "--cluster", CLUSTER]
    ) as ingest:
        values = [json.dumps({"id": i, "amount": i}).encode() for i in range(20)]
        produced = produce(kafka.bootstrap_servers, topic, values)
        wait_until_committed(admin, CLUSTER, table, topic, produced.end_offsets(), ingest=ingest)
    # Retention removed the first 10 records (as time or size retention does, at once).
    client = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
    [future] = client.delete_records([TopicPartition(topic, 0, 10)]).values()
    future.result(30)
    refused = CliRunner().invoke(main, ["replay", "--table", name, "--from", "5"], env=_environment(server))
    assert refused.exit_code == 1, refused.output
    assert "no longer holds partition 0's offsets 5 to 9" in refused.output
    assert "earliest retained offset is 10" in refused.output
    assert len(server.catalog().load_table(name).scan().to_arrow()) == 20
    # From what it still holds, the replay goes.
    counts = _replay(server, name, "--from", "0:10", "--dry-run")
    assert (counts["records"], counts["rows-replaced"], counts["range"]) == (10, 10, {"0": [10, 20]})
    # A table that is not in floe.yaml is refused, saying so.
    unknown = CliRunner().invoke(
        main, ["replay", "--table", f"{CLUSTER}.nope", "--from", "0"], env=_environment(server)
    )
    assert unknown.exit_code == 1
    assert "not a table of the applied floe.yaml" in unknown.output
