"""`floe ingest`: one Spark application that keeps every configured topic flowing into its table.

A supervisor loop polls floe's applied pipeline (floe.yaml) and keeps exactly one Structured Streaming
query per table: new tables start, removed tables stop, tables whose settings or schema changed restart
(so a schema migration applied while ingesting takes effect within one poll), and failed queries restart
with backoff. Each query starts from the offsets floe has committed for its table — the catalog is the
source of truth, so Spark checkpoints are per-run scratch and losing one loses nothing.

A table whose topic does not exist is not started (a query on a missing topic fails and restarts in a
loop): on a broker floe itself runs (`create_topics_at`, `floe up`'s) the topic is created; elsewhere
one WARNING a minute per topic says so, and the `floe_ingest_topic_missing` metric shows it in
`floe status`, until the topic appears. Commits are logged as one INFO line on a table's first commit
and then one summary line per table per minute.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from catalog.client import ClientError, FloeClient, Pipeline
from ingest import metrics
from ingest.batches import BatchWriter
from ingest.ingest_table import BatchResult, IngestTable
from ingest.kafka_connection import check_connection
from ingest.lag import LagTracker
from ingest.registry_client import RegistryClient, RegistryConnection
from ingest.shared.service import SharedTables, shared_consumer_reads
from ingest.watermark_report import report_watermarks
from runtime.shards import shard_of
from runtime.spark import CatalogConnection, register_warehouse

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

log = logging.getLogger(__name__)


@dataclass
class IngestOptions:
    """Knobs of `floe ingest` (the defaults suit a laptop and the tests)."""

    commit_interval: float | None = None  # overrides every table's configured interval
    max_records_per_batch: int = 500_000
    poll_interval: float = 5.0
    clusters: frozenset[str] = frozenset()  # only these source clusters (empty: all)
    state_dir: Path | None = None
    # Bootstrap servers of brokers floe itself runs (`floe up`): missing topics are created there.
    create_topics_at: frozenset[str] = frozenset()
    # Run each table's batch path once before its query starts (`floe up`: fast first records).
    warm_up: bool = False
    # This instance's share of the tables (`floe ingest --shard i/n`): index i of n, by a stable hash.
    shard: tuple[int, int] = (0, 1)


@dataclass(frozen=True)
class CatalogAccess:
    """The key a cluster's tables are ingested with: floe's management client (offsets) and Spark's
    catalog connection (commits)."""

    client: FloeClient
    connection: CatalogConnection


@dataclass
class _Running:
    table: IngestTable
    query: StreamingQuery
    checkpoint: Path
    writer: BatchWriter
    started_at: float = field(default_factory=time.monotonic)


class IngestService:
    """Supervises the streaming queries of every table in the applied pipeline.

    Registry-mode tables get their schema-registry client from `registry_for` (by default one
    `RegistryClient` per registry connection, kept for the service's lifetime so its schema cache is).
    """

    def __init__(
        self,
        spark: SparkSession | Callable[[], SparkSession],
        catalog: FloeClient,
        connection: CatalogConnection,
        tables_of: Callable[[Pipeline], list[IngestTable]],
        options: IngestOptions,
        registry_for: Callable[[RegistryConnection], RegistryClient] | None = None,
        access_for: Callable[[str], CatalogAccess] | None = None,
        owns: Callable[[str], bool] | None = None,
    ) -> None:
        # Started at the first table that needs a Spark query (a session given is used as it is): the
        # shared consumer's tables need no JVM, so a pipeline of them starts in seconds.
        self._spark: SparkSession | None = None if callable(spark) else spark
        self._spark_factory = spark if callable(spark) else None
        self.catalog = catalog
        self.connection = connection
        # A cluster's tables are written with its own key when given (`floe up`'s pipeline keys);
        # `catalog` then only reads the pipeline.
        self.access_for = access_for or (lambda _cluster: CatalogAccess(catalog, connection))
        self.tables_of = tables_of
        self.options = options
        # Whether a table is this instance's: its lease's (`floe ingest --shard auto`, `runtime.leases`),
        # else its static shard's (`--shard i/n`).
        index, count = options.shard
        self._owns = owns or (lambda name: shard_of(name, count) == index)
        self.registry_for = registry_for or self._registry_client
        self._registries: dict[RegistryConnection, RegistryClient] = {}
        self.running: dict[str, _Running] = {}
        self._failures: dict[str, tuple[int, float]] = {}  # table → (consecutive failures, retry at)
        self._stop = threading.Event()
        self._state = options.state_dir or Path(tempfile.mkdtemp(prefix="floe-ingest-"))
        self._state.mkdir(parents=True, exist_ok=True)
        # Checkpoints of earlier runs are scratch (offsets come from floe): a crashed run leaves them.
        for stale in self._state.glob("checkpoint-*"):
            shutil.rmtree(stale, ignore_errors=True)
        self._lag = LagTracker()
        self._throughput = metrics.Throughput()
        self._commit_log = CommitLog()
        self._missing_warned: dict[str, float] = {}  # topic table → when its missing topic was last logged
        self._undeclared: dict[str, set[str]] = {}  # table → undeclared field names seen (and labelled)
        # (revision, when applied, when built, the tables): a catalog whose database was made again
        # numbers its revisions from 1 again, so the revision alone does not name a pipeline.
        self._tables_cache: tuple[tuple[int, datetime], float, list[IngestTable]] | None = None
        self._shared = SharedTables(
            self.access_for, self._committed, self._interval, self.options.max_records_per_batch
        )

    @property
    def spark(self) -> SparkSession:
        if self._spark is None:
            assert self._spark_factory is not None
            self._spark = self._spark_factory()
        return self._spark

    @property
    def spark_started(self) -> bool:
        return self._spark is not None

    # -- lifecycle --------------------------------------------------------------------------------

    def stop(self) -> None:
        self._stop.set()

    def run(self, on_started: Callable[[list[IngestTable]], None] | None = None) -> None:
        """Reconcile until `stop()`; every query is stopped on the way out. `on_started` is called once,
        with the tables being ingested, when the first reconciliation's queries have each finished their
        first trigger (they read their topics' offsets): records produced from then on are picked up."""
        try:
            while not self._stop.is_set():
                try:
                    self.reconcile()
                except ClientError as exc:
                    log.warning("cannot read the pipeline from floe (will retry): %s", exc)
                if on_started is not None:
                    self._wait_first_triggers()
                    on_started(self.running_tables())
                    on_started = None
                self._lag.refresh(self.running_tables())
                report_watermarks(
                    self._lag.observed, [t.name for t in self.running_tables()], self._client_of
                )
                self._commit_log.flush()
                self._stop.wait(self.options.poll_interval)
        finally:
            for name in list(self.running):
                self._stop_query(name)
            self._shared.stop()
            self._commit_log.flush(force=True)
            self._lag.close()
            for registry in self._registries.values():
                registry.close()

    def _wait_first_triggers(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        self._shared.wait_assigned(timeout)
        for running in list(self.running.values()):
            while (
                not self._stop.is_set()
                and running.query.isActive
                and running.query.lastProgress is None
                and time.monotonic() < deadline
            ):
                time.sleep(0.1)

    def _client_of(self, cluster: str) -> FloeClient:
        return self.access_for(cluster).client

    def running_tables(self) -> list[IngestTable]:
        return [r.table for r in self.running.values()] + self._shared.tables()

    def _interval(self, table: IngestTable) -> float:
        return self.options.commit_interval or table.commit_interval

    # -- reconciliation ---------------------------------------------------------------------------

    def desired(self) -> dict[str, IngestTable]:
        pipeline = self.catalog.pipeline()
        if pipeline is None:
            return {}
        # Building a thousand tables' settings (schemas, fingerprints) every poll cost more than the
        # poll: built again when the pipeline changes, or once a minute (certificates, registries).
        cached = self._tables_cache
        revision = (pipeline.revision, pipeline.applied_at)
        if cached is not None and cached[0] == revision and time.monotonic() - cached[1] < 60:
            tables = cached[2]
        else:
            tables = self.tables_of(pipeline)
            self._tables_cache = (revision, time.monotonic(), tables)
        if self.options.clusters:
            tables = [t for t in tables if t.cluster in self.options.clusters]
        return {t.name: t for t in tables if self._owns(t.name)}

    def reconcile(self) -> None:
        desired = self.desired()
        shared = {n: t for n, t in desired.items() if shared_consumer_reads(t)}
        desired = {n: t for n, t in desired.items() if n not in shared}
        for name in [n for n in shared if n in self.running]:  # a table that became shareable
            self._stop_query(name, between_batches=True)
        self._shared.set_tables([t for t in shared.values() if self._topic_ready(t)])
        for name, running in list(self.running.items()):
            wanted = desired.get(name)
            if wanted is None:
                log.info("%s left the pipeline: stopping its ingestion", name)
                self._stop_query(name, between_batches=True)
                self._throughput.forget(name)
                metrics.PROBLEMS.clear(name)
            elif wanted.fingerprint != running.table.fingerprint:
                log.info("%s changed (schema or settings): restarting its ingestion", name)
                self._stop_query(name, between_batches=True)
            elif not running.query.isActive or running.writer.commits.error is not None:
                error = running.query.exception() or running.writer.commits.error
                # The exception's first line says why; the rest (Spark's dump of the query plan, the Java
                # stack) is in the Spark log.
                reason = str(error).strip().splitlines()[0] if error is not None else "no error"
                metrics.PROBLEMS.report(name, f"ingestion query stopped: {reason}")
                metrics.QUERY_RESTARTS.labels(name).inc()
                self._stop_query(name)
                count = self._failures.get(name, (0, 0.0))[0] + 1
                self._failures[name] = (count, time.monotonic() + min(60.0, 2.0**count))
        for name, table in desired.items():
            if name in self.running:
                continue
            failures = self._failures.get(name)
            if failures and time.monotonic() < failures[1]:
                continue
            if not self._topic_ready(table):
                continue
            try:
                self._start_query(table)
            except Exception as exc:  # one table's bad settings must not stop the others
                metrics.PROBLEMS.report(name, f"cannot start ingestion: {exc}")
                count = (failures or (0, 0.0))[0] + 1
                self._failures[name] = (count, time.monotonic() + min(60.0, 2.0**count))
        metrics.TABLES.set(len(self.running) + len(self._shared.tables()))

    def _topic_ready(self, table: IngestTable) -> bool:
        """Whether the table's topic exists (created first on a broker floe runs); a missing one is
        logged at most once a minute and shown by the `floe_ingest_topic_missing` metric."""
        try:
            exists = bool(self._lag.partitions(table))
            if not exists and table.consumer_config.get("bootstrap.servers") in self.options.create_topics_at:
                create_topic(table)
                log.info("%s: created topic %s on floe's broker", table.name, table.topic)
                exists = True
        except Exception as exc:  # an unreachable cluster: the query's own start reports it
            log.debug("%s: topic check: %s", table.name, exc)
            return True
        metrics.TOPIC_MISSING.labels(table.name, table.topic).set(0 if exists else 1)
        if exists:
            self._missing_warned.pop(table.name, None)
            return True
        last = self._missing_warned.get(table.name)
        if last is None or time.monotonic() - last >= MISSING_TOPIC_WARNING_SECONDS:
            self._missing_warned[table.name] = time.monotonic()
            log.warning(
                "%s: topic %s does not exist on cluster %s; ingestion starts when it does",
                table.name,
                table.topic,
                table.cluster,
            )
        return False

    def _starting_offsets(self, table: IngestTable) -> str:
        client = self.access_for(table.cluster).client
        committed = client.next_offsets(table.warehouse, table.namespace, table.table, table.topic)
        self._lag.seed(table, committed)
        if not committed:
            return "earliest"
        partitions = self._lag.partitions(table)
        offsets = {str(p): committed.get(p, -2) for p in sorted(set(partitions) | set(committed))}
        return json.dumps({table.topic: offsets})

    def _start_query(self, table: IngestTable) -> None:
        registry = None
        if table.registry is not None:
            registry = self.registry_for(table.registry)
            # Unreachable, or refusing floe's credentials: one clear error now (the table is retried with
            # backoff), rather than a failed batch inside the streaming query.
            registry.check()
        if table.source_cluster is not None:
            # A refused login or certificate: one clear error now, rather than a failed Spark query.
            check_connection(table.source_cluster, table.consumer_config, table.topic)
        interval = self.options.commit_interval or table.commit_interval
        checkpoint = Path(tempfile.mkdtemp(prefix="checkpoint-", dir=self._state))
        batch = str(self.options.max_records_per_batch)
        reader = (
            self.spark.readStream.format("kafka")
            .options(**table.kafka_options)
            .option("subscribe", table.topic)
            .option("startingOffsets", self._starting_offsets(table))
            .option("includeHeaders", "true")
            # Records deleted by retention before floe read them cannot be recovered; keep going.
            .option("failOnDataLoss", "false")
            # The commit interval bounds how long a record waits, not the pace of a backlog: a full batch
            # starts as soon as the previous one is committed, a partial one once `interval` has passed
            # since the last batch (see `poll_delay_seconds`).
            .option("maxOffsetsPerTrigger", batch)
            .option("minOffsetsPerTrigger", batch)
            .option("maxTriggerDelay", f"{round(interval * 1000)}ms")
        )
        access = self.access_for(table.cluster)
        spark_catalog = register_warehouse(self.spark, access.connection, table.warehouse)
        writer = BatchWriter(
            table,
            access.client,
            registry,
            on_commit=self._committed,
            spark_catalog=spark_catalog,
            checkpoint=checkpoint,
        )
        if self.options.warm_up:
            self._warm_up(writer, spark_catalog)
        # Read by the query when it starts (its session is a copy of this one).
        self.spark.conf.set(POLLING_DELAY, f"{round(poll_delay_seconds(interval) * 1000)}ms")
        query = (
            reader.load()
            .writeStream.queryName(f"floe:{table.name}")
            .foreachBatch(writer)
            .option("checkpointLocation", str(checkpoint))
            .trigger(processingTime="0 seconds")
            .start()
        )
        self.running[table.name] = _Running(table, query, checkpoint, writer)
        log.info("%s: ingesting topic %s every %gs", table.name, table.topic, interval)

    def _warm_up(self, writer: BatchWriter, spark_catalog: str) -> None:
        """Before the query starts, run a batch's work once on a record that commits nothing: the batch
        path (decoding, the offsets filter, the statistics job) on a record below every offset, and an
        Iceberg write of it into a scratch table of a local catalog. The first real batch then finds the
        JVM's classes loaded and its code compiled: seconds off the first record after a start."""
        from pyspark.sql import functions as F

        from ingest.decode import KAFKA_COLUMN, user_fields

        scratch = self._state / "warm-up"
        try:
            self.spark.table(writer.table.spark_name(catalog=spark_catalog)).schema  # noqa: B018
            row: tuple[Any, ...] = (None, b"{}", writer.table.topic, 0, -10, None, 0, [])
            record = self.spark.createDataFrame([row], KAFKA_SOURCE_SCHEMA).withColumn(
                "timestamp", F.current_timestamp()
            )
            writer.write(record)  # below every committed offset: filtered out, nothing committed
            for key, value in {
                "": "org.apache.iceberg.spark.SparkCatalog",
                ".type": "hadoop",
                ".warehouse": scratch.resolve().as_uri(),
            }.items():
                self.spark.conf.set(f"spark.sql.catalog.{WARM_UP_CATALOG}{key}", value)
            columns = [F.col(f.name) for f in user_fields(writer.table.schema)] + [F.col(KAFKA_COLUMN)]
            decoded = writer.decode(record).select(*columns)
            decoded.writeTo(f"{WARM_UP_CATALOG}.scratch.t{abs(hash(writer.table.name))}").using(
                "iceberg"
            ).createOrReplace()
            if writer.writes_in_one_pass:
                # A one-pass table's later batches commit through floe's jar (staged appends): built
                # (javac, on a fresh cache) and loaded now rather than during the second batch.
                from ingest.jvm_decoder import STAGED_APPEND_CLASS_NAME, jar_class

                jar_class(self.spark, STAGED_APPEND_CLASS_NAME)
        except Exception as exc:  # only a warm-up: the query reports real problems
            log.debug("%s: warm-up: %s", writer.table.name, exc)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def _registry_client(self, connection: RegistryConnection) -> RegistryClient:
        client = self._registries.get(connection)
        if client is None:
            client = self._registries[connection] = RegistryClient(connection)
        return client

    def _stop_query(self, name: str, *, between_batches: bool = False) -> None:
        """Stop a table's query; with `between_batches`, first let it start no further batch and wait
        (up to `STOP_WAIT_SECONDS`) for the one it is running to end (`BatchGate`): stopping mid-batch
        interrupts its Spark jobs, which is safe (the batch's commit either happened or is retried by
        the next query) but makes Spark and py4j log the interruption as errors with stack traces, on
        every routine restart after a schema change."""
        running = self.running.pop(name, None)
        if running is None:
            return
        if between_batches and not running.writer.stop(STOP_WAIT_SECONDS):
            log.info("%s: its batch still runs after %.0f s: interrupting it", name, STOP_WAIT_SECONDS)
        elif not between_batches:
            running.writer.commits.drain(STOP_WAIT_SECONDS)  # a queued commit is not cut short
        try:
            running.query.stop()
        except Exception as exc:  # stopping a failed query can rethrow its failure
            log.debug("%s: stop: %s", name, exc)
        running.writer.commits.close()  # its thread would otherwise wait for commits forever
        shutil.rmtree(running.checkpoint, ignore_errors=True)

    def _committed(self, table: IngestTable, result: BatchResult) -> None:
        self._failures.pop(table.name, None)
        metrics.PROBLEMS.clear(table.name)
        now = time.time()
        for partition in result.end_offsets:
            labels = (table.name, table.topic, str(partition))
            metrics.COMMITTED_OFFSET.labels(*labels).set(result.end_offsets[partition])
        metrics.LAST_COMMIT.labels(table.name).set(now)
        metrics.RECORDS.labels(table.name, table.topic, "all").inc(result.records)
        metrics.BYTES.labels(table.name, table.topic, "all").inc(result.value_bytes)
        metrics.DEAD_LETTERS.labels(table.name, table.topic, "all").inc(result.dead_letters)
        if result.records_with_undeclared:
            self._count_undeclared(table, result)
        self._throughput.add(table.name, result.records, result.value_bytes, now)
        self._lag.committed(table, result)
        self._commit_log.committed(table, result)

    def _count_undeclared(self, table: IngestTable, result: BatchResult) -> None:
        """Count the undeclared fields; say once per field name that its values are not kept."""
        metrics.UNDECLARED_RECORDS.labels(table.name, table.topic, "all").inc(result.records_with_undeclared)
        seen = self._undeclared.setdefault(table.name, set())
        new: list[str] = []
        for name, count in sorted(result.undeclared_fields.items()):
            label = name
            if name not in seen:
                if len(seen) < metrics.MAX_UNDECLARED_LABELS:
                    new.append(name)
                else:
                    label = metrics.OTHER_FIELDS
            seen.add(label)
            metrics.UNDECLARED_FIELDS.labels(table.name, label).inc(count)
        if new:
            log.warning(
                "%s: records carry fields the table does not declare, not kept: %s "
                "(declare them in floe.yaml to keep them)",
                table.name,
                ", ".join(new),
            )


MISSING_TOPIC_WARNING_SECONDS = 60.0
# How long a restart waits for the running batch to end before interrupting it.
STOP_WAIT_SECONDS = 30.0
WARM_UP_CATALOG = "floe_warm_up"
# The rows Spark's Kafka source reads (with includeHeaders), for the warm-up batch.
KAFKA_SOURCE_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
    "timestampType int, headers array<struct<key: string, value: binary>>"
)


# How long a query waits before it looks for records again when it found too few for a batch, as a
# share of its commit interval and within bounds: each look is a Kafka end-offsets request and a trigger
# of Spark's engine (Spark's own default, 10 ms, made a hundred a second per idle table; 0.2 s cost an
# idle table 3.6 % of a core). A partial batch starts at most this long after its interval is up.
POLL_DELAY_SHARE = 0.25
POLL_DELAY_BOUNDS = (0.05, 1.0)
POLLING_DELAY = "spark.sql.streaming.pollingDelay"


def poll_delay_seconds(interval: float) -> float:
    """How long a query committing every `interval` seconds waits between looks for records.

    Its trigger runs batches back to back (`processingTime` 0): a batch starts as soon as the last one
    ends if a full batch of records is waiting (`minOffsetsPerTrigger`), or once `interval` has passed
    since the last one (`maxTriggerDelay`); only when neither holds does it wait this long. A
    `processingTime=interval` trigger held a backlog to one batch per interval, idling whenever a batch
    took less."""
    low, high = POLL_DELAY_BOUNDS
    return min(high, max(low, interval * POLL_DELAY_SHARE))


def create_topic(table: IngestTable, timeout: float = 30.0) -> None:
    """Create the table's topic with the broker's default partitions (an existing one is fine)."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    # librdkafka's own notes go through logging from warnings up, not raw onto the terminal.
    config: dict[str, Any] = {
        "bootstrap.servers": table.consumer_config["bootstrap.servers"],
        "logger": logging.getLogger("ingest.kafka"),
        "log_level": 4,
    }
    admin = AdminClient(config)
    future = admin.create_topics([NewTopic(table.topic)], request_timeout=timeout)[table.topic]
    try:
        future.result(timeout=timeout)
    except KafkaException as exc:
        error = exc.args[0]
        if not (isinstance(error, KafkaError) and error.code() == KafkaError.TOPIC_ALREADY_EXISTS):
            raise


class CommitLog:
    """Commits in the log without drowning it: a table's first commit as its own INFO line, then one
    line per table per `period` seconds summing the commits since (commits can come every 2 s)."""

    def __init__(self, period: float = 60.0) -> None:
        self.period = period
        self._lock = threading.Lock()
        self._seen: set[str] = set()
        # table → (commits, rows, dead letters, newest end offsets, window start)
        self._pending: dict[str, tuple[int, int, int, dict[int, int], float]] = {}

    def committed(self, table: IngestTable, result: BatchResult) -> None:
        with self._lock:
            if table.name not in self._seen:
                self._seen.add(table.name)
                log.info(
                    "%s: first commit, %d rows%s (offsets %s)",
                    table.name,
                    result.records,
                    f" and {result.dead_letters} dead letters" if result.dead_letters else "",
                    _offsets(result.end_offsets),
                )
                return
            commits, rows, dead, offsets, since = self._pending.get(
                table.name, (0, 0, 0, {}, time.monotonic())
            )
            self._pending[table.name] = (
                commits + 1,
                rows + result.records,
                dead + result.dead_letters,
                {**offsets, **result.end_offsets},
                since,
            )
        self.flush()

    def flush(self, force: bool = False) -> None:
        """Log the summaries whose period is over (every pending one when `force`). Called at every
        commit: it looks at the due ones only. `_pending` is in the order of the windows' starts (a
        table enters at its window's start, is updated in place, and leaves when logged), so the due
        ones are its first; looking at all of them was a thousand tables a commit."""
        now = time.monotonic()
        entries: list[tuple[str, tuple[int, int, int, dict[int, int], float]]] = []
        with self._lock:
            for name, pending in self._pending.items():
                if not force and now - pending[4] < self.period:
                    break
                entries.append((name, pending))
            for name, _ in entries:
                del self._pending[name]
        for name, (commits, rows, dead, offsets, since) in entries:
            log.info(
                "%s: %d commits, %d rows%s in the last %.0f s (offsets %s)",
                name,
                commits,
                rows,
                f", {dead} dead letters" if dead else "",
                now - since,
                _offsets(offsets),
            )


def _offsets(end_offsets: Mapping[int, int]) -> str:
    """Next offsets per partition, as `p0=120 p1=98`."""
    return " ".join(f"p{p}={o}" for p, o in sorted(end_offsets.items())) or "none"
