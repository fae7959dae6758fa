"""`GET /management/v1/snapshots/at`: the first snapshot holding a Kafka record, answered from the
offsets floe's ingestion snapshots carry, checked against those snapshots' summaries; clear 404s for a
position not yet committed or whose snapshot has been expired; 400 for a bad position."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.types import LongType, NestedField

from catalog.kafka_offsets import END_OFFSETS, MAX_TIMESTAMP, MIN_TIMESTAMP, START_OFFSETS
from tests.unit.test_kafka_offsets import progress_props

ROWS = pa.schema([pa.field("id", pa.int64(), nullable=True)])


@pytest.fixture
def table(rest_catalog: RestCatalog, namespace: str) -> Table:
    created: Table = rest_catalog.create_table(
        f"{namespace}.events", Schema(NestedField(1, "id", LongType()))
    )
    return created


def _append(table: Table, start: dict[int, int], end: dict[int, int]) -> int:
    table.append(pa.table({"id": [1]}, schema=ROWS), snapshot_properties=progress_props("orders", start, end))
    table.refresh()
    snapshot = table.current_snapshot()
    assert snapshot is not None
    return snapshot.snapshot_id


def _at(http: httpx.Client, namespace: str, **params: Any) -> httpx.Response:
    return http.get(
        "/management/v1/snapshots/at",
        params={"warehouse": "default", "namespace": namespace, "table": "events", **params},
    )


def test_the_first_snapshot_holding_each_offset(table: Table, namespace: str, http: httpx.Client) -> None:
    first = _append(table, {}, {0: 3, 1: 2})
    second = _append(table, {0: 3}, {0: 5})
    table.append(pa.table({"id": [9]}, schema=ROWS))  # no offsets (a compaction, another writer)
    third = _append(table, {0: 5, 1: 2}, {0: 9, 1: 4})
    expected = {(0, 0): first, (0, 2): first, (0, 3): second, (0, 4): second, (0, 5): third, (0, 8): third}
    expected |= {(1, 0): first, (1, 1): first, (1, 2): third, (1, 3): third}
    for (partition, offset), snapshot_id in expected.items():
        response = _at(http, namespace, partition=partition, offset=offset)
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["snapshot-id"] == snapshot_id, (partition, offset)
        assert body["topic"] == "orders"
        # What it answers is what the snapshot's own summary says.
        summary = table.snapshot_by_id(snapshot_id).summary  # type: ignore[union-attr]
        assert summary is not None
        assert body["end-offsets"] == json.loads(summary[END_OFFSETS] or "{}")
        assert body["start-offsets"] == json.loads(summary[START_OFFSETS] or "{}")
        assert body["end-offsets"][str(partition)] > offset


def test_a_position_not_yet_committed_is_a_clear_404(
    table: Table, namespace: str, http: httpx.Client
) -> None:
    _append(table, {}, {0: 3})
    response = _at(http, namespace, partition=0, offset=3)
    assert response.status_code == 404
    assert "No snapshot holds offset 3 of partition 0 yet" in response.json()["error"]["message"]
    assert "up to offset 2" in response.json()["error"]["message"]
    response = _at(http, namespace, partition=7, offset=0)
    assert response.status_code == 404
    assert "hold nothing of that partition" in response.json()["error"]["message"]


def test_an_expired_position_says_so(table: Table, namespace: str, http: httpx.Client) -> None:
    first = _append(table, {}, {0: 3})
    kept = _append(table, {0: 3}, {0: 6})
    table.maintenance.expire_snapshots().by_id(first).commit()
    response = _at(http, namespace, partition=0, offset=1)
    assert response.status_code == 404
    message = response.json()["error"]["message"]
    assert "has been expired" in message
    assert f"from offset 3 (snapshot {kept})" in message
    assert _at(http, namespace, partition=0, offset=4).json()["snapshot-id"] == kept


def test_bad_positions_are_400_and_missing_tables_404(
    namespace: str, http: httpx.Client, table: Table
) -> None:
    assert _at(http, namespace, partition=-1, offset=0).status_code == 400
    assert _at(http, namespace, partition=0, offset="x").status_code == 400
    assert _at(http, namespace, offset=0).status_code == 400
    response = http.get(
        "/management/v1/snapshots/at",
        params={"warehouse": "default", "namespace": namespace, "table": "nope", "partition": 0, "offset": 0},
    )
    assert response.status_code == 404
    assert response.json()["error"]["type"] == "NoSuchTableException"


def _append_timed(table: Table, start: dict[int, int], end: dict[int, int], low: int, high: int) -> int:
    props = progress_props("orders", start, end) | {MIN_TIMESTAMP: str(low), MAX_TIMESTAMP: str(high)}
    table.append(pa.table({"id": [1]}, schema=ROWS), snapshot_properties=props)
    table.refresh()
    snapshot = table.current_snapshot()
    assert snapshot is not None
    return snapshot.snapshot_id


def test_the_table_as_of_a_record_time(table: Table, namespace: str, http: httpx.Client) -> None:
    base = 1_763_000_000_000
    first = _append_timed(table, {}, {0: 3}, base, base + 1_000)
    second = _append_timed(table, {0: 3}, {0: 6}, base + 1_500, base + 2_000)
    _append_timed(table, {0: 6}, {0: 9}, base + 2_500, base + 3_000)
    for timestamp, expected in ((base + 1_000, first), (base + 1_999, first), (base + 2_000, second)):
        response = _at(http, namespace, timestamp=timestamp)
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["snapshot-id"] == expected, timestamp
        summary = table.snapshot_by_id(expected).summary  # type: ignore[union-attr]
        assert summary is not None
        assert body["end-offsets"] == json.loads(summary[END_OFFSETS] or "{}")
        assert str(body["max-record-time-ms"]) == summary[MAX_TIMESTAMP]
        assert body["as-of-record-time-ms"] <= timestamp
    not_yet = _at(http, namespace, timestamp=base + 3_000)
    assert not_yet.status_code == 404
    assert "yet" in not_yet.json()["error"]["message"]
    before = _at(http, namespace, timestamp=base - 1)
    assert before.status_code == 404
    assert "no record at or before" in before.json()["error"]["message"]
    # The offset answer carries the snapshot's record times too.
    assert _at(http, namespace, partition=0, offset=4).json()["min-record-time-ms"] == base + 1_500
    table.maintenance.expire_snapshots().by_id(first).commit()
    expired = _at(http, namespace, timestamp=base + 1_200)
    assert expired.status_code == 404
    assert "has been expired" in expired.json()["error"]["message"]


def test_a_record_time_query_is_400_when_mixed_or_negative(
    table: Table, namespace: str, http: httpx.Client
) -> None:
    huge = 10**30  # beyond int64: no Kafka position or time
    cases: tuple[dict[str, object], ...] = (
        {"timestamp": 5, "partition": 0, "offset": 0},
        {"timestamp": -1},
        {"timestamp": "x"},
        {"timestamp": huge},
        {"partition": 0, "offset": huge},
        {"partition": huge, "offset": 0},
        {},
    )
    for params in cases:
        response = _at(http, namespace, **params)
        assert response.status_code == 400, params
        assert response.json()["error"]["type"] == "BadRequestException"
