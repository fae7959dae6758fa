"""The console's readings: the overview's lights, the small-file histogram, the snapshot timeline, and the
store of sampled ingestion metrics (one sample per interval whichever worker took it, pruned by age)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from catalog.console.readings import Health, health_of, size_histogram, snapshot_rows
from catalog.ingest_metrics import ingest_status
from catalog.kafka_offsets import END_OFFSETS, START_OFFSETS, TOPIC
from catalog.migrations import upgrade_database
from catalog.service.ingest_history import IngestReading, ingest_readings
from catalog.store import create_store
from catalog.store.ingest_history import IngestSample


@pytest.mark.parametrize(
    ("age", "dead", "ingest", "health", "reasons"),
    [
        (10.0, 0, None, Health.GREEN, ()),
        (None, None, None, Health.AMBER, ("no commits yet",)),
        (600.0, 0, None, Health.AMBER, ("no commit for over five minutes",)),
        (7200.0, 0, None, Health.RED, ("no commit for over an hour",)),
        (10.0, 3, None, Health.AMBER, ("3 dead letters in the last hour",)),
        (10.0, 0, IngestReading(5, 400.0, 1.0), Health.AMBER, ("ingestion over five minutes behind",)),
        (
            600.0,
            0,
            IngestReading(5, 4000.0, 1.0),
            Health.RED,
            ("ingestion over an hour behind", "no commit for over five minutes"),
        ),
        (10.0, 0, IngestReading(None, None, None, "boom"), Health.RED, ("ingestion stopped: boom",)),
        (10.0, 0, IngestReading(0, 0.0, 0.0, None, "t"), Health.AMBER, ("topic t does not exist",)),
    ],
)
def test_health(
    age: float | None,
    dead: int | None,
    ingest: IngestReading | None,
    health: Health,
    reasons: tuple[str, ...],
) -> None:
    assert health_of(age, dead, None, ingest) == (health, reasons)


def test_size_histogram_buckets() -> None:
    histogram = dict(size_histogram([10, (1 << 20) - 1, 1 << 20, 100 << 20, 600 << 20]))
    assert histogram == {
        "< 1 MiB": 2,
        "1 to 8 MiB": 1,
        "8 to 32 MiB": 0,
        "32 to 128 MiB": 1,
        "128 to 512 MiB": 0,
        "≥ 512 MiB": 1,
    }


def test_snapshot_rows_newest_first_with_offsets() -> None:
    metadata = {
        "current-snapshot-id": 2,
        "snapshots": [
            {
                "snapshot-id": 1,
                "timestamp-ms": 1000,
                "summary": {"operation": "append", "added-records": "3"},
            },
            {
                "snapshot-id": 2,
                "parent-snapshot-id": 1,
                "timestamp-ms": 2000,
                "summary": {
                    "operation": "append",
                    TOPIC: "t",
                    START_OFFSETS: '{"0": 3}',
                    END_OFFSETS: '{"0": 5, "1": "junk"}',
                },
            },
        ],
    }
    rows = snapshot_rows(metadata)
    assert [(r.snapshot_id, r.current) for r in rows] == [(2, True), (1, False)]
    assert (rows[0].kafka_topic, rows[0].start_offsets, rows[0].end_offsets) == ("t", {"0": 3}, {"0": 5})
    assert rows[1].added_records == 3


def test_ingest_samples_are_kept_once_per_interval_and_pruned(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'catalog.db'}"
    upgrade_database(url)

    async def run() -> None:
        store = create_store(url)
        try:
            now = datetime.now(UTC)
            first = [IngestSample("c.t", now - timedelta(hours=2), 5, 1.5, 10.0)]
            assert await store.add_ingest_samples(1, first)
            # Another worker sampling the same interval stores nothing.
            assert not await store.add_ingest_samples(1, [IngestSample("c.t", now, 6, 2.0, 11.0)])
            assert await store.add_ingest_samples(2, [IngestSample("c.t", now, 7, 0.0, 12.0)])
            samples = await store.list_ingest_samples("c.t", now - timedelta(hours=3))
            assert [(s.offset_lag, s.records_per_second) for s in samples] == [(5, 10.0), (7, 12.0)]
            assert await store.prune_ingest_samples(now - timedelta(hours=1)) == 1
            assert [
                s.offset_lag for s in await store.list_ingest_samples("c.t", now - timedelta(days=1))
            ] == [7]
        finally:
            await store.close()

    asyncio.run(run())


def test_ingest_status_reads_the_ingestion_services_exposition() -> None:
    """`floe status` and the console read `floe ingest`'s own metric families (its registry's text)."""
    from prometheus_client import generate_latest

    from ingest import metrics

    table = f"unit_{uuid.uuid4().hex[:6]}.t"
    metrics.OFFSET_LAG.labels(table, "t", "1").set(7)
    metrics.OFFSET_LAG.labels(table, "t", "0").set(3)
    metrics.TIME_LAG.labels(table, "t", "0").set(4.25)
    metrics.RECORDS_RATE.labels(table).set(12.0)
    metrics.TABLE_ERROR.labels(table, "cannot decode").set(1)
    metrics.TOPIC_MISSING.labels(table, "t").set(1)
    try:
        status = ingest_status(generate_latest(metrics.REGISTRY).decode())
        entry = next(e for e in status["tables"] if e["table"] == table)
        assert [p["partition"] for p in entry["partitions"]] == [0, 1]
        assert (entry["error"], entry["missing_topic"], entry["records_per_second"]) == (
            "cannot decode",
            "t",
            12.0,
        )
        reading = ingest_readings(status)[table]
        assert reading == IngestReading(10, 4.25, 12.0, "cannot decode", "t")
    finally:
        metrics.TABLE_ERROR.remove(table, "cannot decode")
        metrics.TOPIC_MISSING.remove(table, "t")
