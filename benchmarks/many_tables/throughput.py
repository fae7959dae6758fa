"""`python -m benchmarks.many_tables.throughput`: records/s of `floe ingest` draining a backlog, spread over
many tables or in one, both designs side by side.

Each row: a fresh floe database (PostgreSQL), the topics filled first (JSON values of ~200 bytes), the
tables applied (design `queries`: every table `ingest_path: spark`), then `floe ingest --master
local[2]` started; records/s is 80 % of the records
over the time from 10 % to 90 % of them committed (polled every 0.5 s from floe's database).
Issue 31's target: 100 tables x 1,000 records/s reach ≥ 80 % of what one table reaches.
Results: benchmarks/results/many-tables-throughput.{md,json}.

`--events`: the same drain (shared design, `--tables` tables) with the catalog's commit events off, then
on (FLOE_EVENTS_* to the benchmark's own broker, topic `floe.events.{cluster}`), side by side; each row
also counts the events the topic received and the outbox left. Results: `--name` (default
ingest-commit-events).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.catalog.procstat import postmaster_pid
from benchmarks.ingest.environment import Environment, apply_pipeline, environment
from benchmarks.many_tables.__main__ import (
    CLUSTER,
    RESULTS,
    Offsets,
    floe_environment,
    git_commit,
    queries_design,
    start_ingest,
    tree_rss,
)
from catalog.client import FloeClient
from devtools.catalog_server import CatalogProcess
from devtools.kafka_broker import LocalKafka
from devtools.postgres import LocalPostgres

SCHEMA = {
    "fields": [
        {"name": "id", "id": 1, "type": "long"},
        {"name": "name", "id": 2, "type": "string"},
        {"name": "score", "id": 3, "type": "double", "optional": True},
        {"name": "at", "id": 4, "type": "timestamptz", "optional": True},
        {"name": "sent_at", "id": 5, "type": "long"},
    ]
}


@dataclass
class Drain:
    design: str
    tables: int
    partitions_per_topic: int
    records: int
    first_commit_s: float | None = None  # after floe ingest started
    drained_s: float | None = None  # floe ingest's start → every table at its end
    # Steady rate: 80 % of the records over the time from 10 % to 90 % of them committed.
    records_per_s: float | None = None
    ingest_cores: float | None = None
    ingest_peak_rss_gib: float | None = None
    catalog_cores: float | None = None
    other_cores: float | None = None
    events: bool | None = None  # --events: the catalog's commit events on or off
    postgres_cores: float | None = None  # --events: PostgreSQL apart (catalog_cores: floe serve alone)
    events_published: int | None = None  # messages on the events topic after the drain
    outbox_left: int | None = None  # events still waiting in the outbox then
    # --events: from the catalog's access log over the whole run (ingestion's requests by kind).
    commit_requests: int | None = None
    commit_ms_mean: float | None = None
    watermark_reports: int | None = None
    watermark_report_ms_mean: float | None = None
    notes: list[str] = field(default_factory=list)


EVENTS_TOPIC = f"floe.events.{CLUSTER}"


@contextlib.contextmanager
def events_environment(work: Path, events: bool) -> Iterator[Environment]:
    """The benchmark's components with the broker started before the catalog, so the catalog can send
    its commit events to it (`events`) — started in the same order either way."""
    import uuid

    from confluent_kafka.admin import AdminClient, NewTopic

    with LocalPostgres() as postgres, LocalKafka(data_dir=work / "kafka", heap="1g") as kafka:
        database = postgres.create_database(f"floe_events_bench_{uuid.uuid4().hex[:6]}")
        admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
        admin.create_topics([NewTopic(EVENTS_TOPIC, 1, 1)])[EVENTS_TOPIC].result(60)
        env = (
            {
                "FLOE_EVENTS_KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers,
                "FLOE_EVENTS_TOPIC": EVENTS_TOPIC,
            }
            if events
            else {}
        )
        with CatalogProcess(database, home=work / "floe", env=env) as server:
            control = FloeClient(server.url, server.admin_client_id, server.admin_client_secret)
            try:
                yield Environment(work, postgres, server, kafka, server.catalog(), control)
            finally:
                control.close()


def requests(log_path: Path, needle: str) -> tuple[int, float | None]:
    """How many requests of a path containing `needle` the catalog's access log holds, and their mean
    server time (ms)."""
    durations = []
    for line in log_path.read_text(errors="replace").splitlines():
        if needle not in line:
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if needle in str(entry.get("path", "")) and isinstance(entry.get("duration_ms"), int | float):
            durations.append(float(entry["duration_ms"]))
    return len(durations), round(sum(durations) / len(durations), 2) if durations else None


def events_on_topic(bootstrap: str) -> int:
    """Messages the events topic holds (its one partition's end offset)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "floe-bench-events"})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(EVENTS_TOPIC, 0), timeout=30)
        return int(high)
    finally:
        consumer.close()


def json_tables(bootstrap: str, topics: list[str]) -> dict[str, Any]:
    """floe.yaml (as JSON) with one inline-JSON table of SCHEMA per topic of the benchmark's broker."""
    host, port = bootstrap.split(":")
    brokers = [{"hostname": host, "port": int(port)}]
    return {
        "source_clusters": [{"name": CLUSTER, "bootstrap_brokers": brokers}],
        "tables": [
            {
                "source_cluster_name": CLUSTER,
                "source_topic": t,
                "source_format": "json",
                "schema_mode": "inline",
                "schema": SCHEMA,
            }
            for t in topics
        ],
    }


def value(i: int) -> bytes:
    return json.dumps(
        {"id": i, "name": f"user-{i:08d}", "score": i / 4, "at": "2026-11-28T10:00:00Z", "sent_at": i}
    ).encode()


def run(
    design: str,
    tables: int,
    partitions: int,
    per_table: int,
    work: Path,
    limit: float,
    events: bool | None = None,
) -> Drain:
    drain = Drain(design, tables, partitions, tables * per_table, events=events)
    setup = environment(work, kafka_heap="1g") if events is None else events_environment(work, events)
    with setup as env:
        from confluent_kafka import Producer
        from confluent_kafka.admin import AdminClient, NewTopic

        topics = [f"t{i:04d}" for i in range(tables)]
        admin = AdminClient({"bootstrap.servers": env.kafka.bootstrap_servers})
        for future in admin.create_topics([NewTopic(t, partitions, 1) for t in topics]).values():
            future.result(60)
        producer = Producer(
            {"bootstrap.servers": env.kafka.bootstrap_servers, "linger.ms": 20, "batch.size": 1_000_000}
        )
        for topic in topics:
            for i in range(per_table):
                while True:
                    try:
                        producer.produce(topic, value(i), partition=i % partitions)
                        break
                    except BufferError:
                        producer.poll(0.1)
        producer.flush(120)
        config = json_tables(env.kafka.bootstrap_servers, topics)
        apply_pipeline(env.server, queries_design(config) if design == "queries" else config)
        offsets = Offsets(env.server.database_url or "")
        log = (work / "ingest.log").open("wb")
        process = start_ingest(work, floe_environment(env), log)
        started = time.monotonic()
        sampler = env.sampler(None)
        sampler.groups["ingester"] = lambda: [process.pid]
        if events is not None:  # floe serve and PostgreSQL apart: what the events cost each
            server_pid = env.server.process.pid if env.server.process else None
            postmaster = postmaster_pid(env.postgres.data)
            sampler.groups["catalog"] = lambda: [server_pid] if server_pid else []
            sampler.groups["postgres"] = lambda: [postmaster] if postmaster else []
        first_wall = None
        peak = 0
        at: dict[float, float] = {}  # share of the records → when first seen committed
        try:
            while True:
                total = sum(offsets.read_all().values())
                sampler.sample()
                peak = max(peak, tree_rss(process.pid))
                now = time.monotonic()
                if total and drain.first_commit_s is None:
                    drain.first_commit_s = round(now - started, 1)
                    first_wall = time.time()
                for share in (0.1, 0.9):
                    if share not in at and total >= share * drain.records:
                        at[share] = now
                if total >= drain.records:
                    assert first_wall is not None
                    drain.drained_s = round(now - started, 1)
                    span = at[0.9] - at[0.1]
                    drain.records_per_s = round(0.8 * drain.records / span) if span > 0 else None
                    if span <= 0:
                        drain.notes.append("10 % and 90 % committed in one poll: too few records to rate")
                    cores = sampler.cores(first_wall, time.time())
                    drain.ingest_cores = cores.get("ingester")
                    drain.catalog_cores = cores.get("catalog")
                    drain.other_cores = cores.get("other")
                    drain.postgres_cores = cores.get("postgres")
                    break
                if now - started > limit or process.poll() is not None:
                    drain.notes.append(
                        f"{total:,} of {drain.records:,} records committed after {now - started:.0f} s"
                    )
                    break
                time.sleep(0.5)
        finally:
            process.terminate()
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
            if events is not None:
                time.sleep(3)  # the publisher sends within its poll interval (1 s) of the last commit
                drain.events_published = events_on_topic(env.kafka.bootstrap_servers)
                drain.outbox_left = int(offsets.fetch("SELECT count(*) AS n FROM commit_events")[0]["n"])
                log_path = env.server.log_path
                drain.commit_requests, drain.commit_ms_mean = requests(log_path, "/transactions/commit")
                reports = requests(log_path, "/watermark/observations")
                drain.watermark_reports, drain.watermark_report_ms_mean = reports
            offsets.close()
            log.close()
        drain.ingest_peak_rss_gib = round(peak / 2**30, 2)
    return drain


def report(drains: list[Drain], started: float, name: str = "many-tables-throughput") -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    if any(d.events is not None for d in drains):
        events_report(drains, started, name)
        return
    (RESULTS / "many-tables-throughput.json").write_text(
        json.dumps([asdict(d) for d in drains], indent=2) + "\n"
    )
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    lines = [
        "# Many tables: records/s draining a backlog, spread over many tables or in one",
        "",
        f"Generated by `python -m benchmarks.many_tables.throughput` on "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} at git commit `{commit}` "
        f"({time.time() - started:.0f} s in all). {__doc__.split(chr(10) + chr(10))[1]}",
        "",
        "| design | tables x partitions | records | first commit after start | all committed after start "
        "| records/s (10 % → 90 %) "
        "| ingestion CPU | peak RSS | catalog + PostgreSQL CPU | other load |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for d in drains:
        lines.append(
            f"| {d.design} | {d.tables} x {d.partitions_per_topic} | {d.records:,} | {d.first_commit_s} s "
            f"| {d.drained_s} s | {d.records_per_s or 'n/a'} | {d.ingest_cores} "
            f"| {d.ingest_peak_rss_gib} GiB | {d.catalog_cores} | {d.other_cores} |"
        )
    notes = [f"- {d.design}, {d.tables} tables: {n}" for d in drains for n in d.notes]
    lines += ["", *notes, "", f"Machine: {os.cpu_count()} CPUs; load average at the end {os.getloadavg()}."]
    (RESULTS / "many-tables-throughput.md").write_text("\n".join(lines) + "\n")


def events_report(drains: list[Drain], started: float, name: str) -> None:
    (RESULTS / f"{name}.json").write_text(json.dumps([asdict(d) for d in drains], indent=2) + "\n")
    commit = git_commit()
    lines = [
        "# Ingestion with the catalog's commit events off and on",
        "",
        f"Generated by `python -m benchmarks.many_tables.throughput --events` on "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} at git commit `{commit}` "
        f"({time.time() - started:.0f} s in all). {__doc__.split(chr(10) + chr(10))[2]}",
        "",
        "| commit events | tables x partitions | records | all committed after start "
        "| records/s (10 % → 90 %) | ingestion CPU | floe serve CPU | PostgreSQL CPU | other load "
        "| events on the topic | left in the outbox | commit requests (mean ms) "
        "| watermark reports (mean ms) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for d in drains:
        lines.append(
            f"| {'on' if d.events else 'off'} | {d.tables} x {d.partitions_per_topic} | {d.records:,} "
            f"| {d.drained_s} s | {d.records_per_s or 'n/a'} | {d.ingest_cores} | {d.catalog_cores} "
            f"| {d.postgres_cores} | {d.other_cores} | {d.events_published} | {d.outbox_left} "
            f"| {d.commit_requests} ({d.commit_ms_mean}) "
            f"| {d.watermark_reports} ({d.watermark_report_ms_mean}) |"
        )
    notes = [f"- events {'on' if d.events else 'off'}: {n}" for d in drains for n in d.notes]
    lines += ["", *notes, "", f"Machine: {os.cpu_count()} CPUs; load average at the end {os.getloadavg()}."]
    (RESULTS / f"{name}.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="records in all, per row")
    parser.add_argument("--designs", default="shared,queries")
    parser.add_argument("--limit", type=float, default=600.0, help="seconds before a row gives up")
    parser.add_argument("--events", action="store_true", help="commit events off vs on (shared design)")
    parser.add_argument("--tables", type=int, default=10, help="--events: tables (one partition each)")
    parser.add_argument("--name", default="ingest-commit-events", help="--events: the results file's name")
    parser.add_argument("--rounds", type=int, default=1, help="--events: off/on pairs, alternating")
    args = parser.parse_args()
    started = time.time()
    drains = []
    if args.events:
        for events in (False, True) * args.rounds:
            with tempfile.TemporaryDirectory(prefix=f"floe-drain-events-{events}-") as work:
                print(
                    f"== shared, {args.tables} tables, commit events {'on' if events else 'off'}", flush=True
                )
                per_table = args.records // args.tables
                drain = run("shared", args.tables, 1, per_table, Path(work), args.limit, events)
                print(json.dumps(asdict(drain)), flush=True)
                drains.append(drain)
                report(drains, started, args.name)
        return
    for design in args.designs.split(","):
        for tables, partitions in ((1, 4), (100, 1)):
            with tempfile.TemporaryDirectory(prefix=f"floe-drain-{design}-{tables}-") as work:
                print(f"== {design}, {tables} tables", flush=True)
                drain = run(design, tables, partitions, args.records // tables, Path(work), args.limit)
                print(json.dumps(asdict(drain)), flush=True)
                drains.append(drain)
                report(drains, started)


if __name__ == "__main__":
    main()
