"""`python -m benchmarks.many_tables.record_cost`: the shared consumer's Python work per Kafka record, the
previous design and the current one in one run.

At 100,000 records a second every microsecond the consumer spends on a record is a tenth of a core. Two
steps run once per record whatever the table: buffering a polled message (`SharedIngest._buffer`: the
record kept as a `Record`) and building the batch's `_kafka` column (`ingest.shared.tables._kafka_column`).
Before, `Record` was a frozen dataclass (its `__init__` sets each field through `object.__setattr__`)
and `_kafka_column` called a small function per record and field; now `Record` is a named tuple and
a batch's fields are taken apart by one `zip(*records)` (`RecordColumns`). The previous design is kept
below to measure against.

Each design, `--rounds` rounds alternating which goes first: `--records` real `confluent_kafka.Message`
objects (JSON values of ~50 bytes, no key, no headers, as the live-rate benchmark's producer sends)
buffered one by one through the consumer's own `_buffer` (a stand-in table holds the buffer), then the
`_kafka` column built over the buffered records in batches of `--batch` records, under `floe ingest`'s
garbage-collector policy (`catalog.collector`). Measured: the calling thread's CPU time per record, the
median round.
Results: benchmarks/results/many-tables-record-cost.{md,json}.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import pyarrow as pa
from confluent_kafka import Message

from benchmarks.many_tables.__main__ import RESULTS, git_commit
from catalog.collector import keep_full_collections_short
from catalog.pipelines.columns import KAFKA_STRUCT
from ingest.shared import consumer as shared_consumer
from ingest.shared import tables as shared_tables


@dataclass(frozen=True)
class PreviousRecord:
    """The previous design's record (a63f8cf's `ingest.shared.tables.Record`)."""

    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] | None


def previous_kafka_column(records: list[Any], kind: pa.DataType) -> pa.Array:
    """The previous design's `_kafka` column: a function per record and field."""
    values: dict[str, Callable[[Any], Any]] = {
        "partition": lambda r: r.partition,
        "offset": lambda r: r.offset,
        "timestamp": lambda r: r.timestamp_ms * 1000,
        "key": lambda r: r.key,
        "headers": lambda r: None if r.headers is None else [{"key": k, "value": v} for k, v in r.headers],
    }
    children = []
    for child in kind:
        if child.name == "headers" and all(r.headers is None for r in records):
            children.append(pa.nulls(len(records), child.type))
        else:
            children.append(pa.array([values[child.name](r) for r in records], child.type))
    return pa.StructArray.from_arrays(children, fields=list(kind))


@dataclass
class StandIn:
    """What `_buffer` touches of a shared table."""

    buffer: list[Any] = field(default_factory=list)
    buffered_bytes: int = 0
    first_buffered_at: float | None = None


def consumer_with(table: StandIn, record_type: Any) -> shared_consumer.SharedIngest:
    """A shared consumer whose only table, of topic `t`, is `table` (no Kafka, no floe: `_buffer` needs
    neither), making its records as `record_type`."""
    setattr(shared_consumer, "Record", record_type)  # noqa: B010  # the design measured
    unused: Any = None  # the client and the table opener: `_buffer` calls neither
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


def one_round(
    messages: list[Message], record_type: Any, kafka_column: Callable[..., pa.Array], batch: int
) -> tuple[float, float]:
    table = StandIn()
    consumer = consumer_with(table, record_type)
    since = time.monotonic()
    offset = time.monotonic() - time.time()
    began = time.thread_time()
    for message in messages:
        consumer._buffer(message, since, offset)
    buffered = time.thread_time() - began
    records = table.buffer
    kind = arrow_schema_of_kafka()
    began = time.thread_time()
    for start in range(0, len(records), batch):
        kafka_column(records[start : start + batch], kind)
    built = time.thread_time() - began
    consumer._sender.shutdown()
    n = len(messages)
    return buffered / n * 1e6, built / n * 1e6


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
    parser.add_argument("--batch", type=int, default=1_000, help="records per _kafka column")
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
    designs: dict[str, tuple[Any, Callable[..., pa.Array]]] = {
        "previous (frozen dataclass, a function per field)": (PreviousRecord, previous_kafka_column),
        "current (named tuple, the fields by one zip)": (
            shared_tables.Record,
            lambda records, kind: shared_tables._kafka_column(shared_tables.RecordColumns.of(records), kind),
        ),
    }
    found: dict[str, list[tuple[float, float]]] = {name: [] for name in designs}
    names = list(designs)
    for index in range(args.rounds):
        for name in names if index % 2 == 0 else reversed(names):
            found[name].append(one_round(messages, *designs[name], args.batch))
    setattr(shared_consumer, "Record", shared_tables.Record)  # noqa: B010
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
        "| design | buffering a message (`_buffer`) | the `_kafka` column | both | at 100,000 records/s |",
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
