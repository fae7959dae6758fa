"""`python -m benchmarks.many_tables.commit_growth`: what ingestion's 100-table transaction costs floe's
catalog and PostgreSQL as the tables' snapshots accumulate, the catalog of an earlier commit (`--before`,
its `git archive` run from a folder of its own) and of this tree side by side in one run; with
`--compression pglz,lz4`, the metadata JSON column compressed by PostgreSQL's pglz (before migration 0014)
and by LZ4 (after).

Each row: a fresh PostgreSQL database and `floe serve`, `--tables` tables, then `--rounds` transactions
through `/v1/{prefix}/transactions/commit`, each adding one snapshot to every table (the summary the
shared consumer writes, Kafka offsets included), one after the other from one client. Reported for an
early window (tables at ~20 snapshots) and a late one (~115): wall time per transaction, and the CPU per
transaction of the catalog process and of all PostgreSQL processes (/proc). No ingestion runs: this is
the catalog's share of the many-tables benchmark's steady state.

Results: benchmarks/results/many-tables-commit-growth.{md,json}.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil  # type: ignore[import-untyped]

from benchmarks.many_tables.__main__ import RESULTS, git_commit
from benchmarks.many_tables.metadata_growth import append_updates
from devtools.catalog_server import CatalogProcess
from devtools.postgres import LocalPostgres

WINDOWS = ((11, 30), (101, 130))  # rounds measured: tables at ~20 and ~115 snapshots


@dataclass
class Window:
    rounds: str
    wall_ms: float
    catalog_cpu_ms: float
    postgres_cpu_ms: float


@dataclass
class Row:
    design: str  # the catalog's tree: "now", or the commit it was exported from
    compression: str
    windows: list[Window]
    metadata_kib: float


def _cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def _postgres_cpu(postgres: LocalPostgres) -> float:
    total = 0.0
    for pid in postgres.server_pids():
        with contextlib.suppress(psutil.NoSuchProcess):  # a backend that ended meanwhile
            total += _cpu(psutil.Process(pid))
    return total


def _change(table: int, round_: int, parent: int | None, location: str) -> dict[str, Any]:
    snapshot_id = round_ * 100_000 + table
    return {
        "identifier": {"namespace": ["ns"], "name": f"t{table}"},
        "requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": parent}],
        "updates": append_updates(location, snapshot_id, round_, parent, f"topic-{table}"),
    }


def measure(design: str, tree: Path | None, compression: str, tables: int, rounds: int, work: Path) -> Row:
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField, StringType

    with LocalPostgres() as postgres:
        url = postgres.create_database("floe")
        env = {"PYTHONPATH": str(tree)} if tree is not None else None
        home = work / re.sub(r"[^A-Za-z0-9]+", "-", f"{design}-{compression}")  # the warehouse's folder
        with CatalogProcess(url, home=home, env=env, cwd=tree) as server:
            # The server ran the migrations at start: pglz is the column's compression before 0014.
            alter = f"ALTER TABLE tabulars ALTER COLUMN metadata_json SET COMPRESSION {compression}"
            postgres.psql(alter, "floe")
            catalog = server.catalog()
            catalog.create_namespace("ns")
            schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "name", StringType()))
            locations = [catalog.create_table(f"ns.t{i}", schema).metadata.location for i in range(tables)]
            assert server.process is not None
            catalog_process = psutil.Process(server.process.pid)
            heads: list[int | None] = [None] * tables
            windows: list[Window] = []
            started: tuple[float, float, float] | None = None
            headers = {"Authorization": f"Bearer {server.token()}"}
            with httpx.Client(base_url=server.url, headers=headers, timeout=300) as client:
                prefix = client.get("/v1/config").json()["overrides"]["prefix"]
                for round_ in range(1, rounds + 1):
                    window = next((w for w in WINDOWS if w[0] <= round_ <= w[1]), None)
                    if window is not None and round_ == window[0]:
                        started = (time.monotonic(), _cpu(catalog_process), _postgres_cpu(postgres))
                    changes = [_change(i, round_, heads[i], locations[i]) for i in range(tables)]
                    body = {"table-changes": changes}
                    response = client.post(f"/v1/{prefix}/transactions/commit", json=body)
                    response.raise_for_status()
                    heads = [round_ * 100_000 + i for i in range(tables)]
                    if window is not None and round_ == window[1] and started is not None:
                        n = window[1] - window[0] + 1
                        windows.append(
                            Window(
                                f"{window[0]}-{window[1]}",
                                round((time.monotonic() - started[0]) * 1000 / n, 1),
                                round((_cpu(catalog_process) - started[1]) * 1000 / n, 1),
                                round((_postgres_cpu(postgres) - started[2]) * 1000 / n, 1),
                            )
                        )
                metadata = client.get(f"/v1/{prefix}/namespaces/ns/tables/t0").json()["metadata"]
    return Row(
        design, compression, windows, round(len(json.dumps(metadata, separators=(",", ":"))) / 1024, 1)
    )


def report(rows: list[Row], args: argparse.Namespace, took: float) -> str:
    lines = [
        "# Many tables: a 100-table transaction's catalog and PostgreSQL CPU as snapshots accumulate",
        "",
        f"Generated by `python -m benchmarks.many_tables.commit_growth --before {args.before} --compression "
        f"{args.compression}` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} at git commit "
        f"`{git_commit()}` ({took:.0f} s). {args.tables} tables, {args.rounds} transactions each adding one "
        "snapshot to every table, one client; each row on a fresh database, in this one run, the rows of "
        f"each design {'alternating' if args.repeat > 1 else 'one after the other'}. Per transaction: wall "
        "time, CPU of the catalog process, CPU of all PostgreSQL processes. The warehouse is under "
        f"`{args.work_dir}`.",
        "",
        "| design | compression | rounds (snapshots per table) | wall | catalog CPU | PostgreSQL CPU |",
        "|---|---|---|---:|---:|---:|",
    ]
    for row in rows:
        for w in row.windows:
            lines.append(
                f"| {row.design} | {row.compression} | {w.rounds} | {w.wall_ms:.0f} ms "
                f"| {w.catalog_cpu_ms:.0f} ms | {w.postgres_cpu_ms:.0f} ms |"
            )
    lines += [
        "",
        f"Metadata JSON of a table at the end: {rows[-1].metadata_kib:,.1f} KiB. Machine: {os.cpu_count()} "
        f"CPUs; load average at the end {tuple(round(x, 2) for x in os.getloadavg())}.",
    ]
    return "\n".join(lines) + "\n"


def export(revision: str, work: Path) -> Path:
    """`revision`'s tree, exported with `git archive` into a folder of `work`."""
    folder = work / f"tree-{revision}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", revision], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=WINDOWS[-1][1])
    parser.add_argument("--work-dir", type=Path, default=Path("/tmp/floe-commit-growth"))
    parser.add_argument("--before", default="HEAD", help="the earlier commit whose catalog is measured too")
    parser.add_argument("--compression", default="lz4", help="the metadata column's compressions, a row each")
    parser.add_argument("--repeat", type=int, default=1, help="rows per design and compression, alternating")
    parser.add_argument("--name", default="many-tables-commit-growth", help="the results' file name")
    args = parser.parse_args()
    began = time.monotonic()
    args.work_dir.mkdir(parents=True, exist_ok=True)
    designs: list[tuple[str, Path | None]] = [(f"before ({args.before})", export(args.before, args.work_dir))]
    designs.append(("now", None))
    rows = [
        measure(design, tree, compression, args.tables, args.rounds, args.work_dir)
        for index in range(args.repeat)
        for design, tree in (designs if index % 2 == 0 else designs[::-1])
        for compression in args.compression.split(",")
    ]
    took = time.monotonic() - began
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(json.dumps([asdict(r) for r in rows], indent=1))
    text = report(rows, args, took)
    (RESULTS / f"{args.name}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
