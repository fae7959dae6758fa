"""`floe ingest`: one Spark application that keeps every configured topic flowing into its table.

A supervisor loop polls floe's applied pipeline (floe.yaml) and keeps exactly one Structured Streaming
query per table: new tables start, removed tables stop, tables whose settings or schema changed restart
(so a schema migration applied while ingesting takes effect within one poll), and failed queries restart
with backoff. Each query starts from the offsets floe has committed for its table — the catalog is the
source of truth, so Spark checkpoints are per-run scratch and losing one loses nothing.
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
from pathlib import Path
from typing import TYPE_CHECKING, Any

from catalog.client import ClientError, FloeClient, Pipeline
from ingest import metrics
from ingest.batches import BatchResult, BatchWriter, IngestTable
from ingest.kafka_connection import check_connection
from ingest.registry_client import RegistryClient, RegistryConnection
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


@dataclass
class _Running:
    table: IngestTable
    query: StreamingQuery
    checkpoint: Path
    started_at: float = field(default_factory=time.monotonic)


class IngestService:
    """Supervises the streaming queries of every table in the applied pipeline.

    Registry-mode tables get their schema-registry client from `registry_for` (by default one
    `RegistryClient` per registry connection, kept for the service's lifetime so its schema cache is).
    """

    def __init__(
        self,
        spark: SparkSession,
        catalog: FloeClient,
        connection: CatalogConnection,
        tables_of: Callable[[Pipeline], list[IngestTable]],
        options: IngestOptions,
        registry_for: Callable[[RegistryConnection], RegistryClient] | None = None,
    ) -> None:
        self.spark = spark
        self.catalog = catalog
        self.connection = connection
        self.tables_of = tables_of
        self.options = options
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

    # -- lifecycle --------------------------------------------------------------------------------

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> None:
        """Reconcile until `stop()`; every query is stopped on the way out."""
        try:
            while not self._stop.is_set():
                try:
                    self.reconcile()
                except ClientError as exc:
                    log.warning("cannot read the pipeline from floe (will retry): %s", exc)
                self._lag.refresh(self.running_tables())
                self._stop.wait(self.options.poll_interval)
        finally:
            for name in list(self.running):
                self._stop_query(name)
            self._lag.close()
            for registry in self._registries.values():
                registry.close()

    def running_tables(self) -> list[IngestTable]:
        return [r.table for r in self.running.values()]

    # -- reconciliation ---------------------------------------------------------------------------

    def desired(self) -> dict[str, IngestTable]:
        pipeline = self.catalog.pipeline()
        if pipeline is None:
            return {}
        tables = self.tables_of(pipeline)
        if self.options.clusters:
            tables = [t for t in tables if t.cluster in self.options.clusters]
        return {t.name: t for t in tables}

    def reconcile(self) -> None:
        desired = self.desired()
        for name, running in list(self.running.items()):
            wanted = desired.get(name)
            if wanted is None:
                log.info("%s left the pipeline: stopping its ingestion", name)
                self._stop_query(name)
                self._throughput.forget(name)
                metrics.PROBLEMS.clear(name)
            elif wanted.fingerprint != running.table.fingerprint:
                log.info("%s changed (schema or settings): restarting its ingestion", name)
                self._stop_query(name)
            elif not running.query.isActive:
                error = running.query.exception()
                metrics.PROBLEMS.report(name, f"ingestion query stopped: {error}")
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
            try:
                self._start_query(table)
            except Exception as exc:  # one table's bad settings must not stop the others
                metrics.PROBLEMS.report(name, f"cannot start ingestion: {exc}")
                count = (failures or (0, 0.0))[0] + 1
                self._failures[name] = (count, time.monotonic() + min(60.0, 2.0**count))
        metrics.TABLES.set(len(self.running))

    def _starting_offsets(self, table: IngestTable) -> str:
        committed = self.catalog.next_offsets(table.warehouse, table.namespace, table.table, table.topic)
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
        reader = (
            self.spark.readStream.format("kafka")
            .options(**table.kafka_options)
            .option("subscribe", table.topic)
            .option("startingOffsets", self._starting_offsets(table))
            .option("includeHeaders", "true")
            # Records deleted by retention before floe read them cannot be recovered; keep going.
            .option("failOnDataLoss", "false")
            .option("maxOffsetsPerTrigger", str(self.options.max_records_per_batch))
        )
        spark_catalog = register_warehouse(self.spark, self.connection, table.warehouse)
        writer = BatchWriter(
            table, self.catalog, registry, on_commit=self._committed, spark_catalog=spark_catalog
        )
        query = (
            reader.load()
            .writeStream.queryName(f"floe:{table.name}")
            .foreachBatch(writer)
            .option("checkpointLocation", str(checkpoint))
            .trigger(processingTime=f"{interval:g} seconds")
            .start()
        )
        self.running[table.name] = _Running(table, query, checkpoint)
        log.info("%s: ingesting topic %s every %gs", table.name, table.topic, interval)

    def _registry_client(self, connection: RegistryConnection) -> RegistryClient:
        client = self._registries.get(connection)
        if client is None:
            client = self._registries[connection] = RegistryClient(connection)
        return client

    def _stop_query(self, name: str) -> None:
        running = self.running.pop(name, None)
        if running is None:
            return
        try:
            running.query.stop()
        except Exception as exc:  # stopping a failed query can rethrow its failure
            log.debug("%s: stop: %s", name, exc)
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
        self._throughput.add(table.name, result.records, result.value_bytes, now)
        self._lag.committed(table, result)


class LagTracker:
    """Offset and time lag per partition: Kafka's high watermarks against what the table committed."""

    def __init__(self) -> None:
        self._consumers: dict[str, Any] = {}
        self._committed: dict[tuple[str, int], tuple[int, float]] = {}  # (table, p) → (offset, max ts)
        self._started: dict[str, float] = {}  # table → when this run began ingesting it
        self._lock = threading.Lock()

    def _consumer(self, table: IngestTable) -> Any:
        from confluent_kafka import Consumer

        key = json.dumps(dict(table.consumer_config), sort_keys=True)
        consumer = self._consumers.get(key)
        if consumer is None:
            config = {
                **table.consumer_config,
                "group.id": "floe-lag-probe",
                "enable.auto.commit": False,
            }
            consumer = Consumer(config)
            self._consumers[key] = consumer
        return consumer

    def partitions(self, table: IngestTable) -> list[int]:
        metadata = self._consumer(table).list_topics(table.topic, timeout=10)
        topic = metadata.topics.get(table.topic)
        if topic is None or topic.error is not None:
            return []
        return sorted(topic.partitions)

    def seed(self, table: IngestTable, committed: Mapping[int, int]) -> None:
        """What the table had committed before this run (its records' times are unknown here)."""
        with self._lock:
            for partition, offset in committed.items():
                previous = self._committed.get((table.name, partition), (0, 0.0))
                self._committed[(table.name, partition)] = (max(offset, previous[0]), previous[1])
            self._started.setdefault(table.name, time.time())

    def committed(self, table: IngestTable, result: BatchResult) -> None:
        with self._lock:
            for partition, offset in result.end_offsets.items():
                previous = self._committed.get((table.name, partition), (0, 0.0))
                newest = max(previous[1], result.max_timestamps.get(partition, 0.0))
                self._committed[(table.name, partition)] = (offset, newest)

    def refresh(self, tables: list[IngestTable]) -> None:
        from confluent_kafka import TopicPartition

        for table in tables:
            try:
                consumer = self._consumer(table)
                for partition in self.partitions(table):
                    _, high = consumer.get_watermark_offsets(
                        TopicPartition(table.topic, partition), timeout=5, cached=False
                    )
                    with self._lock:
                        offset, newest = self._committed.get((table.name, partition), (0, 0.0))
                    lag = max(0, high - offset)
                    labels = (table.name, table.topic, str(partition))
                    metrics.OFFSET_LAG.labels(*labels).set(lag)
                    # Before this run's first commit the newest committed record's time is unknown:
                    # count from when ingestion of the table began (a lower bound).
                    since = newest or self._started.get(table.name, time.time())
                    metrics.TIME_LAG.labels(*labels).set(max(0.0, time.time() - since) if lag else 0.0)
            except Exception as exc:  # lag is best effort; ingestion goes on
                log.debug("lag of %s: %s", table.name, exc)

    def close(self) -> None:
        for consumer in self._consumers.values():
            consumer.close()
        self._consumers.clear()
