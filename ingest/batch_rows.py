"""Spark column expressions and jobs over a batch's rows for ingest/batches.py: the offsets filter, each
partition's progress, the one-pass write's observed counts and dead-letter stop, the dead letters'
precise reasons, the undeclared field names."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pyiceberg.schema import Schema

from ingest.decode import (
    ERROR_COLUMN,
    GENERIC_ERRORS,
    UNDECLARED_COLUMN,
    cached_columns,
    source,
    written_columns,
)
from ingest.ingest_table import BatchResult
from ingest.offset_log import BatchRange
from ingest.reasons import DeadLetterReasons

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, Observation, SparkSession

# The length of a record's value, observed (`counted_good_rows`).
VALUE_BYTES = "__floe_value_bytes"
# At most this many dead letters of a batch get their precise reason (worked out on the driver from
# their values); the others keep Spark's generic one. A whole topic of bad records stays cheap.
MAX_EXPLAINED = 10_000
# At most this many undeclared field names are reported per batch (the most frequent ones): keys of a
# JSON object used as a map would otherwise be unbounded.
MAX_UNDECLARED_NAMES = 20
# The message of the error that stops a one-pass append at its first dead letter.
DEAD_LETTER_FOUND = "floe: dead letter in a one-pass batch"


def offset_lookup(offsets: Mapping[int, int]) -> Column:
    """The committed next offset of the row's partition (-1 when the partition has none)."""
    from pyspark.sql import functions as F

    if not offsets:
        return F.lit(-1).cast("long")
    pairs: list[Column] = []
    for partition, offset in offsets.items():
        pairs += [F.lit(partition), F.lit(offset).cast("long")]
    return F.coalesce(
        F.try_element_at(F.create_map(*pairs), F.col(source("partition"))), F.lit(-1).cast("long")
    )


def batch_progress(raw: DataFrame, committed: Mapping[int, int] | None) -> list[Any]:
    """Per partition of the raw batch (internal column names), the records past `committed` (all of them
    when None): their lowest and highest offset and their record-time range."""
    from pyspark.sql import functions as F

    offset, timestamp = F.col(source("offset")), F.col(source("timestamp"))
    rows = raw if committed is None else raw.where(offset >= offset_lookup(committed))
    return (
        rows.groupBy(F.col(source("partition")).alias("partition"))
        .agg(
            F.min(offset).alias("min_offset"),
            F.max(offset).alias("max_offset"),
            F.max(timestamp).alias("max_ts"),
            F.min(F.unix_millis(timestamp)).alias("min_ts_ms"),
            F.max(F.unix_millis(timestamp)).alias("max_ts_ms"),
        )
        .collect()
    )


def has_undeclared() -> Column:
    """Whether a decoded row has fields the table does not declare."""
    from pyspark.sql import functions as F

    return F.coalesce(F.size(UNDECLARED_COLUMN), F.lit(0)) > 0


def counted_good_rows(batch: DataFrame, observation: Observation, *extra: Column) -> DataFrame:
    """`batch` as a one-pass write reads it: observed into `observation` (`records`, `undeclared`,
    `bytes`, and the `extra` aggregates), each row passing only if it is good — a dead letter stops the
    job, and Iceberg then aborts the write (nothing commits)."""
    from pyspark.sql import functions as F

    def build() -> tuple[Column, list[Column], Column]:
        counts = [
            F.count(F.lit(1)).alias("records"),
            F.count_if(has_undeclared()).alias("undeclared"),
            F.sum(VALUE_BYTES).alias("bytes"),
        ]
        is_good = F.col(ERROR_COLUMN).isNull()
        stop = F.when(is_good, F.lit(True)).otherwise(F.raise_error(F.lit(DEAD_LETTER_FOUND)))
        return F.length(source("value")), counts, stop

    value_bytes, counts, good_or_stop = cached_columns(batch.sparkSession, ("counted_good_rows",), build)
    # The value's length, not the value: Spark generates no code across the observation, so its rows
    # are copied out of the decoding stage, and with the value (1 KiB here) in them that copy (and the
    # value's, read again for its length) took ~10 % of a task's samples.
    sized = batch.withColumn(VALUE_BYTES, value_bytes).drop(source("value"))
    return sized.observe(observation, *counts, *extra).where(good_or_stop)


def table_columns(spark: SparkSession, schema: Schema) -> list[Column]:
    """The columns a batch writes (`written_columns`), built once per schema."""
    key = ("table_columns", schema.model_dump_json())
    return cached_columns(spark, key, lambda: written_columns(schema))


def one_pass_result(
    counts: Mapping[str, Any], end: dict[int, int], newest: dict[int, float], batch: DataFrame
) -> BatchResult:
    """A committed one-pass batch's result from its observed `counts`."""
    result = BatchResult(
        records=int(counts["records"] or 0),
        value_bytes=int(counts["bytes"] or 0),
        end_offsets=end,
        max_timestamps=newest,
        records_with_undeclared=int(counts["undeclared"] or 0),
    )
    if result.records_with_undeclared:
        # Decoded again: only batches with undeclared fields pay for their names.
        result.undeclared_fields = undeclared_names(batch.where(has_undeclared()))
    return result


def range_starts_after(
    offsets: BatchRange, main_committed: Mapping[int, int], dlq_committed: Mapping[int, int]
) -> bool:
    """`starts_after` for a batch whose range is known from the offset log."""
    firsts = {p: offsets.start.get(p) for p in offsets.partitions()}
    return firsts_after(firsts, main_committed, dlq_committed)


def starts_after(
    progress: list[Any], main_committed: Mapping[int, int], dlq_committed: Mapping[int, int]
) -> bool:
    """Whether no record of the batch is committed already, to the table or to its dead-letter table
    (every partition's lowest offset is at or past both): the batch then needs no offsets filter."""
    firsts = {int(row["partition"]): int(row["min_offset"]) for row in progress}
    return firsts_after(firsts, main_committed, dlq_committed)


def firsts_after(
    firsts: Mapping[int, int | None], main_committed: Mapping[int, int], dlq_committed: Mapping[int, int]
) -> bool:
    """Whether each partition's first offset is at or past what the table and its dead-letter table have
    committed (a first offset unknown — None — only where nothing is committed)."""
    for partition, first in firsts.items():
        committed = max(main_committed.get(partition, -1), dlq_committed.get(partition, -1))
        if (first is None and committed > 0) or (first is not None and first < committed):
            return False
    return True


def stopped_at_dead_letter(exc: BaseException) -> bool:
    """Whether a failed one-pass append was stopped by its dead-letter check (its message, or that of
    the Java exception behind it or any of their causes, says so)."""
    if DEAD_LETTER_FOUND in str(exc):
        return True
    java = getattr(exc, "_origin", None) or getattr(exc, "java_exception", None)
    for _ in range(20):
        if java is None:
            return False
        try:
            if DEAD_LETTER_FOUND in str(java.getMessage() or ""):
                return True
            java = java.getCause()
        except Exception:  # not a Java throwable after all
            return False
    return False


def explained(failed: DataFrame, reasons: DeadLetterReasons) -> DataFrame:
    """The dead letters with Spark's generic errors replaced by the precise reasons.

    The reasons are worked out on the driver, for the first MAX_EXPLAINED such records of the batch
    (their values are collected), and joined back by position: executors run no Python for JSON and Avro
    tables (README "Running on a Spark cluster"), and the good records never leave the JVM.
    """
    from pyspark.sql import functions as F

    generic = failed.where(F.col("error").isin(*GENERIC_ERRORS))
    rows = generic.select("partition", "offset", "value", "error").limit(MAX_EXPLAINED).collect()
    if not rows:
        return failed
    explained = failed.sparkSession.createDataFrame(
        [(r["partition"], r["offset"], reasons.refine(r["value"], r["error"])) for r in rows],
        "partition int, offset long, reason string",
    )
    joined = failed.join(F.broadcast(explained), ["partition", "offset"], "left")
    return joined.select(
        *[c for c in failed.columns if c != "error"], F.coalesce("reason", "error").alias("error")
    )


def undeclared_names(rows: DataFrame) -> dict[str, int]:
    """How many of `rows` carry each undeclared field name (the most frequent names only)."""
    from pyspark.sql import functions as F

    counted = (
        rows.select(F.explode(UNDECLARED_COLUMN).alias("name"))
        .groupBy("name")
        .count()
        .orderBy(F.desc("count"), "name")
        .limit(MAX_UNDECLARED_NAMES)
        .collect()
    )
    return {str(r["name"]): int(r["count"]) for r in counted}
