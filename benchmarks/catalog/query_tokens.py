"""`python -m benchmarks.catalog.query_tokens`: a Trino-like workload on floe — a token request, then a
loadTable with that token, per query — against the Iceberg reference server's loadTable alone, in one run.

Issue 16's target: such pairs at ≥ 1.5x the reference's loadTable throughput (the reference server has
no authentication, so its clients never ask for a token). Each of `--clients` connections runs queries
in a closed loop: `POST /v1/oauth/tokens` (client credentials of a writer key with a secret floe
generated, what an engine is configured with), then `GET` the seeded table with the access token it
answered. floe's loadTable alone (one token reused) is measured beside it, so the token's share shows.
Rounds alternate which server goes first; each server ran every workload unmeasured first (JIT).

Results: `benchmarks/results/catalog-query-tokens.json` and `.md`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import os
import resource
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from benchmarks.catalog.loadgen import (
    ConnectionLost,
    LoadResult,
    build_request,
    new_event_loop,
    open_connection,
    run_load,
)
from benchmarks.catalog.report import machine_info
from benchmarks.catalog.run import Server, floe_server, reference_server, sample_of
from benchmarks.catalog.token_endpoint import token_request as query_token_request
from benchmarks.catalog.workloads import Dataset, Target, create_cluster_key, discover, seed_read_table
from benchmarks.provenance import git_commit

RESULTS_DIR = Path(__file__).resolve().parent.parent / "results"
TOKEN_PATH = "/v1/oauth/tokens"
TARGET_RATIO = 1.5
PAIRS, FLOE_LOAD, REFERENCE_LOAD = "floe_token_and_load", "floe_load", "reference_load"
TITLES = {
    PAIRS: "floe: token request, then loadTable with that token (one query)",
    FLOE_LOAD: "floe: loadTable alone (one token reused)",
    REFERENCE_LOAD: "reference server: loadTable alone (no authentication)",
}


async def _closed_loop_pairs(
    target: Target, token_request: bytes, load_path: str, clients: int, duration_s: float, warmup_s: float
) -> LoadResult:
    """`clients` connections, each sending a token request and then loadTable with the token it got,
    for `warmup_s + duration_s`; the pairs that started and ended in the measured part count (latency:
    both requests; status: the loadTable's, or the token request's when that one failed)."""
    result = LoadResult(concurrency=clients, duration_s=duration_s)
    started = time.perf_counter_ns()
    measure_from = started + int(warmup_s * 1e9)
    measure_until = measure_from + int(duration_s * 1e9)
    cpu_before = resource.getrusage(resource.RUSAGE_SELF)
    ports = target.ports

    async def client(port: int) -> None:
        connection = None
        try:
            while time.perf_counter_ns() < measure_until:
                if connection is None or connection.closed or connection.server_closes:
                    if connection is not None and connection.transport is not None:
                        connection.transport.close()
                    connection = await open_connection(target.host, port, keep_body=True)
                sent = time.perf_counter_ns()
                try:
                    status = await connection.send(token_request)
                    if status == 200:
                        token = json.loads(bytes(connection.body))["access_token"]
                        headers = {"Authorization": f"Bearer {token}"}
                        load = build_request("GET", load_path, target.host_header, headers)
                        status = await connection.send(load)
                except (ConnectionLost, OSError):
                    if sent >= measure_from:
                        result.connection_errors += 1
                    connection.closed = True
                    continue
                done = time.perf_counter_ns()
                if sent >= measure_from and done <= measure_until:
                    result.latencies_ns.append(done - sent)
                    result.statuses[status] += 1
        finally:
            if connection is not None and connection.transport is not None:
                connection.transport.close()

    await asyncio.gather(*(client(ports[i % len(ports)]) for i in range(clients)))
    cpu_after = resource.getrusage(resource.RUSAGE_SELF)
    result.loadgen_cpu_s = (cpu_after.ru_utime + cpu_after.ru_stime) - (
        cpu_before.ru_utime + cpu_before.ru_stime
    )
    result.wall_s = (time.perf_counter_ns() - started) / 1e9
    return result


def closed_loop_pairs(
    target: Target, token_request: bytes, load_path: str, clients: int, duration_s: float, warmup_s: float
) -> LoadResult:
    """Token-and-load queries from `clients` connections in a closed loop (see `_closed_loop_pairs`)."""
    loop = new_event_loop()
    try:
        return loop.run_until_complete(
            _closed_loop_pairs(target, token_request, load_path, clients, duration_s, warmup_s)
        )
    finally:
        loop.close()


def _measured(server: Server, run: Callable[[], LoadResult]) -> dict[str, Any]:
    """Run `run()` (a LoadResult); with the server's CPU and everything else's meanwhile."""
    measured = sample_of(server, lambda: (run(), {}))
    return {
        "result": measured.result,
        "server_cpu_s": measured.server_cpu_s,
        "other_cpu_s": measured.other_cpu_s,
    }


def _rounded(ms: float | None) -> float | None:
    return None if ms is None else round(ms, 2)


def _summary(samples: list[dict[str, Any]]) -> dict[str, Any]:
    merged = LoadResult.merge([s["result"] for s in samples])
    server_cpu = sum(s["server_cpu_s"] for s in samples)
    wall = sum(s["result"].wall_s for s in samples)
    return {
        "queries_per_s": round(merged.throughput, 1),
        "queries": merged.requests,
        "p50_ms": _rounded(merged.percentile_ms(50)),
        "p99_ms": _rounded(merged.percentile_ms(99)),
        "statuses": {str(k): v for k, v in sorted(merged.statuses.items())},
        "errors": merged.errors,
        # CPU is read around whole runs (their warm-up too): the server's cores busy on average, and
        # from them its CPU per query at the measured rate.
        "server_cores": round(server_cpu / wall, 2) if wall else None,
        "server_cpu_ms_per_query": round(server_cpu / wall * 1000 / merged.throughput, 3)
        if wall and merged.throughput
        else None,
        "other_cores": round(sum(s["other_cpu_s"] for s in samples) / wall, 2) if wall else None,
        "loadgen_cores": round(merged.loadgen_cpu_s / wall, 2) if wall else None,
    }


def access_token(url: str, client_id: str, client_secret: str) -> str:
    form = {"grant_type": "client_credentials", "client_id": client_id, "client_secret": client_secret}
    answer = httpx.post(f"{url}{TOKEN_PATH}", data=form, timeout=30).raise_for_status()
    token: str = answer.json()["access_token"]
    return token


def render(doc: dict[str, Any]) -> str:
    """The results as Markdown."""
    rows = doc["workloads"]
    lines = [
        "# A Trino-like workload: a token request and a loadTable per query",
        "",
        f"Generated by `python -m benchmarks.catalog.query_tokens` on {doc['generated_at']} at git commit "
        f"`{doc['git_commit']}` ({doc['total_seconds']} s in all). {doc['clients']} clients in a closed "
        "loop, "
        f"{doc['duration_s']:g} s measured per workload and server in {doc['rounds']} rounds alternating "
        f"which server goes first, each after {doc['warmup_s']:g} s of warm-up; each workload ran "
        f"unmeasured for {doc['server_warmup_s'] / 3:g} s first. floe: {doc['servers']['floe']}; here "
        "the measured requests use a cluster's writer key (a secret floe generated) and its tokens. "
        f"Reference: {doc['servers']['reference']}. Server cores: the server's processes (floe: "
        "workers and PostgreSQL), busy on average; CPU per query: those cores over the measured rate.",
        "",
        "| workload | queries/s | p50 ms | p99 ms | server cores | server CPU ms per query | other cores "
        "| statuses |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for key, row in rows.items():
        lines.append(
            f"| {TITLES[key]} | {row['queries_per_s']:,.1f} | {row['p50_ms']} | {row['p99_ms']} | "
            f"{row['server_cores']} | {row['server_cpu_ms_per_query']} | {row['other_cores']} | "
            f"{row['statuses']} |"
        )
    ratio = doc["ratio"]
    lines += [
        "",
        f"floe's queries (token + loadTable) ÷ the reference's loadTable alone: **{ratio}x** "
        f"(target ≥ {TARGET_RATIO}x: {'met' if doc['target_met'] else 'missed'}).",
        "",
        "Machine: " + ", ".join(f"{k} {v}" for k, v in doc["machine"].items()) + ".",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.catalog.query_tokens", description=__doc__)
    parser.add_argument("--duration", type=float, default=10.0, help="measured seconds per workload")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--warmup", type=float, default=2.0, help="warm-up seconds per measurement")
    parser.add_argument(
        "--server-warmup",
        type=float,
        default=90.0,
        help="unmeasured seconds before measuring, shared by the workloads (the reference's JIT)",
    )
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--workers", type=int, default=2, help="floe serve worker processes")
    parser.add_argument("--output", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)

    started = time.perf_counter()
    machine = machine_info()
    dataset = Dataset(appends=8)
    with contextlib.ExitStack() as stack:
        floe, _ = stack.enter_context(floe_server(args.workers))
        reference = stack.enter_context(reference_server())
        # Cluster `bench`: floe makes its namespace, the dataset's; the key's secret is floe's.
        assert floe.target.token is not None
        key = create_cluster_key(floe.target.origin, floe.target.token, "bench")
        writer = discover(
            "floe", floe.target.url, access_token(floe.target.url, key["client_id"], key["client_secret"])
        )
        seed_read_table(writer, dataset)  # in the cluster's namespace, `bench`
        seed_read_table(reference.target, dataset)
        token_request = query_token_request(writer, key["client_id"], key["client_secret"], scope="catalog")
        floe_path = writer.table_path(dataset.namespace, dataset.read_table)
        reference_path = reference.target.table_path(dataset.namespace, dataset.read_table)
        floe_load = build_request("GET", floe_path, writer.host_header, writer.headers)
        reference_load = build_request("GET", reference_path, reference.target.host_header)

        def run(workload: str, duration: float, warmup: float) -> dict[str, Any]:
            if workload == PAIRS:
                pairs = token_request, floe_path, args.clients, duration, warmup
                return _measured(floe, lambda: closed_loop_pairs(writer, *pairs))
            if workload == FLOE_LOAD:
                server, target, request = floe, writer, floe_load
            else:
                server, target, request = reference, reference.target, reference_load
            return _measured(
                server,
                lambda: run_load(
                    target.host, target.ports, lambda _: request, args.clients, duration, warmup
                ),
            )

        for workload in (PAIRS, FLOE_LOAD, REFERENCE_LOAD):
            print(f"warming up: {TITLES[workload]} for {args.server_warmup / 3:g} s ...", flush=True)
            run(workload, args.server_warmup / 3, 0.0)
        samples: dict[str, list[dict[str, Any]]] = {w: [] for w in TITLES}
        per_round = args.duration / max(1, args.rounds)
        for round_index in range(max(1, args.rounds)):
            order = [PAIRS, FLOE_LOAD, REFERENCE_LOAD]
            for workload in order if round_index % 2 == 0 else order[::-1]:
                sample = run(workload, per_round, args.warmup)
                samples[workload].append(sample)
                result: LoadResult = sample["result"]
                print(
                    f"round {round_index + 1}: {workload:20} {result.throughput:9.1f}/s  "
                    f"statuses {dict(Counter(result.statuses))}",
                    flush=True,
                )
    rows = {w: _summary(s) for w, s in samples.items()}
    reference_rps = rows[REFERENCE_LOAD]["queries_per_s"]
    ratio = round(rows[PAIRS]["queries_per_s"] / reference_rps, 2) if reference_rps else None
    machine["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    doc = {
        "generated_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "git_commit": git_commit(),
        "total_seconds": round(time.perf_counter() - started, 1),
        "clients": args.clients,
        "duration_s": args.duration,
        "rounds": args.rounds,
        "warmup_s": args.warmup,
        "server_warmup_s": args.server_warmup,
        "servers": {"floe": floe.description, "reference": reference.description},
        "machine": machine,
        "workloads": rows,
        "ratio": ratio,
        "target_ratio": TARGET_RATIO,
        "target_met": ratio is not None and ratio >= TARGET_RATIO,
    }
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / "catalog-query-tokens.json").write_text(json.dumps(doc, indent=2) + "\n")
    (args.output / "catalog-query-tokens.md").write_text(render(doc))
    print(render(doc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
