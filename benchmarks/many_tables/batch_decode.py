"""`python -m benchmarks.many_tables.batch_decode --before DIR`: what the shared consumer's loop spends to
prepare one table's batch (`SharedTable.prepare`: decode the records, write the Parquet file, the
manifest and the manifest list, describe the commit), by batch size, in this tree and in the tree at DIR
(an export of an earlier commit), side by side in one run.

At a thousand quiet tables the loop prepares ~120 batches a second of a few records each, and it is the
loop's time per batch that sets how fresh the tables are. Each tree is measured in its own process
(`python` with that tree first on its path), the trees alternating round by round; a process prepares
`--calls` batches of each size on a local warehouse (each commit taken as accepted, no catalog), with
every record a good row (`clean`) or with one dead letter in the batch (`one bad`, which always takes the
per-record decoder), and reports the mean wall time and the mean CPU time of its thread per batch. The
table: an id, a name, a score, a flag and a timestamp, and floe's `_kafka` column.

Results: benchmarks/results/NAME.{md,json} (default many-tables-batch-decode).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
TREE = HERE.parents[2]
SIZES = (1, 4, 8, 16, 32, 64, 128)


def worker(sizes: list[int], calls: int, work: str) -> dict[str, Any]:
    """In the measured tree's process: {kind: {size: [wall µs, thread CPU µs]}}, a mean per batch."""
    from types import SimpleNamespace

    from confluent_kafka import Message
    from pyiceberg.io.pyarrow import PyArrowFileIO
    from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
    from pyiceberg.schema import Schema
    from pyiceberg.table.metadata import new_table_metadata
    from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
    from pyiceberg.types import BooleanType, DoubleType, LongType, NestedField, StringType, TimestamptzType

    from catalog.pipelines.columns import KAFKA_FIELD, dlq_schema
    from ingest.ingest_table import IngestTable
    from ingest.shared.iceberg_append import TableAppender
    from ingest.shared.tables import SharedTable

    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "name", StringType(), required=False),
        NestedField(3, "score", DoubleType(), required=False),
        NestedField(4, "ok", BooleanType(), required=False),
        NestedField(5, "at", TimestamptzType(), required=False),
        KAFKA_FIELD,
    )

    def appender(name: str, table_schema: Schema) -> TableAppender:
        metadata = new_table_metadata(
            table_schema, UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, f"file://{work}/{name}", {}
        )
        table: Any = SimpleNamespace(metadata=metadata, io=PyArrowFileIO())
        return TableAppender(("bench", name), lambda: table)

    def value(n: int, bad: bool) -> bytes:
        if bad:
            return b'{"id": "not a number"}'
        record = {
            "id": n,
            "name": f"user-{n:08d}",
            "score": n / 7,
            "ok": n % 2 == 0,
            "at": "2026-11-30T10:00:00Z",
        }
        return json.dumps(record).encode()

    measured: dict[str, Any] = {}
    for kind in ("clean", "one bad"):
        by_size: dict[str, list[float]] = {}
        for size in sizes:
            name = f"t_{kind.replace(' ', '_')}_{size}"
            table = IngestTable(
                cluster="bench",
                topic=name,
                warehouse="default",
                namespace=("bench",),
                table=name,
                dlq_table=f"{name}_dlq",
                source_format="json",
                schema=schema,
                kafka_options={},
                consumer_config={},
                commit_interval=1.0,
            )
            shared = SharedTable(
                table, appender(name, schema), appender(f"{name}_dlq", dlq_schema()), {}, dict
            )
            offset, wall, cpu = 0, 0.0, 0.0
            for call in range(calls + 5):  # the first five warm the table's caches up, not counted
                messages = [
                    Message(
                        topic=name,
                        partition=0,
                        offset=offset + i,
                        key=None,
                        value=value(offset + i, kind == "one bad" and i == size // 2),
                        headers=None,
                        timestamp=(1, 1_796_000_000_000 + offset + i),
                    )
                    for i in range(size)
                ]
                offset += size
                began_wall, began_cpu = time.perf_counter(), time.thread_time()
                batch = shared.prepare(messages)
                assert batch is not None
                shared.committed(batch)
                if call >= 5:
                    wall += time.perf_counter() - began_wall
                    cpu += time.thread_time() - began_cpu
            by_size[str(size)] = [wall / calls * 1e6, cpu / calls * 1e6]
        measured[kind] = by_size
    return measured


def run_tree(tree: Path, sizes: list[int], calls: int, root: str | None) -> dict[str, Any]:
    """One worker process on `tree`'s code (its own path first; this file run as a script), its
    warehouse under `root` (the system's temporary folder when None)."""
    with tempfile.TemporaryDirectory(prefix="floe-batch-decode-", dir=root) as work:
        code = (
            "import json, runpy, sys; "
            f"worker = runpy.run_path({str(HERE)!r}, run_name='batch_decode_worker')['worker']; "
            f"print(json.dumps(worker({sizes!r}, {calls}, {work!r})))"
        )
        env = {**os.environ, "PYTHONPATH": str(tree)}
        done = subprocess.run(
            [sys.executable, "-c", code], cwd=tree, env=env, capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"worker on {tree} failed:\n{done.stderr[-3000:]}")
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return result


def main() -> None:
    from benchmarks.many_tables.__main__ import RESULTS, git_commit

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--before", required=True, help="an export of the earlier tree to compare with")
    parser.add_argument("--before-name", default="", help="what the earlier tree is (its commit)")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="records per batch")
    parser.add_argument("--calls", type=int, default=200, help="batches per size and process")
    parser.add_argument("--rounds", type=int, default=4, help="processes per tree, alternating")
    parser.add_argument(
        "--warehouse-root",
        default="",
        help="where the warehouses go (e.g. /dev/shm: creating a file on this machine's disk costs ~0.6 ms "
        "of kernel CPU, the same for both trees but noisy); default: the temporary folder",
    )
    parser.add_argument("--name", default="many-tables-batch-decode")
    args = parser.parse_args()
    sizes = [int(n) for n in args.sizes.split(",")]
    trees = {"this tree": TREE, "before": Path(args.before).resolve()}
    started = time.monotonic()
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    for round_ in range(args.rounds):
        for name in list(trees) if round_ % 2 == 0 else list(reversed(trees)):
            runs[name].append(run_tree(trees[name], sizes, args.calls, args.warehouse_root or None))
            print(f"round {round_ + 1}: {name} done", flush=True)
    rows = []
    for kind in ("clean", "one bad"):
        for size in sizes:
            row: dict[str, Any] = {"batch": kind, "records": size}
            for name in trees:
                walls = [run[kind][str(size)][0] for run in runs[name]]
                cpus = [run[kind][str(size)][1] for run in runs[name]]
                row[name] = {
                    "wall_us": round(statistics.median(walls)),
                    "cpu_us": round(statistics.median(cpus)),
                }
            rows.append(row)
    before = args.before_name or str(trees["before"])
    RESULTS.mkdir(parents=True, exist_ok=True)
    root = args.warehouse_root or tempfile.gettempdir()
    meta = {
        "commit": git_commit(),
        "before": before,
        "calls": args.calls,
        "rounds": args.rounds,
        "warehouse_root": root,
    }
    (RESULTS / f"{args.name}.json").write_text(json.dumps({**meta, "rows": rows}, indent=2) + "\n")
    lines = [
        "# Many tables: the shared consumer's time to prepare one table's batch, by batch size",
        "",
        f"Generated by `python -m benchmarks.many_tables.batch_decode` on "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} at git commit `{git_commit()}` beside "
        f"`{before}` ({time.monotonic() - started:.0f} s; median over {args.rounds} processes per tree, "
        f"the trees alternating, of the mean over {args.calls} batches per size; warehouses under `{root}`). "
        f"{(__doc__ or '').split(chr(10) + chr(10))[1]}",
        "",
        "| batch | records | wall, before | wall, this tree | thread CPU, before | thread CPU, this tree "
        "| CPU this tree ÷ before |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        now, then = row["this tree"], row["before"]
        lines.append(
            f"| {row['batch']} | {row['records']} | {then['wall_us']} µs | {now['wall_us']} µs "
            f"| {then['cpu_us']} µs | {now['cpu_us']} µs | {now['cpu_us'] / then['cpu_us']:.2f} |"
        )
    lines += ["", f"Machine: {os.cpu_count()} CPUs; load average at the end {os.getloadavg()}."]
    (RESULTS / f"{args.name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
