"""Dead-letter redrive (ingest/dlq_redrive.py) on real Iceberg tables in a local pyiceberg SQL catalog:
what decodes with the current schema moves to the data table once, what still fails stays with its
new reason, and a refused or lost commit never lands a record twice. The real floe catalog, Kafka and
ingestion: tests/e2e/test_dlq_redrive.py."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.schema import Schema
from pyiceberg.table import CommitTableRequest, Table
from pyiceberg.types import IntegerType, LongType, NestedField, StringType

from catalog import redrive_audit
from catalog.pipelines.columns import KAFKA_FIELD, dlq_schema
from catalog.redrive_audit import redrive_counts
from ingest.dlq_redrive import (
    REDRIVEN,
    STILL_FAILING,
    RedriveRefused,
    RedriveResult,
    check_redrivable,
    plan_round,
    redrive,
)
from ingest.shared.json_rows import JsonRows

NARROW = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "amount", IntegerType(), required=False),
    KAFKA_FIELD,
)
MAIN, DLQ = ("ns", "orders"), ("ns", "orders_dlq")
T0 = dt.datetime(2026, 11, 28, 10, tzinfo=dt.UTC)
BIG = 3_000_000_000  # does not fit an int: a dead letter until `amount` is widened to long


def _letter(partition: int, offset: int, value: Any, error: str, minutes: int = 0) -> dict[str, Any]:
    return {
        "topic": "orders",
        "partition": partition,
        "offset": offset,
        "timestamp": T0 + dt.timedelta(minutes=minutes),
        "key": str(offset).encode(),
        "value": value if isinstance(value, bytes) else json.dumps(value).encode(),
        "headers": [{"key": "h", "value": b"v"}],
        "error": error,
        "failed_at": T0,
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


def _widen(table: Table) -> None:
    with table.update_schema() as update:
        update.update_column("amount", LongType())


def _add_dead_letters(table: Table, letters: list[dict[str, Any]]) -> None:
    import pyarrow as pa
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    table.append(pa.Table.from_pylist(letters, schema=schema_to_pyarrow(table.schema())))


class Committer:
    """floe's transaction endpoint over the SQL catalog: every table's requirements checked, then each
    change committed (nothing is committed when one requirement fails). `lose` answers a landed commit
    as lost; `refuse_first` refuses that many commits first, as when ingestion moved a table."""

    def __init__(self, catalog: SqlCatalog, *, lose: int = 0, refuse_first: int = 0) -> None:
        self.catalog = catalog
        self.lose = lose
        self.refuse_first = refuse_first
        self.sent = 0
        self.bodies: list[list[dict[str, Any]]] = []

    def __call__(self, changes: list[dict[str, Any]]) -> str:
        self.sent += 1
        self.bodies.append(changes)
        requests = [CommitTableRequest.model_validate(c) for c in changes]
        tables = [
            self.catalog.load_table((*r.identifier.namespace.root, r.identifier.name)) for r in requests
        ]
        if self.refuse_first:
            self.refuse_first -= 1
            # Another writer moves the data table (an ingestion append) before this commit arrives.
            main = self.catalog.load_table(MAIN)
            rows = main.scan().to_arrow().slice(0, 0)
            main.append(rows)
            return "refused"
        try:
            for request, table in zip(requests, tables, strict=True):
                for requirement in request.requirements:
                    requirement.validate(table.metadata)
        except Exception:
            return "refused"
        for request, table in zip(requests, tables, strict=True):
            self.catalog.commit_table(table, request.requirements, request.updates)
        if self.lose:
            self.lose -= 1
            return "connection reset"
        return "committed"


def _rows(catalog: SqlCatalog, identifier: tuple[str, str]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = catalog.load_table(identifier).scan().to_arrow().to_pylist()
    return rows


def _reason(value: Any) -> str:
    """Why ingestion made `value` a dead letter under the narrow schema."""
    reason = JsonRows(NARROW).decode(json.dumps(value).encode()).error
    assert reason is not None
    return reason


def _seed(catalog: SqlCatalog) -> None:
    big3, abc, big7 = {"id": 3, "amount": BIG}, {"id": 5, "amount": "abc"}, {"id": 7, "amount": BIG}
    _add_dead_letters(
        catalog.load_table(DLQ),
        [
            _letter(0, 3, big3, _reason(big3)),
            _letter(0, 5, abc, _reason(abc)),
            _letter(1, 2, big7, _reason(big7), minutes=30),
        ],
    )
    _add_dead_letters(
        catalog.load_table(DLQ), [_letter(1, 9, b"{not json", "not valid JSON: old reason", minutes=30)]
    )


def test_what_now_decodes_moves_once_and_what_still_fails_stays_with_its_new_reason(
    catalog: SqlCatalog,
) -> None:
    _seed(catalog)
    # Before the fix nothing decodes; the one dead letter with an outdated reason gets the current one.
    before = redrive(catalog.load_table, Committer(catalog), MAIN, DLQ)
    assert (before.redriven, before.still_failing, before.reasons_changed, before.commits) == (0, 4, 1, 1)
    assert _rows(catalog, MAIN) == []
    _widen(catalog.load_table(MAIN))
    dry = redrive(catalog.load_table, Committer(catalog), MAIN, DLQ, dry_run=True)
    assert (dry.redriven, dry.still_failing, dry.reasons_changed, dry.commits) == (2, 2, 1, 0)
    assert len(_rows(catalog, DLQ)) == 4  # a dry run changes nothing
    committer = Committer(catalog)
    result = redrive(catalog.load_table, committer, MAIN, DLQ)
    assert (result.examined, result.redriven, result.still_failing, result.commits) == (4, 2, 2, 1)
    assert result.reasons_changed == 1  # "abc" is not a long: its reason names the new type
    main = sorted(_rows(catalog, MAIN), key=lambda r: r["id"])
    assert [(r["id"], r["amount"]) for r in main] == [(3, BIG), (7, BIG)]
    kafka = main[0]["_kafka"]
    assert (kafka["partition"], kafka["offset"], kafka["key"]) == (0, 3, b"3")
    assert kafka["timestamp"] == T0
    assert kafka["headers"] == [{"key": "h", "value": b"v"}]
    kept = {(r["partition"], r["offset"]): r["error"] for r in _rows(catalog, DLQ)}
    assert set(kept) == {(0, 5), (1, 9)}
    assert kept[(0, 5)] == "field 'amount': expected long, got string \"abc\""
    assert kept[(1, 9)].startswith("not valid JSON")
    assert kept[(1, 9)] != "not valid JSON: old reason"
    # Both snapshots carry the counts; the catalog's audit entry repeats them.
    for identifier in (MAIN, DLQ):
        snapshot = catalog.load_table(identifier).current_snapshot()
        assert snapshot is not None
        assert snapshot.summary is not None
        summary = snapshot.summary
        assert (summary[REDRIVEN], summary[STILL_FAILING]) == ("2", "2")
    assert (REDRIVEN, STILL_FAILING) == (redrive_audit.REDRIVEN, redrive_audit.STILL_FAILING)
    # Each table's change is pinned to the table and the snapshot its rows were read from.
    for change in committer.bodies[0]:
        kinds = sorted(r["type"] for r in change["requirements"])
        assert kinds == ["assert-ref-snapshot-id", "assert-table-uuid"]
    request = CommitTableRequest.model_validate(committer.bodies[0][0])
    assert redrive_counts(request.updates) == "redriven=2 still-failing=2"
    # Neither snapshot carries Kafka offsets: the offsets fence and stored offsets are untouched.
    assert not any("floe.kafka" in json.dumps(body) for body in committer.bodies)
    again = redrive(catalog.load_table, Committer(catalog), MAIN, DLQ)
    assert (again.redriven, again.commits) == (0, 0)
    assert len(_rows(catalog, MAIN)) == 2


def test_since_selects_by_kafka_record_time(catalog: SqlCatalog) -> None:
    _seed(catalog)
    _widen(catalog.load_table(MAIN))
    result = redrive(catalog.load_table, Committer(catalog), MAIN, DLQ, since=T0 + dt.timedelta(minutes=10))
    assert (result.examined, result.redriven) == (2, 1)
    assert [r["id"] for r in _rows(catalog, MAIN)] == [7]
    assert {(r["partition"], r["offset"]) for r in _rows(catalog, DLQ)} == {(0, 3), (0, 5), (1, 9)}


def test_a_refused_commit_is_built_again_and_lands_once(catalog: SqlCatalog) -> None:
    _seed(catalog)
    _widen(catalog.load_table(MAIN))
    committer = Committer(catalog, refuse_first=2)
    result = redrive(catalog.load_table, committer, MAIN, DLQ)
    assert (result.redriven, result.commits, result.attempts, committer.sent) == (2, 1, 3, 3)
    assert sorted(r["id"] for r in _rows(catalog, MAIN)) == [3, 7]


def test_a_lost_answer_is_found_landed_and_not_sent_again(catalog: SqlCatalog) -> None:
    _seed(catalog)
    _widen(catalog.load_table(MAIN))
    committer = Committer(catalog, lose=1)
    result = redrive(catalog.load_table, committer, MAIN, DLQ)
    assert (result.redriven, result.commits, committer.sent) == (2, 1, 1)
    assert sorted(r["id"] for r in _rows(catalog, MAIN)) == [3, 7]


def test_a_resent_stale_commit_is_refused(catalog: SqlCatalog) -> None:
    """A commit sent again after it landed (a zombie redrive) fails its requirements: nothing twice."""
    _seed(catalog)
    _widen(catalog.load_table(MAIN))
    committer = Committer(catalog)
    redrive(catalog.load_table, committer, MAIN, DLQ)
    assert committer(committer.bodies[0]) == "refused"
    assert sorted(r["id"] for r in _rows(catalog, MAIN)) == [3, 7]


def test_copies_of_a_record_in_several_files_are_redriven_once_even_across_rounds() -> None:
    wide = Schema(NestedField(1, "id", LongType(), required=True), KAFKA_FIELD)
    copy = _letter(0, 1, {"id": 1}, "old")
    files: list[Any] = [
        ("f1", [copy, _letter(0, 2, {"id": 2}, "old")]),
        ("f2", [_letter(0, 3, {"id": 3}, "old")]),
        ("f3", [dict(copy)]),
    ]
    plan = plan_round(files, wide, None, RedriveResult("t"), cap=1)
    # f1 is taken (then the cap is reached), and with it f3, which holds a copy of a record it moves.
    assert plan.removed == ["f1", "f3"]
    assert sorted(r["id"] for r in plan.rows) == [1, 2]
    assert plan.duplicates == 1
    assert plan.more
    assert plan.kept == []


def test_tables_it_cannot_decode_for_are_refused(catalog: SqlCatalog) -> None:
    catalog.create_table(("ns", "avro"), NARROW, properties={"floe.source.format": "avro"})
    catalog.create_table(("ns", "up"), NARROW, properties={"floe.table-mode": "upsert"})
    catalog.create_table(("ns", "plain"), Schema(NestedField(1, "id", StringType(), required=False)))
    for name, why in (("avro", "decodes JSON values only"), ("up", "upsert"), ("plain", "no _kafka")):
        with pytest.raises(RedriveRefused, match=why):
            check_redrivable(catalog.load_table(("ns", name)), f"ns.{name}")


def test_the_redrive_history_reads_only_what_a_redrive_wrote() -> None:
    snapshots = [
        {"snapshot-id": 1, "timestamp-ms": 1000, "summary": {"operation": "append"}},
        {"snapshot-id": 2, "timestamp-ms": 2000, "summary": {REDRIVEN: "20", STILL_FAILING: "5"}},
        {"snapshot-id": 3, "timestamp-ms": 3000, "summary": {REDRIVEN: "<b>", STILL_FAILING: "5"}},
        {"snapshot-id": 4, "timestamp-ms": 4000, "summary": {REDRIVEN: "9" * 40}},
        {"snapshot-id": 5, "timestamp-ms": 5000, "summary": {REDRIVEN: "0", STILL_FAILING: "x"}},
        "not a snapshot",
    ]
    history = redrive_audit.redrive_history({"snapshots": snapshots})
    assert [(r.snapshot_id, r.redriven, r.still_failing) for r in history] == [(5, 0, None), (2, 20, 5)]


def test_a_table_partitioned_by_record_hour_gets_its_rows_in_their_partitions(catalog: SqlCatalog) -> None:
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import HourTransform

    timestamp_id = NARROW.find_field("_kafka.timestamp").field_id
    spec = PartitionSpec(PartitionField(timestamp_id, 1000, HourTransform(), "hour"))
    wide = Schema(*[NestedField(2, "amount", LongType()) if f.name == "amount" else f for f in NARROW.fields])
    hourly = ("ns", "hourly")
    catalog.create_table(hourly, wide, partition_spec=spec, properties={"floe.source.format": "json"})
    _seed(catalog)  # two records 30 minutes apart that decode: 10:00 and 10:30, one hour
    letters = catalog.load_table(DLQ)
    _add_dead_letters(letters, [_letter(2, 1, {"id": 9, "amount": 1}, "old", minutes=90)])  # 11:30
    result = redrive(catalog.load_table, Committer(catalog), hourly, DLQ)
    assert result.redriven == 3
    files = catalog.load_table(hourly).inspect.files().to_pylist()
    assert sorted(f["record_count"] for f in files) == [1, 2]
    assert sorted(r["id"] for r in _rows(catalog, hourly)) == [3, 7, 9]


def test_a_redriven_record_fills_a_field_added_since_it_failed(catalog: SqlCatalog) -> None:
    _widen(catalog.load_table(MAIN))
    with catalog.load_table(MAIN).update_schema() as update:
        update.add_column("note", StringType())
    value = {"id": 1, "amount": BIG, "note": "kept"}
    _add_dead_letters(catalog.load_table(DLQ), [_letter(0, 1, value, _reason(value))])
    assert redrive(catalog.load_table, Committer(catalog), MAIN, DLQ).redriven == 1
    assert [(r["id"], r["note"]) for r in _rows(catalog, MAIN)] == [(1, "kept")]
