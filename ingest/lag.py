"""Offset and time lag per partition of every ingested table: Kafka's end offsets against what each
table has committed, as the `floe_ingest_offset_lag` and `floe_ingest_time_lag_seconds` metrics.

With a thousand tables a request per table (its topic's metadata, each partition's high watermark)
cost seconds a poll: each cluster's topics are listed once a poll (`METADATA_SECONDS`) and its end
offsets asked for all partitions in one `list_offsets` request.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from ingest import metrics
from ingest.ingest_table import BatchResult, IngestTable

log = logging.getLogger(__name__)

# How long one listing of a cluster's topics answers for (a poll's checks of all its tables).
METADATA_SECONDS = 2.0


class LagTracker:
    """Offset and time lag per partition: Kafka's high watermarks against what the table committed."""

    def __init__(self) -> None:
        self._consumers: dict[str, Any] = {}
        self._admins: dict[str, Any] = {}
        self._topics: dict[str, tuple[float, dict[str, list[int]]]] = {}  # config → (when, partitions)
        self._committed: dict[tuple[str, int], tuple[int, float]] = {}  # (table, p) → (offset, max ts)
        self._started: dict[str, float] = {}  # table → when this run began ingesting it
        # table → (the table, when its end offsets were read (epoch ms, before asking), {p: end offset}):
        # what ingestion reports to floe for the table's completeness watermark (ingest/watermark_report.py).
        self.observed: dict[str, tuple[IngestTable, int, dict[int, int]]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _key(table: IngestTable) -> str:
        return json.dumps(dict(table.consumer_config), sort_keys=True)

    def _consumer(self, table: IngestTable) -> Any:
        from confluent_kafka import Consumer

        key = self._key(table)
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
        """The partitions of the table's topic (none when it does not exist), from a listing of its
        cluster's topics at most `METADATA_SECONDS` old."""
        key = self._key(table)
        listed = self._topics.get(key)
        if listed is None or time.monotonic() - listed[0] > METADATA_SECONDS or table.topic not in listed[1]:
            metadata = self._consumer(table).list_topics(timeout=10)
            topics = {
                name: sorted(topic.partitions)
                for name, topic in metadata.topics.items()
                if topic.error is None
            }
            listed = self._topics[key] = (time.monotonic(), topics)
        return listed[1].get(table.topic, [])

    def _end_offsets(
        self, table: IngestTable, partitions: list[tuple[str, int]]
    ) -> dict[tuple[str, int], int]:
        """The end offsets of `partitions` of the table's cluster, in one request."""
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import AdminClient, OffsetSpec

        key = self._key(table)
        admin = self._admins.get(key)
        if admin is None:
            config: dict[str, Any] = {k: v for k, v in table.consumer_config.items() if k != "group.id"}
            admin = self._admins[key] = AdminClient(config)
        latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
        request = {TopicPartition(t, p): latest for t, p in partitions}
        found: dict[tuple[str, int], int] = {}
        for tp, future in admin.list_offsets(request, request_timeout=10).items():
            try:
                found[(tp.topic, tp.partition)] = future.result(timeout=15).offset
            except Exception as exc:  # a partition gone meanwhile: no lag for it this time
                log.debug("end offset of %s[%d]: %s", tp.topic, tp.partition, exc)
        return found

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
        by_cluster: dict[str, list[IngestTable]] = {}
        for table in tables:
            by_cluster.setdefault(self._key(table), []).append(table)
        for group in by_cluster.values():
            try:
                wanted = [(t.topic, p) for t in group for p in self.partitions(t)]
                # Taken before the request: every record appended before it is below the answer.
                observed_ms = int(time.time() * 1000)
                ends = self._end_offsets(group[0], sorted(set(wanted)))
            except Exception as exc:  # lag is best effort; ingestion goes on
                log.debug("lag of %s: %s", [t.name for t in group], exc)
                continue
            for table in group:
                seen = {p: ends[(table.topic, p)] for p in self.partitions(table) if (table.topic, p) in ends}
                if seen:
                    self.observed[table.name] = (table, observed_ms, seen)
                for partition in self.partitions(table):
                    high = ends.get((table.topic, partition))
                    if high is None:
                        continue
                    with self._lock:
                        offset, newest = self._committed.get((table.name, partition), (0, 0.0))
                    lag = max(0, high - offset)
                    labels = (table.name, table.topic, str(partition))
                    metrics.OFFSET_LAG.labels(*labels).set(lag)
                    # Before this run's first commit the newest committed record's time is unknown:
                    # count from when ingestion of the table began (a lower bound).
                    since = newest or self._started.get(table.name, time.time())
                    metrics.TIME_LAG.labels(*labels).set(max(0.0, time.time() - since) if lag else 0.0)

    def close(self) -> None:
        for consumer in self._consumers.values():
            consumer.close()
        self._consumers.clear()
        self._admins.clear()
