"""Commit events on PostgreSQL with a real Kafka and real `floe serve` processes (issue 35 item 4).

- The store's outbox on PostgreSQL (its one-statement commit path is PostgreSQL's alone): one row per
  change that landed, none for one that did not (the scenario of tests/unit/test_commit_events.py).
- Through the REST API: every change (create, commits with snapshots, a multi-table transaction, a
  schema change, a rename, a drop) is one event on the cluster's topic; duplicates only ever share
  their id; a refused commit (409) has none; the outbox is empty afterwards.
- kill -9 of the only catalog right after a commit's transaction, before anything was sent: the
  event waits in the outbox, not in Kafka, and is sent after the restart with the outbox row's id.
- kill -9 of the only catalog after the broker acknowledged an event, before the outbox forgot it:
  it is sent again after the restart, with the same id (at least once; consumers deduplicate by id).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, KafkaException

from catalog.faults import CRASH_AFTER_COMMIT, CRASH_AFTER_EVENTS_SENT, FAULT_ENV
from catalog.migrations import upgrade_database
from devtools.catalog_server import CatalogProcess
from devtools.kafka_broker import LocalKafka
from devtools.postgres import LocalPostgres
from tests.api.test_rest_api import PREFIX, SCHEMA, set_prop, snapshot_update
from tests.e2e.test_commit_faults import START_TIMEOUT, client, query, serving
from tests.unit.test_commit_events import check_scenario, outbox_scenario

CLUSTER = "evc"
TOPIC = f"floe.events.{CLUSTER}"


@pytest.fixture(scope="module")
def database(postgres: LocalPostgres) -> str:
    return postgres.create_database(f"floe_{uuid.uuid4().hex[:8]}")


def events_env(kafka: LocalKafka) -> dict[str, str]:
    return {
        "FLOE_EVENTS_KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers,
        "FLOE_EVENTS_TOPIC": "floe.events.{cluster}",
        "FLOE_EVENTS_POLL_INTERVAL_SECONDS": "0.5",
    }


@pytest.fixture(scope="module")
def server(database: str, kafka: LocalKafka) -> Iterator[CatalogProcess]:
    kafka.create_topic(TOPIC, 3, exist_ok=True)
    with serving(CatalogProcess(database, env=events_env(kafka))) as running:
        yield running


def read_events(kafka: LocalKafka, *, until: Any, seconds: float = 60) -> list[dict[str, Any]]:
    """Every event on the topic from its start, read until `until(events)` holds or `seconds` pass."""
    consumer = Consumer(
        {
            "bootstrap.servers": kafka.bootstrap_servers,
            "group.id": f"test-{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([TOPIC])
    events: list[dict[str, Any]] = []
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline and not until(events):
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is not None:
                raise KafkaException(message.error())
            headers = dict(message.headers() or [])
            assert headers["content-type"] == b"application/cloudevents+json; charset=UTF-8"
            value = message.value()
            assert value is not None
            events.append(json.loads(value))
    finally:
        consumer.close()
    return events


def of_table(events: list[dict[str, Any]], namespace: str) -> list[dict[str, Any]]:
    """The events of one namespace's tables, each id once (duplicates must be identical), by id."""
    by_id: dict[str, dict[str, Any]] = {}
    for event in events:
        if event["data"]["namespace"][:2] != [CLUSTER, namespace]:
            continue
        assert by_id.setdefault(event["id"], event) == event, "a duplicate differs from its first copy"
    return sorted(by_id.values(), key=lambda event: int(event["id"]))


def append(http: httpx.Client, table: str, snapshot_id: int, *, parent: int | None) -> httpx.Response:
    metadata = http.get(table).json()["metadata"]
    return http.post(
        table,
        json={
            "requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": parent}],
            "updates": [
                snapshot_update(
                    snapshot_id, metadata["last-sequence-number"] + 1, parent, location=metadata["location"]
                ),
                {
                    "action": "set-snapshot-ref",
                    "ref-name": "main",
                    "type": "branch",
                    "snapshot-id": snapshot_id,
                },
            ],
        },
    )


def test_the_outbox_on_postgres(postgres: LocalPostgres) -> None:
    url = postgres.create_database(f"floe_{uuid.uuid4().hex[:8]}")
    upgrade_database(url)
    check_scenario(asyncio.run(outbox_scenario(url)))


def test_every_change_is_one_event_and_a_refused_commit_none(
    server: CatalogProcess, kafka: LocalKafka
) -> None:
    namespace = f"ns_{uuid.uuid4().hex[:6]}"
    base = f"{PREFIX}/namespaces/{CLUSTER}%1F{namespace}/tables"
    with client(server) as http:
        http.post(f"{PREFIX}/namespaces", json={"namespace": [CLUSTER]})
        assert http.post(f"{PREFIX}/namespaces", json={"namespace": [CLUSTER, namespace]}).status_code == 200
        for name in ("t", "u"):
            assert http.post(base, json={"name": name, "schema": SCHEMA}).status_code == 200
        table = f"{base}/t"
        assert append(http, table, 101, parent=None).status_code == 200
        assert append(http, table, 102, parent=101).status_code == 200
        # Refused: its requirement names a snapshot that is no longer current.
        refused = append(http, table, 199, parent=101)
        assert refused.status_code == 409, refused.text
        # One transaction over both tables, then a property change, a rename and a drop.
        changes = [
            {"identifier": {"namespace": [CLUSTER, namespace], "name": n}, "requirements": [], "updates": [u]}
            for n, u in (("t", set_prop("a", "1")), ("u", set_prop("b", "2")))
        ]
        assert http.post(f"{PREFIX}/transactions/commit", json={"table-changes": changes}).status_code == 204
        renamed = {
            "source": {"namespace": [CLUSTER, namespace], "name": "u"},
            "destination": {"namespace": [CLUSTER, namespace], "name": "u2"},
        }
        assert http.post(f"{PREFIX}/tables/rename", json=renamed).status_code == 204
        assert http.delete(f"{base}/u2").status_code == 204
    expected = [
        ("io.floe.table.created", "t"),
        ("io.floe.table.created", "u"),
        ("io.floe.table.committed", "t"),
        ("io.floe.table.committed", "t"),
        ("io.floe.table.committed", "t"),
        ("io.floe.table.committed", "u"),
        ("io.floe.table.renamed", "u2"),
        ("io.floe.table.dropped", "u2"),
    ]
    events = of_table(
        read_events(kafka, until=lambda found: len(of_table(found, namespace)) >= len(expected)), namespace
    )
    assert [(e["type"], e["data"]["name"]) for e in events] == expected
    snapshots = [e["data"]["snapshot"]["snapshot-id"] for e in events[2:4]]
    assert snapshots == [101, 102]  # and never 199, the refused one
    assert all(e["data"]["snapshot"]["added-by-this-commit"] for e in events[2:4])
    assert events[4]["data"]["snapshot"]["added-by-this-commit"] is False
    assert {e["specversion"] for e in events} == {"1.0"}
    assert {e["data"]["cluster"] for e in events} == {CLUSTER}
    # Nothing else arrives for it (a refused commit, or a second copy under another id).
    time.sleep(2)
    again = of_table(read_events(kafka, until=lambda found: False, seconds=5), namespace)
    assert [e["id"] for e in again] == [e["id"] for e in events]
    assert query(server.database_url or "", "SELECT count(*) FROM commit_events")[0][0] == 0


def test_an_event_survives_a_kill_9_between_commit_and_send(
    server: CatalogProcess, kafka: LocalKafka
) -> None:
    namespace = f"ns_{uuid.uuid4().hex[:6]}"
    table = f"{PREFIX}/namespaces/{CLUSTER}%1F{namespace}/tables/t"
    with client(server) as http:
        http.post(f"{PREFIX}/namespaces", json={"namespace": [CLUSTER]})
        assert http.post(f"{PREFIX}/namespaces", json={"namespace": [CLUSTER, namespace]}).status_code == 200
        created = http.post(table.rsplit("/", 1)[0], json={"name": "t", "schema": SCHEMA})
        assert created.status_code == 200
    assert len(of_table(read_events(kafka, until=lambda f: len(of_table(f, namespace)) >= 1), namespace)) == 1
    server.stop()  # the doomed one is the only catalog: nobody else can send its event
    try:
        env = {
            **events_env(kafka),
            FAULT_ENV: CRASH_AFTER_COMMIT,
            "FLOE_ADMIN_CLIENT_ID": server.admin_client_id,
        }
        env["FLOE_ADMIN_CLIENT_SECRET"] = server.admin_client_secret
        doomed = CatalogProcess(server.database_url, home=server.home, env=env).start(timeout=START_TIMEOUT)
        try:
            with client(doomed) as http, pytest.raises(httpx.TransportError):
                append(http, table, 301, parent=None)
            assert doomed.process is not None
            assert doomed.process.wait(timeout=30) == -9
        finally:
            doomed.stop()
        waiting = query(server.database_url or "", "SELECT id, event_type, payload FROM commit_events")
        assert len(waiting) == 1
        assert waiting[0]["event_type"] == "committed"
        assert json.loads(waiting[0]["payload"])["snapshot"]["snapshot-id"] == 301
        before = of_table(read_events(kafka, until=lambda f: False, seconds=3), namespace)
        assert [e["type"] for e in before] == ["io.floe.table.created"]
    finally:
        server.start(timeout=START_TIMEOUT)
    events = of_table(read_events(kafka, until=lambda f: len(of_table(f, namespace)) >= 2), namespace)
    assert [e["type"] for e in events] == ["io.floe.table.created", "io.floe.table.committed"]
    assert events[1]["id"] == str(waiting[0]["id"])
    assert events[1]["data"]["snapshot"]["snapshot-id"] == 301
    deadline = time.monotonic() + 30
    while (
        query(server.database_url or "", "SELECT count(*) FROM commit_events")[0][0]
        and time.monotonic() < deadline
    ):
        time.sleep(0.2)
    assert query(server.database_url or "", "SELECT count(*) FROM commit_events")[0][0] == 0


def test_an_event_acknowledged_before_a_kill_9_is_sent_again_with_its_id(
    server: CatalogProcess, kafka: LocalKafka
) -> None:
    namespace = f"ns_{uuid.uuid4().hex[:6]}"
    table = f"{PREFIX}/namespaces/{CLUSTER}%1F{namespace}/tables/t"
    with client(server) as http:
        http.post(f"{PREFIX}/namespaces", json={"namespace": [CLUSTER]})
        assert http.post(f"{PREFIX}/namespaces", json={"namespace": [CLUSTER, namespace]}).status_code == 200
        assert http.post(table.rsplit("/", 1)[0], json={"name": "t", "schema": SCHEMA}).status_code == 200
    assert len(of_table(read_events(kafka, until=lambda f: len(of_table(f, namespace)) >= 1), namespace)) == 1
    server.stop()
    try:
        env = {**events_env(kafka), FAULT_ENV: CRASH_AFTER_EVENTS_SENT}
        env |= {"FLOE_ADMIN_CLIENT_ID": server.admin_client_id}
        env["FLOE_ADMIN_CLIENT_SECRET"] = server.admin_client_secret
        doomed = CatalogProcess(server.database_url, home=server.home, env=env).start(timeout=START_TIMEOUT)
        try:
            with client(doomed) as http, contextlib.suppress(httpx.TransportError):
                append(http, table, 401, parent=None)  # answered, or not: the publisher kills the process
            assert doomed.process is not None
            assert doomed.process.wait(timeout=60) == -9
        finally:
            doomed.stop()
        waiting = query(server.database_url or "", "SELECT id FROM commit_events")
        assert len(waiting) == 1
        sent = read_events(kafka, until=lambda f: len(of_table(f, namespace)) >= 2)
        assert [e["id"] for e in sent if e["data"]["name"] == "t"][-1] == str(waiting[0]["id"])
    finally:
        server.start(timeout=START_TIMEOUT)

    def copies(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [e for e in found if e["id"] == str(waiting[0]["id"])]

    events = read_events(kafka, until=lambda found: len(copies(found)) >= 2)
    assert len(copies(events)) == 2
    assert copies(events)[0] == copies(events)[1]
    assert [e["type"] for e in of_table(events, namespace)] == [
        "io.floe.table.created",
        "io.floe.table.committed",
    ]
