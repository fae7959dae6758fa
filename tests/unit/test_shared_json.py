"""The shared consumer's two JSON decoders agree: Arrow's reader (a batch at once) answers only when
every value is a good row, and then with the rows the per-record decoder gives; otherwise it leaves the
batch to the per-record decoder, whose reasons are the Spark path's (`ingest.reasons`)."""

from __future__ import annotations

import datetime as dt
import json
import time
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Message
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.schema import Schema
from pyiceberg.types import (
    BooleanType,
    DoubleType,
    FloatType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestamptzType,
)

from catalog.pipelines.columns import KAFKA_FIELD
from ingest.decode import user_fields
from ingest.reasons import json_reason
from ingest.shared.json_arrow import ArrowJson, arrow_reads
from ingest.shared.json_rows import Decoded, JsonRows, _convert, _first_missing, readable
from ingest.shared.tables import (
    PER_RECORD_MAX,
    Record,
    RecordColumns,
    _kafka,
    _kafka_column,
    _newest_seconds,
)

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "name", StringType(), required=False),
    NestedField(3, "score", DoubleType(), required=False),
    NestedField(4, "at", TimestamptzType(), required=False),
    NestedField(5, "device", StructType(NestedField(6, "os", StringType(), required=False)), required=False),
    NestedField(7, "tags", ListType(8, StringType(), element_required=False), required=False),
    KAFKA_FIELD,
)
TABLE = schema_to_pyarrow(SCHEMA, include_field_ids=True)

GOOD = [
    {"id": 1, "name": "a", "score": 1, "at": "2026-11-21T10:00:00Z", "device": {"os": "x"}, "tags": ["t"]},
    {"id": 2, "at": "2026-11-21T10:00:00+02:00", "extra": 5},
    {"id": 3, "name": None, "tags": []},
]


def test_arrow_reads_a_batch_of_good_rows_as_the_per_record_decoder_does() -> None:
    values = [json.dumps(v).encode() for v in GOOD]
    batch = ArrowJson(SCHEMA, TABLE).read(values)
    assert batch is not None
    rows = JsonRows(SCHEMA)
    slow = [rows.decode(v) for v in values]
    for name, column in batch.columns.items():
        expected = pa.array([d.row[name] if d.row else None for d in slow], TABLE.field(name).type)
        assert column.to_pylist() == expected.to_pylist(), name
    assert batch.records_with_undeclared == 1
    assert dict(batch.undeclared) == {"extra": 1}
    assert batch.value_bytes == sum(len(v) for v in values)
    assert slow[1].undeclared == ("extra",)
    assert batch.columns["at"].to_pylist()[1] == dt.datetime(2026, 11, 21, 8, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    "bad",
    [
        b"not json",
        b'{"name": "no id"}',
        b'{"id": "12"}',
        b'{"id": 1.5}',
        b'{"id": 1, "name": 12}',
        b'{"id": 1, "score": "NaN"}',
        b'{"id": 1, "at": 1700000000}',
        b'{"id": 1}{"id": 2}',
        b'{"id":\n1}',
        b'{"id": 1}\n',  # a line break at either end of a value, or a carriage return
        b'\n{"id": 1}',
        b'{"id": 1,\r"name": "x"}',
        b"[1]",
        b"",
        None,
        b'{"id": 1, "device": {"os": "x", "undeclared": 1}}',
    ],
)
def test_arrow_leaves_any_batch_it_might_read_otherwise_to_the_per_record_decoder(bad: bytes | None) -> None:
    values = [json.dumps(GOOD[0]).encode(), bad]
    assert ArrowJson(SCHEMA, TABLE).read(values) is None


def test_what_each_decoder_takes() -> None:
    assert arrow_reads(SCHEMA)
    assert readable(SCHEMA)
    with_map = Schema(
        NestedField(1, "m", MapType(2, StringType(), 3, StringType(), value_required=False), required=False)
    )
    assert not arrow_reads(with_map)
    assert readable(with_map)
    required_inside = Schema(
        NestedField(1, "s", StructType(NestedField(2, "x", LongType(), required=True)), required=False)
    )
    assert not arrow_reads(required_inside)


def test_per_record_reasons_are_the_spark_paths() -> None:
    rows = JsonRows(SCHEMA)
    assert rows.decode(None).error == "record has no value (tombstone)"
    assert rows.decode(b'{"name": "x"}').error == "required field id is missing or null"
    assert rows.decode(b'{"id": "abc"}').error == "field 'id': expected long, got string \"abc\""
    assert rows.decode(b"[1,2]").error == "not a JSON object (got array)"
    # A string field keeps any JSON value as its text; NaN text is a double.
    decoded = rows.decode(b'{"id": 1, "name": {"a": 1}, "score": "NaN"}')
    assert decoded.row is not None
    assert decoded.row["name"] == '{"a":1}'
    assert decoded.row["score"] != decoded.row["score"]


def message(
    partition: int,
    offset: int,
    timestamp_ms: int,
    key: bytes | None = None,
    value: bytes | None = b"{}",
    headers: list[tuple[str, str | bytes | None]] | None = None,
    kind: int = 1,  # CreateTime; 0: none (a pre-0.10 message format)
) -> Message:
    """A polled record as the shared consumer buffers it: confluent-kafka's own `Message`."""
    return Message(
        topic="t",
        partition=partition,
        offset=offset,
        key=key,
        value=value,
        headers=headers,
        timestamp=(kind, timestamp_ms),
    )


def test_the_kafka_column_built_by_columns_equals_the_rows() -> None:
    messages = [
        message(0, 5, 1_700_000_000_123, b"k", b"{}", [("h", b"v")]),
        message(1, 6, 1_700_000_000_456),
    ]
    kind = TABLE.field("_kafka").type
    columns = RecordColumns.of(messages)
    built = _kafka_column(columns, kind)
    assert built.to_pylist() == pa.array([_kafka(r) for r in columns.records()], kind).to_pylist()
    assert built.type == kind
    assert built.to_pylist()[0]["headers"] == [{"key": "h", "value": b"v"}]
    # A batch without headers (most): the headers child is all nulls, still of the column's type.
    plain = RecordColumns.of([message(2, 7, 1_700_000_000_789, b"k2"), messages[1]])
    built = _kafka_column(plain, kind)
    assert built.type == kind
    assert built.to_pylist() == pa.array([_kafka(r) for r in plain.records()], kind).to_pylist()


def test_columns_taken_from_polled_messages_keep_every_field() -> None:
    messages = [message(0, 5, 1_700_000_000_123, b"k", b'{"id": 1}', [("h", None)]), message(3, 9, 7)]
    assert RecordColumns.of(messages).records() == [
        Record(0, 5, 1_700_000_000_123, b"k", b'{"id": 1}', [("h", None)]),
        Record(3, 9, 7, None, b"{}", None),
    ]
    assert RecordColumns.of([]).records() == []
    # A record without a timestamp counts from when its batch was taken, as a record made now would.
    before = int(time.time() * 1000)
    stamps = RecordColumns.of([message(0, 1, -1, kind=0), message(0, 2, 42)]).timestamps_ms
    assert before <= stamps[0] <= int(time.time() * 1000)
    assert stamps[1] == 42


def test_records_the_table_holds_already_are_dropped_and_the_rest_kept_in_order() -> None:
    columns = RecordColumns.of(
        [message(p, offset, offset) for p, offset in [(0, 3), (1, 10), (0, 4), (1, 11), (2, 0), (0, 5)]]
    )
    # Nothing committed at or past these records: the same columns (no copy).
    assert columns.from_offsets({0: 3, 1: 10}) is columns
    assert columns.from_offsets({}) is columns
    kept = columns.from_offsets({0: 5, 1: 11, 2: 0, 7: 100})  # a partition not in the batch is no reason
    assert list(zip(kept.partitions, kept.offsets, strict=True)) == [(1, 11), (2, 0), (0, 5)]
    assert kept.timestamps_ms == [11, 0, 5]
    assert not columns.from_offsets({0: 6, 1: 12, 2: 1}).offsets


@pytest.mark.parametrize(
    "stamps",
    [
        [(0, 5), (1, 9), (0, 7), (2, -1), (1, 3)],  # several partitions; one with no time (-1)
        [(3, 10), (3, 4)],  # one partition
        [(1, -1)],
    ],
)
def test_each_partitions_newest_time_and_last_offset(stamps: list[tuple[int, int]]) -> None:
    columns = RecordColumns.of([message(p, offset, t) for offset, (p, t) in enumerate(stamps)])
    records = columns.records()
    expected: dict[int, float] = {}
    last: dict[int, int] = {}
    for r in records:  # the record-by-record loop this replaced
        expected[r.partition] = max(expected.get(r.partition, 0.0), r.timestamp_ms / 1000)
        last[r.partition] = r.offset
    found = _newest_seconds(columns, dict(zip(columns.partitions, columns.offsets, strict=True)))
    assert found == expected
    assert list(found) == list(expected)
    assert dict(zip(columns.partitions, columns.offsets, strict=True)) == last


PLAIN = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "small", IntegerType(), required=False),
    NestedField(3, "name", StringType(), required=False),
    NestedField(4, "score", DoubleType(), required=False),
    NestedField(5, "ok", BooleanType(), required=False),
    NestedField(6, "ratio", FloatType(), required=False),
)


@pytest.mark.parametrize(
    "document",
    [
        {"id": 1, "small": 2, "name": "n", "score": 1.5, "ok": True, "ratio": 0.25},
        {"id": 2**63 - 1, "small": -(2**31), "score": 3, "ratio": 2},  # ints for floats: converted
        {"id": 2**63},  # out of range, past the plain check
        {"id": 1, "small": 2**31},
        {"id": True},  # a boolean is no long (Python's bool is an int)
        {"id": 1, "ok": 1},
        {"id": 1, "score": True},
        {"id": 1, "score": "NaN", "ratio": "-Infinity"},  # Spark's non-finite texts
        {"id": 1, "score": "1.5"},
        {"id": 1, "name": {"a": [1, 2]}},  # a string field keeps any JSON value as its text
        {"id": 1, "name": 5},
        {"id": 1.0},
        {"small": "x"},  # the type problem is reported before the missing required field
        {"name": "no id"},
        {"id": None, "extra": 1},
    ],
)
def test_the_per_record_decoders_shortcuts_agree_with_the_full_rules(document: dict[str, Any]) -> None:
    """`JsonRows` takes the common values (an int for a long, a str for a string) without the full
    rules of `ingest.reasons`; row, reason and undeclared keys are what the full rules give."""
    value = json.dumps(document).encode()
    fields = user_fields(PLAIN)
    reason = json_reason(value, fields)
    decoded = JsonRows(PLAIN).decode(value)
    if reason is not None:
        assert decoded == Decoded(None, reason)
        return
    row = {f.name: _convert(document.get(f.name), f.field_type) for f in fields}
    missing = _first_missing(row, fields, "")
    if missing is not None:
        assert decoded == Decoded(None, f"required field {missing} is missing or null")
        return
    assert decoded.row is not None
    assert decoded.error is None
    assert decoded.undeclared == tuple(k for k in document if k not in {f.name for f in fields})
    assert json.dumps(decoded.row) == json.dumps(row)  # NaN == NaN as text; the types too
    assert [type(v) for v in decoded.row.values()] == [type(v) for v in row.values()]


def test_a_small_batch_is_decoded_a_record_at_a_time_into_the_rows_arrow_reads() -> None:
    """Batches up to PER_RECORD_MAX records skip Arrow's reader: the same table either way."""
    values = [json.dumps(v).encode() for v in GOOD] * 4
    messages = [message(0, i, 1_700_000_000_000 + i, value=v) for i, v in enumerate(values)]
    columns = RecordColumns.of(messages)
    assert len(values) <= PER_RECORD_MAX
    rows = JsonRows(SCHEMA)
    slow: list[dict[str, Any]] = []
    for record in columns.records():
        decoded = rows.decode(record.value)
        assert decoded.row is not None
        slow.append({**decoded.row, "_kafka": _kafka(record)})
    batch = ArrowJson(SCHEMA, TABLE).read(columns.values)
    assert batch is not None
    kafka = _kafka_column(columns, TABLE.field("_kafka").type)
    fast = pa.Table.from_arrays(
        [batch.columns[f.name] if f.name != "_kafka" else kafka for f in TABLE], schema=TABLE
    )
    assert pa.Table.from_pylist(slow, schema=TABLE).equals(fast)
