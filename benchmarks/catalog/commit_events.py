"""The cost of commit events (issue 35 item 4), with commit events off and on, alternately:

- HTTP: floe's commit workloads (`commit_1`, `commit_8` of `python -m benchmarks.catalog`, on
  PostgreSQL) against one local Kafka broker;
- store: one table's commit as the catalog's store runs it on PostgreSQL (the swap, its audit entry,
  and with events on the outbox row, in one statement), in blocks of commits, alternating, in-process:
  the cost of the outbox insert alone, without HTTP and the metadata file write around it.

Writes `catalog-commit-events.json` and `.md` to benchmarks/results.

    python -m benchmarks.catalog.commit_events [--pairs 2] [--duration 20] [--store-blocks 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median
from typing import Any

from catalog.migrations import upgrade_database
from catalog.store import PendingCommit, create_store
from catalog.store.commit_records import CommitRecords
from catalog.store.security import AuditEntry
from devtools.kafka_broker import LocalKafka
from devtools.postgres import LocalPostgres

RESULTS = Path(__file__).resolve().parent.parent / "results"
WORKLOADS = ("commit_1", "commit_8")
TOPIC = "floe.commit-events"


def run_once(env: dict[str, str], duration: float, output: Path) -> dict[str, Any]:
    command = [sys.executable, "-m", "benchmarks.catalog", "--only", "floe", "--duration", str(duration)]
    command += ["--rounds", "1", "--server-warmup", "5", "--output", str(output)]
    for workload in WORKLOADS:
        command += ["--workload", workload]
    subprocess.run(command, env=env, check=True)
    document: dict[str, Any] = json.loads((output / "catalog.json").read_text())
    return document


def throughputs(document: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Per workload: floe's requests/s, p50 and p99 latency (ms) and CPU (cores, its processes)."""
    found: dict[str, dict[str, float]] = {}
    for workload in document["workloads"]:
        floe = workload["results"]["floe"]
        found[workload["key"]] = {
            "rps": floe["throughput_rps"],
            "p50_ms": floe["p50_ms"],
            "p99_ms": floe["p99_ms"],
            "cpu_cores": floe["server_cpu_cores"],
        }
    return found


def _metadata(snapshots: int) -> str:
    """Table metadata JSON with `snapshots` appends (the size the catalog benchmark's tables have)."""
    listed = [
        {
            "snapshot-id": n,
            "sequence-number": n,
            "timestamp-ms": 1_764_000_000_000 + n,
            "manifest-list": f"s3://lake/db/t/metadata/snap-{n}.avro",
            "summary": {"operation": "append", "added-records": "1000", "added-data-files": "1"},
            "schema-id": 0,
        }
        for n in range(1, snapshots + 1)
    ]
    return json.dumps(
        {
            "format-version": 2,
            "location": "s3://lake/db/t",
            "last-updated-ms": 1_764_000_000_000 + snapshots,
            "current-schema-id": 0,
            "current-snapshot-id": snapshots,
            "snapshots": listed,
            "schemas": [{"type": "struct", "schema-id": 0, "fields": []}],
        }
    )


async def _store_blocks(url: str, blocks: int, per_block: int) -> dict[str, list[dict[str, float]]]:
    """Per mode, each block's wall and client CPU milliseconds per commit."""
    store = create_store(url)
    found: dict[str, list[dict[str, float]]] = {"off": [], "on": []}
    try:
        warehouse = await store.upsert_warehouse("lake", "s3://lake", {})
        ns = await store.create_namespace(warehouse.id, "db", {})
        document = _metadata(8)
        assert await store.swap([PendingCommit(None, 0, "s3://lake/m0.json", document, ns.id, "t")])
        record = await store.get_tabular(warehouse.id, "db", "t")
        assert record is not None
        version = record.version
        audit = AuditEntry("bench", "db", "updateTable", "db.t", "ok", 200)
        for block in range(blocks):
            for mode in ("off", "on") if block % 2 == 0 else ("on", "off"):
                store.commit_events_enabled = mode == "on"
                wall, cpu = time.perf_counter(), time.process_time()
                for _ in range(per_block):
                    commit = PendingCommit(record.id, version, f"s3://lake/m{version + 1}.json", document)
                    assert await store.swap([commit], CommitRecords(audit, None))
                    version += 1
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                found[mode].append({"wall_ms": wall * 1000 / per_block, "cpu_ms": cpu * 1000 / per_block})
                # What the publisher does, outside the measurement.
                await store.delete_events([row.id for row in await store.pending_events(per_block * 2)])
    finally:
        await store.close()
    return found


def store_cost(blocks: int, per_block: int) -> dict[str, Any]:
    with LocalPostgres() as postgres:
        url = postgres.create_database("floe_commit_events_bench")
        upgrade_database(url)
        blocks_found = asyncio.run(_store_blocks(url, blocks, per_block))
    medians = {
        mode: {k: median(b[k] for b in found) for k in ("wall_ms", "cpu_ms")}
        for mode, found in blocks_found.items()
    }
    return {"blocks": blocks_found, "median": medians, "per_block": per_block}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=2, help="off/on pairs, alternating which goes first")
    parser.add_argument("--duration", type=float, default=20.0, help="measured seconds per workload")
    parser.add_argument("--store-blocks", type=int, default=10, help="store: blocks per mode")
    parser.add_argument("--store-commits", type=int, default=300, help="store: commits per block")
    args = parser.parse_args()
    store = store_cost(args.store_blocks, args.store_commits)
    print("store", store["median"], flush=True)
    runs: dict[str, list[dict[str, dict[str, float]]]] = {"off": [], "on": []}
    with LocalKafka(data_dir=Path(tempfile.mkdtemp(prefix="bench-kafka-"))) as kafka:
        kafka.create_topic(TOPIC, 3, exist_ok=True)
        base = {k: v for k, v in os.environ.items() if not k.startswith("FLOE_EVENTS_")}
        settings = {
            "off": base,
            "on": {**base, "FLOE_EVENTS_KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers},
        }
        for pair in range(args.pairs):
            for mode in ("off", "on") if pair % 2 == 0 else ("on", "off"):
                with tempfile.TemporaryDirectory() as output:
                    document = run_once(settings[mode], args.duration, Path(output))
                runs[mode].append(throughputs(document))
                print(mode, runs[mode][-1], flush=True)
    summary = {
        mode: {
            w: {k: median(r[w][k] for r in results) for k in ("rps", "p50_ms", "p99_ms", "cpu_cores")}
            for w in WORKLOADS
        }
        for mode, results in runs.items()
    }
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout
    doc = {
        "git_commit": commit.strip(),
        "duration_s": args.duration,
        "runs": runs,
        "median": summary,
        "store": store,
    }
    (RESULTS / "catalog-commit-events.json").write_text(json.dumps(doc, indent=2) + "\n")
    lines = [
        "# Commit events: commit throughput off and on",
        "",
        f"`python -m benchmarks.catalog.commit_events --pairs {args.pairs} --duration {args.duration:g}` at "
        f"`{doc['git_commit']}`: floe on PostgreSQL, set-properties commits, medians of {args.pairs} runs "
        "each; CPU is floe's processes' (cores).",
        "",
        "| workload | off req/s | on req/s | change | off p50 / p99 ms | on p50 / p99 ms | CPU off / on |",
        "|---|---|---|---|---|---|---|",
    ]
    for w in WORKLOADS:
        off, on = summary["off"][w], summary["on"][w]
        change = (on["rps"] / off["rps"] - 1) * 100 if off["rps"] else 0.0
        lines.append(
            f"| {w} | {off['rps']:.0f} | {on['rps']:.0f} | {change:+.1f} % | "
            f"{off['p50_ms']:.1f} / {off['p99_ms']:.1f} | {on['p50_ms']:.1f} / {on['p99_ms']:.1f} | "
            f"{off['cpu_cores']:.2f} / {on['cpu_cores']:.2f} |"
        )
    off, on = store["median"]["off"], store["median"]["on"]
    lines += [
        "",
        f"Store: one table's commit with its audit entry on PostgreSQL, in-process, {args.store_blocks} "
        f"blocks of {args.store_commits} commits per mode, alternating; medians per commit:",
        "",
        "| | events off | events on | difference |",
        "|---|---|---|---|",
        f"| wall ms | {off['wall_ms']:.3f} | {on['wall_ms']:.3f} | {on['wall_ms'] - off['wall_ms']:+.3f} |",
        f"| client CPU ms | {off['cpu_ms']:.3f} | {on['cpu_ms']:.3f} | {on['cpu_ms'] - off['cpu_ms']:+.3f} |",
    ]
    (RESULTS / "catalog-commit-events.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
