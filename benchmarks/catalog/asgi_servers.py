"""floe's app under uvicorn (`floe serve`) and under granian, in one run on one PostgreSQL.

```sh
.venv/bin/python -m benchmarks.catalog.asgi_servers   # needs `pip install granian`; about 2 minutes
```

Both servers run the same app (`catalog.api.app:create_app`) with the same number of worker processes on
the same database, so they serve the same seeded tables; the workloads of `python -m benchmarks.catalog`
are measured in rounds that alternate which server goes first. granian runs with its defaults (uvloop
where available), without floe's uvicorn connection limits (`catalog/http_limits.py`): this measures the
servers' per-request cost, not a production setup. Writes `benchmarks/results/catalog-asgi-servers.md`
and `.json`.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.catalog.procstat import postmaster_pid
from benchmarks.catalog.report import Measurement, machine_info
from benchmarks.catalog.run import RESULTS_DIR, Sample, Server, combine, sample, warm_up
from benchmarks.catalog.workloads import Dataset, discover, seed, workloads
from benchmarks.provenance import git_commit
from devtools.catalog_server import CatalogProcess
from devtools.ports import free_port
from devtools.postgres import LocalPostgres
from devtools.processes import stop_process, wait_until_answering

UVICORN = "uvicorn"
GRANIAN = "granian"


@contextlib.contextmanager
def granian_server(floe: CatalogProcess, workers: int) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """The app under granian, on `floe`'s database, home and admin key (already migrated)."""
    port = free_port()
    granian = shutil.which("granian", path=str(Path(sys.executable).parent))
    if granian is None:
        raise SystemExit("granian is not installed: pip install granian")
    env = {
        **os.environ,
        "FLOE_HOME": str(floe.home),
        "FLOE_DATABASE_URL": floe.database_url or "",
        "FLOE_ADMIN_CLIENT_ID": floe.admin_client_id,
        "FLOE_ADMIN_CLIENT_SECRET": floe.admin_client_secret,
        "FLOE_MIGRATE_ON_START": "false",
    }
    command = [
        granian,
        "--interface", "asgi", "--factory", "--host", "127.0.0.1", "--port", str(port),
        "--workers", str(workers), "--loop", "uvloop", "--no-access-log",
        "catalog.api.app:create_app",
    ]  # fmt: skip
    log_path = floe.home / "granian.log"
    with log_path.open("ab") as log:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_answering(
            process, f"{url}/readyz", name="granian", timeout=60, log_text=lambda: log_path.read_text()
        )
        yield process, url
    finally:
        stop_process(process)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.catalog.asgi_servers", description=__doc__)
    parser.add_argument("--duration", type=float, default=10.0, help="measured seconds per workload")
    parser.add_argument("--rounds", type=int, default=2, choices=range(1, 11))
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--server-warmup", type=float, default=10.0)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--workload", action="append", default=None)
    parser.add_argument("--output", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    dataset = Dataset()
    chosen = [w for w in workloads(args.clients) if not args.workload or w.key in args.workload]
    machine = machine_info()
    started_at = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    rows: list[dict[str, Any]] = []
    with (
        LocalPostgres() as pg,
        CatalogProcess(pg.create_database("floe_bench"), workers=args.workers) as floe,
    ):
        postmaster = postmaster_pid(pg.data)
        token = floe.token()
        uvicorn_target = discover(UVICORN, floe.url, token)
        seed(uvicorn_target, dataset)
        assert floe.process is not None
        uvicorn_pids = [pid for pid in (floe.process.pid, postmaster) if pid]
        with granian_server(floe, args.workers) as (granian, granian_url):
            granian_pids = [pid for pid in (granian.pid, postmaster) if pid]
            servers = [
                Server(uvicorn_target, "floe serve (uvicorn)", lambda: uvicorn_pids),
                Server(discover(GRANIAN, granian_url, token), "granian", lambda: granian_pids),
            ]
            for server in servers:
                warm_up(server, dataset, chosen, args.server_warmup)
            for workload in chosen:
                samples: dict[str, list[Sample]] = {s.target.name: [] for s in servers}
                for round_index in range(max(1, args.rounds)):
                    for server in servers if round_index % 2 == 0 else servers[::-1]:
                        samples[server.target.name].append(
                            sample(
                                server, dataset, workload, args.duration / max(1, args.rounds), args.warmup
                            )
                        )
                measured = {name: combine(s) for name, s in samples.items()}
                row = {"workload": workload.key, "label": workload.title, "clients": workload.concurrency}
                rows.append(row | {name: vars(m) for name, m in measured.items()})
                print(_row(workload.title, measured[UVICORN], measured[GRANIAN]), flush=True)
    doc = {
        "started_at": started_at,
        "git_commit": git_commit(),
        "settings": vars(args) | {"output": str(args.output)},
        "machine": machine,
        "results": rows,
    }
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / "catalog-asgi-servers.json").write_text(json.dumps(doc, indent=2, default=str) + "\n")
    (args.output / "catalog-asgi-servers.md").write_text(_markdown(doc) + NOTE)
    print(_markdown(doc))
    return 0


NOTE = """
granian's throughput is higher where it spends more CPU (its Rust I/O threads run beside the Python
worker), while CPU per request stays within a few percent of uvicorn's; `floe serve` keeps uvicorn, whose
protocol class carries floe's connection, header and body limits (`catalog/http_limits.py`).
"""


def _row(label: str, uvicorn: Measurement, granian: Measurement) -> str:
    ratio = granian.throughput_rps / uvicorn.throughput_rps if uvicorn.throughput_rps else float("nan")
    return (
        f"| {label} | {uvicorn.throughput_rps:,.0f} | {granian.throughput_rps:,.0f} | {ratio:.2f}x | "
        f"{uvicorn.p50_ms} / {uvicorn.p99_ms} | {granian.p50_ms} / {granian.p99_ms} | "
        f"{uvicorn.server_cpu_cores} | {granian.server_cpu_cores} | "
        f"{_cpu_ms(uvicorn)} | {_cpu_ms(granian)} | {uvicorn.errors} | {granian.errors} |"
    )


def _cpu_ms(m: Measurement) -> str:
    """CPU milliseconds (server and PostgreSQL) per request."""
    return f"{m.server_cpu_cores / m.throughput_rps * 1000:.3f}" if m.throughput_rps else "n/a"


def _markdown(doc: dict[str, Any]) -> str:
    s = doc["settings"]
    lines = [
        "# floe under uvicorn vs granian",
        "",
        f"Generated by `python -m benchmarks.catalog.asgi_servers` on {doc['started_at']} at git commit "
        f"`{doc['git_commit']}`: the same app, {s['workers']} worker processes each, one PostgreSQL, "
        f"{s['duration']:g} s per workload and server in {s['rounds']} alternating rounds after "
        f"{s['server_warmup']:g} s of unmeasured warm-up. Latency p50 / p99 in ms; CPU in cores (server "
        "plus PostgreSQL).",
        "",
        "| Workload | uvicorn req/s | granian req/s | granian ÷ uvicorn | uvicorn p50 / p99 | "
        "granian p50 / p99 | uvicorn CPU | granian CPU | uvicorn CPU ms/req | granian CPU ms/req | "
        "uvicorn errors | granian errors |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in doc["results"]:
        lines.append(_row(row["label"], Measurement(**row[UVICORN]), Measurement(**row[GRANIAN])))
    m = doc["machine"]
    lines += [
        "",
        f"Machine: {m.get('cpus')} CPUs, load average before {m.get('load_average_before')}. Other "
        "engineers' work shared the machine: compare the two columns, not absolute numbers.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
