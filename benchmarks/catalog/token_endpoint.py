"""`python -m benchmarks.catalog.token_endpoint`: what a token request costs floe, and what token requests
cost everyone else's requests.

One `floe serve` on a throwaway PostgreSQL, with a cluster, a writer key of it (a secret floe generated,
what engines use) and the admin key (an operator-chosen `FLOE_ADMIN_CLIENT_SECRET`).

1. **CPU per token request**: `--sequential` client-credentials requests one after another, per key (and
   as a floor, requests refused before any credential is looked at: unsupported grant_type); for
   each, the CPU time of floe's process tree (all threads, from `/proc/<pid>/task/<tid>/schedstat`, in
   nanoseconds) before and after it, 10 ms after its answer so work the server does after answering
   (the audit entry) counts too. PostgreSQL's CPU is reported beside it.
2. **Other requests meanwhile**: `--other-clients` clients send listTables (`--tables` tables) in a
   closed loop; after `--baseline` seconds alone, token requests (the writer key) run beside them, twice:
   a burst of `--tokens` at `--token-clients` concurrency (the issue's case: 200 at 32, as fast as the
   server answers) and a paced run of `--paced-rate` per second for `--paced-seconds` (an engine that
   asks for a token before most operations). listTables latency alone vs while the token requests run.

Targets (reported, not asserted): a token request at most 2 ms of floe CPU at p50; listTables p50 while
paced token requests run within 1.5x of alone (a burst saturates a core however cheap each token is).
Results: `benchmarks/results/catalog-token.json` and `.md`.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import math
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from benchmarks.catalog.loadgen import build_request, new_event_loop, open_connection
from benchmarks.catalog.procstat import cpu_ns, postmaster_pid, tree_pids
from benchmarks.catalog.workloads import LIST_TABLE_SCHEMA, Target, create_cluster_key, discover
from devtools.catalog_server import CatalogProcess
from devtools.postgres import LocalPostgres

RESULTS_DIR = Path(__file__).resolve().parent.parent / "results"
TOKEN_PATH = "/v1/oauth/tokens"
TARGET_CPU_P50_MS = 2.0
TARGET_SLOWDOWN = 1.5
_SETTLE_S = 0.01


def _percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile, rounded to microseconds."""
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[max(1, math.ceil(q / 100 * len(ordered))) - 1], 3)


def token_request(target: Target, client_id: str, client_secret: str, scope: str | None = None) -> bytes:
    """A client-credentials token request (with `scope` when given)."""
    form = {"grant_type": "client_credentials", "client_id": client_id, "client_secret": client_secret}
    if scope is not None:
        form["scope"] = scope
    return build_request(
        "POST",
        TOKEN_PATH,
        target.host_header,
        body=urlencode(form).encode(),
        content_type="application/x-www-form-urlencoded",
    )


async def _cpu_per_request(
    target: Target, request: bytes, count: int, pids: dict[str, list[int]]
) -> dict[str, Any]:
    """Send `count` requests one at a time; CPU of each process group per request."""
    connection = await open_connection(target.host, target.port)
    per_group: dict[str, list[float]] = {name: [] for name in pids}
    latencies: list[float] = []
    statuses: Counter[int] = Counter()
    try:
        for _ in range(count):
            before = {name: cpu_ns(group) for name, group in pids.items()}
            sent = time.perf_counter_ns()
            statuses[await connection.send(request)] += 1
            latencies.append((time.perf_counter_ns() - sent) / 1e6)
            await asyncio.sleep(_SETTLE_S)
            for name, group in pids.items():
                per_group[name].append((cpu_ns(group) - before[name]) / 1e6)
    finally:
        if connection.transport is not None:
            connection.transport.close()
    result: dict[str, Any] = {
        "requests": count,
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
        "latency_p50_ms": _percentile(latencies, 50),
    }
    for name, values in per_group.items():
        result[f"{name}_cpu_p50_ms"] = _percentile(values, 50)
        result[f"{name}_cpu_p90_ms"] = _percentile(values, 90)
        result[f"{name}_cpu_mean_ms"] = round(sum(values) / len(values), 3) if values else None
    return result


async def _contended(
    target: Target,
    token: bytes,
    other: bytes,
    *,
    tokens: int,
    token_clients: int,
    other_clients: int,
    baseline_s: float,
    rate: float | None = None,
) -> dict[str, Any]:
    """listTables latency alone, then while `tokens` token requests run on `token_clients` connections:
    as fast as answered, or started `rate` per second."""
    stop = asyncio.Event()
    samples: list[tuple[int, float, int]] = []  # (sent ns, latency ms, status)

    async def other_client() -> None:
        connection = await open_connection(target.host, target.port)
        try:
            while not stop.is_set():
                sent = time.perf_counter_ns()
                status = await connection.send(other)
                samples.append((sent, (time.perf_counter_ns() - sent) / 1e6, status))
        finally:
            if connection.transport is not None:
                connection.transport.close()

    next_index = 0
    token_latencies: list[float] = []
    token_statuses: Counter[int] = Counter()

    async def token_client(started: float) -> None:
        nonlocal next_index
        connection = await open_connection(target.host, target.port)
        try:
            while next_index < tokens:
                index, next_index = next_index, next_index + 1
                if rate:
                    await asyncio.sleep(max(0.0, started + index / rate - time.perf_counter()))
                sent = time.perf_counter_ns()
                token_statuses[await connection.send(token)] += 1
                token_latencies.append((time.perf_counter_ns() - sent) / 1e6)
        finally:
            if connection.transport is not None:
                connection.transport.close()

    others = [asyncio.create_task(other_client()) for _ in range(other_clients)]
    await asyncio.sleep(1.0)  # warm-up, not measured
    baseline_from = time.perf_counter_ns()
    await asyncio.sleep(baseline_s)
    started = time.perf_counter_ns()
    await asyncio.gather(*(token_client(started / 1e9) for _ in range(token_clients)))
    ended = time.perf_counter_ns()
    stop.set()
    await asyncio.gather(*others)
    alone = [ms for sent, ms, _ in samples if baseline_from <= sent < started]
    during = [ms for sent, ms, _ in samples if started <= sent < ended]
    statuses = Counter(status for _, _, status in samples)

    def summary(values: list[float]) -> dict[str, Any]:
        return {
            "requests": len(values),
            "p50_ms": _percentile(values, 50),
            "p99_ms": _percentile(values, 99),
            "max_ms": _percentile(values, 100),
        }

    alone_p50, during_p50 = _percentile(alone, 50), _percentile(during, 50)
    return {
        "token_requests": tokens,
        "token_clients": token_clients,
        "token_rate_per_s": rate,
        "token_phase_s": round((ended - started) / 1e9, 3),
        "token_statuses": {str(k): v for k, v in sorted(token_statuses.items())},
        "token_latency_p50_ms": _percentile(token_latencies, 50),
        "token_latency_p99_ms": _percentile(token_latencies, 99),
        "other_clients": other_clients,
        "other_statuses": {str(k): v for k, v in sorted(statuses.items())},
        "other_alone": summary(alone),
        "other_during_tokens": summary(during),
        "other_p50_slowdown": round(during_p50 / alone_p50, 2) if alone_p50 and during_p50 else None,
    }


def _seed(target: Target, namespace: str, tables: int) -> None:
    with target.http() as http:
        for i in range(tables):
            body = {"name": f"t_{i:04d}", "schema": LIST_TABLE_SCHEMA}
            http.post(target.tables_path(namespace), json=body).raise_for_status()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.catalog.token_endpoint", description=__doc__)
    parser.add_argument(
        "--sequential", type=int, default=200, help="token requests measured one at a time, per key"
    )
    parser.add_argument("--tokens", type=int, default=200, help="token requests in the burst")
    parser.add_argument("--token-clients", type=int, default=32, help="connections of the burst")
    parser.add_argument("--paced-rate", type=float, default=25.0, help="token requests per second, paced")
    parser.add_argument("--paced-seconds", type=float, default=4.0)
    parser.add_argument("--other-clients", type=int, default=4)
    parser.add_argument("--baseline", type=float, default=3.0, help="seconds of listTables alone")
    parser.add_argument("--tables", type=int, default=100, help="tables in the listed namespace")
    parser.add_argument("--workers", type=int, default=1, help="floe serve worker processes")
    parser.add_argument("--label", default="", help="a note stored with the results (e.g. the commit)")
    parser.add_argument("--output", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)

    with (
        LocalPostgres() as pg,
        CatalogProcess(pg.create_database("floe_token_bench"), workers=args.workers) as floe,
    ):
        admin = floe.token()
        key = create_cluster_key(floe.url, admin, "bench")
        target = discover("floe", floe.url, admin)
        _seed(target, "bench", args.tables)
        assert floe.process is not None
        postmaster = postmaster_pid(pg.data)
        groups = {
            "floe": tree_pids([floe.process.pid]),
            "postgres": tree_pids([postmaster]) if postmaster else [],
        }
        writer = token_request(target, key["client_id"], key["client_secret"])
        operator = token_request(target, floe.admin_client_id, floe.admin_client_secret)
        # What the endpoint costs before any credential is looked at: the floor of a token request.
        refused = build_request(
            "POST",
            TOKEN_PATH,
            target.host_header,
            body=b"grant_type=password",
            content_type="application/x-www-form-urlencoded",
        )
        other = build_request("GET", target.tables_path("bench"), target.host_header, target.headers)

        loop = new_event_loop()
        try:
            # A few unmeasured requests first (connections, caches, the first verification of each key).
            loop.run_until_complete(_cpu_per_request(target, writer, 5, groups))
            loop.run_until_complete(_cpu_per_request(target, operator, 5, groups))
            sequential = {
                "generated_secret": loop.run_until_complete(
                    _cpu_per_request(target, writer, args.sequential, groups)
                ),
                "operator_secret": loop.run_until_complete(
                    _cpu_per_request(target, operator, args.sequential, groups)
                ),
                "unsupported_grant": loop.run_until_complete(
                    _cpu_per_request(target, refused, args.sequential, groups)
                ),
            }
            common = {"other_clients": args.other_clients, "baseline_s": args.baseline}
            contended = {
                "burst": loop.run_until_complete(
                    _contended(
                        target, writer, other, tokens=args.tokens, token_clients=args.token_clients, **common
                    )
                ),
                "paced": loop.run_until_complete(
                    _contended(
                        target,
                        writer,
                        other,
                        tokens=round(args.paced_rate * args.paced_seconds),
                        token_clients=8,
                        rate=args.paced_rate,
                        **common,
                    )
                ),
            }
        finally:
            loop.close()

    cpu_p50 = sequential["generated_secret"]["floe_cpu_p50_ms"]
    slowdown = contended["paced"]["other_p50_slowdown"]
    document = {
        "generated_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "label": args.label,
        "workers": args.workers,
        "cpus": os.cpu_count(),
        "tables": args.tables,
        "sequential": sequential,
        "contended": contended,
        "target_cpu_p50_ms": TARGET_CPU_P50_MS,
        "target_slowdown": TARGET_SLOWDOWN,
        "cpu_target_met": cpu_p50 is not None and cpu_p50 <= TARGET_CPU_P50_MS,
        "latency_target_met": slowdown is not None and slowdown <= TARGET_SLOWDOWN,
    }
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / "catalog-token.json").write_text(json.dumps(document, indent=2) + "\n")
    (args.output / "catalog-token.md").write_text(render(document))
    print(render(document))
    return 0


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _row(*cells: object) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def render(document: dict[str, Any]) -> str:
    seq, con = document["sequential"], document["contended"]
    rows = [
        _row(
            label,
            *(_ms(r[f"floe_cpu_{stat}_ms"]) for stat in ("p50", "p90", "mean")),
            _ms(r["postgres_cpu_p50_ms"]),
            _ms(r["latency_p50_ms"]),
            r["statuses"],
        )
        for label, r in (
            ("key with a generated secret", seq["generated_secret"]),
            ("admin key, operator-chosen secret", seq["operator_secret"]),
            ("floor: unsupported grant_type (400, no credentials checked)", seq["unsupported_grant"]),
        )
    ]
    other_rows = []
    for phase, title in (("burst", "burst"), ("paced", "paced")):
        run = con[phase]
        how = (
            f"{run['token_requests']} at {run['token_rate_per_s']:g}/s"
            if run["token_rate_per_s"]
            else f"{run['token_requests']} at concurrency {run['token_clients']}"
        )
        for label, r in (
            ("alone", run["other_alone"]),
            (f"during {title}: {how}", run["other_during_tokens"]),
        ):
            other_rows.append(
                _row(label, r["requests"], _ms(r["p50_ms"]), _ms(r["p99_ms"]), _ms(r["max_ms"]))
            )
        other_rows.append(
            _row(
                f"token requests of the {title}",
                sum(run["token_statuses"].values()),
                _ms(run["token_latency_p50_ms"]),
                _ms(run["token_latency_p99_ms"]),
                f"{run['token_phase_s']} s in all, statuses {run['token_statuses']}",
            )
        )
    verdict = {True: "met", False: "missed"}
    label = f" ({document['label']})" if document["label"] else ""
    return "\n".join(
        [
            "# The token endpoint: CPU per token request, and other requests while tokens are issued",
            "",
            "Generated by `python -m benchmarks.catalog.token_endpoint` on "
            f"{document['generated_at']}{label}: `floe serve --workers {document['workers']}` on a local "
            f"PostgreSQL, {document['cpus']} CPUs.",
            "",
            f"## CPU per token request ({seq['generated_secret']['requests']} sequential requests per key)",
            "",
            "| key | floe CPU p50 ms | p90 ms | mean ms | PostgreSQL CPU p50 ms | latency p50 ms "
            "| statuses |",
            "|---|---:|---:|---:|---:|---:|---|",
            *rows,
            "",
            f"Target: ≤ {document['target_cpu_p50_ms']} ms of floe CPU at p50 (generated secret): "
            f"{verdict[document['cpu_target_met']]}.",
            "",
            f"## listTables ({document['tables']} tables, {con['burst']['other_clients']} clients) "
            "while token requests run",
            "",
            "| listTables | requests | p50 ms | p99 ms | max ms |",
            "|---|---:|---:|---:|---:|",
            *other_rows,
            "",
            f"listTables p50 slowdown: burst {con['burst']['other_p50_slowdown']}x, paced "
            f"{con['paced']['other_p50_slowdown']}x (target for paced ≤ {document['target_slowdown']}x: "
            f"{verdict[document['latency_target_met']]}).",
            "",
        ]
    )


if __name__ == "__main__":
    raise SystemExit(main())
