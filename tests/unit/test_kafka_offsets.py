"""The exactly-once fence, pure rules (catalog/kafka_offsets.py): Kafka offsets carried by snapshot
summaries. The server behaviour is in tests/api/test_kafka_offsets.py.
"""

from __future__ import annotations

import json

import pytest
from pyiceberg.table.snapshots import Operation, Snapshot, Summary
from pyiceberg.table.update import AddSnapshotUpdate

from catalog.errors import BadRequest, CommitFailed, NotFound
from catalog.kafka_offsets import (
    END_OFFSETS,
    MAX_TIMESTAMP,
    MIN_TIMESTAMP,
    START_OFFSETS,
    TOPIC,
    check_kafka_progress,
    kafka_progress,
    snapshot_at,
    snapshot_at_time,
)


def _update(**summary: str) -> AddSnapshotUpdate:
    return AddSnapshotUpdate(
        snapshot=Snapshot(
            snapshot_id=1,
            sequence_number=1,
            timestamp_ms=1,
            manifest_list="file:///m.avro",
            summary=Summary(Operation.APPEND, **summary),
        )
    )


def progress_props(topic: str, start: dict[int, int], end: dict[int, int]) -> dict[str, str]:
    return {
        TOPIC: topic,
        START_OFFSETS: json.dumps({str(p): o for p, o in start.items()}),
        END_OFFSETS: json.dumps({str(p): o for p, o in end.items()}),
    }


# -- pure rules -------------------------------------------------------------------------------------


def test_commits_without_offsets_carry_no_progress() -> None:
    assert kafka_progress([_update()]) is None
    assert kafka_progress([]) is None


def test_progress_is_parsed_from_the_summary() -> None:
    progress = kafka_progress([_update(**progress_props("orders", {0: 5}, {0: 9, 1: 3}))])
    assert progress is not None
    assert progress.topic == "orders"
    assert dict(progress.start) == {0: 5}
    assert dict(progress.end) == {0: 9, 1: 3}


@pytest.mark.parametrize(
    ("summary", "message"),
    [
        ({TOPIC: "t"}, "is required"),
        ({TOPIC: "t", END_OFFSETS: "[1]"}, "JSON object"),
        ({TOPIC: "t", END_OFFSETS: "nope"}, "JSON object"),
        ({TOPIC: "t", END_OFFSETS: '{"x": 1}'}, "JSON object"),
        ({TOPIC: "t", END_OFFSETS: '{"0": -1}'}, "invalid entry"),
        ({TOPIC: "t", END_OFFSETS: '{"0": "5"}'}, "invalid entry"),
        ({TOPIC: "t", START_OFFSETS: '{"0": 9}', END_OFFSETS: '{"0": 5}'}, "before its start"),
        ({TOPIC: "t", START_OFFSETS: '{"1": 9}', END_OFFSETS: '{"0": 5}'}, "without end"),
    ],
)
def test_malformed_progress_is_a_bad_request(summary: dict[str, str], message: str) -> None:
    with pytest.raises(BadRequest, match=message):
        kafka_progress([_update(**summary)])


def test_only_one_snapshot_per_commit_may_carry_offsets() -> None:
    props = progress_props("t", {}, {0: 1})
    with pytest.raises(BadRequest, match="only one snapshot"):
        kafka_progress([_update(**props), _update(**props)])


def test_the_fence_accepts_only_commits_starting_where_the_table_is() -> None:
    progress = kafka_progress([_update(**progress_props("t", {0: 5}, {0: 9, 1: 2}))])
    assert progress is not None
    check_kafka_progress(progress, {0: 5})
    check_kafka_progress(progress, {0: 5, 2: 100})  # partitions the commit does not cover don't matter
    with pytest.raises(CommitFailed, match="partition 0 is committed up to 9"):
        check_kafka_progress(progress, {0: 9})
    with pytest.raises(CommitFailed, match="partition 1 is committed up to 2"):
        check_kafka_progress(progress, {0: 5, 1: 2})
    with pytest.raises(CommitFailed, match="committed up to nothing"):
        check_kafka_progress(progress, {})


# -- snapshot_at: the first snapshot holding a Kafka record ----------------------------------------


def _snapshot(snapshot_id: int, topic: str | None, start: dict[int, int], end: dict[int, int]) -> Snapshot:
    props = progress_props(topic, start, end) if topic is not None else {}
    return Snapshot(
        snapshot_id=snapshot_id,
        sequence_number=snapshot_id,
        timestamp_ms=1_700_000_000_000 + snapshot_id,
        manifest_list=f"s3://b/m-{snapshot_id}.avro",
        summary=Summary(Operation.APPEND, **props),
    )


def test_snapshot_at_skips_snapshots_without_offsets_and_orders_by_sequence() -> None:
    snapshots = [_snapshot(3, "t", {0: 4}, {0: 9}), _snapshot(2, None, {}, {}), _snapshot(1, "t", {}, {0: 4})]
    assert snapshot_at(snapshots, 0, 0).snapshot.snapshot_id == 1
    assert snapshot_at(snapshots, 0, 4).snapshot.snapshot_id == 3
    assert snapshot_at(snapshots, 0, 8).progress.end == {0: 9}
    with pytest.raises(NotFound, match="up to offset 8"):
        snapshot_at(snapshots, 0, 9)


def test_snapshot_at_needs_the_topic_when_a_table_has_several() -> None:
    snapshots = [_snapshot(1, "a", {}, {0: 4}), _snapshot(2, "b", {}, {0: 4})]
    with pytest.raises(BadRequest, match="several topics"):
        snapshot_at(snapshots, 0, 1)
    assert snapshot_at(snapshots, 0, 1, topic="b").snapshot.snapshot_id == 2
    with pytest.raises(BadRequest, match=">= 0"):
        snapshot_at(snapshots, 0, -1)


# -- snapshot_at_time: the table as of a Kafka record time -----------------------------------------


def _timed(
    snapshot_id: int, start: dict[int, int], end: dict[int, int], low: int | None, high: int | None
) -> Snapshot:
    props = progress_props("t", start, end)
    if low is not None and high is not None:
        props |= {MIN_TIMESTAMP: str(low), MAX_TIMESTAMP: str(high)}
    return Snapshot(
        snapshot_id=snapshot_id,
        sequence_number=snapshot_id,
        timestamp_ms=1_700_000_000_000 + snapshot_id,
        manifest_list=f"s3://b/m-{snapshot_id}.avro",
        summary=Summary(Operation.APPEND, **props),
    )


def test_snapshot_at_time_is_the_newest_snapshot_holding_no_later_record() -> None:
    snapshots = [
        _timed(1, {}, {0: 3}, 100, 200),
        _timed(2, {0: 3}, {0: 6}, 210, 300),
        _snapshot(3, None, {}, {}),  # a compaction: no offsets, no record times
        _timed(4, {0: 6}, {0: 9}, 250, 280),  # late records: the high water stays 300
        _timed(5, {0: 9}, {0: 12}, 290, 400),
    ]
    assert snapshot_at_time(snapshots, 200).snapshot.snapshot_id == 1
    assert snapshot_at_time(snapshots, 299).snapshot.snapshot_id == 1  # snapshot 2 holds 300
    found = snapshot_at_time(snapshots, 300)
    # Snapshot 4's records are all earlier than 300 and its high water is 300: it is the table as of 300.
    assert (found.snapshot.snapshot_id, found.as_of_ms) == (4, 300)
    assert (found.min_timestamp_ms, found.max_timestamp_ms) == (250, 280)
    assert found.progress.end == {0: 9}
    assert snapshot_at_time(snapshots, 399).snapshot.snapshot_id == 4


def test_snapshot_at_time_not_yet_before_first_and_expired_are_404() -> None:
    snapshots = [_timed(1, {}, {0: 3}, 100, 200), _timed(2, {0: 3}, {0: 6}, 210, 300)]
    with pytest.raises(NotFound, match="yet"):
        snapshot_at_time(snapshots, 300)  # nothing later is committed: records up to 300 may still come
    with pytest.raises(NotFound, match="no record at or before"):
        snapshot_at_time(snapshots, 99)
    with pytest.raises(NotFound, match="has been expired"):
        snapshot_at_time(snapshots[1:], 250)  # snapshot 1 (the answer) is gone
    assert (
        snapshot_at_time([*snapshots[1:], _timed(3, {0: 6}, {0: 7}, 500, 500)], 300).snapshot.snapshot_id == 2
    )
    with pytest.raises(NotFound, match="no record time"):
        snapshot_at_time([_snapshot(1, "t", {}, {0: 3})], 10)  # written before record times were kept


def test_snapshot_at_time_needs_the_topic_when_a_table_has_several() -> None:
    a = Snapshot(
        snapshot_id=9,
        sequence_number=9,
        timestamp_ms=1,
        manifest_list="s3://b/m.avro",
        summary=Summary(
            Operation.APPEND, **progress_props("a", {}, {0: 1}), **{MIN_TIMESTAMP: "1", MAX_TIMESTAMP: "1"}
        ),
    )
    with pytest.raises(BadRequest, match="several topics"):
        snapshot_at_time([a, _timed(1, {}, {0: 3}, 100, 200)], 150)
