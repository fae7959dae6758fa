"""Replay of a range (ingest/replay.py) on real Iceberg tables in a local pyiceberg SQL catalog, the topic
in memory: the range's rows are replaced by the records decoded again, in one commit, nothing outside
the range changes, a rerun replaces them again, and a refused or lost commit never lands a record twice.
Real Kafka, floe and ingestion: tests/e2e/test_replay.py."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.table import CommitTableRequest

from catalog.pipelines.columns import dlq_schema
from catalog.redrive_audit import redrive_counts
from ingest.dlq_redrive import decide
from ingest.replay import (
    DEAD_LETTERS,
    RANGE,
    ROWS,
    Position,
    Range,
    ReplayRefused,
    check_replayable,
    parse_position,
    replay,
    resolve_range,
)
from ingest.replay_source import Span
from tests.unit.test_dlq_redrive import BIG, DLQ, MAIN, NARROW, T0, Committer, _widen

TOPIC = "orders"


class FakeTopic:
    """A topic in memory: records by (partition, offset), retained from `low` on per partition."""

    def __init__(self, values: Mapping[tuple[int, int], Any], low: Mapping[int, int] | None = None) -> None:
        self.name = TOPIC
        self.records: dict[tuple[int, int], dict[str, Any]] = {
            key: {
                "topic": TOPIC,
                "partition": key[0],
                "offset": key[1],
                "timestamp": T0 + dt.timedelta(minutes=key[1]),
                "key": str(key[1]).encode(),
                "value": json.dumps(value).encode(),
                "headers": None,
            }
            for key, value in values.items()
        }
        self.low = dict(low or {})
        self.reads = 0

    def partitions(self) -> list[int]:
        return sorted({p for p, _ in self.records})

    def watermarks(self, partition: int) -> tuple[int, int]:
        offsets = [o for p, o in self.records if p == partition]
        return self.low.get(partition, 0), max(offsets) + 1

    def offset_at(self, partition: int, time_ms: int) -> int:
        at = dt.datetime.fromtimestamp(time_ms / 1000, dt.UTC)
        low = self.low.get(partition, 0)
        found = [
            o for (p, o), r in self.records.items() if p == partition and o >= low and r["timestamp"] >= at
        ]
        return min(found) if found else self.watermarks(partition)[1]

    def read(self, spans: Mapping[int, Span]) -> dict[tuple[int, int], dict[str, Any]]:
        self.reads += 1
        return {
            k: dict(r)
            for k, r in self.records.items()
            if k[0] in spans and spans[k[0]].start <= k[1] < spans[k[0]].end and k[1] >= self.low.get(k[0], 0)
        }


@pytest.fixture
def catalog(tmp_path: Path) -> SqlCatalog:
    catalog = SqlCatalog(
        "test", uri=f"sqlite:///{tmp_path / 'catalog.db'}", warehouse=f"file://{tmp_path / 'warehouse'}"
    )
    catalog.create_namespace("ns")
    catalog.create_table(MAIN, NARROW, properties={"floe.source.format": "json"})
    catalog.create_table(DLQ, dlq_schema())
    return catalog


def _ingest(catalog: SqlCatalog, topic: FakeTopic, keys: list[tuple[int, int]]) -> None:
    """What ingestion did with `keys`: one data file of its rows, one dead-letter file of the rest."""
    main = catalog.load_table(MAIN)
    decided = decide([topic.records[k] for k in keys], main.schema())
    rows = [d.row for d in decided.values() if d.row is not None]
    dead = [
        {**topic.records[k], "error": d.reason, "failed_at": T0} for k, d in decided.items() if d.row is None
    ]
    if rows:
        main.append(pa.Table.from_pylist(rows, schema=schema_to_pyarrow(main.schema())))
    if dead:
        dlq = catalog.load_table(DLQ)
        dlq.append(pa.Table.from_pylist(dead, schema=schema_to_pyarrow(dlq.schema())))


def _keys(catalog: SqlCatalog) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    rows = catalog.load_table(MAIN).scan().to_arrow().to_pylist()
    dead = catalog.load_table(DLQ).scan().to_arrow().to_pylist()
    return (
        sorted((r["_kafka"]["partition"], r["_kafka"]["offset"]) for r in rows),
        sorted((d["partition"], d["offset"]) for d in dead),
    )


def _topic() -> FakeTopic:
    """Two partitions of 10 records; every third amount is too big for an int (a dead letter at first)."""
    return FakeTopic(
        {(p, o): {"id": p * 100 + o, "amount": BIG if o % 3 == 0 else o} for p in (0, 1) for o in range(10)}
    )


def _seeded(catalog: SqlCatalog) -> FakeTopic:
    topic = _topic()
    _ingest(catalog, topic, [(p, o) for p in (0, 1) for o in range(5)])
    _ingest(catalog, topic, [(p, o) for p in (0, 1) for o in range(5, 10)])
    return topic


def test_a_range_is_rebuilt_in_one_commit_and_nothing_outside_it_changes(catalog: SqlCatalog) -> None:
    topic = _seeded(catalog)
    before_rows = catalog.load_table(MAIN).scan().to_arrow().to_pylist()
    assert len(catalog.load_table(DLQ).scan().to_arrow()) == 8  # offsets 0, 3, 6, 9 of both partitions
    _widen(catalog.load_table(MAIN))
    committed = {0: 10, 1: 10}
    range_ = resolve_range(topic, Position(offset=3), Position(offsets={0: 7}), committed)
    # --to names partition 0 only: the other partitions end at the committed offsets.
    assert range_.spans == {0: Span(3, 7), 1: Span(3, 10)}

    dry = replay(catalog.load_table, Committer(catalog), MAIN, DLQ, topic, range_, dry_run=True)
    assert (dry.records, dry.rows, dry.dead_letters, dry.commits) == (11, 11, 0, 0)
    assert (dry.rows_replaced, dry.dead_letters_replaced) == (6, 5)
    assert _keys(catalog)[1] != []  # a dry run changes nothing

    committer = Committer(catalog)
    result = replay(catalog.load_table, committer, MAIN, DLQ, topic, range_)
    assert (result.records, result.rows, result.dead_letters, result.commits) == (11, 11, 0, 1)
    rows, dead = _keys(catalog)
    inside = {(0, o) for o in range(3, 7)} | {(1, o) for o in range(3, 10)}
    # Every record once; the range's former dead letters (3, 6, 9) decode with the wider schema.
    assert sorted(rows + dead) == sorted(topic.records)
    assert set(dead) == {(0, 0), (1, 0), (0, 9)}
    assert all(key in rows for key in inside)
    # Rows outside the range are the very rows ingestion wrote.
    after = catalog.load_table(MAIN).scan().to_arrow().to_pylist()
    outside = [r for r in before_rows if (r["_kafka"]["partition"], r["_kafka"]["offset"]) not in inside]
    kept = [r for r in after if (r["_kafka"]["partition"], r["_kafka"]["offset"]) not in inside]
    assert sorted(outside, key=str) == sorted(kept, key=str)
    replayed = next(r for r in after if r["_kafka"]["partition"] == 1 and r["_kafka"]["offset"] == 6)
    assert (replayed["id"], replayed["amount"], replayed["_kafka"]["key"]) == (106, BIG, b"6")
    assert replayed["_kafka"]["timestamp"] == T0 + dt.timedelta(minutes=6)
    # Both changes pinned to what was read; no Kafka offsets; the counts and range in the summary.
    assert not any("floe.kafka" in json.dumps(body) for body in committer.bodies)
    for change in committer.bodies[0]:
        assert sorted(r["type"] for r in change["requirements"]) == [
            "assert-ref-snapshot-id",
            "assert-table-uuid",
        ]
    snapshot = catalog.load_table(MAIN).current_snapshot()
    assert snapshot is not None
    assert snapshot.summary is not None
    assert (snapshot.summary[ROWS], snapshot.summary[DEAD_LETTERS]) == ("11", "0")
    assert json.loads(snapshot.summary[RANGE] or "") == {"0": [3, 7], "1": [3, 10]}
    # The catalog's audit entry of the transaction carries the counts.
    request = CommitTableRequest.model_validate(committer.bodies[0][0])
    assert redrive_counts(request.updates) == "replayed=11 rows=11 dead-letters=0"

    # Run again: the same rows replace themselves, nothing is doubled.
    again = replay(catalog.load_table, Committer(catalog), MAIN, DLQ, topic, range_)
    assert (again.rows_replaced, again.dead_letters_replaced, again.commits) == (11, 0, 1)
    assert _keys(catalog) == (rows, dead)


def test_a_record_that_no_longer_decodes_moves_to_the_dead_letter_table(catalog: SqlCatalog) -> None:
    topic = FakeTopic({(0, o): {"id": o, "amount": o} for o in range(4)})
    _ingest(catalog, topic, [(0, o) for o in range(4)])
    topic.records[(0, 2)]["value"] = b'{"id": "two"}'  # as if it had been decoded wrongly
    result = replay(catalog.load_table, Committer(catalog), MAIN, DLQ, topic, Range({0: Span(1, 3)}))
    assert (result.rows, result.dead_letters, result.rows_replaced) == (1, 1, 2)
    rows, dead = _keys(catalog)
    assert (rows, dead) == ([(0, 0), (0, 1), (0, 3)], [(0, 2)])
    [letter] = catalog.load_table(DLQ).scan().to_arrow().to_pylist()
    assert letter["error"].startswith("field 'id'")
    assert letter["value"] == b'{"id": "two"}'


def test_a_refused_commit_is_rebuilt_and_a_lost_answer_found_landed(catalog: SqlCatalog) -> None:
    topic = _seeded(catalog)
    _widen(catalog.load_table(MAIN))
    range_ = Range({0: Span(0, 10)})
    # Ingestion moves the data table before the first commit arrives: rebuilt on it, with the same files.
    committer = Committer(catalog, refuse_first=1)
    result = replay(catalog.load_table, committer, MAIN, DLQ, topic, range_)
    assert (result.commits, result.attempts) == (1, 2)
    assert topic.reads == 1
    # floe committed but the answer was lost: the replay finds its snapshot and does not send again.
    lost = Committer(catalog, lose=1)
    result = replay(catalog.load_table, lost, MAIN, DLQ, topic, range_)
    assert (result.commits, lost.sent) == (1, 1)
    rows, dead = _keys(catalog)
    assert sorted(rows + dead) == sorted(topic.records)
    assert [k for k in rows if k[0] == 0] == [(0, o) for o in range(10)]


def test_the_range_ends_at_the_committed_offsets_and_retention_is_refused(catalog: SqlCatalog) -> None:
    topic = _topic()
    # Nothing past what ingestion committed: --to beyond it is clipped, a partition without offsets skipped.
    range_ = resolve_range(topic, Position(offset=2), Position(offset=50), {0: 6})
    assert (range_.spans, range_.clipped) == ({0: Span(2, 6)}, [0, 1])
    by_time = resolve_range(topic, Position(time=T0 + dt.timedelta(minutes=4)), None, {0: 10, 1: 8})
    assert by_time.spans == {0: Span(4, 10), 1: Span(4, 8)}
    pairs = resolve_range(topic, parse_position("1:3"), None, {0: 10, 1: 10})
    assert pairs.spans == {1: Span(3, 10)}
    with pytest.raises(ReplayRefused, match="no partition 7"):
        resolve_range(topic, parse_position("7:0"), None, {0: 10})
    retained = FakeTopic({(0, o): {"id": o} for o in range(10)}, low={0: 5})
    with pytest.raises(ReplayRefused, match="no longer holds partition 0's offsets 2 to 4"):
        resolve_range(retained, Position(offset=2), None, {0: 10})
    assert resolve_range(retained, Position(offset=5), None, {0: 10}).spans == {0: Span(5, 10)}


def test_a_time_range_retention_cut_into_is_refused(catalog: SqlCatalog) -> None:
    topic = FakeTopic({(0, o): {"id": o, "amount": o} for o in range(10)})
    _ingest(catalog, topic, [(0, o) for o in range(10)])
    topic.low = {0: 5}  # retention removed offsets 0-4 (record times T0 .. T0+4min)
    for minutes, refused in ((2, True), (5, False), (6, False)):
        start = Position(time=T0 + dt.timedelta(minutes=minutes))
        range_ = resolve_range(topic, start, None, {0: 10})
        assert range_.spans == {0: Span(max(5, minutes), 10)}
        if refused:  # resolved to offset 5, and the table holds records of that time before it
            with pytest.raises(ReplayRefused, match="before offset 5, and some of them are from"):
                replay(catalog.load_table, Committer(catalog), MAIN, DLQ, topic, range_, dry_run=True)
        else:
            replay(catalog.load_table, Committer(catalog), MAIN, DLQ, topic, range_, dry_run=True)


def test_rows_whose_records_the_topic_lost_are_refused(catalog: SqlCatalog) -> None:
    topic = _seeded(catalog)
    del topic.records[(0, 4)]  # compacted away: its row would be removed and never come back
    with pytest.raises(ReplayRefused, match="partition 0 offset 4"):
        replay(catalog.load_table, Committer(catalog), MAIN, DLQ, topic, Range({0: Span(0, 10)}))
    assert len(catalog.load_table(MAIN).scan().to_arrow()) == 12


def test_positions_and_table_kinds() -> None:
    assert parse_position("120") == Position(offset=120)
    assert parse_position("0:120, 1:98") == Position(offsets={0: 120, 1: 98})
    assert parse_position("2026-11-28T10:00:00Z") == Position(time=T0)
    assert parse_position("2026-11-28T10:00:00") == Position(time=T0)
    with pytest.raises(ValueError, match="not an offset"):
        parse_position("yesterday")


def test_tables_it_cannot_rebuild_are_refused(catalog: SqlCatalog) -> None:
    catalog.create_table(("ns", "up"), NARROW, properties={"floe.table-mode": "upsert"})
    catalog.create_table(("ns", "avro"), NARROW, properties={"floe.source.format": "avro"})
    for name, why in (("up", "upsert table: its rows are each key's latest"), ("avro", "JSON values only")):
        with pytest.raises(ReplayRefused, match=why):
            check_replayable(catalog.load_table(("ns", name)), f"ns.{name}")


def test_the_command_says_what_it_did_and_refuses_a_bad_position() -> None:
    from click.testing import CliRunner

    from floe.cli import main
    from floe.cli.replay import describe
    from ingest.replay import ReplayResult

    result = ReplayResult("ns.orders", {0: Span(3, 7)}, [1], records=4, rows=3, dead_letters=1)
    result.rows_replaced, result.dead_letters_replaced, result.files_rewritten = 2, 2, 3
    result.commits, result.snapshots = 1, [11, 12]
    assert describe(result).splitlines() == [
        "ns.orders: replayed 4 records (partition:[from,to) 0:[3,7)): 3 rows, 1 dead letters; "
        "replacing 2 rows and 2 dead letters (3 files rewritten)",
        "  --to clipped to the table's committed offsets in partition(s) 1",
        "  committed in 1 commit: snapshots 11, 12",
    ]
    bad = CliRunner().invoke(main, ["replay", "--table", "ns.orders", "--from", "yesterday"])
    assert bad.exit_code == 2
    assert "not an offset (123), partition offsets (0:120,1:98) or an ISO-8601 time" in bad.output
