"""`python -m benchmarks.many_tables.record_cost`: the shared consumer's Python work per Kafka record, the
previous design and the current one in one run.

At 100,000 records a second every microsecond the consumer spends on a record is a tenth of a core. Two
steps run once per record whatever the table: buffering the polled messages (`SharedIngest._poll`) and
taking a batch's fields apart for its `_kafka` column and the offsets fence (`RecordColumns`,
`ingest.shared.tables._kafka_column`). Before (`4f76dde`), each polled message became a `Record` (a
named tuple) in a method call per message, and a batch's fields were taken apart by one `zip(*records)`
after dropping, record by record, those the table held already; now the loop keeps the polled
`confluent_kafka.Message` itself and a batch's fields are one comprehension each when it is taken,
with one `min()` for the records the table holds already. The previous design is kept below to
measure against.

Each design, `--rounds` rounds alternating which goes first: `--records` real `confluent_kafka.Message`
objects (JSON values of ~50 bytes, no key, no headers, as the live-rate benchmark's producer sends)
polled in lists of 10,000 (as `consume()` returns them; the consumer that hands them over does nothing
else) into one table's buffer, then the buffer taken in batches of `--batch` records: its fields and its
`_kafka` column, under `floe ingest`'s garbage-collector policy (`catalog.collector`). Measured: the
calling thread's CPU time per record, the median round.
Results: benchmarks/results/many-tables-record-cost.{md,json}.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, NamedTuple, cast

import pyarrow as pa
from confluent_kafka import Message

from benchmarks.many_tables.__main__ import RESULTS, git_commit
from catalog.collector import keep_full_collections_short
from catalog.pipelines.columns import KAFKA_STRUCT
from ingest.shared import consumer as shared_consumer
from ingest.shared import tables as shared_tables

POLLED = 10_000  # messages a consume() call returns at most (`SharedIngest._poll`)


class PreviousRecord(NamedTuple):
    """The previous design's record (4f76dde's `ingest.shared.tables.Record`)."""

    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] | None


@dataclass
class StandIn:
    """What buffering touches of a shared table."""

    buffer: list[Any] = field(default_factory=list)
    buffered_bytes: int = 0
    first_buffered_at: float | None = None


def previous_buffer(
    by_topic: dict[str, list[StandIn]], message: Any, since: float, clock_offset: float
) -> None:
    """4f76dde's `SharedIngest._buffer`, called per polled message (`by_topic` stands in for the
    consumer's `_by_topic`)."""
    if message.error() is not None:
        return
    kind, timestamp = message.timestamp()
    headers = message.headers()
    record = PreviousRecord(
        message.partition(),
        message.offset(),
        timestamp if kind != 0 else int(time.time() * 1000),
        message.key(),
        message.value(),
        tuple(headers) if headers is not None else None,
    )
    size = len(record.value or b"") + len(record.key or b"")
    for shared in by_topic.get(message.topic(), ()):
        if not shared.buffer:
            produced = min(time.monotonic(), record.timestamp_ms / 1000 + clock_offset)
            shared.first_buffered_at = max(since, produced)
        shared.buffer.append(record)
        shared.buffered_bytes += size


def previous_columns(records: list[PreviousRecord], main_next: dict[int, int]) -> Any:
    """4f76dde's `SharedTable.prepare` up to the columns: the records the table holds dropped one by
    one, then one `zip(*records)`."""
    kept = [r for r in records if r.offset >= main_next.get(r.partition, -1)]
    return shared_tables.RecordColumns(*zip(*kept, strict=True))


class Polled:
    """Hands `SharedIngest._poll` the polled messages, `POLLED` at a time, as `consume()` does."""

    def __init__(self, messages: list[Message]) -> None:
        self.messages = messages
        self.at = 0

    def consume(self, num_messages: int, timeout: float) -> list[Message]:
        chunk = self.messages[self.at : self.at + min(num_messages, POLLED)]
        self.at += len(chunk)
        return chunk


def current_consumer(table: StandIn) -> shared_consumer.SharedIngest:
    """A shared consumer whose only table, of topic `t`, is `table` (no Kafka, no floe: polling
    needs neither)."""
    unused: Any = None  # the client and the table opener: polling calls neither
    consumer = shared_consumer.SharedIngest(
        "bench", {}, unused, unused, lambda t, r: None, lambda t: 1.0, lambda w: w
    )
    consumer._by_topic = {"t": [cast(shared_tables.SharedTable, table)]}
    return consumer


@dataclass
class Measured:
    design: str
    buffer_us: float  # per record
    kafka_column_us: float  # per record
    rounds_buffer_us: list[float]
    rounds_kafka_column_us: list[float]

    @property
    def total_us(self) -> float:
        return round(self.buffer_us + self.kafka_column_us, 3)


def previous_round(messages: list[Message], batch: int) -> tuple[float, float]:
    table = StandIn()
    by_topic = {"t": [table]}
    since = time.monotonic()
    offset = time.monotonic() - time.time()
    began = time.thread_time()
    for start in range(0, len(messages), POLLED):
        for message in messages[start : start + POLLED]:
            previous_buffer(by_topic, message, since, offset)
    buffered = time.thread_time() - began
    return buffered, taken(table.buffer, batch, previous_columns)


def current_round(messages: list[Message], batch: int) -> tuple[float, float]:
    table = StandIn()
    consumer = current_consumer(table)
    polled = Polled(messages)
    began = time.thread_time()
    while polled.at < len(messages):
        consumer._poll(polled)
    buffered = time.thread_time() - began
    consumer._sender.shutdown()
    return buffered, taken(
        table.buffer,
        batch,
        lambda chunk, main_next: shared_tables.RecordColumns.of(chunk).from_offsets(main_next),
    )


def taken(buffer: list[Any], batch: int, columns_of: Any) -> float:
    """CPU seconds to take `buffer` in batches of `batch`: the fields, then the `_kafka` column."""
    kind = arrow_schema_of_kafka()
    main_next = {0: 0}  # the table holds nothing of these records
    began = time.thread_time()
    for start in range(0, len(buffer), batch):
        shared_tables._kafka_column(columns_of(buffer[start : start + batch], main_next), kind)
    return time.thread_time() - began


def arrow_schema_of_kafka() -> pa.DataType:
    """The `_kafka` column's Arrow type as the table writer has it."""
    from pyiceberg.io.pyarrow import schema_to_pyarrow
    from pyiceberg.schema import Schema
    from pyiceberg.types import NestedField

    schema = Schema(NestedField(1, "_kafka", KAFKA_STRUCT, required=False))
    return schema_to_pyarrow(schema, include_field_ids=True).field("_kafka").type


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=1_000, help="records per batch taken")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    # The garbage collector's policy of `floe ingest` (full collections skip what survived the last
    # one): without it, this process's full collections over the buffered records were two thirds of
    # the buffering step, which the real process does not pay.
    keep_full_collections_short()
    now_ms = int(time.time() * 1000)
    messages = [
        Message(
            topic="t",
            partition=0,
            offset=i,
            key=None,
            headers=None,
            timestamp=(1, now_ms + i),
            value=json.dumps({"id": i, "sent_at": now_ms + i, "name": f"n{i}"}).encode(),
        )
        for i in range(args.records)
    ]
    designs = {
        "previous (a named tuple per polled message)": previous_round,
        "current (the polled messages kept, fields taken with the batch)": current_round,
    }
    found: dict[str, list[tuple[float, float]]] = {name: [] for name in designs}
    names = list(designs)
    n = len(messages)
    for index in range(args.rounds):
        for name in names if index % 2 == 0 else reversed(names):
            buffered, built = designs[name](messages, args.batch)
            found[name].append((buffered / n * 1e6, built / n * 1e6))
    results = [
        Measured(
            name,
            round(statistics.median(b for b, _ in rounds), 3),
            round(statistics.median(k for _, k in rounds), 3),
            [round(b, 3) for b, _ in rounds],
            [round(k, 3) for _, k in rounds],
        )
        for name, rounds in found.items()
    ]
    report(results, args)


def report(results: list[Measured], args: argparse.Namespace) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = "many-tables-record-cost"
    rows = [{**r.__dict__, "total_us": r.total_us} for r in results]
    (RESULTS / f"{name}.json").write_text(json.dumps(rows, indent=2) + "\n")
    paragraphs = (__doc__ or "").split("\n\n")
    lines = [
        "# The shared consumer's Python work per Kafka record: previous and current design",
        "",
        f"Generated by `python -m benchmarks.many_tables.record_cost --records {args.records} --batch "
        f"{args.batch} --rounds {args.rounds}` on {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M UTC} at git "
        f"commit `{git_commit()}`. " + " ".join(p.replace("\n", " ") for p in paragraphs[1:3]),
        "",
        "| design | buffering the polled messages | a batch's fields and `_kafka` column | both "
        "| at 100,000 records/s |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r.design} | {r.buffer_us} µs | {r.kafka_column_us} µs | {r.total_us} µs | "
            f"{r.total_us / 10:.2f} cores |"
        )
    lines += ["", f"Machine: {os.cpu_count()} CPUs; load average at the end {os.getloadavg()}."]
    (RESULTS / f"{name}.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
