"""Scale-out: floe with 1 and 2 worker processes, and two `floe serve` processes on one PostgreSQL,
beside the Iceberg reference server, in one run.

```sh
.venv/bin/python -m benchmarks.catalog.scale_out   # about 7 minutes
# writes benchmarks/results/catalog-scale-out.{json,md}
```

Setups (all started at once, measured in rounds that alternate their order, so machine conditions hit
them alike):

- `floe serve --workers 1` on its own PostgreSQL database;
- `floe serve --workers 2` on its own database (uvicorn workers on one `SO_REUSEPORT` socket);
- two `floe serve --workers 1` processes on one shared database, the load generator spreading its
  connections over both ports round-robin (what a keep-alive load balancer does);
- the reference server (`python -m benchmarks.catalog`'s peer).

Per workload and setup: requests per second, the CPU of the catalog's own processes and of PostgreSQL
(cores busy on average), and requests per second per busy core (catalog plus database: what a core of
this machine buys). After the measured commits, a check that no commit was lost: 8 writers commit
unique properties to one table (through both processes where there are two) and every 200 must be in
the final metadata, every 409 absent, nothing else answered.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import math
import os
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx

from benchmarks.catalog import reference
from benchmarks.catalog.procstat import cpu_seconds, machine_busy_seconds, postmaster_pid
from benchmarks.catalog.report import REFERENCE, machine_info, versions
from benchmarks.catalog.run import RESULTS_DIR, reference_server, warm_up
from benchmarks.catalog.workloads import Dataset, Target, Workload, discover, measure, seed, workloads
from benchmarks.provenance import git_commit
from devtools.catalog_server import CatalogProcess
from devtools.postgres import LocalPostgres

FLOE_1W = "floe-1-worker"
FLOE_2W = "floe-2-workers"
FLOE_2P = "floe-2-processes"
SETUPS = {
    FLOE_1W: "`floe serve --workers 1` on PostgreSQL",
    FLOE_2W: "`floe serve --workers 2` on PostgreSQL",
    FLOE_2P: "two `floe serve --workers 1` processes on one PostgreSQL database, connections round-robin",
    REFERENCE: f"Iceberg `RESTCatalogServer` {reference.ICEBERG_VERSION} (JdbcCatalog on SQLite, no auth)",
}
WORKLOADS = ("load_table", "load_table_etag", "commit_1", "commit_8")
AUDIT_WRITERS = 8
AUDIT_COMMITS_PER_WRITER = 25


@dataclass
class Setup:
    """A catalog under test: its target (one or more ports) and the processes whose CPU it uses."""

    name: str
    target: Target
    catalog_pids: list[int]
    database_pids: list[int]


@dataclass
class Row:
    """One workload on one setup, all rounds together."""

    requests: int = 0
    measured_s: float = 0.0
    wall_s: float = 0.0
    catalog_cpu_s: float = 0.0
    database_cpu_s: float = 0.0
    other_cpu_s: float = 0.0
    latencies_ns: list[int] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)

    def summary(self) -> dict[str, Any]:
        ordered = sorted(self.latencies_ns)

        def percentile(q: float) -> float | None:
            # Nearest rank, as the main benchmark reports it.
            return round(ordered[max(1, math.ceil(q / 100 * len(ordered))) - 1] / 1e6, 2) if ordered else None

        rps = self.requests / self.measured_s if self.measured_s else 0.0
        catalog = self.catalog_cpu_s / self.wall_s if self.wall_s else 0.0
        database = self.database_cpu_s / self.wall_s if self.wall_s else 0.0
        busy = catalog + database
        return {
            "requests": self.requests,
            "throughput_rps": round(rps, 1),
            "p50_ms": percentile(50),
            "p99_ms": percentile(99),
            "statuses": dict(sorted(self.statuses.items())),
            "catalog_cpu_cores": round(catalog, 3),
            "database_cpu_cores": round(database, 3),
            "rps_per_core": round(rps / busy, 1) if busy else None,
            "cpu_ms_per_request": round(busy / rps * 1000, 4) if rps else None,
            "other_cpu_cores": round(self.other_cpu_s / self.wall_s, 2) if self.wall_s else 0.0,
        }


def sample(
    setup: Setup, dataset: Dataset, workload: Workload, row: Row, seconds: float, warmup: float
) -> None:
    """One round of `workload` on `setup`, added to `row`."""
    catalog_before, database_before = cpu_seconds(setup.catalog_pids), cpu_seconds(setup.database_pids)
    busy_before = machine_busy_seconds()
    result, _ = measure(setup.target, dataset, workload, seconds, warmup)
    catalog = cpu_seconds(setup.catalog_pids) - catalog_before
    database = cpu_seconds(setup.database_pids) - database_before if setup.database_pids else 0.0
    row.requests += result.requests
    row.measured_s += result.duration_s
    row.wall_s += result.wall_s
    row.catalog_cpu_s += catalog
    row.database_cpu_s += database
    row.other_cpu_s += max(
        0.0, machine_busy_seconds() - busy_before - catalog - database - result.loadgen_cpu_s
    )
    row.latencies_ns.extend(result.latencies_ns)
    row.statuses.update({str(k): v for k, v in result.statuses.items()})
    if result.connection_errors:
        row.statuses["connection-errors"] += result.connection_errors


async def _audit_commits(target: Target, dataset: Dataset) -> dict[str, Any]:
    """8 writers commit unique properties to the commit table (over every port of the setup); every
    acknowledged commit must be in the final metadata and every refused one absent."""
    run = uuid.uuid4().hex[:8]
    path = target.table_path(dataset.namespace, dataset.commit_table)
    urls = [f"http://{target.host}:{port}" for port in target.ports]
    outcomes: dict[str, int | str] = {}

    async def writer(index: int) -> None:
        async with httpx.AsyncClient(
            base_url=urls[index % len(urls)], headers=target.headers, timeout=60
        ) as client:
            for commit in range(AUDIT_COMMITS_PER_WRITER):
                key = f"audit.{run}.{index}.{commit}"
                body = {"requirements": [], "updates": [{"action": "set-properties", "updates": {key: "1"}}]}
                try:
                    outcomes[key] = (await client.post(path, json=body)).status_code
                except httpx.HTTPError as exc:
                    outcomes[key] = type(exc).__name__

    await asyncio.gather(*(writer(i) for i in range(AUDIT_WRITERS)))
    async with httpx.AsyncClient(base_url=urls[0], headers=target.headers, timeout=60) as client:
        properties = (await client.get(path)).raise_for_status().json()["metadata"].get("properties", {})
    present = {key for key in properties if key.startswith(f"audit.{run}.")}
    acknowledged = {key for key, status in outcomes.items() if status == 200}
    refused = {key for key, status in outcomes.items() if status == 409}
    return {
        "writers": AUDIT_WRITERS,
        "commits": len(outcomes),
        "statuses": dict(Counter(str(status) for status in outcomes.values())),
        "lost": len(acknowledged - present),  # answered 200, not in the table
        "applied_though_refused": len(refused & present),
        "unaccounted": len(outcomes) - len(acknowledged) - len(refused),
    }


@contextlib.contextmanager
def floe_setups(pg: LocalPostgres) -> Iterator[list[Setup]]:
    """The three floe setups, each on its own database of one PostgreSQL."""
    postmaster = postmaster_pid(pg.data)
    database = [postmaster] if postmaster else []
    with contextlib.ExitStack() as stack:
        one = stack.enter_context(CatalogProcess(pg.create_database("floe_scale_1w"), workers=1))
        two = stack.enter_context(CatalogProcess(pg.create_database("floe_scale_2w"), workers=2))
        shared = pg.create_database("floe_scale_2p")
        first = stack.enter_context(CatalogProcess(shared, workers=1))
        second = stack.enter_context(
            CatalogProcess(
                shared,
                workers=1,
                home=first.home,  # the same warehouse directory and admin key
                env={
                    "FLOE_ADMIN_CLIENT_ID": first.admin_client_id,
                    "FLOE_ADMIN_CLIENT_SECRET": first.admin_client_secret,
                },
            )
        )

        def pid(process: CatalogProcess) -> int:
            assert process.process is not None
            return process.process.pid

        pair = discover(FLOE_2P, first.url, first.token())
        yield [
            Setup(FLOE_1W, discover(FLOE_1W, one.url, one.token()), [pid(one)], database),
            Setup(FLOE_2W, discover(FLOE_2W, two.url, two.token()), [pid(two)], database),
            Setup(FLOE_2P, replace(pair, more_ports=(second.port,)), [pid(first), pid(second)], database),
        ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.catalog.scale_out", description=__doc__)
    parser.add_argument("--duration", type=float, default=10.0, help="measured seconds per workload")
    parser.add_argument("--rounds", type=int, default=2, choices=range(1, 11))
    parser.add_argument("--warmup", type=float, default=2.0, help="warm-up seconds per round")
    parser.add_argument("--server-warmup", type=float, default=30.0, help="unmeasured seconds per setup")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--workload", action="append", choices=WORKLOADS, default=None)
    parser.add_argument("--no-reference", action="store_true", help="floe setups only")
    parser.add_argument("--output", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    settings = {
        "started_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "duration_s": args.duration,
        "rounds": args.rounds,
        "warmup_s": args.warmup,
        "server_warmup_s": args.server_warmup,
        "clients": args.clients,
        "git_commit": git_commit(),
    }
    machine = machine_info()
    dataset = Dataset(list_tables=10)
    chosen = [w for w in workloads(args.clients) if w.key in (args.workload or WORKLOADS)]
    rows: dict[str, dict[str, Row]] = {w.key: {} for w in chosen}
    audits: dict[str, dict[str, Any]] = {}
    with LocalPostgres() as pg, floe_setups(pg) as setups, contextlib.ExitStack() as stack:
        if not args.no_reference:
            ref = stack.enter_context(reference_server())
            setups.append(Setup(REFERENCE, ref.target, ref.pids(), []))
        for setup in setups:
            print(f"seeding and warming up {setup.name} ...", flush=True)
            seed(setup.target, dataset)
            warm_up(_as_server(setup), dataset, chosen, args.server_warmup)
        for workload in chosen:
            for round_index in range(args.rounds):
                order = setups if round_index % 2 == 0 else setups[::-1]
                for setup in order:
                    row = rows[workload.key].setdefault(setup.name, Row())
                    sample(setup, dataset, workload, row, args.duration / args.rounds, args.warmup)
            for setup in setups:
                s = rows[workload.key][setup.name].summary()
                print(
                    f"{workload.key:16} {setup.name:17} {s['throughput_rps']:9.1f} req/s  "
                    f"{s['rps_per_core']} req/s per core  statuses {s['statuses']}",
                    flush=True,
                )
        if any(w.key.startswith("commit") for w in chosen):
            for setup in setups:
                audits[setup.name] = asyncio.run(_audit_commits(setup.target, dataset))
                print(f"commit audit {setup.name}: {audits[setup.name]}", flush=True)
        postgres_bin = pg.bin
    machine["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    doc = {
        "settings": settings | {"total_seconds": round(time.perf_counter() - started, 1)},
        "machine": machine,
        "versions": versions(postgres_bin, reference.artifact_versions()),
        "setups": {name: SETUPS[name] for name in (s.name for s in setups)},
        "workloads": [
            {
                "key": w.key,
                "title": w.title,
                "clients": w.concurrency,
                "results": {name: row.summary() for name, row in rows[w.key].items()},
            }
            for w in chosen
        ],
        "commit_audit": audits,
    }
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / "catalog-scale-out.json").write_text(json.dumps(doc, indent=2) + "\n")
    markdown = render_markdown(doc)
    (args.output / "catalog-scale-out.md").write_text(markdown)
    print(markdown)
    return 0


def _as_server(setup: Setup) -> Any:
    """The `run.Server` shape `warm_up` takes."""
    from benchmarks.catalog.run import Server

    return Server(setup.target, setup.name, lambda: setup.catalog_pids + setup.database_pids)


def _number(value: float | None, digits: int = 0) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def render_markdown(doc: dict[str, Any]) -> str:
    s, m = doc["settings"], doc["machine"]
    lines = [
        "# Catalog scale-out: floe with 1 and 2 workers, two `floe serve` on one PostgreSQL, "
        "and the reference",
        "",
        f"Generated by `python -m benchmarks.catalog.scale_out` on {s['started_at']} at git commit "
        f"`{s['git_commit']}`. {s['duration_s']:g} s measured per workload and setup in {s['rounds']} rounds "
        f"alternating the order of the setups, each after {s['warmup_s']:g} s of warm-up; every setup ran "
        f"all workloads unmeasured for {s['server_warmup_s']:g} s first. Closed loop, {s['clients']} "
        "clients for reads, keep-alive HTTP/1.1; with two processes the clients' connections alternate "
        "between their ports. floe verifies a bearer token on every request; the reference has no "
        "authentication.",
        "",
        "CPU in cores busy on average: the catalog's own processes (floe: all its workers; reference: the "
        "JVM) and PostgreSQL (floe only; the reference's SQLite runs inside its JVM). Requests per core = "
        "req/s ÷ (catalog + PostgreSQL cores). Other CPU: everything else on the machine meanwhile (other "
        "engineers' work), which takes cores away from the setups.",
        "",
    ]
    for workload in doc["workloads"]:
        results = workload["results"]
        reference_rps = results.get(REFERENCE, {}).get("throughput_rps")
        lines += [
            f"## {workload['title']} ({workload['clients']} client{'s' if workload['clients'] > 1 else ''})",
            "",
            "| Setup | req/s | ÷ reference | catalog CPU | PostgreSQL CPU | req/s per core | CPU ms/request "
            "| p50 ms | p99 ms | statuses | other CPU |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|",
        ]
        for name, r in results.items():
            ratio = (
                f"{r['throughput_rps'] / reference_rps:.2f}x" if reference_rps and name != REFERENCE else ""
            )
            statuses = ", ".join(f"{k}: {v:,}" for k, v in r["statuses"].items())
            lines.append(
                f"| {name} | {_number(r['throughput_rps'])} | {ratio} | {r['catalog_cpu_cores']:.2f} | "
                f"{r['database_cpu_cores']:.2f} | {_number(r['rps_per_core'])} | "
                f"{_number(r['cpu_ms_per_request'], 3)} | {_number(r['p50_ms'], 2)} | "
                f"{_number(r['p99_ms'], 2)} | {statuses} | {r['other_cpu_cores']:.2f} |"
            )
        lines.append("")
    if doc["commit_audit"]:
        lines += [
            f"## No lost commits ({AUDIT_WRITERS} writers x {AUDIT_COMMITS_PER_WRITER} unique "
            "set-properties commits on one table, after the measured runs)",
            "",
            "| Setup | commits | statuses | acknowledged but missing | refused but applied "
            "| other outcomes |",
            "|---|---:|---|---:|---:|---:|",
        ]
        for name, audit in doc["commit_audit"].items():
            statuses = ", ".join(f"{k}: {v}" for k, v in sorted(audit["statuses"].items()))
            lines.append(
                f"| {name} | {audit['commits']} | {statuses} | {audit['lost']} | "
                f"{audit['applied_though_refused']} | {audit['unaccounted']} |"
            )
        lines.append("")
    lines += [
        f"Machine: {m.get('cpus')} CPUs ({m.get('cpu_model')}), {m.get('memory_gb')} GB; load average "
        f"before {m.get('load_average_before')}, after {m.get('load_average_after')}. Every setup, "
        "PostgreSQL and the load generator share these cores, so a second worker or process can only "
        "add throughput while a core is idle: on a busy 2-core machine the req/s per core column is the "
        "comparable figure.",
        "",
        "Versions: " + ", ".join(f"{k} {v}" for k, v in doc["versions"].items() if v) + ".",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
