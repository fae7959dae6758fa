"""`python -m benchmarks.many_tables.maintenance_idle`: full passes of `floe maintain --once` over many
idle tables (their topics quiet: nothing to compact or expire), an earlier commit's design and this
tree's side by side in one run.

A fresh `floe serve` (PostgreSQL) gets N tables of one namespace, each with `--appends` small pyiceberg
appends (fewer files than a compaction needs); a warm-up pass sets what only a first pass sets (the
metadata properties). Then each design's pass over every table: wall time (process start to exit), its
CPU and peak RSS, the tables its output shows skipped from their metadata, all processes' CPU on the
machine and the load average. No ingestion runs: this is the cost of visiting quiet tables.
Designs as in `benchmarks.many_tables.maintenance` (`before:<folder>`, `inprocess`, `inprocess-pN`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psutil  # type: ignore[import-untyped]

from benchmarks.many_tables.maintenance import maintain_command, tree_cpu_seconds, tree_rss

RESULTS = Path(__file__).resolve().parents[1] / "results"
NAMESPACE = "idle"


def create_tables(catalog: Any, count: int, appends: int) -> None:
    import pyarrow as pa

    schema = pa.schema([pa.field("id", pa.int64())])
    catalog.create_namespace(NAMESPACE)

    def create(i: int) -> None:
        table = catalog.create_table((NAMESPACE, f"t{i:04d}"), schema)
        for j in range(appends):
            table.append(pa.table({"id": pa.array([j], pa.int64())}, schema=schema))

    # A few at once: each is mostly waiting for floe's commits.
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(create, range(count)))


def one_pass(design: str, env: dict[str, str], log: Path) -> dict[str, Any]:
    command, tree = maintain_command(design)
    command += ["--namespace", NAMESPACE]
    if tree is not None:
        env = {**env, "PYTHONPATH": tree}
    started = time.time()
    machine = psutil.cpu_times()
    peak, cpu = 0, 0.0
    with log.open("wb") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=tree)
        while process.poll() is None:
            peak = max(peak, tree_rss(process.pid))
            cpu = max(cpu, tree_cpu_seconds(process.pid))
            time.sleep(0.5)
    elapsed = time.time() - started
    after = psutil.cpu_times()
    busy = (after.user + after.system + after.nice) - (machine.user + machine.system + machine.nice)
    text = log.read_text(errors="replace")
    return {
        "design": f"before ({Path(tree).name})" if tree else design,
        "exit_code": process.returncode,
        "pass_s": round(elapsed, 1),
        "cores": round(cpu / elapsed, 2),
        "peak_rss_gib": round(peak / 2**30, 2),
        "tables_skipped": text.count("nothing to do (table metadata)"),
        "machine_busy_cores": round(busy / elapsed, 2),
        "load_average_end": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=1000)
    parser.add_argument("--appends", type=int, default=2)
    parser.add_argument("--designs", default="inprocess", help="comma-separated, as --maintain-designs")
    parser.add_argument("--name", default="many-tables-maintenance-idle")
    args = parser.parse_args()
    from devtools.catalog_server import CatalogProcess
    from devtools.postgres import LocalPostgres

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="floe-idle-") as work, LocalPostgres() as postgres:
        url = postgres.create_database("floe_idle")
        with CatalogProcess(url, home=Path(work) / "floe") as server:
            started = time.time()
            create_tables(server.catalog(), args.tables, args.appends)
            created_s = round(time.time() - started, 1)
            print(f"{args.tables} tables created in {created_s} s", flush=True)
            env = {
                **os.environ,
                "FLOE_URL": server.url,
                "FLOE_CLIENT_ID": server.admin_client_id,
                "FLOE_CLIENT_SECRET": server.admin_client_secret,
            }
            for label, design in [
                ("warm-up", "inprocess"),
                *(("measured", d) for d in args.designs.split(",")),
            ]:
                row = {
                    "label": label,
                    "tables": args.tables,
                    **one_pass(design, env, Path(work) / "pass.log"),
                }
                print(json.dumps(row), flush=True)
                rows.append(row)
    RESULTS.mkdir(parents=True, exist_ok=True)
    document = {"tables": args.tables, "appends": args.appends, "created_s": created_s, "passes": rows}
    (RESULTS / f"{args.name}.json").write_text(json.dumps(document, indent=2) + "\n")


if __name__ == "__main__":
    main()
