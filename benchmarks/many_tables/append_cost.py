"""`python -m benchmarks.many_tables.append_cost`: what one append costs the shared consumer as a table's
manifests accumulate, from its first commit to past a merge.

At a thousand quiet tables the shared consumer's freshness is the time it takes to commit every table once,
and each commit writes three files for the table (`ingest.shared.iceberg_append.TableAppender.prepare`): a
Parquet file of the batch, a manifest for it, and the manifest list, which names every manifest the table
carries, so it grows by one entry a commit until `commit.manifest.min-count-to-merge` (100) merges them.
`python -m benchmarks.many_tables` runs for a few minutes, about 20 commits a table; a table that has run
for an hour carries 1-100 manifests. This measures, in one process and one run, the CPU time of
`prepare` for a one-record batch at every commit of a few tables (`TableAppender` on a local warehouse,
each commit taken as accepted: no catalog involved), split into writing the Parquet file and the rest,
and reports it by the number of manifests carried; side by side, interleaved, with the appender before
it kept its manifests' entries (a merge read every carried manifest back). And the memory those kept
entries take.

Results: benchmarks/results/many-tables-append-cost.{md,json}.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import tempfile
import time
import tracemalloc
from dataclasses import asdict, dataclass
from types import SimpleNamespace
from typing import cast

import pyarrow as pa
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.table import Table
from pyiceberg.table.metadata import TableMetadata

from benchmarks.many_tables.__main__ import RESULTS, git_commit
from benchmarks.many_tables.metadata_growth import empty_table
from ingest.shared.iceberg_append import TableAppender

Samples = list[tuple[int, float, float]]


@dataclass
class Row:
    commits: str  # the range of commits (1-based) this row averages
    manifests_carried: str  # how many manifests the lists of those commits named before the new one
    prepare_ms: float  # CPU time of `prepare` (Parquet, manifest, manifest list, the commit's models)
    parquet_ms: float  # of which writing the Parquet file and its statistics
    rest_ms: float


def table_at(location: str) -> TableMetadata:
    """floe's benchmark table (id, name, `_kafka`), unpartitioned, at `location`."""
    return empty_table().model_copy(update={"location": location})


DESIGNS = {"now": False, "before": True}  # design → read every merged manifest back (before)


def measure(commits: int, tables: int, work: str) -> dict[str, Samples]:
    """Per design, (manifests carried, prepare CPU ms, Parquet CPU ms) of each commit, averaged over
    `tables` tables each taking one-record appends in turn, the designs interleaved (so the machine's
    other load falls on both alike). "before" is the appender before it kept its manifests' entries:
    a merge reads every carried manifest back."""
    appenders = {(d, t): _appender(f"{work}/{d}/t{t}") for d in DESIGNS for t in range(tables)}
    samples: dict[str, Samples] = {d: [] for d in DESIGNS}
    for n in range(commits):
        taken: dict[str, list[tuple[int, float, float]]] = {d: [] for d in DESIGNS}
        for t in range(tables):
            for design in sorted(DESIGNS, reverse=(n + t) % 2 == 1):
                taken[design].append(_append_once(appenders[(design, t)], n, DESIGNS[design]))
        for design, measured in taken.items():
            samples[design].append(
                (
                    measured[0][0],
                    statistics.mean(m[1] for m in measured),
                    statistics.mean(m[2] for m in measured),
                )
            )
    return samples


def _appender(location: str) -> TableAppender:
    table = cast(Table, SimpleNamespace(metadata=table_at(f"file://{location}"), io=PyArrowFileIO()))
    return TableAppender(("ns", "t"), lambda: table)


def one_record(schema: pa.Schema, n: int) -> pa.Table:
    """The `n`th record of the benchmark's table (`table_at`) as the appender writes it."""
    return pa.Table.from_arrays(
        [
            pa.array([n], pa.int64()),
            pa.array([f"name-{n}"], pa.string()),
            pa.array([{"partition": 0, "offset": n}], schema.field("_kafka").type),
        ],
        schema=schema,
    )


def _append_once(appender: TableAppender, n: int, read_back: bool) -> tuple[int, float, float]:
    rows = one_record(appender.arrow_schema, n)
    carried = len(appender._head.manifests)
    if read_back:
        appender._entries.clear()
    parquet_started = time.process_time()
    appender._files.write(rows)  # the Parquet file alone, timed apart (an extra file, not committed)
    parquet = time.process_time() - parquet_started
    started = time.process_time()
    prepared = appender.prepare(rows, {"kafka.topic": "t", "kafka.end-offsets": json.dumps({"0": n + 1})})
    took = time.process_time() - started
    appender.committed(prepared)
    return carried, took * 1000, parquet * 1000


def kept_bytes(commits: int, work: str) -> tuple[int, int]:
    """(entries kept, bytes they hold: tracemalloc of a copy) for one table after `commits` appends."""
    appender = _appender(f"{work}/memory")
    for n in range(commits):
        _append_once(appender, n, read_back=False)
    tracemalloc.start()
    copied = copy.deepcopy(appender._entries)
    size = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return sum(len(e) for e in copied.values()), size


def rows_of(samples: list[tuple[int, float, float]], width: int) -> list[Row]:
    rows = []
    for start in range(0, len(samples), width):
        chunk = samples[start : start + width]
        prepare = statistics.mean(s[1] for s in chunk)
        parquet = statistics.mean(s[2] for s in chunk)
        carried = [s[0] for s in chunk]
        rows.append(
            Row(
                f"{start + 1}-{start + len(chunk)}",
                f"{min(carried)}-{max(carried)}",
                round(prepare, 2),
                round(parquet, 2),
                round(prepare - parquet, 2),
            )
        )
    return rows


def summary(samples: list[tuple[int, float, float]]) -> str:
    first20 = statistics.mean(s[1] for s in samples[:20])
    # The second cycle of 100 when there is one: the first includes the process's warm-up.
    cycle_samples = samples[100:200] if len(samples) >= 200 else samples[:100]
    cycle = statistics.mean(s[1] for s in cycle_samples)
    merges = [s[1] for s in samples if s[0] >= 99]
    return (
        f"mean over the first 20 commits (what a few minutes of `python -m benchmarks.many_tables` sees) "
        f"{first20:.2f} ms; over a whole cycle of 100 (a table in its steady state; commits 101-200 when "
        f"measured) {cycle:.2f} ms ({cycle / first20:.2f}x); the merging commits alone "
        + ", ".join(f"{m:.0f} ms" for m in merges)
    )


def report(
    rows: list[Row], samples: Samples, before: Samples, took: float, tables: int, memory: tuple[int, int]
) -> str:
    lines = [
        "# Many tables: an append's CPU in the shared consumer as a table's manifests accumulate",
        "",
        f"Generated by `python -m benchmarks.many_tables.append_cost` on "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} at git commit `{git_commit()}` "
        f"({took:.0f} s). "
        f"{tables} tables per design, one-record batches appended to each in turn, the two designs "
        "interleaved; `TableAppender.prepare` on a local warehouse, each commit taken as "
        "accepted; CPU time of this process. `Parquet` is writing the batch's file and its statistics "
        "alone; the rest is the manifest, the manifest list (one entry per carried manifest) and the "
        "commit's models. Iceberg's merge (`commit.manifest.min-count-to-merge`, 100) folds the carried "
        "manifests into one at the 100th commit.",
        "",
        "| commits | manifests carried | prepare | Parquet | the rest | prepare, reading back (before) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    width = int(rows[0].commits.split("-")[1])
    before_rows: list[Row | None] = list(rows_of(before, width)) if before else [None] * len(rows)
    for r, b in zip(rows, before_rows, strict=True):
        lines.append(
            f"| {r.commits} | {r.manifests_carried} | {r.prepare_ms:.2f} ms | {r.parquet_ms:.2f} ms "
            f"| {r.rest_ms:.2f} ms | {f'{b.prepare_ms:.2f} ms' if b else 'n/a'} |"
        )
    lines += [
        "",
        f"- The appender keeping its manifests' entries (now): {summary(samples)}.",
    ]
    if before:
        lines.append(f"- Reading every merged manifest back (before, same run): {summary(before)}.")
    lines.append(
        f"- What a table keeps for its merge after 99 commits: {memory[0]} entries, "
        f"{memory[1] / 1024:.0f} KiB (tracemalloc of a copy); "
        f"{memory[1] * 1000 / 2**20:.0f} MiB for 1,000 such tables."
    )
    lines += [
        "",
        f"Machine: {os.cpu_count()} CPUs; load average at the end "
        f"{tuple(round(x, 2) for x in os.getloadavg())} (CPU time is measured; other load still slows it "
        "through shared caches).",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=300, help="appends to each table")
    parser.add_argument("--tables", type=int, default=10, help="tables per design, appended to in turn")
    parser.add_argument("--width", type=int, default=20, help="commits a row averages")
    parser.add_argument("--name", default="many-tables-append-cost")
    args = parser.parse_args()
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="floe-append-cost-") as work:
        samples = measure(args.commits, args.tables, work)
        memory = kept_bytes(99, work)
    rows = {design: rows_of(s, args.width) for design, s in samples.items()}
    RESULTS.mkdir(parents=True, exist_ok=True)
    document = {
        "commit": git_commit(),
        "tables": args.tables,
        "kept_entries_bytes_after_99_commits": memory,
        **{f"{design}_rows": [asdict(r) for r in design_rows] for design, design_rows in rows.items()},
    }
    (RESULTS / f"{args.name}.json").write_text(json.dumps(document, indent=2) + "\n")
    text = report(rows["now"], samples["now"], samples["before"], time.time() - started, args.tables, memory)
    (RESULTS / f"{args.name}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
