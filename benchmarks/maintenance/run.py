"""The maintenance benchmark: DuckDB on a table of many small files, before and after `floe maintain`.

One floe server (SQLite, its own home), one table written the way ingestion writes it (one small
Parquet file per commit), representative DuckDB queries measured warm (median of several runs), then
one maintenance pass by the worker on a Spark session (its time, and the peak memory of the Spark JVM
plus this Python process, sampled), then the same queries on the same table. The answers must be
identical; the ratio of the medians is the result (target: compacted at least 5 times faster, reported).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.io.pyarrow import _dataframe_to_data_files
from pyiceberg.manifest import (
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    write_manifest,
    write_manifest_list,
)
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.table.refs import MAIN_BRANCH, SnapshotRefType
from pyiceberg.table.snapshots import (
    Operation,
    Snapshot,
    SnapshotSummaryCollector,
    Summary,
    update_snapshot_summaries,
)
from pyiceberg.table.update import AddSnapshotUpdate, AssertRefSnapshotId, SetSnapshotRefUpdate
from pyiceberg.transforms import DayTransform
from pyiceberg.types import DoubleType, LongType, NestedField, StringType, TimestamptzType

from benchmarks.catalog.procstat import cpu_seconds, machine_busy_seconds, tree_pids
from benchmarks.catalog.report import machine_info
from benchmarks.maintenance.report import git_commit, render_markdown, write_results
from catalog.pipelines.maintenance import DEFAULT_POLICY
from devtools.catalog_server import CatalogProcess
from tests.e2e.duckdb_client import attach_catalog, connect

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

NAMESPACE = "bench"
TABLE = "events"
DAYS = 4
CATEGORIES = ("click", "view", "cart", "purchase", "search")
RATIO_TARGET = 5.0
START = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
# pyiceberg's default for manifests and manifest lists (`write.avro.compression-codec` gzip, which
# is Avro's deflate).
AVRO_COMPRESSION: Literal["deflate"] = "deflate"

SCHEMA = Schema(
    NestedField(1, "event_id", LongType(), required=False),
    NestedField(2, "user_id", LongType(), required=False),
    NestedField(3, "category", StringType(), required=False),
    NestedField(4, "amount", DoubleType(), required=False),
    NestedField(5, "event_time", TimestamptzType(), required=False),
)
SPEC = PartitionSpec(PartitionField(5, 1000, DayTransform(), "event_time_day"))


@dataclass(frozen=True)
class Query:
    key: str
    title: str
    sql: str


def queries(ref: str) -> list[Query]:
    low, high = (START + dt.timedelta(days=d) for d in (1, 2))
    bounds = f"TIMESTAMPTZ '{low.isoformat()}' AND event_time < TIMESTAMPTZ '{high.isoformat()}'"
    return [
        Query("count", "count(*) over the table", f"SELECT count(*) FROM {ref}"),
        Query(
            "aggregate",
            "count, sum, min and max per category",
            # Sums of exact integers (amounts are tenths): a float sum's last bits depend on the order
            # DuckDB's threads add in, which would make answers differ from run to run.
            f"SELECT category, count(*), sum(round(amount * 10)::BIGINT), min(amount), max(amount) "
            f"FROM {ref} GROUP BY category ORDER BY category",
        ),
        Query(
            "filter",
            "rows of one user",
            f"SELECT count(*), sum(round(amount * 10)::BIGINT) FROM {ref} WHERE user_id = 42",
        ),
        Query(
            "one_day",
            "one day (partition pruning)",
            f"SELECT count(*), max(amount) FROM {ref} WHERE event_time >= {bounds}",
        ),
    ]


@dataclass
class QueryTiming:
    median_ms: float
    samples_ms: list[float]
    answer: list[tuple[Any, ...]]


_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


def rss_bytes(pid: int) -> int:
    """Resident memory of a live process (0 once it is gone), from /proc."""
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * _PAGE_BYTES
    except (OSError, IndexError, ValueError):
        return 0


def process_name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


@dataclass
class MemorySampler:
    """Peak RSS of this process and of its Java children (the Spark driver JVM), sampled."""

    interval_s: float = 0.2
    peak_total_bytes: int = 0
    peak_java_bytes: int = 0
    peak_python_bytes: int = 0
    samples: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    def _sample(self) -> None:
        python = rss_bytes(os.getpid())
        java = sum(rss_bytes(pid) for pid in tree_pids([os.getpid()]) if process_name(pid) == "java")
        self.peak_python_bytes = max(self.peak_python_bytes, python)
        self.peak_java_bytes = max(self.peak_java_bytes, java)
        self.peak_total_bytes = max(self.peak_total_bytes, python + java)
        self.samples += 1

    @contextlib.contextmanager
    def running(self) -> Iterator[MemorySampler]:
        def loop() -> None:
            while not self._stop.is_set():
                self._sample()
                self._stop.wait(self.interval_s)

        thread = threading.Thread(target=loop, name="memory-sampler", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            thread.join()
            self._sample()


def rows_for(file_index: int, rows: int) -> pa.Table:
    day = file_index % DAYS
    base = file_index * rows
    at = [START + dt.timedelta(days=day, seconds=(base + i) % 86_400) for i in range(rows)]
    return pa.table(
        {
            "event_id": pa.array(range(base, base + rows), pa.int64()),
            "user_id": pa.array([(base + i) % 1000 for i in range(rows)], pa.int64()),
            "category": pa.array([CATEGORIES[(base + i) % len(CATEGORIES)] for i in range(rows)]),
            "amount": pa.array([((base + i) % 997) / 10 for i in range(rows)], pa.float64()),
            "event_time": pa.array(at, pa.timestamp("us", tz="UTC")),
        }
    )


def seed(catalog: RestCatalog, files: int, rows: int) -> Table:
    """One commit per small file, as ingestion writes them: each commit adds one data file, one manifest,
    one manifest list (listing every manifest so far) and one metadata file.

    The commits are fast appends made here from pyiceberg's own writers rather than `Table.append`, which
    deep-copies the table's metadata about 18 times per append (80% of the time once the table has
    hundreds of snapshots); the files and the REST commits are the same."""
    catalog.create_namespace(NAMESPACE)
    table: Table = catalog.create_table((NAMESPACE, TABLE), SCHEMA, partition_spec=SPEC)
    metadata = table.metadata
    io = table.io
    locations = table.location_provider()
    manifests: list[ManifestFile] = []  # as listed by the newest manifest list (sequence numbers set)
    parent: Snapshot | None = None
    started = time.perf_counter()
    for index in range(files):
        snapshot_id = _new_snapshot_id()
        commit_uuid = uuid.uuid4()
        data_files = list(_dataframe_to_data_files(metadata, rows_for(index, rows), io, commit_uuid))
        manifest_path = locations.new_metadata_location(f"{commit_uuid}-m0.avro")
        with write_manifest(
            metadata.format_version,
            metadata.spec(),
            metadata.schema(),
            io.new_output(manifest_path),
            snapshot_id,
            AVRO_COMPRESSION,
        ) as manifest_writer:
            for data_file in data_files:
                manifest_writer.add(
                    ManifestEntry.from_args(
                        status=ManifestEntryStatus.ADDED, snapshot_id=snapshot_id, data_file=data_file
                    )
                )
        collector = SnapshotSummaryCollector()
        for data_file in data_files:
            collector.add_file(data_file, schema=metadata.schema(), partition_spec=metadata.spec())
        summary = update_snapshot_summaries(
            Summary(Operation.APPEND, **collector.build()), parent.summary if parent is not None else None
        )
        sequence_number = metadata.next_sequence_number()
        list_path = locations.new_metadata_location(f"snap-{snapshot_id}-0-{commit_uuid}.avro")
        parent_id = parent.snapshot_id if parent is not None else None
        with write_manifest_list(
            metadata.format_version,
            io.new_output(list_path),
            snapshot_id,
            parent_id,
            sequence_number,
            AVRO_COMPRESSION,
        ) as list_writer:
            listed = [list_writer.prepare_manifest(manifest_writer.to_manifest_file()), *manifests]
            list_writer.add_manifests(listed)
        manifests = listed
        parent = Snapshot(
            snapshot_id=snapshot_id,
            parent_snapshot_id=parent_id,
            sequence_number=sequence_number,
            manifest_list=list_path,
            summary=summary,
            schema_id=metadata.current_schema_id,
        )
        response = catalog.commit_table(
            table,
            requirements=(AssertRefSnapshotId(ref=MAIN_BRANCH, snapshot_id=parent_id),),
            updates=(
                AddSnapshotUpdate(snapshot=parent),
                SetSnapshotRefUpdate(
                    ref_name=MAIN_BRANCH,
                    type=SnapshotRefType.BRANCH,
                    snapshot_id=snapshot_id,
                    max_ref_age_ms=None,
                    max_snapshot_age_ms=None,
                    min_snapshots_to_keep=None,
                ),
            ),
        )
        metadata = response.metadata
        table = Table(table.name(), metadata, response.metadata_location, io, catalog)
        if (index + 1) % 100 == 0:
            print(f"  {index + 1} files written ({time.perf_counter() - started:.0f} s)", flush=True)
    return table


def _new_snapshot_id() -> int:
    # Iceberg's own rule: a positive 63-bit number from a random UUID.
    return uuid.uuid4().int & (2**63 - 1)


def measure(server: CatalogProcess, extensions: Path, repetitions: int) -> dict[str, QueryTiming]:
    """Each query once unmeasured (warm), then `repetitions` times; the median."""
    connection = connect(extensions)
    try:
        attach_catalog(
            connection,
            endpoint=server.url,
            warehouse="default",
            client_id=server.admin_client_id,
            client_secret=server.admin_client_secret,
        )
        results: dict[str, QueryTiming] = {}
        for query in queries(f"floe.{NAMESPACE}.{TABLE}"):
            answer = connection.execute(query.sql).fetchall()
            samples = []
            for _ in range(repetitions):
                started = time.perf_counter()
                again = connection.execute(query.sql).fetchall()
                samples.append((time.perf_counter() - started) * 1000)
                if again != answer:
                    raise AssertionError(f"{query.key}: the answer changed between runs")
            results[query.key] = QueryTiming(round(statistics.median(samples), 2), samples, answer)
        return results
    finally:
        connection.close()


def file_stats(table: Table) -> dict[str, int]:
    snapshot = table.current_snapshot()
    files = data_bytes = manifests = 0
    if snapshot is not None:
        for manifest in snapshot.manifests(table.io):
            manifests += 1
            for entry in manifest.fetch_manifest_entry(table.io):
                files += 1
                data_bytes += entry.data_file.file_size_in_bytes
    return {
        "data_files": files,
        "data_bytes": data_bytes,
        "manifests": manifests,
        "snapshots": len(table.metadata.snapshots),
    }


def maintain(server: CatalogProcess, master: str, spark: SparkSession | None = None) -> dict[str, Any]:
    """One `floe maintain` pass over the benchmark's namespace: Spark start, pass time and each action's,
    CPU seconds (this process with Spark's JVM, and the floe server), peak memory. A given `spark`
    session is used (and left running) instead of starting one."""
    from maintenance.worker import MaintenanceWorker, PassResult, WorkerOptions
    from runtime.spark import CatalogConnection, spark_session

    assert server.process is not None
    server_pid = server.process.pid

    class MeasuredWorker(MaintenanceWorker):
        """The worker, with the CPU seconds each action costs: on a shared machine an action's wall
        time depends on the other load, its CPU time much less."""

        cpu: dict[str, dict[str, float]] = {}

        def run_action(
            self, result: PassResult, name: str, action: Callable[[], dict[str, Any]], **context: Any
        ) -> bool:
            driver, catalog = cpu_seconds([os.getpid()]), cpu_seconds([server_pid])
            try:
                return super().run_action(result, name, action, **context)
            finally:
                spent = self.cpu.setdefault(name, {"driver": 0.0, "catalog": 0.0})
                spent["driver"] += cpu_seconds([os.getpid()]) - driver
                spent["catalog"] += cpu_seconds([server_pid]) - catalog

    client_id, secret = server.admin_client_id, server.admin_client_secret
    sampler = MemorySampler()
    with sampler.running():
        started = time.perf_counter()
        session = spark or spark_session(
            "floe-maintain-benchmark",
            CatalogConnection(server.url, "default", client_id, secret),
            master=master,
            conf={"spark.driver.memory": "1g", "spark.ui.showConsoleProgress": "false"},
        )
        spark_start_s = time.perf_counter() - started
        try:
            # The data is of past days: partitions ingestion no longer writes, cold at once.
            options = WorkerOptions(
                server.url,
                client_id,
                secret,
                namespaces=(NAMESPACE,),
                defaults=replace(DEFAULT_POLICY, cold_after=0),
            )
            worker = MeasuredWorker(session, options)
            pass_started = time.perf_counter()
            cpu_before = (cpu_seconds([os.getpid()]), cpu_seconds([server_pid]), machine_busy_seconds())
            results = worker.run_once()
            pass_s = time.perf_counter() - pass_started
            driver_cpu = cpu_seconds([os.getpid()]) - cpu_before[0]
            catalog_cpu = cpu_seconds([server_pid]) - cpu_before[1]
            machine_cpu = machine_busy_seconds() - cpu_before[2]
            worker.close()
        finally:
            if spark is None:
                session.stop()
    (result,) = results
    if result.failed:
        raise RuntimeError(f"the maintenance pass failed: {result.summary()}")
    actions_s = sum(a.duration_seconds for a in result.actions)
    return {
        "spark_start_s": round(spark_start_s, 1),
        "pass_s": round(pass_s, 1),
        "actions": {a.name: round(a.duration_seconds, 1) for a in result.actions},
        # Reading the table's state (pyiceberg: the current manifests before, metadata between actions,
        # the manifests after) and recording the pass.
        "outside_actions_s": round(pass_s - actions_s, 1),
        "action_results": {
            a.name: {k: v for k, v in a.result.items() if k != "removed"} for a in result.actions
        },
        "cpu_s": {
            "driver": round(driver_cpu, 1),
            "catalog": round(catalog_cpu, 1),
            # Every process of the machine during the pass: what is not ours is the other load.
            "machine": round(machine_cpu, 1),
            "actions": {
                name: {k: round(v, 1) for k, v in spent.items()} for name, spent in worker.cpu.items()
            },
        },
        "peak_rss_mb": {
            "spark_jvm_plus_python": round(sampler.peak_total_bytes / 2**20),
            "spark_jvm": round(sampler.peak_java_bytes / 2**20),
            "python": round(sampler.peak_python_bytes / 2**20),
        },
        "memory_samples": sampler.samples,
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.maintenance", description=__doc__)
    parser.add_argument("--files", type=int, default=1000, help="small files (one commit each)")
    parser.add_argument("--rows-per-file", type=int, default=100)
    parser.add_argument("--repetitions", type=int, default=7, help="measured runs per query (median)")
    parser.add_argument("--master", default="local[2]", help="Spark master of the maintenance pass")
    parser.add_argument("--output", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--name", default="maintenance", help="results file name (without extension)")
    return parser.parse_args(argv)


def run(args: argparse.Namespace, spark: SparkSession | None = None) -> dict[str, Any]:
    settings = {
        "started_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "files": args.files,
        "rows_per_file": args.rows_per_file,
        "repetitions": args.repetitions,
        "master": args.master,
        "floe_commit": git_commit(),
    }
    machine = machine_info()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="floe-maintenance-bench-") as work:
        home = Path(work) / "home"
        with CatalogProcess(f"sqlite+aiosqlite:///{home / 'floe.db'}", home=home) as server:
            catalog = server.catalog()
            print(f"writing {args.files} small files ...", flush=True)
            seed_started = time.perf_counter()
            table = seed(catalog, args.files, args.rows_per_file)
            seed_s = time.perf_counter() - seed_started
            before_stats = file_stats(catalog.load_table((NAMESPACE, TABLE)))
            extensions = Path(work) / "duckdb-extensions"
            print("measuring DuckDB on the small files ...", flush=True)
            before = measure(server, extensions, args.repetitions)
            print("maintaining ...", flush=True)
            maintenance = maintain(server, args.master, spark)
            table = catalog.load_table((NAMESPACE, TABLE))
            after_stats = file_stats(table)
            print("measuring DuckDB on the compacted table ...", flush=True)
            after = measure(server, extensions, args.repetitions)
    rows: list[dict[str, Any]] = []
    for query in queries("t"):
        b, a = before[query.key], after[query.key]
        if a.answer != b.answer:
            raise AssertionError(f"{query.key}: answers differ before and after maintenance")
        rows.append(
            {
                "key": query.key,
                "title": query.title,
                "before_median_ms": b.median_ms,
                "after_median_ms": a.median_ms,
                "speedup": round(b.median_ms / a.median_ms, 2) if a.median_ms else None,
                "before_samples_ms": [round(s, 2) for s in b.samples_ms],
                "after_samples_ms": [round(s, 2) for s in a.samples_ms],
            }
        )
    speedups = [r["speedup"] for r in rows if r["speedup"] is not None]
    return {
        "benchmark": "maintenance",
        "settings": settings | {"total_seconds": round(time.perf_counter() - started, 1)},
        "machine": machine | {"load_average_after": [round(x, 2) for x in os.getloadavg()]},
        "versions": _versions(),
        "table": {"seed_seconds": round(seed_s, 1), "before": before_stats, "after": after_stats},
        "queries": rows,
        "maintenance": maintenance,
        "targets": {
            "speedup": RATIO_TARGET,
            "min_speedup": min(speedups) if speedups else None,
            "median_speedup": round(statistics.median(speedups), 2) if speedups else None,
            "met": bool(speedups) and min(speedups) >= RATIO_TARGET,
        },
    }


def _versions() -> dict[str, Any]:
    from importlib import metadata

    def version(name: str) -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    from runtime.spark import ICEBERG_VERSION, SPARK_VERSION

    return {
        "python": sys.version.split()[0],
        "floe": version("floe"),
        "duckdb": version("duckdb"),
        "pyiceberg": version("pyiceberg"),
        "pyspark": version("pyspark") or SPARK_VERSION,
        "iceberg_spark_runtime": ICEBERG_VERSION,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    doc = run(args)
    json_path, md_path = write_results(doc, args.output, args.name)
    print(render_markdown(doc))
    print(f"wrote {json_path} and {md_path}")
    return 0
