"""`python -m benchmarks.many_tables`: many quiet tables through `floe ingest`, both designs side by side.

For each (design, table count): a fresh PostgreSQL database for floe, N one-partition topics on one
Kafka broker, a floe.yaml of N inline-JSON tables applied (the `queries` design: each with `ingest_path:
spark`, a Spark query of its own; `shared`: the default path, the shared consumer), then `floe ingest`
started while a producer sends one record a second to every topic (each carrying its send time). Measured:
- first rows: seconds from `floe ingest`'s start until every table has committed a record;
- freshness: produce (delivery confirmed) → the first poll (every 0.5 s) of floe's database that shows
  the table's committed offset past the record — the offsets are written in the snapshot's own
  transaction, so this is "counted in the table's current snapshot";
- ingestion CPU (cores, the `floe ingest` process tree) and its peak RSS (Python driver + Spark JVM);
  catalog CPU (floe + PostgreSQL) and the machine's other load, over the measured window.
Results: benchmarks/results/many-tables.{md,json}.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any

import psutil  # type: ignore[import-untyped]

from benchmarks.ingest.environment import Environment, apply_pipeline, environment
from benchmarks.many_tables import kafka_connect, maintenance
from benchmarks.many_tables.freshness import by_minute, p99, window_ages
from benchmarks.many_tables.outcome import Outcome, markdown
from benchmarks.many_tables.priority_windows import PriorityWindows
from benchmarks.many_tables.quiet_producer import ARRIVALS, QuietProducer, delivered_per_table_second
from benchmarks.provenance import git_commit as tree_commit

RESULTS = Path(__file__).resolve().parents[1] / "results"
CLUSTER = "many"


class Offsets:
    """Committed next offsets of every table (partition 0) read straight from floe's PostgreSQL."""

    def __init__(self, database_url: str) -> None:
        self.url = database_url.replace("postgresql+asyncpg://", "postgresql://")
        self.loop = asyncio.new_event_loop()
        self.conn: Any = self.loop.run_until_complete(self._connect())

    async def _connect(self) -> Any:
        import asyncpg  # type: ignore[import-untyped]

        return await asyncpg.connect(self.url)

    def read(self) -> dict[str, int]:
        query = (
            "SELECT t.name, o.next_offset FROM kafka_offsets o JOIN tabulars t ON t.id = o.tabular_id "
            "WHERE o.partition = 0 AND t.name NOT LIKE '%\\_dlq'"
        )
        rows = self.loop.run_until_complete(self.conn.fetch(query))
        return {r["name"]: int(r["next_offset"]) for r in rows}

    def read_all(self) -> dict[tuple[str, int], int]:
        """Committed next offsets of every data table's partitions."""
        query = (
            "SELECT t.name, o.partition, o.next_offset FROM kafka_offsets o JOIN tabulars t "
            "ON t.id = o.tabular_id WHERE t.name NOT LIKE '%\\_dlq'"
        )
        rows = self.loop.run_until_complete(self.conn.fetch(query))
        return {(r["name"], int(r["partition"])): int(r["next_offset"]) for r in rows}

    def fetch(self, query: str, *args: Any) -> list[Any]:
        return list(self.loop.run_until_complete(self.conn.fetch(query, *args)))

    def close(self) -> None:
        self.loop.run_until_complete(self.conn.close())
        self.loop.close()


def git_commit() -> str:
    """The commit measured (`benchmarks.provenance`), "unknown" where git cannot tell."""
    return tree_commit() or "unknown"


def write_markdown(name: str, lines: list[str]) -> None:
    """`RESULTS/<name>.md`: `lines`, then the machine's CPUs and load average at the end."""
    load = tuple(round(x, 2) for x in os.getloadavg())
    lines = [*lines, "", f"Machine: {os.cpu_count()} CPUs; load average at the end {load}.", ""]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.md").write_text("\n".join(lines))


def floe_environment(env: Environment) -> dict[str, str]:
    """This process's environment with floe's URL and the admin key (never on a command line)."""
    return {
        **os.environ,
        "FLOE_URL": env.server.url,
        "FLOE_CLIENT_ID": env.server.admin_client_id,
        "FLOE_CLIENT_SECRET": env.server.admin_client_secret,
    }


def start_ingest(
    work: Path,
    env_vars: dict[str, str],
    log: IO[bytes],
    log_level: str = "info",
    tree: str | None = None,
    shard: tuple[int, int] = (0, 1),
    auto: bool = False,
) -> subprocess.Popen[bytes]:
    """`floe ingest` on Spark local[2] (its own session: `kill` takes the JVM too), from the source tree
    `tree` when given (an earlier commit's `git archive`, to measure its design); with `--shard i/n` when
    `shard` is not (0, 1), `--shard auto` with `auto`. Which path each table takes is floe.yaml's
    (`ingest_path`, `queries_design`)."""
    if tree is not None:  # its code first (`python -m` also puts the working folder first)
        env_vars = {**env_vars, "PYTHONPATH": tree}
    index, shards = shard
    state = work / "state" if shards == 1 else work / f"state-{index}"
    command = [
        sys.executable, "-m", "floe.cli", "ingest", "--master", "local[2]",
        "--metrics-port", "0", "--state-dir", str(state), "--driver-memory", "2g",
        "--log-level", log_level,
    ]  # fmt: skip
    if shards > 1:
        command += ["--shard", "auto" if auto else f"{index}/{shards}"]
    return subprocess.Popen(
        command, env=env_vars, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=tree
    )


def queries_design(config: dict[str, Any]) -> dict[str, Any]:
    """`config` with every table on a Spark query of its own (`ingest_path: spark`): the design before
    the shared consumer, measured beside it."""
    return {**config, "tables": [{**t, "ingest_path": "spark"} for t in config["tables"]]}


def tree_rss(pid: int) -> int:
    try:
        root = psutil.Process(pid)
        return sum(p.memory_info().rss for p in [root, *root.children(recursive=True)])
    except psutil.Error:
        return 0


def run_one(outcome: Outcome, args: argparse.Namespace, work: Path, log_level: str = "info") -> Outcome:
    """`outcome`'s row (its design, table count and arrivals), measured."""
    design, count = outcome.design, outcome.tables
    with environment(work, kafka_heap="1g", kafka_request_log=args.broker_request_log) as env:
        from confluent_kafka.admin import AdminClient, NewTopic

        topics = [f"t{i:04d}" for i in range(count)]
        admin = AdminClient({"bootstrap.servers": env.kafka.bootstrap_servers})
        for i in range(0, count, 200):
            futures = admin.create_topics([NewTopic(t, 1, 1) for t in topics[i : i + 200]])
            for future in futures.values():
                future.result(60)
        host, port = env.kafka.bootstrap_servers.split(":")
        config: dict[str, Any] = {
            "source_clusters": [
                {"name": CLUSTER, "bootstrap_brokers": [{"hostname": host, "port": int(port)}]}
            ],
            "tables": [
                {
                    "source_cluster_name": CLUSTER,
                    "source_topic": t,
                    "source_format": "json",
                    "schema_mode": "inline",
                    "schema": {
                        "fields": [
                            {"name": "id", "id": 1, "type": "long"},
                            {"name": "sent_at", "id": 2, "type": "long"},
                        ]
                    },
                }
                for t in topics
            ],
        }
        if args.maintain:
            config["maintenance"] = maintenance.POLICY
        if design.startswith("queries"):
            config = queries_design(config)
        started_apply = time.monotonic()
        apply_pipeline(env.server, config)
        outcome.notes.append(f"floe apply of {count} tables: {time.monotonic() - started_apply:.1f} s")
        offsets = Offsets(env.server.database_url or "")
        env_vars = floe_environment(env)
        # "shared", "shared 2 shards" (`--shard i/n`) or "shared 2 auto" (`--shard auto`).
        parts = design.split()
        kind, shards, auto = parts[0], int(parts[1]) if len(parts) == 3 else 1, parts[-1] == "auto"
        logs = [(work / f"ingest-{kind}-{count}-{i}.log").open("wb") for i in range(shards)]
        # (topic, offset) → delivered at (epoch s)
        producer = QuietProducer(env.kafka.bootstrap_servers, topics, outcome.arrivals, args.linger_ms)
        if args.linger_ms != 5:
            outcome.notes.append(f"the producer's linger.ms: {args.linger_ms} (5 by default)")
        produced = producer.produced
        producer.start()
        processes = [
            start_ingest(work, env_vars, log, log_level, shard=(i, shards), auto=auto)
            for i, log in enumerate(logs)
        ]
        ingest_started = time.monotonic()
        ingest_started_at = time.time()
        sampler = env.sampler(None)
        sampler.groups["ingester"] = lambda: [p.pid for p in processes]
        worker_log = (work / "maintain-worker.log").open("wb")
        worker = None
        windows = None
        if args.maintain_alongside:
            alternate = args.nice_window > 0
            worker = maintenance.start_worker(env_vars, worker_log, 0 if alternate else args.maintain_nice)
            sampler.groups["maintainer"] = lambda: [worker.pid]
            if alternate:
                windows = PriorityWindows(worker.pid, args.maintain_nice, args.nice_window, ingest_started_at)
        applies: list[float] = []  # when each apply during the window began
        admin.create_topics([NewTopic("extra", 1, 1)])["extra"].result(60)
        seen: dict[tuple[str, int], float] = {}  # first poll showing the record committed
        committed: dict[str, int] = {}
        advances: list[float] = []  # when a poll saw a table's committed offset move
        peak_rss = 0
        measure_from = measure_to = settled_at = first_settled_at = killed_at = None

        def poll() -> None:
            nonlocal peak_rss
            current = offsets.read()
            polled_at = time.time()
            for table, next_offset in current.items():
                before = committed.get(table, 0)
                if next_offset > before:
                    advances.append(polled_at)
                    for o in range(before, next_offset):
                        seen[(table, o)] = polled_at
                    committed[table] = next_offset
            sampler.sample()
            peak_rss = max(peak_rss, sum(tree_rss(p.pid) for p in processes))

        try:
            while True:
                now_mono = time.monotonic()
                poll()
                if windows is not None:
                    windows.apply(time.time())
                with_rows = sum(1 for t in topics if committed.get(t, 0) > 0)
                outcome.tables_with_rows = with_rows
                if outcome.first_rows_s is None and with_rows == count:
                    outcome.first_rows_s = round(now_mono - ingest_started, 1)
                    first_settled_at = settled_at = time.time() + args.settle
                queued = producer.queued()
                if measure_from is None and settled_at is not None and first_settled_at is not None:
                    # The window starts `settle` s after the broker last held a second's records back
                    # (they arrive as a burst the tables were never offered at one record a second, and
                    # the tables take a while to absorb it), or at the catch-up limit.
                    if queued >= count:
                        settled_at = max(settled_at, time.time() + args.settle)
                    late = time.time() > first_settled_at + args.catch_up_limit
                    if time.time() >= settled_at or late:
                        measure_from = time.time()
                        measure_to = measure_from + args.measure
                        outcome.window_waited_s = round(measure_from - first_settled_at, 1)
                elif measure_from is not None and measure_to is not None and time.time() <= measure_to:
                    outcome.producer_queued_max = max(outcome.producer_queued_max, queued)
                if measure_from is not None and measure_to is not None:
                    due = measure_from + args.measure * (len(applies) + 1) / 3
                    if len(applies) < 2 and time.time() >= due:
                        # One table added, then removed again, while the others flow.
                        extra = dict(config["tables"][0], source_topic="extra")
                        tables = [*config["tables"], extra] if not applies else config["tables"]
                        began = time.time()
                        apply_pipeline(env.server, {**config, "tables": tables})
                        outcome.apply_seconds.append(round(time.time() - began, 1))
                        applies.append(began)
                kill_due = measure_from is not None and time.time() >= measure_from + args.kill_one_at
                if args.kill_one_at >= 0 and killed_at is None and shards > 1 and kill_due:
                    # kill -9 of the last instance and its JVM (its own process group).
                    os.killpg(processes[-1].pid, 9)
                    killed_at = time.time()
                if measure_to is not None and time.time() > measure_to + args.grace:
                    break
                if outcome.first_rows_s is None and now_mono - ingest_started > args.first_rows_limit:
                    outcome.notes.append(
                        f"only {with_rows} of {count} tables had rows "
                        f"{args.first_rows_limit:.0f} s after the start; "
                        "freshness measured over the tables that did, in the last 60 s"
                    )
                    measure_to = time.time()
                    measure_from = measure_to - 60
                    break
                if any(p.poll() is not None for p in processes[: -1 if killed_at else None]):
                    codes = [p.returncode for p in processes]
                    outcome.notes.append(f"floe ingest exited: return codes {codes}")
                    break
                time.sleep(0.5)
            if args.maintain and outcome.first_rows_s is not None:
                maintain(outcome, args, work, env_vars, offsets, poll)
            if worker is not None:
                rounds, gap = maintenance.worker_rounds(offsets.fetch, ingest_started_at, set(topics))
                outcome.worker_rounds, outcome.worker_longest_gap_s = rounds, gap
                if windows is not None:
                    windows.record_visits(offsets.fetch)
        finally:
            producer.stop()
            if producer.skipped:
                outcome.notes.append(f"the producer fell behind and skipped {producer.skipped:,} records")
            for child in (*processes, worker):
                if child is not None:
                    child.terminate()
                    try:
                        child.wait(60)
                    except subprocess.TimeoutExpired:
                        child.kill()
            offsets.close()
            for log in logs:
                log.close()
            worker_log.close()
        for one_pass in outcome.maintenance_passes:
            if one_pass.window is not None:
                one_pass.freshness_p99_s = maintenance.freshness_p99(seen, produced, *one_pass.window)
        if measure_from is not None and measure_to is not None:
            window_end = min(measure_to, time.time())
            cores = sampler.cores(measure_from, window_end)
            outcome.ingest_cores = cores.get("ingester")
            outcome.catalog_cores = cores.get("catalog")
            outcome.broker_cores = cores.get("broker")
            outcome.other_cores = cores.get("other")
            outcome.maintain_cores = cores.get("maintainer")
            window = window_end - measure_from
            commits = sum(1 for at in advances if measure_from <= at <= window_end)
            outcome.table_commits_per_s = round(commits / window, 1) if window > 0 else None
            outcome.freshness_by_minute = by_minute(produced, seen, ingest_started_at, measure_to)
            outcome.freshness_by_10s = by_minute(produced, seen, measure_from, measure_to, step=10.0)
            outcome.apply_at_s = [round(a - ingest_started_at, 1) for a in applies]
            if killed_at is not None:
                note = takeover_note(killed_at, topics, produced, seen, args.kill_one_at, shards)
                outcome.notes.append(note)
            if outcome.producer_queued_max >= count:
                outcome.notes.append(
                    "disturbed: the broker fell behind the producer in the window (up to "
                    f"{outcome.producer_queued_max:,} records queued, "
                    f"{outcome.producer_queued_max / count:.1f} s of records), which then arrived in a burst"
                )
            if outcome.window_waited_s and outcome.window_waited_s >= 1:
                outcome.notes.append(
                    f"the window began {outcome.window_waited_s:.0f} s late: {args.settle:.0f} s after the "
                    "producer's queue last held a second's records"
                )
            outcome.delivered_per_table_s = delivered_per_table_second(
                produced, count, (measure_from, window_end)
            )

            # A table that never started (reported above) is left out.
            every_table = outcome.first_rows_s is not None
            ages, away, around, missing = window_ages(
                produced,
                seen,
                (measure_from, measure_to),
                applies,
                started=lambda topic: every_table or committed.get(topic, 0) > 0,
            )
            if away:
                outcome.freshness_p99_away_from_applies_s = round(p99(away), 2)
            if around:
                outcome.freshness_around_applies_p99_s = round(p99(around), 2)
            outcome.records_measured, outcome.records_missing = len(ages), missing
            if ages:
                outcome.freshness_p50_s = round(statistics.median(ages), 2)
                outcome.freshness_p99_s = round(p99(ages), 2)
                outcome.freshness_max_s = round(ages[-1], 2)
            if windows is not None:
                outcome.priority_windows = [
                    asdict(row)
                    for row in windows.rows(produced, seen, sampler.cores, measure_from, measure_to)
                ]
        outcome.ingest_peak_rss_gib = round(peak_rss / 2**30, 2)
    return outcome


def maintain(
    outcome: Outcome,
    args: argparse.Namespace,
    work: Path,
    env_vars: dict[str, str],
    offsets: Offsets,
    poll: Callable[[], None],
) -> None:
    """A warm-up pass, then for each design of `--maintain-designs` ingestion for `--maintain-gap`
    seconds and one full pass (benchmarks/many_tables/maintenance.py)."""
    log = work / "maintain.log"
    passes = [("inprocess", "warm-up")] + [(d, "measured") for d in args.maintain_designs.split(",") if d]
    for index, (design, label) in enumerate(passes):
        if index:
            until = time.time() + args.maintain_gap
            while time.time() < until:
                poll()
                time.sleep(0.5)
        print(f"   maintenance pass {index}: {design} ({label})", flush=True)
        one_pass = maintenance.run_pass(
            design, label, env_vars, log, offsets.fetch, poll, args.maintain_limit
        )
        print(f"   {one_pass}", flush=True)
        outcome.maintenance_passes.append(one_pass)


def takeover_note(
    killed_at: float,
    topics: list[str],
    produced: dict[tuple[str, int], float],
    seen: dict[tuple[str, int], float],
    kill_at: float,
    instances: int,
) -> str:
    """How long after the kill every table committed again (the killed instance's tables once the
    others took them over), and the freshness of the records produced in the minute after it."""
    first_after: dict[str, float] = {}
    for (table, _offset), at in seen.items():
        if at > killed_at and at < first_after.get(table, float("inf")):
            first_after[table] = at
    resumed = [first_after[t] - killed_at for t in topics if t in first_after]
    after = [k for k, at in produced.items() if killed_at <= at < killed_at + 60]
    ages = sorted(seen[k] - produced[k] for k in after if k in seen)
    missing = sum(1 for k in after if k not in seen)
    took = (
        f"within {max(resumed):.1f} s"
        if len(resumed) == len(topics)
        else f"for only {len(resumed)} of {len(topics)} tables (the killed one's commits in flight included)"
    )
    return (
        f"kill -9 of one of {instances} instances {kill_at:.0f} s into the window: a commit after it seen "
        f"{took}; the records produced in the minute after it: freshness p99 "
        f"{p99(ages) if ages else float('nan'):.1f} s, {missing} not committed by the end"
    )


def report(outcomes: list[Outcome], args: argparse.Namespace, commit: str, started: float) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(json.dumps([asdict(o) for o in outcomes], indent=2) + "\n")
    lines = markdown(outcomes, args, commit, time.time() - started)
    (RESULTS / f"{args.name}.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", default="100,300,1000", help="table counts for the shared design")
    parser.add_argument("--queries", default="100", help="table counts for one Spark query per table")
    parser.add_argument(
        "--shards", default="1", help="shared rows with n `floe ingest --shard i/n` instances, for each n"
    )
    parser.add_argument(
        "--auto-shards",
        default="",
        help="shared rows with n `floe ingest --shard auto` instances, for each n",
    )
    parser.add_argument(
        "--kill-one-at",
        type=float,
        default=-1.0,
        help="rows of several instances: kill -9 one this many seconds into the window (-1: none)",
    )
    parser.add_argument("--measure", type=float, default=60.0, help="seconds of freshness measurement")
    parser.add_argument(
        "--settle", type=float, default=15.0, help="seconds after first rows before measuring"
    )
    parser.add_argument("--grace", type=float, default=15.0, help="seconds after the window for late commits")
    parser.add_argument(
        "--catch-up-limit",
        type=float,
        default=300.0,
        help="seconds after settling the window may wait for the producer's queue to drain",
    )
    parser.add_argument("--first-rows-limit", type=float, default=300.0)
    parser.add_argument(
        "--broker-request-log",
        action="store_true",
        help="the broker logs every request with its times (with --work-dir: kafka/server.log)",
    )
    parser.add_argument(
        "--linger-ms", type=int, default=5, help="the quiet producer's linger.ms (records share a request)"
    )
    parser.add_argument("--maintain", action="store_true", help="then one floe maintain --once pass")
    parser.add_argument("--name", default="many-tables", help="results: benchmarks/results/NAME.md")
    parser.add_argument(
        "--maintain-alongside",
        action="store_true",
        help="run the long-running floe maintain (built-in policy) beside floe ingest from its start",
    )
    parser.add_argument(
        "--maintain-nice", type=int, default=10, help="--maintain-alongside: floe maintain --nice"
    )
    parser.add_argument(
        "--nice-window",
        type=float,
        default=0.0,
        help="--maintain-alongside: seconds at niceness 0 and at --maintain-nice by turns (0: always "
        "--maintain-nice)",
    )
    parser.add_argument("--maintain-limit", type=float, default=600.0, help="seconds a pass may take")
    parser.add_argument(
        "--maintain-designs", default="spark,inprocess", help="floe maintain --design of each measured pass"
    )
    parser.add_argument(
        "--maintain-gap", type=float, default=60.0, help="seconds of ingestion before each measured pass"
    )
    parser.add_argument(
        "--connect", default="", help="table counts for Iceberg's Kafka Connect sink (kafka_connect.py)"
    )
    parser.add_argument(
        "--connect-interval-ms", default="10000,300000", help="the sink's commit intervals, one row each"
    )
    parser.add_argument("--work-dir", default="", help="keep each row's logs and state under this folder")
    parser.add_argument("--log-level", default="info", help="floe ingest --log-level")
    parser.add_argument(
        "--arrivals",
        default="spread",
        help="when each topic's record of a second is sent: spread over the second, or burst (all at its "
        "start, then waiting for their delivery); spread,burst: a row each",
    )
    args = parser.parse_args()
    arrivals = [a for a in args.arrivals.split(",") if a]
    if not arrivals or any(a not in ARRIVALS for a in arrivals):
        parser.error(f"--arrivals: {', '.join(ARRIVALS)} or a list of them")
    started = time.time()
    commit = git_commit()  # the tree the processes run: taken before any of them starts
    plan = [("queries", int(n)) for n in args.queries.split(",") if n] + [
        ("shared" if shards == "1" else f"shared {shards} shards", int(n))
        for shards in args.shards.split(",")
        if shards
        for n in args.shared.split(",")
        if n
    ]
    plan += [
        (f"shared {instances} auto", int(n))
        for instances in args.auto_shards.split(",")
        if instances
        for n in args.shared.split(",")
        if n
    ]
    intervals = [int(ms) for ms in args.connect_interval_ms.split(",") if ms]
    plan += [
        (f"kafka-connect {ms // 1000} s", int(n)) for n in args.connect.split(",") if n for ms in intervals
    ]
    outcomes = []
    for (design, count), row_arrivals in itertools.product(plan, arrivals):
        prefix = f"floe-many-{design.split()[0]}-{count}-"
        if args.work_dir:  # kept: the logs of every process
            Path(args.work_dir).mkdir(parents=True, exist_ok=True)
            kept = contextlib.nullcontext(tempfile.mkdtemp(prefix=prefix, dir=args.work_dir))
        with kept if args.work_dir else tempfile.TemporaryDirectory(prefix=prefix) as work:
            print(f"== {design}, {count} tables, {row_arrivals} arrivals", flush=True)
            outcome = Outcome(design, count, row_arrivals)
            if design.startswith("kafka-connect"):
                kafka_connect.run(outcome, int(design.split()[1]) * 1000, args, Path(work))
            else:
                run_one(outcome, args, Path(work), args.log_level)
            print(json.dumps(asdict(outcome)), flush=True)
            outcomes.append(outcome)
            report(outcomes, args, commit, started)


if __name__ == "__main__":
    main()
