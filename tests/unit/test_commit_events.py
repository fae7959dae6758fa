"""Commit events (issue 35 item 4): the outbox rows a store's changes write in their own transactions
(only for changes that landed), the CloudEvents document made of a row, and the publisher's
acknowledged-prefix rule. The same store scenario runs on PostgreSQL in tests/e2e/test_commit_events.py
(its one-statement commit path is PostgreSQL's alone)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from catalog.kafka_offsets import KafkaProgress
from catalog.migrations import upgrade_database
from catalog.service.commit_events import CommitEventPublisher, Message, cloud_event, topic_for
from catalog.settings import Settings
from catalog.store import PendingCommit, create_store
from catalog.store.commit_records import CommitRecords
from catalog.store.outbox import OutboxRow
from catalog.store.security import AuditEntry


def metadata(snapshot_id: int | None, *, added: int = 0, schema_id: int = 0, same_time: bool = True) -> str:
    """Table metadata JSON with `snapshot_id` current (None: no snapshot)."""
    document: dict[str, Any] = {"format-version": 2, "current-schema-id": schema_id, "last-updated-ms": 5000}
    if snapshot_id is not None:
        document["current-snapshot-id"] = snapshot_id
        document["snapshots"] = [
            {
                "snapshot-id": snapshot_id,
                "sequence-number": snapshot_id,
                "timestamp-ms": 5000 if same_time else 4000,
                "summary": {"operation": "append", "added-records": str(added), "added-data-files": "1"},
            }
        ]
    return json.dumps(document)


async def outbox_scenario(url: str) -> list[OutboxRow]:
    """Every kind of change of a table (and of a view) with events on, and changes that do not land;
    the outbox's rows afterwards."""
    store = create_store(url)
    store.commit_events_enabled = True
    try:
        warehouse = await store.upsert_warehouse("lake", "file:///lake", {})
        ns = await store.create_namespace(warehouse.id, "prod", {})
        other = await store.create_namespace(warehouse.id, "prod\x1fsales", {})
        created = PendingCommit(None, 0, "file:///m0.json", metadata(None), ns.id, "t", "table")
        assert await store.swap([created])
        table = await store.get_tabular(warehouse.id, "prod", "t")
        assert table is not None
        # A plain commit (one statement on PostgreSQL), then one with its audit entry (the CTE path).
        assert await store.swap([PendingCommit(table.id, 0, "file:///m1.json", metadata(11, added=10))])
        audit = AuditEntry("someone", "prod", "updateTable", "prod.t", "ok", 200, "r1")
        landed = PendingCommit(table.id, 1, "file:///m2.json", metadata(12, added=20))
        assert await store.swap([landed], CommitRecords(audit, None))
        # A lost race (stale version) lands nothing: no event.
        assert not await store.swap([PendingCommit(table.id, 1, "file:///lost.json", metadata(99))])
        assert not await store.swap(
            [PendingCommit(table.id, 1, "file:///lost2.json", metadata(98))], CommitRecords(audit, None)
        )
        # A schema change (no new snapshot), then an ingestion commit with Kafka offsets.
        schema = metadata(12, added=20, schema_id=1, same_time=False)
        assert await store.swap([PendingCommit(table.id, 2, "file:///m3.json", schema)])
        kafka = KafkaProgress("orders", {0: 0, 1: 0}, {0: 7, 1: 3})
        ingest = PendingCommit(table.id, 3, "file:///m4.json", metadata(13, added=10), kafka=kafka)
        assert await store.swap([ingest])
        # A multi-table transaction: a create and a commit in one; one that loses its race lands none.
        u = PendingCommit(None, 0, "file:///u0.json", metadata(None), other.id, "u", "table")
        assert await store.swap([u, PendingCommit(table.id, 4, "file:///m5.json", metadata(14, added=1))])
        v = PendingCommit(None, 0, "file:///v0.json", metadata(None), other.id, "v", "table")
        assert not await store.swap([v, PendingCommit(table.id, 4, "file:///m6.json", metadata(15))])
        view = PendingCommit(None, 0, "file:///view.json", '{"current-version-id": 1}', ns.id, "w", "view")
        assert await store.swap([view])
        await store.rename_tabular(table.id, other.id, "t2", "table")
        dropped = await store.drop_tabular(table.id)
        assert dropped is not None
        rows = await store.pending_events(100)
        assert await store.outbox_depth() == (len(rows), rows[0].created_at_ms)
        return rows
    finally:
        await store.close()


def check_scenario(rows: list[OutboxRow]) -> None:
    """The rows `outbox_scenario` must leave: one per change that landed, in commit order."""
    seen = [(r.event_type, r.kind, r.namespace, r.name) for r in rows]
    assert seen == [
        ("created", "table", "prod", "t"),
        ("committed", "table", "prod", "t"),
        ("committed", "table", "prod", "t"),
        ("committed", "table", "prod", "t"),
        ("committed", "table", "prod", "t"),
        ("created", "table", "prod\x1fsales", "u"),
        ("committed", "table", "prod", "t"),
        ("created", "view", "prod", "w"),
        ("renamed", "table", "prod\x1fsales", "t2"),
        ("dropped", "table", "prod\x1fsales", "t2"),
    ]
    assert [r.id for r in rows] == sorted({r.id for r in rows})
    assert {r.warehouse for r in rows} == {"lake"}
    plain, audited, schema, ingest = (rows[i].payload for i in range(1, 5))
    assert plain["metadata-location"] == "file:///m1.json"
    assert plain["snapshot"]["snapshot-id"] == 11
    assert plain["snapshot"]["operation"] == "append"
    assert plain["snapshot"]["summary"] == {"added-records": 10, "added-data-files": 1}
    assert plain["snapshot"]["added-by-this-commit"] is True
    assert audited["snapshot"]["snapshot-id"] == 12
    assert (schema["schema-id"], schema["snapshot"]["added-by-this-commit"]) == (1, False)
    assert ingest["kafka"] == {"topic": "orders", "next-offsets": {"0": 7, "1": 3}}
    assert rows[0].payload["snapshot"] is None
    assert rows[7].payload["version-id"] == 1
    assert rows[8].payload["renamed-from"] == {"namespace": ["prod"], "name": "t"}


def test_every_landed_change_writes_one_event_and_nothing_else_does(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'catalog.db'}"
    upgrade_database(url)
    check_scenario(asyncio.run(outbox_scenario(url)))


def test_events_off_write_nothing(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'catalog.db'}"
    upgrade_database(url)

    async def run() -> int:
        store = create_store(url)
        try:
            warehouse = await store.upsert_warehouse("lake", "file:///lake", {})
            ns = await store.create_namespace(warehouse.id, "prod", {})
            assert await store.swap([PendingCommit(None, 0, "file:///m0.json", "{}", ns.id, "t")])
            return (await store.outbox_depth())[0]
        finally:
            await store.close()

    assert asyncio.run(run()) == 0


ROW = OutboxRow(
    41,
    "committed",
    "0b7a-id",
    "table",
    "lake",
    "prod\x1fsales",
    "orders",
    {"metadata-location": "s3://b/m.json", "snapshot": {"snapshot-id": 5}},
    1_764_324_000_123,
)


def test_the_cloud_event_of_a_row() -> None:
    event = cloud_event(ROW, "/floe/eu", {"topic": "orders", "watermark-ms": 1})
    assert event == {
        "specversion": "1.0",
        "id": "41",
        "source": "/floe/eu",
        "type": "io.floe.table.committed",
        "subject": "prod.sales.orders",
        "time": "2025-11-28T10:00:00.123000Z",
        "datacontenttype": "application/json",
        "data": {
            "warehouse": "lake",
            "namespace": ["prod", "sales"],
            "name": "orders",
            "cluster": "prod",
            "table-uuid-in-catalog": "0b7a-id",
            "kind": "table",
            "change": "committed",
            "metadata-location": "s3://b/m.json",
            "snapshot": {"snapshot-id": 5},
            "watermark": {"topic": "orders", "watermark-ms": 1},
        },
    }


def test_the_topic_per_cluster() -> None:
    assert topic_for("floe.events.{cluster}", ROW) == "floe.events.prod"
    assert topic_for("floe.commit-events", ROW) == "floe.commit-events"
    odd = OutboxRow(1, "created", "x", "table", "lake", "a b/ü\x1fc", "t", {}, 0)
    assert topic_for("ev.{cluster}", odd) == "ev.a_b__"


class FakeSender:
    """Acknowledges the messages whose ids are not in `refuse`; remembers what it was sent."""

    def __init__(self, refuse: set[int]) -> None:
        self.refuse = refuse
        self.sent: list[Message] = []

    def send(self, messages: Sequence[Message], timeout: float) -> set[int]:
        self.sent.extend(messages)
        return {m.id for m in messages} - self.refuse

    def close(self) -> None:
        pass


def test_only_the_acknowledged_prefix_is_forgotten(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'catalog.db'}"
    upgrade_database(url)
    rows = asyncio.run(outbox_scenario(url))
    third = rows[2].id

    async def run() -> tuple[FakeSender, list[int]]:
        store = create_store(url)
        sender = FakeSender({third})
        settings = Settings(events_kafka_bootstrap_servers="unused:9092", events_topic="ev.{cluster}")
        publisher = CommitEventPublisher(store, settings, lambda: sender)  # type: ignore[arg-type,return-value]
        try:
            with pytest.raises(RuntimeError, match="not acknowledged"):
                await publisher.publish_once()
            left = [r.id for r in await store.pending_events(100)]
            sender.refuse = set()
            assert await publisher.publish_once() == len(left)
            assert await store.pending_events(100) == []
            return sender, left
        finally:
            await store.close()

    sender, left = asyncio.run(run())
    assert left == [r.id for r in rows[2:]]
    # Re-sent after the refusal with the same ids: duplicates only ever share their id.
    ids = [m.id for m in sender.sent]
    assert ids == [r.id for r in rows] + left
    first = json.loads(sender.sent[0].value)
    assert (first["id"], first["type"], sender.sent[0].topic) == (
        str(rows[0].id),
        "io.floe.table.created",
        "ev.prod",
    )
    assert sender.sent[0].key == rows[0].tabular_id.encode()


def test_one_publisher_per_sqlite_database(tmp_path: Path) -> None:
    """`--workers N` on SQLite: one worker's publisher holds the lock, the others send nothing until
    it is released (a process's death releases its flock too)."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'catalog.db'}"
    upgrade_database(url)

    async def run() -> list[bool]:
        first, second = create_store(url), create_store(url)
        try:
            a, b = first.publisher_lock(), second.publisher_lock()
            held = [await a.acquire(), await b.acquire(), await a.acquire()]
            await a.release()
            held += [await b.acquire(), await a.acquire()]
            await b.release()
            return held
        finally:
            await first.close()
            await second.close()

    assert asyncio.run(run()) == [True, False, True, True, False]
