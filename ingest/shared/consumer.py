"""The shared consumer: one Kafka consumer for many tables of a source cluster, committed in transactions.

Spark runs a streaming query per table, and every batch of every table pays Spark's fixed cost (its
jobs, planning, the commit): at a hundred quiet tables the driver was saturated and freshness was
tens of seconds. Most topics are quiet, and a quiet table's records fit in memory many times over, so
`SharedIngest` reads every shared table's topic with one librdkafka consumer and buffers each table's
records. A table is due when its oldest buffered record has waited its commit interval (longer while
the consumer is behind its topic: `catch_up_due`); due tables,
oldest first, are written as Parquet (pyarrow, through the table's own pyiceberg FileIO) and committed
through floe's transaction endpoint, `TABLES_PER_TRANSACTION` tables to a transaction and up to
`COMMITS_IN_FLIGHT` transactions at once. The loop never waits for a whole round: it goes on reading
while floe commits, and a table whose transaction is in flight waits only for that one (its next batch
builds on the snapshot it adds). A table whose topic is idle costs nothing but its share of the
consumer's fetches.

Exactly once, as on the Spark path: each table (and its dead-letter table) carries its Kafka offsets
in its snapshot summary and floe refuses a commit that does not start where the table's stored
offsets end. When floe refuses a transaction or its answer is lost, each table of it is tried alone; a
table moved by another writer gets its batch prepared again on the new state; a table refused by the
offsets fence or whose state is unknown is read again from floe and its partitions re-read from floe's
offsets, so nothing is lost or written twice.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgspec

from catalog.client import ClientError
from ingest import metrics
from ingest.ingest_table import BatchResult, IngestTable
from ingest.shared.catch_up import catch_up_due, unread_records
from ingest.shared.tables import PreparedBatch, SharedTable, on_object_store, prepared_batch

if TYPE_CHECKING:
    from catalog.client import FloeClient

log = logging.getLogger(__name__)

TABLES_PER_TRANSACTION = 100
COMMITS_IN_FLIGHT = 3
# Tables of a transaction written at once on an object store: a table's three files are three uploads,
# each mostly waiting on the store with the GIL released (on a local disk, side by side gained nothing).
OBJECT_STORE_WRITERS = 8
# At most this many records buffered for one table: it is committed sooner, whatever its interval.
MAX_BUFFERED = 50_000
# At most this many bytes of values buffered in all: every table with records is committed then (a
# backlog across many topics would otherwise hold up to MAX_BUFFERED records of each in memory).
MAX_BUFFERED_BYTES = 128 * 1024 * 1024
POLL_SECONDS = 0.2
# How long a poll may wait while transactions are in flight: librdkafka's consume() waits its whole
# timeout unless it fills `num_messages`, so a 0.2 s wait delayed every landed transaction's successor.
POLL_IN_FLIGHT_SECONDS = 0.01
# Outcomes of a refused transaction (409): another writer moved a table, or the Kafka offsets fence.
MOVED, FENCED = "refused", "refused by the offsets fence"
# A batch refused because another writer moved its table is prepared again this many times at most.
REBASES = 3
REBASE_FAILED = "refused again after rebasing"
PARTITIONS_REFRESH_SECONDS = 60.0
RECONCILE_RETRY_SECONDS = 10.0
# A table's topic the consumer's metadata does not show yet (just created: the broker's metadata lags
# the controller's answer) is looked for again after 1, 2, 4 … seconds, not at the next minute's refresh.
MISSING_TOPIC_RETRY_SECONDS = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0)
# Each fetch of the consumer's session costs the broker a look at every assigned partition: with a
# fetch answered as soon as one byte is there, a thousand quiet partitions had the broker looking
# hundreds of times a second. A fetch is answered once 1 MiB is there or after 500 ms.
FETCH_BATCHING = {"fetch.min.bytes": 1024 * 1024, "fetch.wait.max.ms": 500}


@dataclass
class InFlight:
    """A transaction sent to floe whose answer is not applied yet."""

    warehouse: str
    batches: list[PreparedBatch]
    sent: Future[str]
    began: float = field(default_factory=time.monotonic)  # its tables' writing started


class SharedIngest:
    """Ingests the shared tables of one source cluster (see the module doc) on a thread of its own.

    `open_table(table)` returns a table's `SharedTable` with its appenders loaded and its committed
    offsets read from floe; `client` sends the transactions; `on_commit` is told of each committed
    batch, as the Spark path's writers tell the service."""

    def __init__(
        self,
        cluster: str,
        consumer_config: dict[str, Any],
        client: FloeClient,
        open_table: Callable[[IngestTable], SharedTable],
        on_commit: Callable[[IngestTable, BatchResult], None],
        interval_of: Callable[[IngestTable], float],
        prefix_of: Callable[[str], str],
        max_records_per_batch: int = MAX_BUFFERED,
    ) -> None:
        self.cluster = cluster
        # A table's batch holds at most this many records (`--max-records-per-batch`, as a Spark
        # query's maxOffsetsPerTrigger): a backlog is committed in several batches, one after the other.
        self._max_records = max(1, min(max_records_per_batch, MAX_BUFFERED))
        self._consumer_config = consumer_config
        self._client = client
        self._open_table = open_table
        self._on_commit = on_commit
        self._interval_of = interval_of
        self._prefix_of = prefix_of
        self._lock = threading.Lock()
        self._wanted: dict[str, IngestTable] = {}
        self._changed = threading.Event()
        self.tables: dict[str, SharedTable] = {}  # by table name; the loop's own
        self._by_topic: dict[str, list[SharedTable]] = {}
        self._assigned: dict[tuple[str, int], int] = {}  # (topic, partition) → offset assigned at
        self._partitions: dict[str, list[int]] = {}  # the assigned partitions by topic
        self._missing_looks = 0  # reconciles in a row that found a table's topic missing
        self._catching_up = 0  # tables `_due` held past their interval in this dispatch pass
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._retry_at: dict[str, tuple[int, float]] = {}  # table → (failures in a row, next try)
        self.assigned = threading.Event()  # set once the first tables' partitions are assigned
        self.transactions = 0
        self._in_flight: list[InFlight] = []  # oldest first
        self._busy: set[str] = set()  # tables with a batch in `_in_flight`
        self._polled_at = time.monotonic()  # when the consumer was last asked for records
        self._sender = ThreadPoolExecutor(
            max_workers=COMMITS_IN_FLIGHT, thread_name_prefix=f"floe-commit-{cluster}"
        )
        self._writers = ThreadPoolExecutor(
            max_workers=OBJECT_STORE_WRITERS, thread_name_prefix=f"floe-write-{cluster}"
        )
        # The cluster's metadata is asked for off the loop (at 1,000 topics the answer kept the loop, and
        # so every table, waiting 1.5-2 s a minute on a busy machine), through a client of its own:
        # confluent-kafka lets one call at a time into a client, and the loop's polls kept a lookup
        # on the consumer waiting for ever.
        self._lookups = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"floe-metadata-{cluster}")

    # -- control (any thread) ---------------------------------------------------------------------

    def set_tables(self, tables: Iterable[IngestTable]) -> None:
        """The tables to ingest from now on: new ones start, missing ones stop (others go on)."""
        with self._lock:
            self._wanted = {t.name: t for t in tables}
        self._changed.set()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"floe-shared-{self.cluster}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop after committing what is buffered (within `timeout` seconds)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    # -- the loop ---------------------------------------------------------------------------------

    def _run(self) -> None:
        from confluent_kafka import Consumer

        config = {
            **FETCH_BATCHING,
            **self._consumer_config,
            "group.id": "floe-shared-ingest",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
            "logger": logging.getLogger("ingest.kafka"),
            "log_level": 4,
        }
        consumer = Consumer(config)
        # Never subscribed nor assigned: it joins no group. Its failures are the lookup's exception.
        lookups = Consumer({**{k: v for k, v in config.items() if k != "logger"}, "log_level": 0})
        refreshed = 0.0
        asked: Future[Any] | None = None  # the lookup on its way
        try:
            while not self._stop.is_set():
                retry = min((at for _, at in self._retry_at.values()), default=float("inf"))
                now = time.monotonic()
                due = self._changed.is_set() or now - refreshed > PARTITIONS_REFRESH_SECONDS or now >= retry
                if due and asked is None:
                    self._changed.clear()
                    asked = self._lookups.submit(lookups.list_topics, timeout=10)
                if asked is not None and asked.done():
                    lookup, asked = asked, None
                    refreshed = self._reconcile_with(consumer, lookup)
                self._settle_landed(consumer)
                buffered = sum(t.buffered_bytes for t in self.tables.values())
                if buffered < MAX_BUFFERED_BYTES:
                    self._poll(consumer)
                elif self._in_flight:  # memory full: wait for floe rather than read more
                    self._settle(self._in_flight.pop(0), consumer)
                self._dispatch(consumer, due_only=buffered < MAX_BUFFERED_BYTES)
            self._drain(consumer)
            while any(t.buffer for t in self.tables.values()):
                self._dispatch(consumer, due_only=False)
                self._drain(consumer)
        except Exception:
            log.exception("shared ingestion of cluster %s stopped", self.cluster)
            raise
        finally:
            if asked is not None:  # closed only once no other thread uses it
                wait([asked])
            lookups.close()
            consumer.close()
            self._lookups.shutdown(wait=True)
            self._sender.shutdown(wait=True)
            self._writers.shutdown(wait=True)

    def _poll(self, consumer: Any) -> None:
        """Buffer what the consumer has. A record counts as waiting since the consumer was last asked
        (or since its own timestamp, if later): one that came while the loop was writing has waited."""
        since = self._polled_at
        timeout = POLL_IN_FLIGHT_SECONDS if self._in_flight else POLL_SECONDS
        messages = consumer.consume(num_messages=10_000, timeout=timeout)
        self._polled_at = time.monotonic()
        if not messages:
            return
        # Wall-clock record times on the monotonic clock, to compare with `since`.
        offset = time.monotonic() - time.time()
        by_topic = self._by_topic
        # Once per record at 100,000 records/s: the message kept as it is (`RecordColumns`), no call.
        for message in messages:
            if message.error() is not None:
                log.debug("consumer: %s", message.error())
                continue
            size = len(message)  # its value's bytes
            for shared in by_topic.get(message.topic(), ()):
                if not shared.buffer:
                    shared.first_buffered_at = _waiting_since(message, since, offset)
                shared.buffer.append(message)
                shared.buffered_bytes += size

    def assigned_partitions(self) -> dict[str, list[int]]:
        """The partitions the consumer reads, by topic (a copy; the loop's own changes)."""
        return {topic: list(partitions) for topic, partitions in self._partitions.items()}

    def _missing_topics_wait(self, missing: list[str]) -> float:
        """How much sooner than a minute the next reconcile comes: 1, 2, 4 … s while tables' topics are
        missing from the consumer's metadata, so a just-created topic is read within seconds."""
        if not missing:
            self._missing_looks = 0
            return 0.0
        wait = MISSING_TOPIC_RETRY_SECONDS[min(self._missing_looks, len(MISSING_TOPIC_RETRY_SECONDS) - 1)]
        self._missing_looks += 1
        log.debug("shared consumer of cluster %s: topics not in metadata yet: %s", self.cluster, missing)
        return PARTITIONS_REFRESH_SECONDS - wait

    def _wanted_now(self) -> dict[str, IngestTable]:
        with self._lock:
            return dict(self._wanted)

    def _to_open(self, wanted: dict[str, IngestTable]) -> Iterator[tuple[IngestTable, SharedTable | None]]:
        """The wanted tables a reconcile opens (new, or changed: with the open one), but those whose
        failed open is not due to be tried again; the clock is read as each is reached."""
        for name, table in wanted.items():
            current = self.tables.get(name)
            if current is not None and current.table.fingerprint == table.fingerprint:
                continue
            if time.monotonic() >= self._retry_at.get(name, (0, 0.0))[1]:
                yield table, current

    def _waits_for_in_flight(self, wanted: dict[str, IngestTable]) -> bool:
        """Whether reconciling `wanted` closes a table, reopens a changed one or opens one on a topic an
        open table reads (rewound): then what is in flight lands first. A new topic's table waits not."""
        if any(name not in wanted for name in self.tables):
            return True
        return any(current is not None or t.topic in self._by_topic for t, current in self._to_open(wanted))

    def _reconcile_with(self, consumer: Any, lookup: Future[Any]) -> float:
        """Reconcile with the metadata `lookup` brought; when the last reconcile counts as done (the next
        is due a minute after, or sooner while tables' topics are missing or the cluster is unreachable)."""
        wanted = self._wanted_now()
        # Only what touches a table in flight waits for it: the minute's look for partitions and a new
        # table did too, and stalled every table for seconds (1,000 tables).
        if self._waits_for_in_flight(wanted):
            self._drain(consumer)
        refreshed = time.monotonic()
        try:
            return refreshed - self._missing_topics_wait(self._reconcile(consumer, wanted, lookup.result))
        except Exception as exc:  # the cluster unreachable: its tables say so; tried again
            log.warning("shared consumer of cluster %s: %s (retried)", self.cluster, exc)
            return time.monotonic() - PARTITIONS_REFRESH_SECONDS + RECONCILE_RETRY_SECONDS

    def _reconcile(
        self, consumer: Any, wanted: dict[str, IngestTable], metadata: Callable[[], Any]
    ) -> list[str]:
        """Open the wanted tables not open yet, close the unwanted, assign their topics' partitions;
        the open tables' topics the cluster's metadata (`metadata()`, the lookup's answer) does not
        show (yet) are returned. A failed lookup raises once the tables are opened (each reports its
        own cluster's refusal: a wrong password, an untrusted certificate)."""
        from confluent_kafka import TopicPartition

        for name in [n for n in self.tables if n not in wanted]:
            log.info("%s left the pipeline: stopping its ingestion", name)
            self.tables.pop(name)
        opened: set[str] = set()  # topics of tables opened now
        for name in [n for n in self._retry_at if n not in wanted]:
            self._retry_at.pop(name)
        for table, current in self._to_open(wanted):
            name = table.name
            failures = self._retry_at.get(name, (0, 0))[0]
            try:
                self.tables[name] = self._open_table(table)
                opened.add(table.topic)
                self._retry_at.pop(name, None)
                if current is not None:
                    log.info("%s changed (schema or settings): its ingestion took the change", name)
                else:
                    log.info(
                        "%s: ingesting topic %s through the shared consumer every %gs",
                        name,
                        table.topic,
                        self._interval_of(table),
                    )
            except Exception as exc:  # one table's problem must not stop the others
                self.tables.pop(name, None)
                # Retried with backoff, as a Spark query's start is: 2, 4, 8 … 60 s.
                self._retry_at[name] = (failures + 1, time.monotonic() + min(60.0, 2.0 ** (failures + 1)))
                metrics.PROBLEMS.report(name, f"cannot start ingestion: {exc}")  # logs it
        self._index_topics()
        wanted_at: dict[tuple[str, int], int] = {}
        if not self._by_topic and not self._assigned:
            self.assigned.set()
            return []
        topics = metadata().topics
        missing: list[str] = []
        for topic in self._by_topic:
            found = topics.get(topic)
            if found is None or found.error is not None or not found.partitions:
                missing.append(topic)
                # Assigned already (an error or a lag in this one answer): kept where it reads. Assigned
                # again from floe's offsets, it would read its buffered records a second time.
                wanted_at |= {(topic, p): self._assigned[(topic, p)] for p in self._partitions.get(topic, ())}
                continue
            for partition in found.partitions:
                wanted_at[(topic, partition)] = self._start_offset(topic, partition)
        gone = [TopicPartition(t, p) for (t, p) in self._assigned if (t, p) not in wanted_at]
        if gone:
            consumer.incremental_unassign(gone)
        new = [TopicPartition(t, p, o) for (t, p), o in wanted_at.items() if (t, p) not in self._assigned]
        if new:
            consumer.incremental_assign(new)
        already = {topic for topic, partition in self._assigned if (topic, partition) in wanted_at}
        self._assigned = wanted_at
        partitions: dict[str, list[int]] = {}
        for topic, partition in wanted_at:
            partitions.setdefault(topic, []).append(partition)
        self._partitions = partitions  # whole, for `assigned_partitions` on other threads
        # A table opened while its topic's partitions were assigned (changed, or sharing its topic with a
        # running table): the consumer is past floe's offsets for it; read the topic again from them.
        for topic in opened & already:
            self._rewind(topic, consumer)
        self.assigned.set()
        return missing

    def _due(self, shared: SharedTable, now: float, consumer: Any) -> bool:
        if not shared.buffer or shared.first_buffered_at is None:
            return False
        if len(shared.buffer) >= self._max_records:
            return True
        waited = now - shared.first_buffered_at
        interval = self._interval_of(shared.table)
        if waited < interval:  # most checks: no call into the consumer
            return False
        unread = unread_records(consumer, shared.table.topic, self._partitions.get(shared.table.topic, ()))
        due = catch_up_due(waited, interval, len(shared.buffer), unread)
        if not due:
            self._catching_up += 1
        return due

    def _dispatch(self, consumer: Any, *, due_only: bool) -> None:
        """Write and send the due tables (every table with records when not `due_only`) not in flight,
        oldest first, while fewer than COMMITS_IN_FLIGHT transactions are: a transaction spends much of
        its time waiting on the database and storage, and floe commits transactions of different tables
        side by side, so the next one's files are written meanwhile."""
        free = COMMITS_IN_FLIGHT - len(self._in_flight)
        if free <= 0:  # nothing can be sent (the loop comes back within POLL_IN_FLIGHT_SECONDS)
            return
        now = time.monotonic()
        self._catching_up = 0
        due = [
            s
            for s in self.tables.values()
            if s.buffer and s.table.name not in self._busy and (not due_only or self._due(s, now, consumer))
        ]
        metrics.SHARED_TABLES_WAITING.labels(self.cluster).set(len(due))
        if due_only:
            metrics.SHARED_TABLES_CATCHING_UP.labels(self.cluster).set(self._catching_up)
        if not due:
            return
        due.sort(key=lambda s: s.first_buffered_at or now)
        by_warehouse: dict[str, list[SharedTable]] = {}
        for shared in due:
            by_warehouse.setdefault(shared.table.warehouse, []).append(shared)
        chunks = [
            (warehouse, tables[start : start + TABLES_PER_TRANSACTION])
            for warehouse, tables in by_warehouse.items()
            for start in range(0, len(tables), TABLES_PER_TRANSACTION)
        ]
        for warehouse, chunk in chunks[:free]:
            began = time.monotonic()
            batches = self._prepare_chunk(chunk, consumer)
            if not batches:
                continue
            changes = [c for b in batches for c in b.changes()]
            sent = self._sender.submit(self._send, warehouse, changes)
            self._in_flight.append(InFlight(warehouse, batches, sent, began))
            self._busy.update(b.table.table.name for b in batches)

    def _settle_landed(self, consumer: Any) -> None:
        """Apply the answers floe has given (the loop does not wait for the others)."""
        for pending in [p for p in self._in_flight if p.sent.done()]:
            self._in_flight.remove(pending)
            self._settle(pending, consumer)

    def _drain(self, consumer: Any) -> None:
        """Wait for every transaction in flight and apply its answer."""
        while self._in_flight:
            self._settle(self._in_flight.pop(0), consumer)

    def _prepare_chunk(self, chunk: list[SharedTable], consumer: Any) -> list[PreparedBatch]:
        """The chunk's batches: written one table after the other, or `OBJECT_STORE_WRITERS` tables at
        once on an object store (each table by one thread: its appenders are its own). Buffers are taken
        and failures handled here, on the loop's thread, which owns them and the consumer."""
        taken = [(shared, time.monotonic(), shared.take(self._max_records)) for shared in chunk]
        side_by_side = len(chunk) > 1 and on_object_store(chunk)
        written = self._writers.map(prepared_batch, taken) if side_by_side else map(prepared_batch, taken)
        batches: list[PreparedBatch] = []
        for (shared, began, records), (batch, error) in zip(taken, written, strict=True):
            if error is not None:
                self._restart(shared, consumer, f"cannot write its batch: {error}")
            elif batch is not None:
                batch.started, batch.records = began, records
                batches.append(batch)
        return batches

    def _settle(self, pending: InFlight, consumer: Any) -> None:
        """Apply the outcome of a transaction: its tables may take their next batch after it."""
        try:
            self._apply(pending.warehouse, pending.batches, pending.sent.result(), consumer)
        finally:
            self._busy.difference_update(b.table.table.name for b in pending.batches)
        self.transactions += 1
        took = time.monotonic() - pending.began
        metrics.SHARED_TRANSACTION_SECONDS.labels(self.cluster).observe(took)
        log.debug("transaction %d: %d tables in %.2f s", self.transactions, len(pending.batches), took)

    def _apply(self, warehouse: str, batches: list[PreparedBatch], outcome: str, consumer: Any) -> None:
        if outcome == "committed":
            for batch in batches:
                self._committed(batch)
            return
        # Refused (one table's requirement or offsets failed: nothing landed) or unknown (it may have
        # landed): each table alone. A table refused alone after an unknown outcome may be refused
        # because the first attempt landed, so its files are only removed after two refusals.
        for batch in batches:
            alone = outcome if len(batches) == 1 else self._send(warehouse, batch.changes())
            if alone == "committed":
                self._committed(batch)
                continue
            refused = outcome in (MOVED, FENCED)  # nothing of the chunk landed
            if alone == MOVED and refused:
                # Only another writer's commit in the way: the same records on the table's new state.
                alone = self._rebase(warehouse, batch)
                if alone == "committed":
                    continue
            elif alone in (MOVED, FENCED) and refused:
                batch.table.refused(batch)
            refusals = (MOVED, FENCED, REBASE_FAILED)
            why = "floe refused its commit" if alone in refusals else f"its outcome is unknown: {alone}"
            self._restart(batch.table, consumer, why)

    def _rebase(self, warehouse: str, batch: PreparedBatch) -> str:
        """Prepare a batch refused because another writer moved its table again on the table's new
        state, and send it alone (up to REBASES times): the outcome of the last try."""
        outcome = MOVED
        for attempt in range(REBASES):
            try:
                rebased = batch.table.rebase(batch)
            except Exception as exc:  # cannot load or write: the restart reads everything again
                log.warning("%s: cannot rebase its batch: %s", batch.table.table.name, exc)
                return REBASE_FAILED
            if rebased is None:
                return "committed"  # nothing left to write: every record was already committed
            batch = rebased
            outcome = self._send(warehouse, batch.changes())
            if outcome == "committed":
                log.info(
                    "%s: moved by another writer; its batch went in on the new state", batch.table.table.name
                )
                self._committed(batch)
                return outcome
            if outcome != MOVED:
                break
            log.info("%s: moved by another writer again (try %d)", batch.table.table.name, attempt + 1)
        if outcome in (MOVED, FENCED):
            batch.table.refused(batch)
            return REBASE_FAILED
        return outcome

    def _send(self, warehouse: str, changes: list[msgspec.Raw]) -> str:
        """'committed'; MOVED (409: another writer moved a table); FENCED (409: the Kafka offsets
        fence refused it, another ingestion wrote these records); or why the outcome is unknown."""
        try:
            prefix = self._prefix_of(warehouse)
        except ClientError as exc:
            return str(exc)
        outcome = self._client.commit_transaction(prefix, changes)
        if outcome.committed:
            return "committed"
        if outcome.refused:
            return FENCED if outcome.fenced else MOVED
        return str(outcome)

    def _committed(self, batch: PreparedBatch) -> None:
        batch.table.committed(batch)
        # As the Spark path's: from decoding the table's records to floe's answer.
        metrics.BATCH_SECONDS.labels(batch.table.table.name).observe(time.monotonic() - batch.started)
        if batch.result.records or batch.result.dead_letters:
            self._on_commit(batch.table.table, batch.result)

    def _restart(self, shared: SharedTable, consumer: Any, why: str) -> None:
        """Drop the table's buffer, read it again from floe, re-read its partitions from its offsets."""

        name = shared.table.name
        log.warning("%s: %s; re-reading from floe's offsets", name, why)
        metrics.PROBLEMS.report(name, f"ingestion restarted: {why}")
        metrics.QUERY_RESTARTS.labels(name).inc()
        shared.take()
        try:
            self.tables[name] = self._open_table(shared.table)
        except Exception:
            self.tables.pop(name, None)
            self._retry_at[name] = (1, time.monotonic() + 2.0)  # opened again by the next reconcile
        self._index_topics()
        if name in self.tables:
            self._rewind(shared.table.topic, consumer)

    def _index_topics(self) -> None:
        """`_by_topic`, the open tables by topic (where `_buffer` puts each record), from `tables`."""
        self._by_topic = {}
        for shared in self.tables.values():
            self._by_topic.setdefault(shared.table.topic, []).append(shared)

    def _start_offset(self, topic: str, partition: int) -> int:
        """Where a partition is read from: the lowest next offset its topic's tables have in floe."""
        from confluent_kafka import OFFSET_BEGINNING

        return min(t.main_next.get(partition, OFFSET_BEGINNING) for t in self._by_topic[topic])

    def _rewind(self, topic: str, consumer: Any) -> None:
        """Read `topic` again from the lowest offset its tables have committed to floe: a table opened
        afresh (restarted, changed, added back) starts where floe says it ends, never where the consumer
        happens to be. The topic's other tables drop their buffers (they are read again; each skips what
        it holds already)."""
        from confluent_kafka import TopicPartition

        tables = self._by_topic.get(topic, [])
        for other in tables:
            other.take()
        for assigned_topic, partition in list(self._assigned):
            if assigned_topic != topic or not tables:
                continue
            offset = self._start_offset(topic, partition)
            try:
                consumer.seek(TopicPartition(topic, partition, offset))
            except Exception as exc:  # not fetched yet: assigned again at the offset instead
                log.debug("seek %s[%d]: %s", topic, partition, exc)
                consumer.incremental_unassign([TopicPartition(topic, partition)])
                consumer.incremental_assign([TopicPartition(topic, partition, offset)])
            self._assigned[(topic, partition)] = offset


def _waiting_since(message: Any, since: float, clock_offset: float) -> float:
    """When a table's first buffered record began to wait (monotonic): since the consumer was last asked
    (`since`), or its own timestamp if later, never later than now (a producer's clock may be ahead)."""
    kind, timestamp = message.timestamp()
    now = time.monotonic()
    if kind == 0:  # no timestamp (a message format older than Kafka 0.10)
        return now
    return max(since, min(now, float(timestamp) / 1000 + clock_offset))
