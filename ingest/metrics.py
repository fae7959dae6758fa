"""Prometheus metrics of the ingestion service, per table and partition (scraped by `floe status`).

`floe_ingest_partition_time_lag_seconds` follows WarpStream Tableflow's
`warpstream_tableflow_partition_time_lag_seconds`: how far behind the newest record a partition's
committed data is — 0 when every produced record is committed, else the time since the newest
committed record was produced (so an idle partition with a backlog shows its age growing).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from threading import Lock

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REGISTRY = CollectorRegistry()
_TP = ("table", "topic", "partition")

RECORDS = Counter("floe_ingest_records", "Records committed to the table", _TP, registry=REGISTRY)
BYTES = Counter("floe_ingest_bytes", "Kafka value bytes committed to the table", _TP, registry=REGISTRY)
DEAD_LETTERS = Counter(
    "floe_ingest_dead_letters", "Records committed to the dead-letter table", _TP, registry=REGISTRY
)
UNDECLARED_RECORDS = Counter(
    "floe_ingest_records_with_undeclared_fields",
    "Records committed with top-level fields the table does not declare (those fields are not kept)",
    _TP,
    registry=REGISTRY,
)
UNDECLARED_FIELDS = Counter(
    "floe_ingest_undeclared_field_records",
    "Records committed with this undeclared field (its value is not kept)",
    ("table", "field"),
    registry=REGISTRY,
)
# Distinct `field` labels per table at most (a JSON object used as a map has unbounded keys); the rest
# are counted as OTHER_FIELDS.
MAX_UNDECLARED_LABELS = 50
OTHER_FIELDS = "(other)"
OFFSET_LAG = Gauge(
    "floe_ingest_partition_offset_lag", "Records produced but not yet committed", _TP, registry=REGISTRY
)
TIME_LAG = Gauge(
    "floe_ingest_partition_time_lag_seconds",
    "Seconds the committed data is behind the partition's newest record (0 when caught up)",
    _TP,
    registry=REGISTRY,
)
GROUP_INSTANCES = Gauge(
    "floe_ingest_group_instances",
    "Live `floe ingest --shard auto` instances of this instance's group, as the catalog last answered",
    registry=REGISTRY,
)
COMMITTED_OFFSET = Gauge(
    "floe_ingest_committed_offset", "Next offset the table has committed", _TP, registry=REGISTRY
)
LAST_COMMIT = Gauge(
    "floe_ingest_last_commit_timestamp_seconds",
    "When the table last committed",
    ("table",),
    registry=REGISTRY,
)
RECORDS_RATE = Gauge(
    "floe_ingest_records_per_second",
    "Records committed per second (last minute)",
    ("table",),
    registry=REGISTRY,
)
BYTES_RATE = Gauge(
    "floe_ingest_bytes_per_second",
    "Value bytes committed per second (last minute)",
    ("table",),
    registry=REGISTRY,
)
SHARED_TRANSACTION_SECONDS = Histogram(
    "floe_ingest_shared_transaction_seconds",
    "Time of one transaction of the shared consumer: its tables' files written and floe's answer",
    ("cluster",),
    registry=REGISTRY,
    buckets=(0.25, 0.5, 1, 2, 4, 8, 16, 32, 64),
)
SHARED_TABLES_WAITING = Gauge(
    "floe_ingest_shared_tables_waiting",
    "Tables of the shared consumer due for a commit and not yet sent (a backlog here means floe or "
    "the writing is the limit)",
    ("cluster",),
    registry=REGISTRY,
)
SHARED_TABLES_CATCHING_UP = Gauge(
    "floe_ingest_shared_tables_catching_up",
    "Tables of the shared consumer past their commit interval whose batch grows because the consumer is "
    "behind their topic (up to 5 intervals; a standing count means the node does not keep up)",
    ("cluster",),
    registry=REGISTRY,
)
BATCH_SECONDS = Histogram(
    "floe_ingest_batch_seconds",
    "Time to decode and commit one micro-batch",
    ("table",),
    registry=REGISTRY,
    buckets=(0.25, 0.5, 1, 2, 4, 8, 16, 32, 64),
)
QUERY_RESTARTS = Counter(
    "floe_ingest_query_restarts", "Streaming queries restarted after a failure", ("table",), registry=REGISTRY
)
TOPIC_MISSING = Gauge(
    "floe_ingest_topic_missing",
    "1 while the table's topic does not exist on its cluster (its ingestion waits for it)",
    ("table", "topic"),
    registry=REGISTRY,
)
BATCHES = Counter(
    "floe_ingest_batches",
    "Micro-batches that committed records, by path: one_pass_staged (each value decoded once in the"
    " batch's only job, its range from Spark's offset log, the append staged and committed with what"
    " was observed while writing), one_pass (each value decoded once, counts observed during the"
    " append, offsets from a job over the records), one_pass_aborted (a dead letter stopped that"
    " append; the batch then went two_pass) or two_pass (decoded batch persisted, statistics job,"
    " dead letters first)",
    ("table", "path"),
    registry=REGISTRY,
)
MERGE_RETRIES = Counter(
    "floe_ingest_merge_retries",
    "Upsert merges planned again after losing a commit race with a concurrent rewrite (maintenance)",
    ("table",),
    registry=REGISTRY,
)
TABLES = Gauge("floe_ingest_tables", "Tables being ingested", registry=REGISTRY)


class Throughput:
    """Records and bytes per second over a sliding window, per table."""

    def __init__(self, window: float = 60) -> None:
        self.window = window
        self._events: dict[str, deque[tuple[float, int, int]]] = {}
        self._lock = Lock()

    def add(self, table: str, records: int, size: int, now: float | None = None) -> None:
        now = time.time() if now is None else now
        with self._lock:
            self._events.setdefault(table, deque()).append((now, records, size))
        self.publish(table, now)

    def publish(self, table: str, now: float | None = None) -> None:
        now = time.time() if now is None else now
        with self._lock:
            events = self._events.get(table, deque())
            while events and events[0][0] < now - self.window:
                events.popleft()
            records = sum(e[1] for e in events)
            size = sum(e[2] for e in events)
        RECORDS_RATE.labels(table).set(records / self.window)
        BYTES_RATE.labels(table).set(size / self.window)

    def forget(self, table: str) -> None:
        with self._lock:
            self._events.pop(table, None)


TABLE_ERROR = Gauge(
    "floe_ingest_table_error",
    "1 while the table cannot be ingested; the label `error` says why (floe status shows it)",
    ("table", "error"),
    registry=REGISTRY,
)


def _label(message: str, limit: int = 1000) -> str:
    """The metric's `error` label: the message's first line (a failed query's carries a Java stack)."""
    first = message.strip().splitlines()[0] if message.strip() else message
    return first if len(first) <= limit else first[: limit - 1] + "…"


class TableProblems:
    """Why tables cannot be ingested right now: logged once per distinct reason, and published as
    `floe_ingest_table_error` until the table commits again (or leaves the pipeline)."""

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self._log = logger or logging.getLogger("ingest")
        self._current: dict[str, str] = {}
        self._lock = Lock()

    def report(self, table: str, message: str) -> None:
        with self._lock:
            previous = self._current.get(table)
            if previous == message:
                return
            self._current[table] = message
        if previous is not None:
            TABLE_ERROR.remove(table, _label(previous))
        TABLE_ERROR.labels(table, _label(message)).set(1)
        self._log.error("%s: %s", table, message)

    def clear(self, table: str) -> None:
        with self._lock:
            previous = self._current.pop(table, None)
        if previous is not None:
            TABLE_ERROR.remove(table, _label(previous))

    def current(self) -> dict[str, str]:
        with self._lock:
            return dict(self._current)


# The ingestion service's: `ingest.tables` reports unresolvable credentials, the service the rest.
PROBLEMS = TableProblems(logging.getLogger("ingest.service"))
