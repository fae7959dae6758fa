"""Apache Iceberg's Kafka Connect sink on the same many topics: the peer row of `benchmarks.many_tables`.

One Kafka Connect worker (standalone mode, Connect 4.1.1, the broker's version) runs one
`org.apache.iceberg.connect.IcebergSinkConnector` (Iceberg 1.11.0, floe's Spark runtime's version) with one
task for all topics (`topics` names them all), in a JVM of `-Xmx2g` (floe's rows: `--driver-memory 2g`).
Both come from Maven Central: the joint runtime classpath is pinned by SHA-1 in
`devtools/data/iceberg-kafka-connect-1.11.0-classpath.txt` and fetched into floe's jar cache
(`runtime.artifacts`), never into the repository.

The sink writes into floe's own Iceberg REST catalog (`iceberg.catalog.type=rest`, OAuth2 client credentials
of a floe API key, warehouse `default`), one table per topic in its own namespace, created by the sink
(`iceberg.tables.auto-create-enabled`). The sink routes a record to tables by a field of the record, not by
its topic, so the stock `InsertField$Value` transform adds the topic as `_topic` and each table's
`route-regex` matches its own topic (static routing, `iceberg.tables` lists every table).

Freshness here is produce (delivery confirmed) → the first 0.5 s poll of floe's database that shows the
record in the table's current snapshot: each poll reads the tables' metadata versions, and for a table
whose version moved reads its current snapshot's `total-records` from the stored metadata. A topic has one
partition and the sink writes each record once, in offset order, so `total-records` is the topic's next
committed offset — the same quantity floe's rows read from floe's offsets table.
"""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.many_tables.freshness import p99
from benchmarks.many_tables.quiet_producer import delivered_per_table_second, producing
from devtools.pins import maven_artifact, pin_lines
from devtools.ports import free_port
from devtools.processes import stop_process
from runtime.artifacts import Artifact, fetch
from runtime.files import write_private
from runtime.java import find_java

if TYPE_CHECKING:
    import argparse

    from benchmarks.many_tables.outcome import Outcome

ICEBERG_VERSION = "1.11.0"
WORKER_CLASS = "org.apache.kafka.connect.cli.ConnectStandalone"
SINK_CLASS = "org.apache.iceberg.connect.IcebergSinkConnector"
TOPIC_FIELD = "_topic"
DEFAULT_COMMIT_INTERVAL_MS = 300_000  # the sink's own default

CONNECT_CLASSPATH: tuple[Artifact, ...] = tuple(
    maven_artifact(*line.split())
    for line in pin_lines(f"iceberg-kafka-connect-{ICEBERG_VERSION}-classpath.txt")
)


def method_text() -> str:
    """This module's description for the results file: what runs and how freshness is read."""
    return " ".join(" ".join((__doc__ or "").split("\n\n")[1:]).split())


def connect_classpath() -> list[Path]:
    """Connect's and the sink's jars from floe's cache, downloaded (SHA-1-verified) on first use."""
    with ThreadPoolExecutor(max_workers=8) as pool:
        return list(pool.map(fetch, CONNECT_CLASSPATH))


@dataclass(frozen=True)
class SinkSettings:
    """One Iceberg sink connector: which topics, into which namespace of which catalog, how often."""

    bootstrap_servers: str
    catalog_uri: str
    credential: str  # client_id:secret of a floe API key
    namespace: str
    topics: Sequence[str]
    commit_interval_ms: int = DEFAULT_COMMIT_INTERVAL_MS
    warehouse: str = "default"
    name: str = "iceberg-sink"

    @property
    def control_topic(self) -> str:
        return f"control-{self.name}"

    def table(self, topic: str) -> str:
        return f"{self.namespace}.{topic}"


def worker_properties(bootstrap_servers: str, work: Path, rest_port: int) -> str:
    """A standalone worker: schemaless JSON values, offsets in a file, its REST API on loopback only."""
    lines = {
        "bootstrap.servers": bootstrap_servers,
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        "offset.storage.file.filename": str(work / "connect.offsets"),
        "listeners": f"http://127.0.0.1:{rest_port}",
        # The sink is on the classpath and names itself in META-INF/services: no reflective scan.
        "plugin.discovery": "service_load",
    }
    return "".join(f"{key}={_escaped(value)}\n" for key, value in lines.items())


def connector_properties(settings: SinkSettings) -> str:
    """The sink: every topic, one table each routed by the `_topic` field, committed every interval."""
    tables = [settings.table(topic) for topic in settings.topics]
    lines = {
        "name": settings.name,
        "connector.class": SINK_CLASS,
        "tasks.max": "1",
        "topics": ",".join(settings.topics),
        "transforms": "topic",
        "transforms.topic.type": "org.apache.kafka.connect.transforms.InsertField$Value",
        "transforms.topic.topic.field": TOPIC_FIELD,
        "iceberg.tables": ",".join(tables),
        "iceberg.tables.route-field": TOPIC_FIELD,
        "iceberg.tables.auto-create-enabled": "true",
        "iceberg.control.topic": settings.control_topic,
        "iceberg.control.commit.interval-ms": str(settings.commit_interval_ms),
        "iceberg.catalog.type": "rest",
        "iceberg.catalog.uri": settings.catalog_uri,
        "iceberg.catalog.credential": settings.credential,
        "iceberg.catalog.oauth2-server-uri": f"{settings.catalog_uri.rstrip('/')}/v1/oauth/tokens",
        "iceberg.catalog.warehouse": settings.warehouse,
        # Anchored and quoted: the table's own topic exactly, whatever characters the name has.
        **{
            f"iceberg.table.{table}.route-regex": f"^\\Q{topic}\\E$"
            for table, topic in zip(tables, settings.topics, strict=True)
        },
    }
    return "".join(f"{key}={_escaped(value)}\n" for key, value in lines.items())


def _escaped(value: str) -> str:
    # java.util.Properties reads backslashes as escapes.
    return value.replace("\\", "\\\\")


LOG4J = """log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.org.apache.kafka.clients=WARN
log4j.logger.org.apache.kafka.common=WARN
log4j.logger.org.apache.hadoop=WARN
"""


class IcebergSinkConnect:
    """A Kafka Connect standalone worker running one Iceberg sink; its output in `work/connect.log`."""

    def __init__(self, settings: SinkSettings, work: Path, heap: str = "2g") -> None:
        self.settings, self.work, self.heap = settings, work, heap
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = work / "connect.log"

    def start(self) -> IcebergSinkConnect:
        java = find_java("Kafka Connect", "install a JDK 17+ or set JAVA_HOME", 17)
        classpath = ":".join(str(path) for path in connect_classpath())
        self.work.mkdir(parents=True, exist_ok=True)
        worker = self.work / "worker.properties"
        connector = self.work / "connector.properties"  # holds the API key's secret: private
        write_private(worker, worker_properties(self.settings.bootstrap_servers, self.work, free_port()))
        write_private(connector, connector_properties(self.settings))
        write_private(self.work / "log4j.properties", LOG4J)
        command = [
            java, f"-Xmx{self.heap}", "-XX:+UseG1GC",
            f"-Dlog4j.configuration=file:{self.work / 'log4j.properties'}",
            "-cp", classpath, WORKER_CLASS, str(worker), str(connector),
        ]  # fmt: skip
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        return self

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def exited(self) -> int | None:
        return self.process.poll() if self.process else None

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        stop_process(self.process)
        self.process = None

    def __enter__(self) -> IcebergSinkConnect:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class SnapshotCounts:
    """Records in each table's current snapshot in one namespace, read from floe's PostgreSQL.

    Only tables whose metadata version moved since the last read have their metadata parsed, so a poll of
    1,000 quiet tables is one small query.
    """

    def __init__(self, fetch_rows: Any, namespace: str) -> None:
        self.fetch_rows, self.namespace = fetch_rows, namespace
        self.versions: dict[str, int] = {}
        self.counts: dict[str, int] = {}

    def read(self) -> dict[str, int]:
        rows = self.fetch_rows(
            "SELECT t.name, t.version FROM tabulars t JOIN namespaces n ON n.id = t.namespace_id "
            "WHERE n.key = $1",
            self.namespace,
        )
        moved = [r["name"] for r in rows if self.versions.get(r["name"]) != int(r["version"])]
        if moved:
            for r in self.fetch_rows(
                "SELECT t.name, t.version, t.metadata_json FROM tabulars t JOIN namespaces n "
                "ON n.id = t.namespace_id WHERE n.key = $1 AND t.name = ANY($2::text[])",
                self.namespace,
                moved,
            ):
                self.versions[r["name"]] = int(r["version"])
                self.counts[r["name"]] = current_records(json.loads(r["metadata_json"]))
        return dict(self.counts)


def current_records(metadata: dict[str, Any]) -> int:
    """`total-records` of the table's current snapshot (0 without one)."""
    current = metadata.get("current-snapshot-id")
    for snapshot in metadata.get("snapshots") or []:
        if snapshot.get("snapshot-id") == current:
            return int(snapshot.get("summary", {}).get("total-records", 0))
    return 0


def run(outcome: Outcome, interval_ms: int, args: argparse.Namespace, work: Path) -> None:
    """One row: N topics, the sink committing every `interval_ms`, one record a second to every topic.

    The measurement window is at least one commit interval long (a record's freshness depends on where in
    the interval it arrives), the grace after it one interval plus 30 s (the window's last records wait for
    the next commit), and first rows may take one interval plus two minutes of start-up.
    """
    from confluent_kafka.admin import AdminClient, NewTopic

    from benchmarks.ingest.environment import environment
    from benchmarks.many_tables.__main__ import Offsets, tree_rss

    count = outcome.tables
    measure = max(args.measure, interval_ms / 1000)
    grace = max(args.grace, interval_ms / 1000 + 30)
    first_rows_limit = max(args.first_rows_limit, interval_ms / 1000 + 120)
    namespace = "connect"
    with environment(work, kafka_heap="1g") as env:
        topics = [f"t{i:04d}" for i in range(count)]
        settings = SinkSettings(
            env.kafka.bootstrap_servers, env.server.url, env.server.admin_credential, namespace,
            topics, commit_interval_ms=interval_ms,
        )  # fmt: skip
        admin = AdminClient({"bootstrap.servers": env.kafka.bootstrap_servers})
        names = [*topics, settings.control_topic]
        for i in range(0, len(names), 200):
            for future in admin.create_topics([NewTopic(t, 1, 1) for t in names[i : i + 200]]).values():
                future.result(60)
        env.catalog.create_namespace(namespace)
        database = Offsets(env.server.database_url or "")
        counts = SnapshotCounts(database.fetch, namespace)
        seen: dict[tuple[str, int], float] = {}
        committed: dict[str, int] = {}
        peak_rss = 0
        measure_from = measure_to = None
        sink = IcebergSinkConnect(settings, work / "connect")
        try:
            with producing(env.kafka.bootstrap_servers, topics, outcome.arrivals) as produced:
                sink.start()
                started = time.monotonic()
                sampler = env.sampler(None)
                sampler.groups["ingester"] = lambda: [p for p in (sink.pid,) if p]
                while True:
                    polled_at = time.time()
                    for table, next_offset in counts.read().items():
                        for offset in range(committed.get(table, 0), next_offset):
                            seen[(table, offset)] = polled_at
                        committed[table] = max(committed.get(table, 0), next_offset)
                    sampler.sample()
                    peak_rss = max(peak_rss, tree_rss(sink.pid or 0))
                    outcome.tables_with_rows = sum(1 for t in topics if committed.get(t, 0) > 0)
                    if outcome.first_rows_s is None and outcome.tables_with_rows == count:
                        outcome.first_rows_s = round(time.monotonic() - started, 1)
                        measure_from = time.time() + args.settle
                        measure_to = measure_from + measure
                    if measure_to is not None and time.time() > measure_to + grace:
                        break
                    if outcome.first_rows_s is None and time.monotonic() - started > first_rows_limit:
                        outcome.notes.append(
                            f"only {outcome.tables_with_rows} of {count} tables had rows "
                            f"{first_rows_limit:.0f} s after the worker started"
                        )
                        measure_to = time.time()
                        measure_from = measure_to - min(measure, 60)
                        break
                    if sink.exited() is not None:
                        outcome.notes.append(f"the Connect worker exited with {sink.exited()}")
                        break
                    time.sleep(0.5)
        finally:
            sink.stop()
            database.close()
        log = sink.log_text()
        errors = [line for line in log.splitlines() if " ERROR " in line]
        if errors:
            outcome.notes.append(f"{len(errors)} ERROR lines in the worker's log, first: {errors[0][:300]}")
        outcome.notes.append(commit_cycles(log))
        outcome.notes.append(
            f"iceberg.control.commit.interval-ms={interval_ms}; freshness window {measure:.0f} s"
        )
        if measure_from is not None and measure_to is not None:
            cores = sampler.cores(measure_from, min(measure_to, time.time()))
            outcome.ingest_cores = cores.get("ingester")
            outcome.catalog_cores = cores.get("catalog")
            outcome.broker_cores = cores.get("broker")
            outcome.other_cores = cores.get("other")
            summarize(outcome, produced, seen, measure_from, measure_to)
        outcome.ingest_peak_rss_gib = round(peak_rss / 2**30, 2)


_LOG_TIME = r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]"
_INITIATED = re.compile(_LOG_TIME + r".*Coordinator \S+ initiated commit (\S+)")
_COMPLETED = re.compile(_LOG_TIME + r".*Coordinator \S+ completed commit (\S+), committed to (\d+) table")
_FAILED = re.compile(r"Coordinator \S+ failed to commit for commit")


def commit_cycles(log: str) -> str:
    """How the sink's commits went, from the coordinator's log lines: how many, and how long from a
    commit's start (the interval's end) to its completion (every table committed)."""

    def at(stamp: str) -> float:
        return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()

    started: dict[str, float] = {}
    for line in log.splitlines():
        if found := _INITIATED.search(line):
            started[found[2]] = at(found[1])
    spans, tables = [], []
    for line in log.splitlines():
        if (found := _COMPLETED.search(line)) and found[2] in started:
            spans.append(at(found[1]) - started[found[2]])
            tables.append(int(found[3]))
    failed = len(_FAILED.findall(log))
    if not spans:
        return f"the sink completed no commit ({len(started)} initiated, {failed} failed)"
    return (
        f"{len(started)} commits initiated, {len(spans)} completed ({failed} failed); commit start → "
        f"complete median {statistics.median(spans):.1f} s, max {max(spans):.1f} s; "
        f"tables per commit median {statistics.median(tables):.0f}"
    )


def summarize(
    outcome: Outcome,
    produced: dict[tuple[str, int], float],
    seen: dict[tuple[str, int], float],
    measure_from: float,
    measure_to: float,
) -> None:
    """Freshness percentiles of the records produced in the window, and how many never showed up."""
    ages = sorted(
        seen[key] - sent
        for key, sent in produced.items()
        if measure_from <= sent <= measure_to and key in seen
    )
    outcome.records_missing = sum(
        1 for key, sent in produced.items() if measure_from <= sent <= measure_to and key not in seen
    )
    outcome.records_measured = len(ages)
    outcome.delivered_per_table_s = delivered_per_table_second(
        produced, outcome.tables, (measure_from, measure_to)
    )
    if ages:
        outcome.freshness_p50_s = round(statistics.median(ages), 2)
        outcome.freshness_p99_s = round(p99(ages), 2)
        outcome.freshness_max_s = round(ages[-1], 2)
