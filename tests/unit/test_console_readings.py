"""The console's pure readings: the overview's lights and the small-file histogram."""

from __future__ import annotations

import pytest

from catalog.console.readings import Health, IngestReading, health_of, size_histogram, snapshot_rows
from catalog.kafka_offsets import END_OFFSETS, START_OFFSETS, TOPIC


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
