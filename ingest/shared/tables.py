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
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from catalog.kafka_offsets import END_OFFSETS, MAX_TIMESTAMP, MIN_TIMESTAMP, START_OFFSETS, TOPIC
from ingest.batch_rows import MAX_UNDECLARED_NAMES
from ingest.decode import KAFKA_COLUMN
from ingest.ingest_table import BatchResult, IngestTable
from ingest.shared.iceberg_append import PreparedAppend, TableAppender
from ingest.shared.json_rows import JsonRows


@dataclass(frozen=True)
class Record:
    """A Kafka record as the shared consumer buffers it."""

    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] | None


@dataclass
class PreparedBatch:
    """A table's batch with its appends written, waiting for the transaction."""

    table: SharedTable
    appends: list[tuple[TableAppender, PreparedAppend]]
    result: BatchResult
    main_end: dict[int, int]
    dlq_end: dict[int, int]

    def changes(self) -> list[dict[str, Any]]:
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
    buffer: list[Record] = field(default_factory=list)
    first_buffered_at: float | None = None

    def __post_init__(self) -> None:
        self.rows = JsonRows(self.table.schema)

    @property
    def dlq_next(self) -> dict[int, int]:
        if self._dlq_next is None:
            self._dlq_next = self.read_dlq_next()
        return self._dlq_next

    def take(self) -> list[Record]:
        records, self.buffer, self.first_buffered_at = self.buffer, [], None
        return records

    def prepare(self, records: list[Record]) -> PreparedBatch | None:
        """The batch of `records` (None when the table holds every one of them already)."""
        good: list[dict[str, Any]] = []
        dead: list[dict[str, Any]] = []
        main_last: dict[int, int] = {}
        dlq_last: dict[int, int] = {}
        times: dict[str, list[int]] = {"main": [], "dlq": []}
        result = BatchResult()
        undeclared: Counter[str] = Counter()
        for record in records:
            main_from = self.main_next.get(record.partition, -1)
            if record.offset < main_from:
                continue
            decoded = self.rows.decode(record.value)
            if decoded.row is not None:
                row = dict(decoded.row)
                row[KAFKA_COLUMN] = _kafka(record)
                good.append(row)
                if decoded.undeclared:
                    result.records_with_undeclared += 1
                    undeclared.update(decoded.undeclared)
                result.value_bytes += len(record.value or b"")
            else:
                if record.offset < max(main_from, self.dlq_next.get(record.partition, -1)):
                    continue
                dead.append(_dead_letter(self.table.topic, record, decoded.error or "unknown"))
                dlq_last[record.partition] = record.offset
                times["dlq"].append(record.timestamp_ms)
            main_last[record.partition] = record.offset
            times["main"].append(record.timestamp_ms)
            newest = result.max_timestamps.get(record.partition, 0.0)
            result.max_timestamps[record.partition] = max(newest, record.timestamp_ms / 1000)
        if not main_last:
            return None
        result.records, result.dead_letters = len(good), len(dead)
        result.undeclared_fields = dict(undeclared.most_common(MAX_UNDECLARED_NAMES))
        t = self.table
        main_end = {p: max(self.main_next.get(p, 0), last + 1) for p, last in main_last.items()}
        appends = []
        main_rows = self.main.rows(good) if good else None
        summary = _summary(t.topic, self.main_next, main_end, times["main"])
        appends.append((self.main, self.main.prepare(main_rows, summary)))
        dlq_end: dict[int, int] = {}
        if dead:
            dlq_end = {p: max(self.dlq_next.get(p, 0), last + 1) for p, last in dlq_last.items()}
            summary = _summary(t.topic, self.dlq_next, dlq_end, times["dlq"])
            appends.append((self.dlq, self.dlq.prepare(self.dlq.rows(dead), summary)))
        result.end_offsets = main_end
        return PreparedBatch(self, appends, result, main_end, dlq_end)

    def committed(self, batch: PreparedBatch) -> None:
        for appender, prepared in batch.appends:
            appender.committed(prepared)
        self.main_next.update(batch.main_end)
        if batch.dlq_end:
            self.dlq_next.update(batch.dlq_end)

    def refused(self, batch: PreparedBatch) -> None:
        for appender, prepared in batch.appends:
            appender.discard(prepared)


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


def _headers(record: Record) -> list[dict[str, Any]] | None:
    if record.headers is None:
        return None
    return [{"key": k, "value": v} for k, v in record.headers]


def _kafka(record: Record) -> dict[str, Any]:
    return {
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": _timestamp(record),
        "key": record.key,
        "headers": _headers(record),
    }


def _dead_letter(topic: str, record: Record, error: str) -> dict[str, Any]:
    return {
        "topic": topic,
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": _timestamp(record),
        "key": record.key,
        "value": record.value,
        "headers": _headers(record),
        "error": error,
        "failed_at": dt.datetime.now(dt.UTC),
    }
