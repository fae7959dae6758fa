"""The upsert benchmark run: floe's upsert ingestion and a plain `foreachBatch` MERGE job, each alone on
the same broker, catalog and machine, written to `upsert.json` and `upsert.md`.

Per system, on its own topic holding the same records: a backlog (every key inserted, then a stream of
changes) is produced before the ingester starts, and its rate is measured between the table's first and
last commit (Spark's start-up left out). Then, with the ingester still running, changes are produced at
a steady rate while a DuckDB reader polls the table; afterwards the table's live data and delete files
are counted. For floe's table, DuckDB query times are measured before and after `floe maintain --once`,
and against an append-only table holding the same current rows.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.serializers import ToOutputFile
from pyiceberg.table.refs import MAIN_BRANCH
from pyiceberg.table.snapshots import Snapshot, SnapshotLogEntry
from pyiceberg.transforms import BucketTransform

from benchmarks.ingest.environment import Environment, apply_pipeline, environment, floe_table
from benchmarks.ingest.ingesters import FLOE, PLAIN, FloeIngester, Ingester, SparkSettings
from benchmarks.upsert import report
from benchmarks.upsert.workload import FIELDS, Change, ChangeStream

RESULTS_DIR = Path(__file__).resolve().parent.parent / "results"
PARTITIONS = 4
CLUSTER = "upsert"
PLAIN_TABLE = "bench.plain_upsert"
TOPICS = {FLOE: "bench.upsert_floe", PLAIN: "bench.upsert_plain"}
STARTUP_TIMEOUT_S = 300.0
QUERIES = {
    "aggregate": "SELECT count(*), sum(amount), max(version) FROM {t}",
    "group_by": "SELECT region, count(*), avg(amount) FROM {t} GROUP BY region ORDER BY region",
    "point_lookup": "SELECT id, version, amount FROM {t} WHERE id = 4242",
}
# Queries take milliseconds: enough runs for a stable median at sub-millisecond resolution.
QUERY_RUNS = 31
COLD_AFTER_S = 30
# The table's snapshots are read this often: far more often than maintenance expires them.
SNAPSHOT_POLL_S = 2.0


class PlainUpsertJob(Ingester):
    """`python -m benchmarks.upsert.plain_job` on one topic."""

    kind = PLAIN

    def __init__(
        self, env: Environment, home: Path, topic: str, settings: SparkSettings, buckets: int
    ) -> None:
        self.progress_path = home / "progress.jsonl"
        server = env.server
        command = [
            sys.executable,
            "-m",
            "benchmarks.upsert.plain_job",
            "--bootstrap",
            env.kafka.bootstrap_servers,
            "--topic",
            topic,
            "--table",
            f"floe.{PLAIN_TABLE}",
            "--checkpoint",
            str(home / "checkpoint"),
            "--progress",
            str(self.progress_path),
            "--master",
            settings.master,
            "--driver-memory",
            settings.driver_memory,
            "--trigger-seconds",
            f"{settings.commit_interval_s:g}",
            "--max-offsets-per-trigger",
            str(settings.records_per_batch),
            "--buckets",
            str(buckets),
        ]
        env_vars = {
            **os.environ,
            "FLOE_URL": server.url,
            "FLOE_CLIENT_ID": server.admin_client_id,
            "FLOE_CLIENT_SECRET": server.admin_client_secret,
        }
        super().__init__(home, command, env_vars)

    def consumed(self) -> int:
        """Records of the batches Spark finished (each batch's MERGE committed)."""
        if not self.progress_path.exists():
            return 0
        lines = self.progress_path.read_text().splitlines()
        return sum(int(json.loads(line).get("numInputRows") or 0) for line in lines if line.strip())


class MaintenanceWorker(Ingester):
    """`floe maintain --interval N` on the upsert table's namespace, beside `floe ingest`: floe as deployed
    with its maintenance worker (`floe up` runs both), compacting while the merges go on."""

    kind = "maintenance"

    def __init__(self, env: Environment, home: Path, settings: SparkSettings, interval_s: int) -> None:
        command = [
            sys.executable, "-m", "floe.cli", "maintain", "--interval", f"{interval_s}s",
            "--namespace", CLUSTER, "--metrics-port", "0", "--master", settings.master,
            "--driver-memory", settings.driver_memory,
        ]  # fmt: skip
        super().__init__(home, command, _admin_env(env))


def _admin_env(env: Environment) -> dict[str, str]:
    """The environment of a floe command acting as the benchmark's admin."""
    return {
        **os.environ,
        "FLOE_URL": env.server.url,
        "FLOE_CLIENT_ID": env.server.admin_client_id,
        "FLOE_CLIENT_SECRET": env.server.admin_client_secret,
        "COLUMNS": "200",
    }


def _produce(bootstrap: str, topic: str, changes: list[Change]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "enable.idempotence": True})
    errors: list[Any] = []
    for i, change in enumerate(changes):
        while True:
            try:
                producer.produce(
                    topic,
                    key=change.key,
                    value=change.value,
                    on_delivery=lambda e, _m: errors.append(e) if e else None,
                )
                break
            except BufferError:
                producer.poll(0.05)
        if i % 1000 == 0:
            producer.poll(0)
    if producer.flush(120) or errors:
        raise RuntimeError(f"producing failed: {errors[:3]}")


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


def _consumed(env: Environment, ingester: Ingester, table: str, topic: str) -> int:
    if isinstance(ingester, PlainUpsertJob):
        return ingester.consumed()
    namespace, name = table.split(".")
    return sum(env.control.next_offsets("default", (namespace,), name, topic).values())


class SnapshotLog(threading.Thread):
    """Every snapshot the table has had while the run watched it, read from the catalog every
    `SNAPSHOT_POLL_S`: floe's maintenance expires an upsert table's history as it goes (at most 50
    snapshots, a pass a minute), so its metadata at the end no longer holds the run's commits."""

    def __init__(self, catalog: RestCatalog, table: str) -> None:
        super().__init__(daemon=True)
        self.catalog, self.table = catalog, table
        self.seen: dict[int, Snapshot] = {}
        self.halt = threading.Event()
        self._lock = threading.Lock()

    def record(self) -> None:
        try:
            loaded = self.catalog.load_table(self.table)
        except NoSuchTableError:  # the plain job creates its table once started
            return
        with self._lock:
            for snapshot in loaded.metadata.snapshots:
                self.seen.setdefault(snapshot.snapshot_id, snapshot)

    def run(self) -> None:
        while not self.halt.wait(SNAPSHOT_POLL_S):
            try:
                self.record()
            except Exception as exc:  # a poll lost to a busy server: the next one reads it
                print(f"snapshot poll failed: {exc}", flush=True)

    def snapshots(self) -> list[Snapshot]:
        """What was seen, oldest first (read once more now)."""
        self.record()
        with self._lock:
            return sorted(self.seen.values(), key=lambda s: s.timestamp_ms)


def _commit_times(snapshots: list[Snapshot]) -> list[float]:
    """The commit times of the snapshots that wrote rows (not the table's creation), oldest first."""
    return sorted(
        s.timestamp_ms / 1000
        for s in snapshots
        if s.summary is not None and s.summary.operation.value != "replace"
    )


def last_commit(catalog: RestCatalog, table: str) -> float:
    """When the table's current snapshot was committed (s since the epoch)."""
    snapshot = catalog.load_table(table).current_snapshot()
    return snapshot.timestamp_ms / 1000 if snapshot is not None else 0.0


def _deletes_written(catalog: RestCatalog, table: str, snapshots: list[Snapshot]) -> dict[str, Any]:
    """The table's delete granularity, and the delete files and positions its snapshots wrote in all
    (a file-scoped merge carries each touched file's earlier deletes into its new delete file)."""
    loaded = catalog.load_table(table)
    summaries = [s.summary for s in snapshots if s.summary is not None]
    return {
        "granularity": loaded.properties.get("write.delete.granularity", "file (Iceberg's default)"),
        "delete_files": sum(int(s.get("added-delete-files") or 0) for s in summaries),
        "positions": sum(int(s.get("added-position-deletes") or 0) for s in summaries),
    }


def _files(catalog: RestCatalog, table: str) -> dict[str, int]:
    """The table's live data and delete files, and what a reader opens before them: its snapshots (all
    in its metadata.json), that file's size, and the current snapshot's manifests."""
    loaded = catalog.load_table(table)
    counts = {"data_files": 0, "delete_files": 0, "rows_in_data_files": 0}
    for f in loaded.inspect.files().to_pylist():
        if f["content"] == 0:
            counts["data_files"] += 1
            counts["rows_in_data_files"] += int(f["record_count"])
        else:
            counts["delete_files"] += 1
    current = loaded.current_snapshot()
    counts["snapshots"] = len(loaded.metadata.snapshots)
    counts["metadata_json_bytes"] = len(loaded.io.new_input(loaded.metadata_location).open().read())
    counts["manifests"] = len(current.manifests(loaded.io)) if current is not None else 0
    return counts


class Freshness(threading.Thread):
    """Polls `SELECT max(seq)` through DuckDB; a record is visible once a poll returns a seq at or above
    its own (a batch commits every partition's records up to the same point)."""

    def __init__(self, env: Environment, duck_dir: Path, table: str) -> None:
        super().__init__(daemon=True)
        self.duck = env.duckdb(duck_dir)
        self.table = table
        self.polls: list[tuple[float, int]] = []  # (poll end, max seq)
        self.query_seconds: list[float] = []  # each poll's query time (the reader's cost per look)
        self.errors = 0
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            try:
                began = time.monotonic()
                (found,) = self.duck.execute(f"SELECT max(seq) FROM {self.table}").fetchone() or (None,)
                self.query_seconds.append(time.monotonic() - began)
                self.polls.append((time.time(), int(found or 0)))
            except Exception:
                self.errors += 1
            self.halt.wait(0.2)

    def freshness(self, sent: dict[int, float]) -> list[float]:
        """Seconds from produce to first visibility of every record sent (deletes are not visible)."""
        result = []
        index = 0
        for seq, sent_at in sorted(sent.items()):
            while index < len(self.polls) and self.polls[index][1] < seq:
                index += 1
            if index == len(self.polls):
                break
            result.append(self.polls[index][0] - sent_at)
        return result


def measure_system(
    env: Environment, args: argparse.Namespace, system: str, settings: SparkSettings, duck_dir: Path
) -> dict[str, Any]:
    topic = TOPICS[system]
    table = floe_table(CLUSTER, topic) if system == FLOE else PLAIN_TABLE
    duck_table = f'floe.{table.split(".")[0]}."{table.split(".")[1]}"'
    stream = ChangeStream(args.keys)
    backlog = list(stream.initial_load()) + list(stream.changes(args.backlog_changes))
    print(f"{system}: producing a backlog of {len(backlog):,} records ...", flush=True)
    _produce(env.kafka.bootstrap_servers, topic, backlog)
    home = env.work / system
    ingester: Ingester = (
        FloeIngester(env.server, home, CLUSTER, settings)
        if system == FLOE
        else PlainUpsertJob(env, home, topic, settings, args.buckets)
    )
    worker = (
        MaintenanceWorker(env, env.work / "maintenance", settings, args.maintenance_interval)
        if system == FLOE and args.maintenance_interval
        else None
    )
    history = SnapshotLog(env.catalog, table)
    started = time.time()
    ingester.start()
    if worker is not None:
        worker.start()
    history.start()
    result: dict[str, Any] = {"system": system, "table": table, "backlog_records": len(backlog)}
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S + len(backlog) / 200
        while _consumed(env, ingester, table, topic) < len(backlog):
            if ingester.exited():
                raise RuntimeError(f"{system} exited:\n{ingester.log_tail()}")
            if worker is not None and worker.exited():
                raise RuntimeError(f"the maintenance worker exited:\n{worker.log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{system} did not catch up:\n{ingester.log_tail()}")
            time.sleep(0.5)
        caught_up = time.time()
        backlog_snapshots = history.snapshots()
        commits = _commit_times(backlog_snapshots)
        window = commits[-1] - commits[0] if len(commits) > 1 else 0.0
        # The first commit's records are Spark's start-up batch: the rate counts those after it.
        first_batch = _first_batch_records(ingester, backlog_snapshots)
        result["throughput"] = {
            "startup_s": round(commits[0] - started, 1) if commits else None,
            "commits": len(commits),
            "window_s": round(window, 1),
            "first_batch_records": first_batch,
            "records_per_s": round((len(backlog) - first_batch) / window, 1) if window > 0 else None,
            "all_committed_after_s": round(caught_up - started, 1),
        }
        print(f"  {system}: {result['throughput']}", flush=True)

        # Steady changes while DuckDB polls.
        probe = Freshness(env, duck_dir, duck_table)
        probe.start()
        producer = Producer({"bootstrap.servers": env.kafka.bootstrap_servers, "linger.ms": 5})
        sent: dict[int, float] = {}
        steady_started = time.monotonic()
        steady_started_at = time.time()
        produced = 0
        changes = stream.changes()
        while time.monotonic() - steady_started < args.steady_seconds:
            due = int((time.monotonic() - steady_started) * args.rate)
            while produced < due:
                change = next(changes)
                producer.produce(topic, key=change.key, value=change.value)
                if change.value is not None:
                    sent[change.seq] = time.time()
                produced += 1
            producer.poll(0)
            time.sleep(0.01)
        producer.flush(60)
        total = len(backlog) + produced
        deadline = time.monotonic() + 600
        while _consumed(env, ingester, table, topic) < total and time.monotonic() < deadline:
            if ingester.exited():
                raise RuntimeError(f"{system} exited:\n{ingester.log_tail()}")
            if worker is not None and worker.exited():
                raise RuntimeError(f"the maintenance worker exited:\n{worker.log_tail()}")
            time.sleep(0.5)
        time.sleep(2)
        probe.halt.set()
        probe.join(30)
        # The first 15 s are left out: the reader's first polls and the switch from backlog to stream.
        skip = min(sent) + 15 if sent else 0
        values = probe.freshness({s: t for s, t in sent.items() if t >= skip})
        # How often the table changed while the changes streamed in (its batch cycle), from its commits.
        steady_commits = [t for t in _commit_times(history.snapshots()) if t >= steady_started_at]
        intervals = [b - a for a, b in itertools.pairwise(steady_commits)]
        result["freshness"] = {
            "rate_per_s": args.rate,
            "commits": len(steady_commits),
            "commit_interval_p50_s": _round(_percentile(intervals, 50)),
            "reader_query_p50_s": _round(_percentile(probe.query_seconds, 50)),
            "seconds": args.steady_seconds,
            "records": produced,
            "measured": len(values),
            "p50_s": _round(_percentile(values, 50)),
            "p99_s": _round(_percentile(values, 99)),
            "max_s": _round(max(values) if values else None),
            "poll_errors": probe.errors,
        }
        print(f"  {system}: freshness {result['freshness']}", flush=True)
        probe.duck.close()
    finally:
        ingester.stop()
        if worker is not None:
            worker.stop()
            result["maintenance_log_tail"] = worker.log_tail(2000)
        history.halt.set()
        history.join(30)
    result["files"] = _files(env.catalog, table)
    seen = history.snapshots()
    result["snapshots_seen"] = len(seen)
    result["deletes_written"] = _deletes_written(env.catalog, table, seen)
    result["rows"] = len(env.catalog.load_table(table).scan(selected_fields=("id",)).to_arrow())
    result["expected_rows"] = len(stream.live)
    print(f"  {system}: files {result['files']}, rows {result['rows']} (model {result['expected_rows']})")
    return result


def _first_batch_records(ingester: Ingester, snapshots: list[Snapshot]) -> int:
    if isinstance(ingester, PlainUpsertJob):
        lines = [ln for ln in ingester.progress_path.read_text().splitlines() if ln.strip()]
        batches = [json.loads(ln) for ln in lines]
        return next((int(b["numInputRows"]) for b in batches if int(b.get("numInputRows") or 0)), 0)
    from catalog.kafka_offsets import END_OFFSETS

    for snapshot in snapshots:
        if snapshot.summary is not None and (offsets := snapshot.summary.get(END_OFFSETS)):
            return sum(json.loads(str(offsets)).values())
    return 0


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def time_queries(env: Environment, duck_dir: Path, tables: Mapping[str, str]) -> dict[str, dict[str, float]]:
    """Median seconds of each query on each of `tables` (label -> table), each run a new query through
    floe. The tables take turns run by run (the order alternating), so a disturbance of the shared
    machine falls on all of them alike rather than on whichever was timed during it."""
    duck = env.duckdb(duck_dir, threads=2)
    refs = {label: 'floe.{}."{}"'.format(*table.split(".")) for label, table in tables.items()}
    runs: dict[str, dict[str, list[float]]] = {label: {} for label in tables}
    try:
        for query, sql in QUERIES.items():
            for ref in refs.values():
                duck.execute(sql.format(t=ref)).fetchall()  # warm-up: extensions, token, caches
            labels = list(refs)
            for run in range(QUERY_RUNS):
                for label in labels if run % 2 == 0 else reversed(labels):
                    started = time.perf_counter()
                    duck.execute(sql.format(t=refs[label])).fetchall()
                    runs[label].setdefault(query, []).append(time.perf_counter() - started)
    finally:
        duck.close()
    return {
        label: {query: round(statistics.median(times), 6) for query, times in by_query.items()}
        for label, by_query in runs.items()
    }


def maintain_once(env: Environment, settings: SparkSettings) -> dict[str, Any]:
    """`floe maintain --once` on the upsert table's namespace, as an operator runs it."""
    command = [
        sys.executable, "-m", "floe.cli", "maintain", "--once", "--namespace", CLUSTER,
        "--metrics-port", "0", "--master", settings.master, "--driver-memory", settings.driver_memory,
    ]  # fmt: skip
    env_vars = _admin_env(env)
    started = time.monotonic()
    done = subprocess.run(command, env=env_vars, capture_output=True, text=True, timeout=1800, check=False)
    return {
        "exit_code": done.returncode,
        "seconds": round(time.monotonic() - started, 1),
        "output": done.stdout[-3000:],
    }


def append_only_copy(env: Environment, table: str, buckets: int) -> str:
    """An append-only table (same schema, same bucket partitioning) holding `table`'s current rows."""
    source = env.catalog.load_table(table)
    rows = source.scan().to_arrow()
    target = "bench.append_same_rows"
    env.catalog.create_namespace_if_not_exists("bench")
    schema = source.schema()
    spec = PartitionSpec(
        PartitionField(schema.find_field("id").field_id, 1000, BucketTransform(buckets), "id_bucket")
    )
    copy = env.catalog.create_table(target, schema=schema, partition_spec=spec)
    copy.append(rows)
    return target


def current_snapshot_only(env: Environment, table: str) -> str:
    """`table` as of its current snapshot alone, registered as another table: a metadata file with that
    one snapshot (the same schema, specs, manifests and data files, no history) — what the table
    would cost a reader without its retained history."""
    loaded = env.catalog.load_table(table)
    metadata = loaded.metadata
    current = metadata.current_snapshot()
    if current is None:
        raise RuntimeError(f"{table} has no snapshot")
    trimmed = metadata.model_copy(
        update={
            "table_uuid": uuid.uuid4(),
            "snapshots": [current.model_copy(update={"parent_snapshot_id": None})],
            "snapshot_log": [
                SnapshotLogEntry(snapshot_id=current.snapshot_id, timestamp_ms=current.timestamp_ms)
            ],
            "metadata_log": [],
            "refs": {MAIN_BRANCH: metadata.refs[MAIN_BRANCH]},
        }
    )
    location = f"{metadata.location}/metadata/00000-{uuid.uuid4()}-current-snapshot-only.metadata.json"
    ToOutputFile.table_metadata(trimmed, loaded.io.new_output(location))
    target = "bench.current_snapshot_only"
    env.catalog.create_namespace_if_not_exists("bench")
    env.catalog.register_table(target, location)
    return target


def pipeline_config(
    bootstrap: str, buckets: int, hot_partition_max_files: int | None = None
) -> dict[str, Any]:
    host, port = bootstrap.split(":")
    return {
        "source_clusters": [{"name": CLUSTER, "bootstrap_brokers": [{"hostname": host, "port": int(port)}]}],
        "tables": [
            {
                "source_cluster_name": CLUSTER,
                "source_topic": TOPICS[FLOE],
                "source_format": "json",
                "table_mode": "upsert",
                "key_fields": ["id"],
                "partitioning_scheme": [f"bucket({buckets}, id)"],
                "schema": {"fields": FIELDS},
                # Cold (every delete applied by a pass) once ingestion has stopped for this long.
                "maintenance": {
                    "cold_after": f"{COLD_AFTER_S}s",
                    **(
                        {"hot_partition_max_files": hot_partition_max_files}
                        if hot_partition_max_files
                        else {}
                    ),
                },
            }
        ],
    }


def git_commit() -> str | None:
    """The checkout's commit, and whether the measured code (ingest/, catalog/, maintenance/,
    benchmarks/upsert/) was edited."""
    root = Path(__file__).resolve().parents[2]

    def first_line(command: list[str]) -> str | None:
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
        except OSError:
            return None
        lines = done.stdout.strip().splitlines()
        return lines[0] if done.returncode == 0 and lines else None

    commit = first_line(["git", "-C", str(root), "rev-parse", "--short", "HEAD"])
    if commit is None:
        return None
    measured = ["ingest", "catalog", "maintenance", "benchmarks/upsert"]
    changed = first_line(["git", "-C", str(root), "status", "--porcelain", "--", *measured])
    return f"{commit} (with local changes)" if changed else commit


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.upsert", description=__doc__)
    parser.add_argument(
        "--full", action="store_true", help="the issue's size: 1 M keys, 10 minutes of changes"
    )
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--backlog-changes", type=int, default=100_000)
    parser.add_argument("--rate", type=float, default=500.0, help="steady changes per second")
    parser.add_argument("--steady-seconds", type=float, default=120.0)
    parser.add_argument("--buckets", type=int, default=16)
    parser.add_argument("--systems", default="floe,plain")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="2g")
    parser.add_argument("--records-per-batch", type=int, default=20_000)
    parser.add_argument("--commit-interval", type=float, default=2.0)
    parser.add_argument("--kafka-heap", default="512m")
    parser.add_argument("--output", type=Path, default=RESULTS_DIR)
    parser.add_argument("--name", default="upsert")
    parser.add_argument(
        "--maintenance-interval",
        type=int,
        default=0,
        help="run floe's maintenance worker beside floe ingest, a pass every N seconds (0: not at all)",
    )
    parser.add_argument(
        "--hot-partition-max-files",
        type=int,
        default=None,
        help="the table's maintenance.hot_partition_max_files (default: floe's)",
    )
    args = parser.parse_args(argv)
    if args.full:
        args.keys, args.backlog_changes, args.steady_seconds = 1_000_000, 1_000_000, 600.0
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    settings = SparkSettings(
        master=args.master,
        driver_memory=args.driver_memory,
        records_per_batch=args.records_per_batch,
        commit_interval_s=args.commit_interval,
    )
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    work = Path(tempfile.mkdtemp(prefix="floe-upsert-bench-"))
    results: dict[str, Any] = {
        "settings": {
            "keys": args.keys,
            "backlog_changes": args.backlog_changes,
            "rate_per_s": args.rate,
            "steady_seconds": args.steady_seconds,
            "buckets": args.buckets,
            "master": args.master,
            "driver_memory": args.driver_memory,
            "records_per_batch": args.records_per_batch,
            "commit_interval_s": args.commit_interval,
            "full": args.full,
            "maintenance_interval_s": args.maintenance_interval,
            "hot_partition_max_files": args.hot_partition_max_files,
            "commit": git_commit(),
            "started_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "cpus": os.cpu_count(),
            "load_average_at_start": list(os.getloadavg()),
        },
        "systems": {},
    }
    try:
        with environment(work, args.kafka_heap) as env:
            duck_dir = work / "duckdb"
            for topic in TOPICS.values():
                env.kafka.create_topic(topic, PARTITIONS)
            apply_pipeline(
                env.server,
                pipeline_config(env.kafka.bootstrap_servers, args.buckets, args.hot_partition_max_files),
            )
            for system in systems:
                results["systems"][system] = measure_system(env, args, system, settings, duck_dir)
            if FLOE in systems:
                table = floe_table(CLUSTER, TOPICS[FLOE])
                before = time_queries(env, duck_dir, {"before_maintain": table})
                queries: dict[str, Any] = dict(before)
                queries["files_before_maintain"] = _files(env.catalog, table)
                # Every partition cold, so the pass applies every delete (not only accumulated ones).
                time.sleep(max(0.0, COLD_AFTER_S + 5 - (time.time() - last_commit(env.catalog, table))))
                print(f"queries before maintenance: {queries['before_maintain']}", flush=True)
                queries["maintain"] = maintain_once(env, settings)
                queries["files_after_maintain"] = _files(env.catalog, table)
                copy = append_only_copy(env, table, args.buckets)
                trimmed = current_snapshot_only(env, table)
                queries["files_current_snapshot_only"] = _files(env.catalog, trimmed)
                queries.update(
                    time_queries(
                        env,
                        duck_dir,
                        {"after_maintain": table, "current_snapshot_only": trimmed, "append_only": copy},
                    )
                )
                print(f"maintain: {queries['maintain']['seconds']} s; after: {queries['after_maintain']}")
                queries["files_append_only"] = _files(env.catalog, copy)
                print(f"append-only: {queries['append_only']}", flush=True)
                results["queries"] = queries
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results["settings"]["load_average_at_end"] = list(os.getloadavg())
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / f"{args.name}.json").write_text(json.dumps(results, indent=2) + "\n")
    (args.output / f"{args.name}.md").write_text(report.markdown(results))
    print(f"wrote {args.output / args.name}.json and .md", flush=True)
    return 0
