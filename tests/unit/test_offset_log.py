"""A micro-batch's Kafka range read from Spark's offset log (ingest/offset_log.py)."""

from __future__ import annotations

import json
from pathlib import Path

from ingest.offset_log import BatchRange, batch_range, end_offsets

# What Spark 4.0's OffsetSeqLog writes for a Kafka source (conf shortened).
_METADATA = (
    '{"batchWatermarkMs":0,"batchTimestampMs":1795493498967,"conf":{"spark.sql.shuffle.partitions":"200"}}'
)


def _entry(checkpoint: Path, batch_id: int, *sources: str, version: str = "v1") -> None:
    (checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
    (checkpoint / "offsets" / str(batch_id)).write_text("\n".join([version, _METADATA, *sources]))


def test_a_batch_reads_from_the_previous_batch_end_to_its_own(tmp_path: Path) -> None:
    _entry(tmp_path, 0, json.dumps({"orders": {"0": 100, "1": 90}}))
    _entry(tmp_path, 1, json.dumps({"orders": {"0": 150, "1": 90, "2": 7}}))
    found = batch_range(tmp_path, 1, "orders")
    assert found == BatchRange(start={0: 100, 1: 90}, end={0: 150, 1: 90, 2: 7})
    # Partition 1 did not move; partition 2 is new to the topic (its start unknown, it advanced).
    assert found is not None
    assert found.partitions() == [0, 2]


def test_the_first_batch_and_unreadable_entries_are_unknown(tmp_path: Path) -> None:
    _entry(tmp_path, 0, json.dumps({"orders": {"0": 100}}))
    assert batch_range(tmp_path, 0, "orders") is None  # no predecessor in this run's log
    assert batch_range(tmp_path, 1, "orders") is None  # not written (yet)
    _entry(tmp_path, 1, json.dumps({"orders": {"0": 120}}), version="v2")
    assert batch_range(tmp_path, 1, "orders") is None  # a format this code does not know
    _entry(tmp_path, 1, "{not json")
    assert batch_range(tmp_path, 1, "orders") is None
    _entry(tmp_path, 1, json.dumps({"other-topic": {"0": 5}}))
    assert batch_range(tmp_path, 1, "orders") is None


def test_a_source_without_offsets_is_skipped(tmp_path: Path) -> None:
    _entry(tmp_path, 3, "-", json.dumps({"orders": {"0": 5, "1": 6}}))
    assert end_offsets(tmp_path, 3, "orders") == {0: 5, 1: 6}
