"""One micro-batch: decode, split good records from dead letters, commit both with their Kafka offsets.

Exactly-once rests on floe's catalog, not on Spark's checkpoint: before a batch is written, the
committed offsets of the table and of its dead-letter table are read from floe; records already
covered are dropped; each commit's snapshot summary carries the offsets it starts from and advances
to, and floe refuses (409) a commit whose start does not match what it has stored. The dead letters
are committed first, so a crash between the two commits is repaired by the next batch: the good
records are re-read from the table's (older) offsets and the dead letters are filtered out by the
dead-letter table's (newer) offsets.

A batch is written in one pass when it can be (`BatchWriter._write_in_one_pass`): each value is decoded
once, its counts are observed while the good records are written, and a dead letter among its records
makes that write fail before anything commits, so the batch is then written by the path above (dead
letters first). Its offsets come from Spark's offset log (`ingest.offset_log`) and its record times are
observed too, so the write is the batch's only job: Iceberg stages the data files instead of committing
them, and floe's jar commits them as one append with the summary (`_append_staged`). A query's first
batch (its range is not in the log) reads its offsets and record times from the raw records first (no
decoding) and appends with them.
Only a batch following one with dead letters goes straight to that path; so do upsert tables and
registry mode.

Upsert tables (`ingest.upsert`) take the same path up to the write: their good records (upserts and
deletes, deduplicated to the latest per key) are merged instead of appended, in one snapshot carrying
the same offsets.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from catalog.kafka_offsets import END_OFFSETS, MAX_TIMESTAMP, MIN_TIMESTAMP, START_OFFSETS, TOPIC
from ingest import metrics, upsert
from ingest.batch_flow import BatchGate, CommitQueue
from ingest.batch_rows import (
    DEAD_LETTER_FOUND,
    batch_progress,
    counted_good_rows,
    explained,
    offset_lookup,
    one_pass_result,
    range_starts_after,
    starts_after,
    stopped_at_dead_letter,
    table_columns,
    undeclared_names,
)
from ingest.debezium import decode_debezium_avro, decode_debezium_json
from ingest.decode import (
    ERROR_COLUMN,
    UNDECLARED_COLUMN,
    cached_columns,
    confluent_schema_id,
    decode_avro,
    decode_json,
    source,
    source_columns,
)
from ingest.ingest_table import BatchResult, IngestTable
from ingest.offset_log import BatchRange, batch_range
from ingest.reasons import DeadLetterReasons
from ingest.spark_logs import quiet_expected_failure

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from catalog.client import FloeClient
    from ingest.protobuf_decode import WriterSchema
    from ingest.registry_client import RegistryClient

log = logging.getLogger(__name__)

DLQ_COLUMNS = ("topic", "partition", "offset", "timestamp", "key", "value", "headers", "error", "failed_at")


# Iceberg's Spark write option that stages the written data files in its driver-side coordinator
# instead of committing them (floe commits them with the summary the write observed).
STAGE_OPTION = "rewritten-file-scan-task-set-id"
# A staged append observes each partition's newest record time with an aggregate of its own: beyond this
# many partitions in one batch, the batch's offsets come from a job over its records instead.
MAX_OBSERVED_PARTITIONS = 64


def _encode(offsets: Mapping[int, int]) -> str:
    return json.dumps({str(p): o for p, o in sorted(offsets.items())})


def _summary(
    topic: str,
    start: Mapping[int, int],
    end: Mapping[int, int],
    record_times: tuple[int, int] | None = None,
) -> dict[str, str]:
    """Write options that put the batch's Kafka progress (and its record-time range, epoch ms: what
    `snapshots/at?timestamp=` answers from) into its snapshot summary."""
    summary = {
        f"snapshot-property.{TOPIC}": topic,
        f"snapshot-property.{START_OFFSETS}": _encode(start),
        f"snapshot-property.{END_OFFSETS}": _encode(end),
    }
    if record_times is not None:
        summary[f"snapshot-property.{MIN_TIMESTAMP}"] = str(record_times[0])
        summary[f"snapshot-property.{MAX_TIMESTAMP}"] = str(record_times[1])
    return summary


def _record_times(stats: list[Any], partitions: set[int] | None = None) -> tuple[int, int] | None:
    """The record-time range (epoch ms) of the batch's records, or of those of `partitions`."""
    chosen = [r for r in stats if partitions is None or int(r["partition"]) in partitions]
    lows = [int(r["min_ts_ms"]) for r in chosen if r["min_ts_ms"] is not None]
    highs = [int(r["max_ts_ms"]) for r in chosen if r["max_ts_ms"] is not None]
    return (min(lows), max(highs)) if lows and highs else None


class BatchWriter:
    """The `foreachBatch` function of one table's streaming query."""

    def __init__(
        self,
        table: IngestTable,
        catalog: FloeClient,
        registry: RegistryClient | None = None,
        on_commit: Callable[[IngestTable, BatchResult], None] | None = None,
        spark_catalog: str = "floe",
        checkpoint: Path | None = None,
    ) -> None:
        self.spark_catalog = spark_catalog
        # The streaming query's checkpoint: its offset log gives each batch's Kafka range.
        self.checkpoint = checkpoint
        self.table = table
        self.catalog = catalog
        self.registry = registry
        self.on_commit = on_commit
        # Protobuf writer schemas by id, compiled once (registry mode).
        self.protobuf_writers: dict[int, WriterSchema] = {}
        # Whether the last batch had dead letters: the next one then skips the one-pass attempt.
        self.expect_dead_letters = False
        self.one_pass_batches = 0  # batches written in one pass (for tests and diagnosis)
        self.gate = BatchGate()  # closed when the query is to stop between batches
        self.commits = CommitQueue()  # staged appends being committed while the next batch runs

    def __call__(self, raw: DataFrame, batch_id: int) -> None:
        if not self.gate.enter():
            return  # the query is stopping: its next one reads these records again
        try:
            self.commits.check()
            started = time.monotonic()
            result = self.write(raw, batch_id)
            metrics.BATCH_SECONDS.labels(self.table.name).observe(time.monotonic() - started)
            if not result.queued:
                self._report(result)
        finally:
            self.gate.leave()

    def _report(self, result: BatchResult) -> None:
        if self.on_commit is not None and (result.records or result.dead_letters):
            self.on_commit(self.table, result)

    def stop(self, timeout: float) -> bool:
        """Start no further batch; wait (up to `timeout` seconds in all) for the batch under way and the
        commits queued. False when something still runs."""
        deadline = time.monotonic() + timeout
        if not self.gate.close(timeout):
            return False
        return self.commits.drain(max(0.0, deadline - time.monotonic()))

    def _schema_ids(self, raw: DataFrame) -> list[int]:
        """The distinct schema ids of the batch's Confluent-framed values (registry mode)."""
        return [
            int(row[0])
            for row in raw.select(confluent_schema_id(raw[source("value")]).alias("id"))
            .where("id IS NOT NULL")
            .distinct()
            .collect()
        ]

    def _registry(self) -> RegistryClient:
        if self.registry is None:
            raise ValueError(f"{self.table.name}: registry mode without a schema registry client")
        return self.registry

    def decode(self, raw: DataFrame) -> DataFrame:
        """The batch's records decoded (`raw` as the Kafka source reads it): the table's columns,
        `_kafka`, the decoding error and the source's columns under their internal names."""
        return self._decode(source_columns(raw))[0]

    def _key_writers(self, raw: DataFrame) -> dict[int, str]:
        """The registry's Avro schemas of the batch's tombstones' Confluent-framed record keys (a tombstone
        has no value to read its key from)."""
        from pyspark.sql import functions as F

        ids = [
            int(row[0])
            for row in raw.where(F.col(source("value")).isNull())
            .select(confluent_schema_id(F.col(source("key"))).alias("id"))
            .where("id IS NOT NULL")
            .distinct()
            .collect()
        ]
        writers: dict[int, str] = {}
        for schema_id in ids:
            try:
                found = self._registry().schema(schema_id)
            except LookupError:
                log.warning("%s: key schema id %d is not registered", self.table.name, schema_id)
                continue
            if found.schema_type == "AVRO":
                writers[schema_id] = found.schema_str
        return writers

    def _writer_schemas(self, raw: DataFrame) -> dict[int, str]:
        """The registry's schema of each schema id among the batch's values (an id it does not know is
        left out: those records become dead letters saying so)."""
        writers: dict[int, str] = {}
        for schema_id in self._schema_ids(raw):
            try:
                writers[schema_id] = self._registry().schema(schema_id).schema_str
            except LookupError:
                log.warning("%s: schema id %d is not registered", self.table.name, schema_id)
        return writers

    def _decode(self, raw: DataFrame) -> tuple[DataFrame, DeadLetterReasons]:
        """The decoded rows (`raw` has the internal column names), and what explains their failures."""
        decoded, reasons = self._decode_values(raw)
        if self.table.is_upsert:
            key_writers = self._key_writers(raw) if self.table.registry is not None else None
            decoded = upsert.with_deletes(decoded, self.table.schema, key_writers)
        return decoded, reasons

    def _decode_values(self, raw: DataFrame) -> tuple[DataFrame, DeadLetterReasons]:
        t = self.table
        if t.envelope == "debezium":
            # Debezium's errors name the event's problem already.
            reasons = DeadLetterReasons("debezium", t.schema)
            if t.source_format == "avro":
                return decode_debezium_avro(raw, t.schema, self._writer_schemas(raw)), reasons
            return decode_debezium_json(raw, t.schema), reasons
        if t.source_format == "protobuf":
            from ingest.protobuf_decode import decode_protobuf_table, registry_writers

            # The protobuf decoder's errors are precise already (it explains each value it rejects).
            reasons = DeadLetterReasons("protobuf", t.schema)
            if t.registry is not None:
                found, unusable = registry_writers(
                    self._registry(), self._schema_ids(raw), self.protobuf_writers
                )
                for schema_id, why in unusable.items():
                    log.warning("%s: schema id %d %s", t.name, schema_id, why)
                return decode_protobuf_table(raw, t.schema, writers=found, unusable=unusable), reasons
            if t.protobuf_inline is None:
                raise ValueError(f"{t.name}: inline protobuf table without its schema")
            decoded = decode_protobuf_table(
                raw, t.schema, inline=t.protobuf_inline, framed=t.protobuf_framing
            )
            return decoded, reasons
        if t.source_format == "json" and t.registry is not None:
            from ingest.json_schema_decode import decode_registry_json, json_schema_ids

            known = json_schema_ids(self._registry(), self._schema_ids(raw))
            reasons = DeadLetterReasons("json", t.schema, confluent_framing=True)
            return decode_registry_json(raw, t.schema, known), reasons
        if t.source_format == "json":
            return decode_json(raw, t.schema), DeadLetterReasons("json", t.schema)
        if t.source_format == "avro":
            if t.avro_schema is None:
                raise ValueError(f"{t.name}: Avro table without an Avro schema")
            writers = self._writer_schemas(raw) if t.registry is not None else None
            framing = t.confluent_framing or t.registry is not None
            decoded = decode_avro(
                raw, t.schema, t.avro_schema, confluent_framing=framing, writer_schemas=writers
            )
            reasons = DeadLetterReasons(
                "avro",
                t.schema,
                avro_schema=t.avro_schema,
                writer_schemas=writers,
                confluent_framing=framing,
            )
            return decoded, reasons
        raise ValueError(f"{t.name}: unsupported source format {t.source_format}")

    @property
    def writes_in_one_pass(self) -> bool:
        """Whether the table's batches are tried in one pass (appends decoded without a registry)."""
        return not (self.table.is_upsert or self.table.registry is not None)

    def write(self, raw: DataFrame, batch_id: int | None = None) -> BatchResult:
        """Write one batch (`raw` as the Kafka source reads it; `batch_id` its id in the query, whose
        offset log then gives its range): in one pass when it can be, else (or when the one-pass append
        met a dead letter, committing nothing) in two."""
        t = self.table
        queued = self.commits.end_offsets  # read first: a commit ending meanwhile is then in floe's
        main_committed = self.catalog.next_offsets(t.warehouse, t.namespace, t.table, t.topic)
        # The last batch's commit may still be under way: this batch starts where it leaves the table.
        main_committed = {
            p: max(main_committed.get(p, 0), queued.get(p, 0)) for p in {*main_committed, *queued}
        }
        dlq_committed = self.catalog.next_offsets(t.warehouse, t.namespace, t.dlq_table, t.topic)
        if self.writes_in_one_pass and not self.expect_dead_letters:
            offsets = None
            if self.checkpoint is not None and batch_id is not None:
                offsets = batch_range(self.checkpoint, batch_id, t.topic)
            result = self._write_in_one_pass(raw, main_committed, dlq_committed, offsets)
            if result is not None:
                self.one_pass_batches += 1
                if result.records:
                    path = "one_pass_staged" if result.staged else "one_pass"
                    metrics.BATCHES.labels(t.name, path).inc()
                return result
            metrics.BATCHES.labels(t.name, "one_pass_aborted").inc()
        result = self._write_in_two_passes(raw, main_committed, dlq_committed)
        if result.records or result.dead_letters:  # not the service's warm-up (a record committed already)
            metrics.BATCHES.labels(t.name, "two_pass").inc()
        self.expect_dead_letters = result.dead_letters > 0
        return result

    def _keep(self, main_committed: Mapping[int, int], dlq_committed: Mapping[int, int]) -> Column:
        """Whether a decoded row is not committed yet (good rows by the table's offsets, dead letters by
        the dead-letter table's)."""
        from pyspark.sql import functions as F

        main_from = offset_lookup(main_committed)
        dlq_from = F.greatest(main_from, offset_lookup(dlq_committed))
        offset = F.col(source("offset"))
        return F.when(F.col(ERROR_COLUMN).isNull(), offset >= main_from).otherwise(offset >= dlq_from)

    def _write_in_one_pass(
        self,
        raw: DataFrame,
        main_committed: Mapping[int, int],
        dlq_committed: Mapping[int, int],
        offsets: BatchRange | None = None,
    ) -> BatchResult | None:
        """Append the batch's good records with each value decoded once. With the batch's range from the
        offset log, one job: the append is staged, and committed with the record times observed while
        writing (`_append_staged`). Otherwise the offsets and record times of the summary come from a job
        over the raw records (no decode), and the counts are observed during the append.
        None, with nothing committed, when the batch holds a dead letter (the append fails at it)."""
        from pyspark.sql import Observation

        t = self.table
        raw = source_columns(raw)
        if (
            offsets is not None
            and len(offsets.partitions()) <= MAX_OBSERVED_PARTITIONS
            and range_starts_after(offsets, main_committed, dlq_committed)
        ):
            return self._append_staged(raw, offsets, main_committed)
        self._drain_commits()  # Spark's own append commits at once: after the queued ones
        # Every record the table may take (a dead letter would stop the append): progress per partition.
        # Usually the batch starts at the committed offsets (the query resumes from them and each batch
        # follows the last), and nothing needs filtering: the jobs then carry no offset literals, so
        # their generated code is the same every batch and Spark compiles it once, not per batch.
        progress = batch_progress(raw, None)
        if not starts_after(progress, main_committed, dlq_committed):
            progress = batch_progress(raw, main_committed)
            main_filter: Column | None = self._keep(main_committed, dlq_committed)
        else:
            main_filter = None
        if not progress:  # nothing past the table's offsets (a batch the table already holds)
            return BatchResult()
        end = {
            int(r["partition"]): max(main_committed.get(int(r["partition"]), 0), int(r["max_offset"]) + 1)
            for r in progress
        }
        start = {p: main_committed[p] for p in end if p in main_committed}
        decoded = self._decode(raw)[0]
        batch = decoded if main_filter is None else decoded.where(main_filter)
        observation = Observation(f"floe-batch-{t.name}-{time.monotonic_ns()}")
        checked = counted_good_rows(batch, observation)
        try:
            # A stop at a dead letter is expected: Spark is not to log it as a failed task.
            with quiet_expected_failure(raw.sparkSession, DEAD_LETTER_FOUND):
                checked.select(*table_columns(raw.sparkSession, t.schema)).writeTo(
                    t.spark_name(catalog=self.spark_catalog)
                ).options(**_summary(t.topic, start, end, _record_times(progress))).append()
        except Exception as exc:  # Spark's failure, converted or not by PySpark
            if not stopped_at_dead_letter(exc):
                raise
            log.info("%s: dead letters in the batch: they commit first, then the good records", t.name)
            return None
        newest = {int(r["partition"]): r["max_ts"].timestamp() for r in progress if r["max_ts"]}
        return one_pass_result(observation.get, end, newest, batch)

    def _append_staged(
        self, raw: DataFrame, offsets: BatchRange, main_committed: Mapping[int, int]
    ) -> BatchResult | None:
        """The one-pass append of a batch whose range is known and starts past everything committed: no
        job before the write. Spark writes the rows without committing (Iceberg stages the data files);
        the counts and record times are observed during that write; floe's jar then commits the files as
        one append whose summary carries the offsets and record-time range (`StagedAppend`)."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        from ingest.jvm_decoder import commit_staged_append, discard_staged_append

        t = self.table
        partitions = offsets.partitions()
        if not partitions:
            return BatchResult()
        end = {p: max(main_committed.get(p, 0), offsets.end[p]) for p in partitions}
        start = {p: main_committed[p] for p in end if p in main_committed}
        batch = self._decode(raw)[0]

        def record_times() -> list[Column]:
            partition, timestamp = F.col(source("partition")), F.col(source("timestamp"))
            return [
                F.min(F.unix_millis(timestamp)).alias("min_ts_ms"),
                F.max(F.unix_millis(timestamp)).alias("max_ts_ms"),
                # Epoch ms: an observed timestamp would arrive as a Java object.
                *[
                    F.max(F.when(partition == p, F.unix_millis(timestamp))).alias(f"max_ts_ms_{p}")
                    for p in partitions
                ],
            ]

        session = raw.sparkSession
        time_range = cached_columns(session, ("record_times", tuple(partitions)), record_times)
        observation = Observation(f"floe-batch-{t.name}-{time.monotonic_ns()}")
        checked = counted_good_rows(batch, observation, *time_range)
        target = t.spark_name(catalog=self.spark_catalog)
        file_set = f"floe-append-{uuid.uuid4()}"
        try:
            with quiet_expected_failure(session, DEAD_LETTER_FOUND):
                checked.select(*table_columns(session, t.schema)).writeTo(target).option(
                    STAGE_OPTION, file_set
                ).append()
        except Exception as exc:  # Spark's failure, converted or not by PySpark
            discard_staged_append(session, target, file_set)  # a failed write stages nothing; be sure
            if not stopped_at_dead_letter(exc):
                raise
            log.info("%s: dead letters in the batch: they commit first, then the good records", t.name)
            return None
        counts = observation.get
        records = int(counts["records"] or 0)
        if not records:  # offsets only (e.g. transaction markers): nothing to commit, as for a job's range
            discard_staged_append(session, target, file_set)
            return BatchResult()
        times = None
        if counts["min_ts_ms"] is not None and counts["max_ts_ms"] is not None:
            times = (int(counts["min_ts_ms"]), int(counts["max_ts_ms"]))
        summary = {
            key.removeprefix("snapshot-property."): value
            for key, value in _summary(t.topic, start, end, times).items()
        }
        newest = {p: int(ms) / 1000 for p in partitions if (ms := counts[f"max_ts_ms_{p}"]) is not None}
        result = one_pass_result(counts, end, newest, batch)
        result.staged = result.queued = True

        def commit() -> None:
            commit_staged_append(session, target, file_set, summary)
            self._report(result)

        self.commits.submit(commit, lambda: discard_staged_append(session, target, file_set), end)
        return result

    def _drain_commits(self) -> None:
        """Wait for the queued commits (before a commit that is not queued); raise if one failed."""
        self.commits.drain()
        self.commits.check()

    def _write_in_two_passes(
        self, raw: DataFrame, main_committed: Mapping[int, int], dlq_committed: Mapping[int, int]
    ) -> BatchResult:
        """Persist the decoded batch, read its statistics, commit its dead letters, then its good records."""
        self._drain_commits()
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        t = self.table
        # The Kafka source's columns under internal names: a table field `value` (or `offset`…) then
        # never collides with them (Spark's AMBIGUOUS_REFERENCE failed every batch).
        raw = source_columns(raw)
        if t.registry is not None:
            raw = raw.persist(StorageLevel.MEMORY_AND_DISK)
        decoded, reasons = self._decode(raw)
        is_good = F.col(ERROR_COLUMN).isNull()
        keep = self._keep(main_committed, dlq_committed)
        has_undeclared = is_good & (F.coalesce(F.size(UNDECLARED_COLUMN), F.lit(0)) > 0)
        # Persist the decoded rows with the keep flag computed, then filter the cached rows: a filter
        # on the decoded rows before the persist made Spark parse each value ~10 times (one from_json
        # per field read in the filter and projections; measured by benchmarks/ingest's diagnosis).
        cached = decoded.withColumn("_keep", keep).persist(StorageLevel.MEMORY_AND_DISK)
        batch = cached.where(F.col("_keep"))
        try:
            stats = (
                batch.groupBy(F.col(source("partition")).alias("partition"))
                .agg(
                    F.max(source("offset")).alias("max_offset"),
                    F.max(source("timestamp")).alias("max_ts"),
                    F.min(F.unix_millis(source("timestamp"))).alias("min_ts_ms"),
                    F.max(F.unix_millis(source("timestamp"))).alias("max_ts_ms"),
                    F.count_if(is_good).alias("good"),
                    F.count_if(~is_good).alias("bad"),
                    F.count_if(has_undeclared).alias("undeclared"),
                    F.sum(F.when(is_good, F.length(source("value"))).otherwise(0)).alias("bytes"),
                )
                .collect()
            )
            result = BatchResult()
            if not stats:
                return result
            batch_end = {int(r["partition"]): int(r["max_offset"]) + 1 for r in stats}
            result.records = sum(int(r["good"]) for r in stats)
            result.dead_letters = sum(int(r["bad"]) for r in stats)
            result.value_bytes = sum(int(r["bytes"] or 0) for r in stats)
            result.max_timestamps = {
                int(r["partition"]): r["max_ts"].timestamp() for r in stats if r["max_ts"]
            }
            result.records_with_undeclared = sum(int(r["undeclared"]) for r in stats)
            if result.records_with_undeclared:
                result.undeclared_fields = undeclared_names(batch.where(has_undeclared))
            if result.dead_letters:
                partitions = {int(r["partition"]) for r in stats if int(r["bad"])}
                start = {p: dlq_committed[p] for p in partitions if p in dlq_committed}
                end = {p: max(dlq_committed.get(p, 0), batch_end[p]) for p in partitions}
                failed = batch.where(~is_good).select(
                    *[F.col(source(c)).alias(c) for c in DLQ_COLUMNS[:-2]],
                    F.col(ERROR_COLUMN).alias("error"),
                )
                dead = explained(failed, reasons).withColumn("failed_at", F.current_timestamp())
                dead.writeTo(t.spark_name(t.dlq_table, self.spark_catalog)).options(
                    **_summary(t.topic, start, end, _record_times(stats, partitions))
                ).append()
            start = {p: main_committed[p] for p in batch_end if p in main_committed}
            end = {p: max(main_committed.get(p, 0), batch_end[p]) for p in batch_end}
            summary = _summary(t.topic, start, end, _record_times(stats))
            target = t.spark_name(catalog=self.spark_catalog)
            if t.is_upsert and result.records:
                retries = upsert.merge_batch(batch.where(is_good), t.schema, target, summary)
                if retries:
                    metrics.MERGE_RETRIES.labels(t.name).inc(retries)
            else:  # an append, or an upsert batch of dead letters only (its offsets still advance)
                good = batch.where(is_good).select(*upsert.table_columns(t.schema))
                good.writeTo(target).options(**summary).append()
            result.end_offsets = end
            return result
        finally:
            cached.unpersist()
            if t.registry is not None:
                raw.unpersist()
