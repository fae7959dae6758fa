"""One shared table's batch: its buffered records split into rows and dead letters, and both commits.

`SharedTable.prepare` turns the records buffered for a table into the appends of its data table and
its dead-letter table (`TableAppender`), each snapshot's summary carrying the Kafka offsets it starts
from and advances to — floe's exactly-once fence, as on the Spark path (ingest/batches.py). Both go to
floe in one transaction, so a table's rows, its dead letters and their offsets land together or not
at all. Records below what the table has committed (re-read after a restart) are dropped.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, cast

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from catalog.kafka_offsets import END_OFFSETS, MAX_TIMESTAMP, MIN_TIMESTAMP, START_OFFSETS, TOPIC
from ingest.batch_rows import MAX_UNDECLARED_NAMES
from ingest.decode import KAFKA_COLUMN
from ingest.ingest_table import BatchResult, IngestTable
from ingest.shared.iceberg_append import PreparedAppend, TableAppender
from ingest.shared.json_arrow import ArrowJson, arrow_reads
from ingest.shared.json_rows import JsonRows

if TYPE_CHECKING:
    from confluent_kafka import Message


# A batch of at most this many records is decoded a record at a time even when Arrow's reader would
# take it: the reader's fixed cost (~0.5 ms of CPU and ~0.3 ms handing the input to its I/O thread)
# is more than the per-record decoder's ~25 µs a record up to here, and at a thousand quiet tables
# most batches hold a few records (`python -m benchmarks.many_tables.batch_decode`).
PER_RECORD_MAX = 32

# A record's headers as confluent-kafka gives them: (name, value) pairs, None when it has none.
Headers = Sequence[tuple[str, bytes | None]] | None


class Record(NamedTuple):
    """One Kafka record of a batch, for the steps that handle a record at a time (dead letters, a
    schema Arrow's reader does not take); the common path reads `RecordColumns` instead."""

    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: Headers


class RecordColumns(NamedTuple):
    """A batch's records field by field, taken from the polled messages once, when the batch is taken.

    The consumer keeps confluent-kafka's `Message` objects as they were polled (librdkafka has let go of
    them: their value and key are Python bytes already) rather than a `Record` per record: making one,
    and the garbage collector's passes over a buffer of young tuples, cost ~2 µs of the consumer's time a
    record at 100,000 records/s (`benchmarks/many_tables/record_cost.py`); a comprehension per field
    costs ~0.1 µs a record and field."""

    partitions: Sequence[int]
    offsets: Sequence[int]
    timestamps_ms: Sequence[int]
    keys: Sequence[bytes | None]
    values: Sequence[bytes | None]
    headers: Sequence[Headers]

    @classmethod
    def of(cls, messages: Sequence[Message]) -> RecordColumns:
        if not messages:
            return cls((), (), (), (), (), ())
        # (type, ms) pairs, only the time kept: taking the types apart too was a third of this step.
        timestamps = [m.timestamp()[1] for m in messages]
        if -1 in timestamps:  # librdkafka's "none" (a format older than Kafka 0.10): when it was taken
            now = int(time.time() * 1000)
            timestamps = [
                now if stamp == -1 and m.timestamp()[0] == 0 else stamp
                for m, stamp in zip(messages, timestamps, strict=True)
            ]
        return cls(
            cast(list[int], [m.partition() for m in messages]),  # a polled record has both
            cast(list[int], [m.offset() for m in messages]),
            timestamps,
            [m.key() for m in messages],
            [m.value() for m in messages],
            cast(list[Headers], [m.headers() for m in messages]),  # a list of pairs, as polled
        )

    def from_offsets(self, next_offsets: Mapping[int, int]) -> RecordColumns:
        """The records at or past their partition's offset in `next_offsets` (those below were
        committed already: read again after a rewind or a restart)."""
        if not self.offsets:
            return self
        needed = max(next_offsets.get(p, -1) for p in set(self.partitions))
        if min(self.offsets) >= needed:  # nothing to drop (the common case), found without a loop
            return self
        kept = [
            i
            for i, (partition, offset) in enumerate(zip(self.partitions, self.offsets, strict=True))
            if offset >= next_offsets.get(partition, -1)
        ]
        return self if len(kept) == len(self.offsets) else self.select(kept)

    def select(self, indices: list[int]) -> RecordColumns:
        picked = [[values[i] for i in indices] for values in self]
        return RecordColumns(*picked)  # type: ignore[arg-type]  # each field keeps its type

    def records(self) -> list[Record]:
        return [Record(*fields) for fields in zip(*self, strict=True)]


@dataclass
class PreparedBatch:
    """A table's batch with its appends written, waiting for the transaction."""

    table: SharedTable
    appends: list[tuple[TableAppender, PreparedAppend]]
    result: BatchResult
    main_end: dict[int, int]
    dlq_end: dict[int, int]
    started: float = 0.0  # time.monotonic() when its records were taken: the batch's seconds start here
    records: list[Message] = field(default_factory=list)  # what it was prepared from (a rebase reuses them)

    def changes(self) -> list[msgspec.Raw]:
        return [prepared.change() for _, prepared in self.appends]


@dataclass
class SharedTable:
    """A table written by the shared consumer: its appenders, committed offsets and buffered records."""

    table: IngestTable
    main: TableAppender
    dlq: TableAppender
    main_next: dict[int, int]
    # The dead-letter table's committed offsets, read at its first dead letter (most tables have none).
    read_dlq_next: Callable[[], dict[int, int]]
    rows: JsonRows = field(init=False)
    _dlq_next: dict[int, int] | None = None
    _arrow: ArrowJson | None = None
    buffer: list[Message] = field(default_factory=list)  # as polled (`RecordColumns`)
    buffered_bytes: int = 0  # of the buffered values
    first_buffered_at: float | None = None

    def __post_init__(self) -> None:
        self.rows = JsonRows(self.table.schema)

    @property
    def dlq_next(self) -> dict[int, int]:
        if self._dlq_next is None:
            self._dlq_next = self.read_dlq_next()
        return self._dlq_next

    def take(self, limit: int | None = None) -> list[Message]:
        """The oldest `limit` buffered records (all when None); the rest stay buffered, due at once."""
        if limit is None or len(self.buffer) <= limit:
            records, self.buffer, self.first_buffered_at = self.buffer, [], None
            self.buffered_bytes = 0
            return records
        records, self.buffer = self.buffer[:limit], self.buffer[limit:]
        self.buffered_bytes = sum(map(len, self.buffer))  # a message's len(): its value's
        return records

    def prepare(self, messages: list[Message]) -> PreparedBatch | None:
        """The batch of `messages` (None when the table holds every one of them already): read by
        Arrow's JSON reader when it is larger than `PER_RECORD_MAX` and every record is a good row,
        else a record at a time."""
        columns = RecordColumns.of(messages).from_offsets(self.main_next)
        if not columns.offsets:
            return None
        result = BatchResult()
        # Each partition's last record (the dict keeps the last value per key).
        main_last = dict(zip(columns.partitions, columns.offsets, strict=True))
        result.max_timestamps = _newest_seconds(columns, main_last)
        main_times = list(columns.timestamps_ms)
        fast = self._read_with_arrow(columns) if len(columns.offsets) > PER_RECORD_MAX else None
        dead: list[dict[str, Any]] = []
        dlq_last: dict[int, int] = {}
        dlq_times: list[int] = []
        if fast is not None:
            main_rows, undeclared = fast
            result.records = main_rows.num_rows
            result.value_bytes, result.records_with_undeclared, counted = undeclared
        else:
            good: list[dict[str, Any]] = []
            counted = Counter()
            for record in columns.records():
                decoded = self.rows.decode(record.value)
                if decoded.row is not None:
                    row = dict(decoded.row)
                    row[KAFKA_COLUMN] = _kafka(record)
                    good.append(row)
                    if decoded.undeclared:
                        result.records_with_undeclared += 1
                        counted.update(decoded.undeclared)
                    result.value_bytes += len(record.value or b"")
                elif record.offset >= self.dlq_next.get(record.partition, -1):
                    dead.append(_dead_letter(self.table.topic, record, decoded.error or "unknown"))
                    dlq_last[record.partition] = record.offset
                    dlq_times.append(record.timestamp_ms)
            result.records = len(good)
            main_rows = self.main.rows(good) if good else None
        result.dead_letters = len(dead)
        result.undeclared_fields = dict(counted.most_common(MAX_UNDECLARED_NAMES))
        t = self.table
        main_end = {p: max(self.main_next.get(p, 0), last + 1) for p, last in main_last.items()}
        appends = []
        summary = _summary(t.topic, self.main_next, main_end, main_times)
        appends.append((self.main, self.main.prepare(main_rows, summary)))
        dlq_end: dict[int, int] = {}
        if dead:
            dlq_end = {p: max(self.dlq_next.get(p, 0), last + 1) for p, last in dlq_last.items()}
            summary = _summary(t.topic, self.dlq_next, dlq_end, dlq_times)
            appends.append((self.dlq, self.dlq.prepare(self.dlq.rows(dead), summary)))
        result.end_offsets = main_end
        return PreparedBatch(self, appends, result, main_end, dlq_end)

    def _read_with_arrow(
        self, columns: RecordColumns
    ) -> tuple[pa.Table, tuple[int, int, Counter[str]]] | None:
        """The records as the table's rows when Arrow's reader takes every one (`.json_arrow`), with
        their values' bytes, the records with undeclared fields and those fields."""
        if self._arrow is None:
            if not arrow_reads(self.table.schema):
                return None
            self._arrow = ArrowJson(self.table.schema, self.main.arrow_schema)
        batch = self._arrow.read(columns.values)
        if batch is None:
            return None
        target = self.main.arrow_schema
        arrays = [
            batch.columns[f.name] if f.name != KAFKA_COLUMN else _kafka_column(columns, f.type)
            for f in target
        ]
        rows = pa.Table.from_arrays(arrays, schema=target)
        return rows, (batch.value_bytes, batch.records_with_undeclared, batch.undeclared)

    def committed(self, batch: PreparedBatch) -> None:
        for appender, prepared in batch.appends:
            appender.committed(prepared)
        self.main_next.update(batch.main_end)
        if batch.dlq_end:
            self.dlq_next.update(batch.dlq_end)

    def refused(self, batch: PreparedBatch) -> None:
        for appender, prepared in batch.appends:
            appender.discard(prepared)

    def rebase(self, batch: PreparedBatch) -> PreparedBatch | None:
        """`batch` (refused because another writer moved a table: maintenance, a redrive, an engine)
        prepared again on both tables as floe has them now. The committed offsets are the batch's
        own (another writer's commits carry none), so the same records are the next ones."""
        self.refused(batch)
        self.main.reload()
        self.dlq.reload()
        rebased = self.prepare(batch.records)
        if rebased is not None:
            rebased.started, rebased.records = batch.started, batch.records
        return rebased


def prepared_batch(
    taken: tuple[SharedTable, float, list[Any]],
) -> tuple[PreparedBatch | None, Exception | None]:
    """A table's batch of its taken records, or why it could not be written."""
    shared, _, records = taken
    try:
        return shared.prepare(records), None
    except Exception as exc:
        return None, exc


def on_object_store(chunk: list[SharedTable]) -> bool:
    """Whether the chunk's warehouse (one per chunk) is an object store, as its first loadable table says."""
    for shared in chunk:
        try:
            return shared.main.on_object_store
        except Exception:  # cannot load: its own prepare says why
            continue
    return False


def _summary(
    topic: str, committed: Mapping[int, int], end: Mapping[int, int], times: list[int]
) -> dict[str, str]:
    """The snapshot summary's Kafka progress: the offsets it starts from (what the table has committed
    for the batch's partitions) and advances to, and the batch's record-time range (epoch ms)."""
    start = {p: committed[p] for p in end if p in committed}
    summary = {TOPIC: topic, START_OFFSETS: _encode(start), END_OFFSETS: _encode(end)}
    if times:
        summary[MIN_TIMESTAMP], summary[MAX_TIMESTAMP] = str(min(times)), str(max(times))
    return summary


def _encode(offsets: Mapping[int, int]) -> str:
    return json.dumps({str(p): o for p, o in sorted(offsets.items())})


def _timestamp(record: Record) -> dt.datetime:
    return dt.datetime.fromtimestamp(record.timestamp_ms / 1000, dt.UTC)


def _header_rows(headers: Headers) -> list[dict[str, Any]] | None:
    if headers is None:
        return None
    return [{"key": k, "value": v} for k, v in headers]


def _kafka(record: Record) -> dict[str, Any]:
    return {
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": _timestamp(record),
        "key": record.key,
        "headers": _header_rows(record.headers),
    }


def _newest_seconds(columns: RecordColumns, partitions: Mapping[int, int]) -> dict[int, float]:
    """Each of the batch's `partitions` (in their order) with its newest record time (epoch seconds, at
    least 0)."""
    if len(partitions) == 1:
        return {columns.partitions[0]: max(0, max(columns.timestamps_ms)) / 1000}
    newest = dict.fromkeys(partitions, 0)
    for partition, stamp in zip(columns.partitions, columns.timestamps_ms, strict=True):
        if stamp > newest[partition]:
            newest[partition] = stamp
    return {p: stamp / 1000 for p, stamp in newest.items()}


def _kafka_column(columns: RecordColumns, kind: pa.DataType) -> pa.Array:
    """The `_kafka` struct of a batch's records (`columns`) built column by column (not a dict per
    record), each child made in the table's type rather than cast to it (a cast per child was half of
    this for a small batch), the times multiplied by Arrow, not per record."""
    count = len(columns.offsets)
    children = []
    for child in kind:
        if child.name == "partition":
            children.append(pa.array(columns.partitions, child.type))
        elif child.name == "offset":
            children.append(pa.array(columns.offsets, child.type))
        elif child.name == "timestamp":  # microseconds, as the column counts
            millis = pa.array(columns.timestamps_ms, pa.int64())
            children.append(pc.multiply_checked(millis, 1000).cast(child.type))
        elif child.name == "key":
            children.append(pa.array(columns.keys, child.type))
        elif child.name != "headers":
            raise ValueError(f"unknown {KAFKA_COLUMN} field {child.name!r}")
        elif columns.headers.count(None) == count:
            children.append(pa.nulls(count, child.type))
        else:
            children.append(pa.array([_header_rows(h) for h in columns.headers], child.type))
    return pa.StructArray.from_arrays(children, fields=list(kind))


def _dead_letter(topic: str, record: Record, error: str) -> dict[str, Any]:
    return {
        "topic": topic,
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": _timestamp(record),
        "key": record.key,
        "value": record.value,
        "headers": _header_rows(record.headers),
        "error": error,
        "failed_at": dt.datetime.now(dt.UTC),
    }
