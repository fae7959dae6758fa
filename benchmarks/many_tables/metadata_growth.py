"""`python -m benchmarks.many_tables.metadata_growth`: what one append commit costs floe's catalog as a
table's snapshots accumulate, side by side for several snapshot counts in one run.

Every commit of a table rewrites its whole metadata file, which lists every snapshot the table keeps. A
streaming table committing every 2 s keeps 1,800 snapshots under a one-hour retention, so the catalog's
cost per commit grows with the retention divided by the commit interval, not with the records. Each row
builds a table's metadata with N one-file appends (the summary the shared consumer writes, Kafka offsets
included) through the catalog's own commit core (`catalog.commit`), then measures, in CPU time of this
process: applying one more append (`apply_table_updates`), serializing the result (the metadata file's
text), parsing the metadata text (a commit whose model is not cached), and the parsed model's size
(tracemalloc). The last columns scale the per-commit cost to 1,000 tables committing once each.

Results: benchmarks/results/many-tables-metadata-growth.{md,json}.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import time
import tracemalloc
import uuid
from dataclasses import asdict, dataclass
from typing import Any

from pyiceberg.table.metadata import TableMetadata

from benchmarks.many_tables.__main__ import RESULTS, git_commit
from catalog.commit import apply_table_updates, parse_table_metadata, parse_table_updates
from catalog.kafka_offsets import END_OFFSETS, MAX_TIMESTAMP, MIN_TIMESTAMP, START_OFFSETS, TOPIC

LOCATION = "file:///tmp/floe-bench/ns/t"


@dataclass
class Row:
    snapshots: int
    metadata_kib: float
    model_kib: float
    apply_ms: float
    serialize_ms: float
    parse_ms: float
    thousand_tables_cached_s: float  # 1,000 commits: apply + serialize (the model cached)
    thousand_tables_uncached_s: float  # and parse (the model not cached)


def empty_table() -> TableMetadata:
    updates = parse_table_updates(
        [
            {"action": "assign-uuid", "uuid": str(uuid.uuid4())},
            {"action": "upgrade-format-version", "format-version": 2},
            {
                "action": "add-schema",
                "schema": {
                    "type": "struct",
                    "schema-id": 0,
                    "fields": [
                        {"id": 1, "name": "id", "type": "long", "required": False},
                        {"id": 2, "name": "name", "type": "string", "required": False},
                        {
                            "id": 3,
                            "name": "_kafka",
                            "type": {
                                "type": "struct",
                                "fields": [
                                    {"id": 4, "name": "partition", "type": "int", "required": False},
                                    {"id": 5, "name": "offset", "type": "long", "required": False},
                                ],
                            },
                            "required": False,
                        },
                    ],
                },
                "last-column-id": 5,
            },
            {"action": "set-current-schema", "schema-id": -1},
            {"action": "add-spec", "spec": {"spec-id": 0, "fields": []}},
            {"action": "set-default-spec", "spec-id": -1},
            {"action": "add-sort-order", "sort-order": {"order-id": 0, "fields": []}},
            {"action": "set-default-sort-order", "sort-order-id": -1},
            {"action": "set-location", "location": LOCATION},
        ]
    )
    return apply_table_updates(None, updates, None)


def append_updates(
    location: str, snapshot_id: int, sequence: int, parent: int | None, topic: str
) -> list[dict[str, Any]]:
    """The updates of the shared consumer's `sequence`-th append to a one-partition topic's table (1-based):
    a snapshot of one two-record file whose summary carries the Kafka offsets and record times as floe's
    fence reads them (`catalog.kafka_offsets`), and main moved to it."""
    now = int(time.time() * 1000)
    snapshot: dict[str, Any] = {
        "snapshot-id": snapshot_id,
        "sequence-number": sequence,  # format v2 and later
        "timestamp-ms": now,
        "manifest-list": f"{location}/metadata/snap-{snapshot_id}-1-{uuid.uuid4()}.avro",
        "summary": {
            "operation": "append",
            "added-data-files": "1",
            "added-records": "2",
            "added-files-size": "1500",
            "total-records": str(2 * sequence),
            "total-data-files": str(sequence),
            "total-files-size": str(1500 * sequence),
            TOPIC: topic,
            START_OFFSETS: json.dumps({"0": 2 * (sequence - 1)}) if sequence > 1 else "{}",
            END_OFFSETS: json.dumps({"0": 2 * sequence}),
            MIN_TIMESTAMP: str(now),
            MAX_TIMESTAMP: str(now),
        },
        "schema-id": 0,
    }
    if parent is not None:
        snapshot["parent-snapshot-id"] = parent
    return [
        {"action": "add-snapshot", "snapshot": snapshot},
        {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": snapshot_id},
    ]


def append(metadata: TableMetadata, sequence: int) -> TableMetadata:
    """One append as the shared consumer commits it (`append_updates`), applied by the catalog's core."""
    snapshot_id = sequence * 1_000 + 7
    updates = append_updates(LOCATION, snapshot_id, sequence, metadata.current_snapshot_id, "topic-1")
    location = f"{LOCATION}/metadata/{sequence:05d}-{uuid.uuid4()}.json"
    return apply_table_updates(metadata, parse_table_updates(updates), location)


def cpu_ms(repeat: int, call: Any) -> float:
    began = time.process_time()
    for _ in range(repeat):
        call()
    return (time.process_time() - began) * 1000 / repeat


def measure(counts: list[int], repeat: int) -> list[Row]:
    rows: list[Row] = []
    metadata, sequence = empty_table(), 0
    for count in counts:
        while sequence < count:
            sequence += 1
            metadata = append(metadata, sequence)
        text = metadata.model_dump_json(by_alias=True, exclude_none=True)
        after = append(metadata, sequence + 1)
        apply_ms = cpu_ms(repeat, lambda m=metadata, s=sequence: append(m, s + 1))
        serialize_ms = cpu_ms(repeat, lambda a=after: a.model_dump_json(by_alias=True, exclude_none=True))
        parse_ms = cpu_ms(max(1, repeat // 4), lambda t=text: parse_table_metadata(t))
        gc.collect()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        model = parse_table_metadata(text)
        model_bytes = tracemalloc.get_traced_memory()[0] - base
        tracemalloc.stop()
        del model
        cached = apply_ms + serialize_ms
        rows.append(
            Row(
                snapshots=len(metadata.snapshots),
                metadata_kib=round(len(text) / 1024, 1),
                model_kib=round(model_bytes / 1024, 1),
                apply_ms=round(apply_ms, 2),
                serialize_ms=round(serialize_ms, 2),
                parse_ms=round(parse_ms, 2),
                thousand_tables_cached_s=round(cached, 2),  # ms per commit x 1,000 commits / 1,000
                thousand_tables_uncached_s=round(cached + parse_ms, 2),
            )
        )
        print(rows[-1], flush=True)
    return rows


def report(rows: list[Row], args: argparse.Namespace, took: float) -> str:
    load = os.getloadavg()
    lines = [
        "# Many tables: an append commit's catalog CPU as a table's snapshots accumulate",
        "",
        f"Generated by `python -m benchmarks.many_tables.metadata_growth` on "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} at git commit `{git_commit()}` "
        f"({took:.0f} s; {args.repeat} commits per measurement). CPU time of one process, through the "
        "catalog's commit core (`catalog.commit`): apply one more append, serialize the new metadata, "
        "parse the metadata text (a commit whose model is not in the catalog's cache). The last two "
        "columns: the same per-commit cost for 1,000 tables committing once each.",
        "",
        "| snapshots kept | metadata file | parsed model | apply | serialize | parse "
        "| 1,000 tables, model cached | 1,000 tables, not cached |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.snapshots:,} | {r.metadata_kib:,.1f} KiB | {r.model_kib:,.0f} KiB | {r.apply_ms:.2f} ms "
            f"| {r.serialize_ms:.2f} ms | {r.parse_ms:.2f} ms | {r.thousand_tables_cached_s:.1f} s "
            f"| {r.thousand_tables_uncached_s:.1f} s |"
        )
    lines += [
        "",
        "A table keeps about `snapshot_retention` ÷ commit interval snapshots (1 h ÷ 2 s = 1,800) unless "
        "`max_snapshots` caps it; the metadata log is capped at 100 entries by Iceberg's default.",
        "",
        f"Machine: {os.cpu_count()} CPUs; load average at the end {tuple(round(x, 2) for x in load)} "
        "(CPU time, not wall time, is measured; other load still slows it through shared caches).",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--snapshots", default="10,100,200,500,1800", help="snapshot counts, comma-separated")
    parser.add_argument("--repeat", type=int, default=40, help="commits per measurement")
    parser.add_argument("--name", default="many-tables-metadata-growth")
    args = parser.parse_args()
    started = time.time()
    rows = measure(sorted(int(n) for n in args.snapshots.split(",")), args.repeat)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(
        json.dumps({"commit": git_commit(), "rows": [asdict(r) for r in rows]}, indent=2) + "\n"
    )
    (RESULTS / f"{args.name}.md").write_text(report(rows, args, time.time() - started))


if __name__ == "__main__":
    main()
