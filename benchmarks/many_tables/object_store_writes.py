"""`python -m benchmarks.many_tables.object_store_writes`: rounds of one-record appends to many tables on an
S3 endpoint: each file written as pyiceberg's FileIO writes it or with one request, the tables one after
the other (the shared consumer's loop before) or W threads at once.

Each append of the shared consumer writes three files (`TableAppender.prepare`: the Parquet file, its
manifest, the manifest list), one after the other since each names the one before. On a local disk a
file costs well under a millisecond, and writing tables side by side measured no gain there
(`many-tables-1000-writers-*.md`). On an object store each file is requests and their answers:
pyiceberg's FileIO writes every file as a multipart upload (three requests), and its manifest writer
asked the store for the length of the manifest it had just written (a fourth). This measures it
against moto's S3 server on loopback (a real S3 API in its own process, the only one this machine
runs): N tables, each round one one-record append to every table, the designs interleaved round by
round; tables a second, this process's CPU a table, the server's CPU and the requests it logged a
table. Both FileIO rows have the appender as it is now (it no longer asks for lengths). moto answers
within a few milliseconds of its own CPU; a cloud store's answers take tens of milliseconds of waiting,
which threads overlap and which one request a file saves twice over.

Results: benchmarks/results/many-tables-object-store-writes.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from types import SimpleNamespace
from typing import cast

import psutil  # type: ignore[import-untyped]
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.table import Table

from benchmarks.many_tables.__main__ import RESULTS, git_commit
from benchmarks.many_tables.append_cost import one_record, table_at
from catalog.s3_files import DelayedOpenFileIO
from devtools.moto_server import MotoServer
from ingest.shared.iceberg_append import MergePacing, TableAppender

BUCKET = "warehouse"


@dataclass
class Row:
    design: str
    tables_per_second: float  # median over the rounds
    rounds: list[float]  # tables a second, each round
    client_cpu_ms_per_table: float  # this process (the appends), CPU ms a table
    server_cpu_ms_per_table: float  # moto's process, CPU ms a table (three uploads)
    requests_per_table: float  # S3 requests moto logged, a table


def _appenders(io: PyArrowFileIO, tables: int, prefix: str, pacing: MergePacing) -> list[TableAppender]:
    appenders = []
    for t in range(tables):
        table = cast(Table, SimpleNamespace(metadata=table_at(f"s3://{BUCKET}/{prefix}/t{t}"), io=io))
        appenders.append(TableAppender(("ns", f"t{t}"), _loader(table), pacing))
    return appenders


def _loader(table: Table) -> Callable[[], Table]:
    return lambda: table


def _append(appender: TableAppender, n: int) -> None:
    rows = one_record(appender.arrow_schema, n)
    prepared = appender.prepare(rows, {"kafka.topic": "t", "kafka.end-offsets": json.dumps({"0": n + 1})})
    appender.committed(prepared)


def _round(appenders: list[TableAppender], n: int, pool: ThreadPoolExecutor | None) -> None:
    if pool is None:
        for appender in appenders:
            _append(appender, n)
    else:
        list(pool.map(lambda a: _append(a, n), appenders))


# How files are written: pyiceberg's FileIO (a multipart upload a file: three requests) or floe's (one).
FILE_IOS: dict[str, type[PyArrowFileIO]] = {
    "pyiceberg's FileIO": PyArrowFileIO,
    "one request a file": DelayedOpenFileIO,
}


def measure(tables: int, rounds: int, writers: list[int]) -> list[Row]:
    with MotoServer() as moto:
        moto.create_bucket(BUCKET)
        properties = moto.file_io_properties()
        assert moto.process is not None
        server = psutil.Process(moto.process.pid)
        designs = {
            f"{io}, {f'{w} threads' if w else 'one table after the other'}": (io, w)
            for io in FILE_IOS
            for w in [0, *writers]
        }
        pacing = MergePacing()
        appenders = {
            d: _appenders(FILE_IOS[io](properties), tables, f"d{i}", pacing)
            for i, (d, (io, _)) in enumerate(designs.items())
        }
        pools = {d: ThreadPoolExecutor(max_workers=w) if w else None for d, (_, w) in designs.items()}
        for design in designs:  # warm-up: each table loaded, its first files written
            _round(appenders[design], 0, pools[design])
        taken: dict[str, list[tuple[float, float, float, float]]] = {d: [] for d in designs}
        for n in range(1, rounds + 1):
            order = list(designs) if n % 2 else list(reversed(designs))
            for design in order:
                cpu, server_cpu = time.process_time(), sum(server.cpu_times()[:2])
                logged = _requests(moto)
                began = time.perf_counter()
                _round(appenders[design], n, pools[design])
                wall = time.perf_counter() - began
                taken[design].append(
                    (
                        tables / wall,
                        (time.process_time() - cpu) * 1000 / tables,
                        (sum(server.cpu_times()[:2]) - server_cpu) * 1000 / tables,
                        (_requests(moto) - logged) / tables,
                    )
                )
        for pool in pools.values():
            if pool is not None:
                pool.shutdown()
    return [
        Row(
            design,
            round(statistics.median(s[0] for s in samples), 1),
            [round(s[0], 1) for s in samples],
            round(statistics.mean(s[1] for s in samples), 2),
            round(statistics.mean(s[2] for s in samples), 2),
            round(statistics.mean(s[3] for s in samples), 1),
        )
        for design, samples in taken.items()
    ]


def _requests(moto: MotoServer) -> int:
    """The requests moto's server has logged (a line each, `"METHOD /path HTTP/1.1" status`)."""
    return sum(1 for line in moto.log_text().splitlines() if ' HTTP/1.1" ' in line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--writers", default="8", help="thread counts, a row each (besides one at a time)")
    parser.add_argument("--name", default="many-tables-object-store-writes")
    args = parser.parse_args()
    started = time.time()
    rows = measure(args.tables, args.rounds, [int(w) for w in args.writers.split(",") if w])
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(json.dumps([asdict(r) for r in rows], indent=2) + "\n")
    lines = [
        "# Many tables: one-record appends on an S3 endpoint, tables one after the other or side by side",
        "",
        f"Generated by `python -m benchmarks.many_tables.object_store_writes` on "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} at git commit `{git_commit()}` "
        f"({time.time() - started:.0f} s). {args.tables} tables on moto's S3 server (its own process, "
        f"loopback); each round one one-record append (`TableAppender.prepare`: Parquet file, manifest, "
        f"manifest list) to every table, after a warm-up round; {args.rounds} rounds a design, interleaved.",
        "",
        "| design | tables a second (median) | each round | client CPU a table | moto's CPU a table "
        "| S3 requests a table |",
        "|---|---:|---|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.design} | {r.tables_per_second:,.1f} | {', '.join(f'{x:.0f}' for x in r.rounds)} "
            f"| {r.client_cpu_ms_per_table:.2f} ms | {r.server_cpu_ms_per_table:.2f} ms "
            f"| {r.requests_per_table:.1f} |"
        )
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    lines += ["", f"Machine: {os.cpu_count()} CPUs; load average at the end ({load})."]
    (RESULTS / f"{args.name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
