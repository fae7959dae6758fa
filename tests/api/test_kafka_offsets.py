"""The exactly-once fence: Kafka offsets carried by snapshot summaries, kept by floe per table.

The server behaviour through pyiceberg's appends with snapshot properties, on both backends: offsets
are stored with the commit, a batch committed twice is refused with 409 and changes nothing, malformed
offsets are a 400, offsets survive snapshot expiry, and readers of other clusters cannot see them.
The pure rules are in tests/unit/test_kafka_offsets.py.
"""

from __future__ import annotations

from typing import Any

import httpx
import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import BadRequestError, CommitFailedException
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.types import LongType, NestedField

from catalog.kafka_offsets import END_OFFSETS, TOPIC
from tests.unit.test_kafka_offsets import progress_props

# -- through the server -----------------------------------------------------------------------------

ROWS = pa.schema([pa.field("id", pa.int64(), nullable=True)])


def _rows(*ids: int) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64())}, schema=ROWS)


@pytest.fixture
def table(rest_catalog: RestCatalog, namespace: str) -> Table:
    created: Table = rest_catalog.create_table(
        f"{namespace}.events", Schema(NestedField(1, "id", LongType()))
    )
    return created


def _offsets(http: httpx.Client, namespace: str, table: str) -> dict[str, Any]:
    response = http.get(
        "/management/v1/kafka-offsets",
        params={"warehouse": "default", "namespace": namespace, "table": table},
    )
    assert response.status_code == 200, response.text
    return {
        t["topic"]: {p["partition"]: p["next-offset"] for p in t["partitions"]}
        for t in response.json()["topics"]
    }


def test_offsets_are_stored_with_the_commit_and_replays_refused(
    table: Table, namespace: str, http: httpx.Client
) -> None:
    assert _offsets(http, namespace, "events") == {}
    table.append(_rows(1, 2, 3), snapshot_properties=progress_props("orders", {}, {0: 3, 1: 7}))
    assert _offsets(http, namespace, "events") == {"orders": {0: 3, 1: 7}}

    # The same batch again (a restart that lost its checkpoint): refused, nothing written.
    with pytest.raises(CommitFailedException, match="Kafka offsets conflict"):
        table.append(_rows(1, 2, 3), snapshot_properties=progress_props("orders", {}, {0: 3, 1: 7}))
    table.refresh()
    assert table.scan().to_arrow().num_rows == 3

    # The next batch, starting where the table is, lands; untouched partitions keep their offsets.
    table.append(_rows(4), snapshot_properties=progress_props("orders", {0: 3}, {0: 4}))
    assert _offsets(http, namespace, "events") == {"orders": {0: 4, 1: 7}}
    # A stale writer (a zombie still at offset 3) is refused.
    with pytest.raises(CommitFailedException, match="partition 0 is committed up to 4"):
        table.append(_rows(4), snapshot_properties=progress_props("orders", {0: 3}, {0: 4}))
    table.refresh()
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == [1, 2, 3, 4]


def test_malformed_offsets_are_a_400_and_change_nothing(
    table: Table, namespace: str, http: httpx.Client
) -> None:
    with pytest.raises(BadRequestError, match=r"floe\.kafka\.end-offsets"):
        table.append(_rows(1), snapshot_properties={TOPIC: "orders", END_OFFSETS: "[]"})
    table.refresh()
    assert table.current_snapshot() is None
    assert _offsets(http, namespace, "events") == {}


def test_offsets_survive_snapshot_expiry(table: Table, namespace: str, http: httpx.Client) -> None:
    table.append(_rows(1), snapshot_properties=progress_props("orders", {}, {0: 1}))
    table.append(_rows(2))  # e.g. a compaction or another writer: no offsets
    table.refresh()
    first = table.snapshots()[0].snapshot_id
    table.maintenance.expire_snapshots().by_id(first).commit()
    table.refresh()
    assert [s.snapshot_id for s in table.snapshots()] != [first]
    assert _offsets(http, namespace, "events") == {"orders": {0: 1}}


def test_offsets_of_a_missing_table_are_404(http: httpx.Client, namespace: str) -> None:
    response = http.get(
        "/management/v1/kafka-offsets",
        params={"warehouse": "default", "namespace": namespace, "table": "nope"},
    )
    assert response.status_code == 404
    assert response.json()["error"]["type"] == "NoSuchTableException"
