"""Upsert tables: each micro-batch is merged into the table, which holds the topic's current state.

The semantics (`apply_batch` states them in plain Python; the tests hold the Spark path to them):

- a record's key is the table's `key_fields`, read from its value; a tombstone (null value) carries no
  value, so its key is read from the Kafka record key: a JSON object with those fields (optionally in
  Debezium's `{"schema": …, "payload": {…}}` wrapper), or, for a single key field, its plain value
  (`42`, `"abc"` or the raw text);
- within a batch the record with the highest offset per key wins (a key's records share a partition;
  the partition breaks a tie between partitions); across batches the later batch wins;
- the winner upserts the row, or deletes it (a tombstone, or a Debezium `d` event);
- a record whose key cannot be read is a dead letter;
- a table without `key_fields` is keyed by the Kafka record key itself: its bytes, as received, are the
  `_key` column (so `"42"` and `42` are different keys); a record without a record key is a dead letter.

The merge is Spark SQL `MERGE INTO` on a merge-on-read table (position deletes on format v2, deletion
vectors on v3: Iceberg picks them by the table's format version), committed as
one snapshot that carries the batch's Kafka offsets: the same exactly-once fence as appends (floe
refuses a commit that does not start where the table's stored offsets are). Spark's MERGE takes no
write options, so the offsets go in through Iceberg's session-level `snapshot-property` settings, set
on the streaming query's own session (each query has its own clone) for the one statement.

A MERGE loses a race when the maintenance worker commits a rewrite of the files it read (compaction
removed the data files its position deletes point at): Iceberg refuses it with a `ValidationException`
before anything reaches floe. The merge is then planned again on the table as it is now (the batch is
cached), for up to `MERGE_RETRY_SECONDS` (a maintenance pass commits its compaction of a hot table group
by group, each commit a lost race for a merge under way: the merge rides the pass out rather than failing
the streaming query, whose restart costs more), at most `MERGE_ATTEMPTS` runs. Only validation failures
are retried: floe refusing the Kafka offsets (a 409, `CommitFailedException`) or a commit whose outcome
is unknown must not be.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyiceberg.schema import Schema
from pyiceberg.types import NestedField

from ingest.decode import ERROR_COLUMN, KEY_COLUMN, source, spark_type, table_columns

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

# True for a record that deletes its key (a tombstone or a Debezium delete); only inside a batch.
DELETE_COLUMN = "_floe_delete"
_SESSION_SNAPSHOT_PROPERTY = "spark.sql.iceberg.snapshot-property."
_WRITE_SNAPSHOT_PROPERTY = "snapshot-property."

Key = tuple[Any, ...]
log = logging.getLogger(__name__)
# Runs of one batch's MERGE that lose a race with a concurrent rewrite before the batch fails.
MERGE_ATTEMPTS = 100
# How long a batch's merge keeps being planned again after lost races before the batch fails.
MERGE_RETRY_SECONDS = 300.0
_VALIDATION_EXCEPTION = "org.apache.iceberg.exceptions.ValidationException"


# -- the semantics, in plain Python ----------------------------------------------------------------


@dataclass(frozen=True)
class Change:
    """One keyed record: its position, its key, and its row (None: delete the key)."""

    partition: int
    offset: int
    key: Key
    row: Mapping[str, Any] | None


def latest_per_key(changes: Iterable[Change]) -> dict[Key, Change]:
    """The winning change of each key in one batch: the highest offset (then partition)."""
    latest: dict[Key, Change] = {}
    for change in changes:
        found = latest.get(change.key)
        if found is None or (change.offset, change.partition) > (found.offset, found.partition):
            latest[change.key] = change
    return latest


def apply_batch(
    state: Mapping[Key, Mapping[str, Any]], changes: Iterable[Change]
) -> dict[Key, Mapping[str, Any]]:
    """The table after merging one batch into `state` (key → row)."""
    after = dict(state)
    for key, change in latest_per_key(changes).items():
        if change.row is None:
            after.pop(key, None)
        else:
            after[key] = change.row
    return after


# -- Spark -----------------------------------------------------------------------------------------


def quote(name: str) -> str:
    """A Spark SQL identifier."""
    return "`" + name.replace("`", "``") + "`"


def merge_statement(target: str, source: str, keys: Sequence[str], columns: Sequence[str]) -> str:
    """The MERGE of a batch (one row per key, `_floe_delete` saying which delete) into the table."""
    on = " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in keys)
    updates = ", ".join(f"t.{quote(c)} = s.{quote(c)}" for c in columns)
    names = ", ".join(quote(c) for c in columns)
    values = ", ".join(f"s.{quote(c)}" for c in columns)
    flag = f"s.{quote(DELETE_COLUMN)}"
    return (
        f"MERGE INTO {target} t USING {source} s ON {on} "
        f"WHEN MATCHED AND {flag} THEN DELETE "
        f"WHEN MATCHED THEN UPDATE SET {updates} "
        f"WHEN NOT MATCHED AND NOT {flag} THEN INSERT ({names}) VALUES ({values})"
    )


def key_fields_of(schema: Schema) -> list[NestedField]:
    """The table's key: its identifier fields, in key order."""
    return [schema.find_field(field_id) for field_id in schema.identifier_field_ids]


def avro_key_places(writer_schema: str, key_fields: Sequence[NestedField]) -> list[str | None] | None:
    """Where each key field is in a key written with `writer_schema`: a record's field name, "" for the
    whole value (a primitive key of a single key field), None when absent; None when it cannot hold
    the key at all."""
    try:
        parsed = json.loads(writer_schema)
    except ValueError:
        return None
    if isinstance(parsed, dict) and parsed.get("type") == "record":
        names = {f.get("name") for f in parsed.get("fields", []) if isinstance(f, dict)}
        return [f.name if f.name in names else None for f in key_fields]
    return [""] if len(key_fields) == 1 else None


def record_key_columns(
    key_fields: Sequence[NestedField], key_writers: Mapping[int, str] | None = None
) -> list[Column]:
    """Each key field as read from the Kafka record key (NULL where the key does not hold it).

    `key_writers` are the Avro writer schemas (by registry id) of the batch's Confluent-framed keys: such
    a key is Avro, a record holding the key fields or, for a single key field, a primitive."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as st

    text = F.col(source("key")).cast("string")
    fields = st.StructType([st.StructField(f.name, spark_type(f.field_type), True) for f in key_fields])
    wrapped = st.StructType([st.StructField("payload", fields, True), *fields.fields])
    parsed = F.from_json(text, wrapped)
    columns = [
        F.coalesce(parsed.getField("payload").getField(f.name), parsed.getField(f.name)) for f in key_fields
    ]
    if len(key_fields) == 1:
        # A plain key: a JSON string ("abc"), or the value's text (42, abc); never a JSON object.
        (only,) = key_fields
        trimmed = F.trim(text)
        plain = F.when(trimmed.rlike(r'^".*"$'), F.regexp_extract(trimmed, r'^"(.*)"$', 1)).otherwise(trimmed)
        scalar = F.when(~trimmed.startswith("{"), plain.cast(spark_type(only.field_type)))
        columns = [F.coalesce(columns[0], scalar)]
    if key_writers:
        from pyspark.sql.avro.functions import from_avro

        key = F.col(source("key"))
        framed = (F.length(key) >= 5) & (F.substring(key, 1, 1) == F.lit(bytes([0])))
        schema_id = F.when(framed, F.conv(F.hex(F.substring(key, 2, 4)), 16, 10).cast("long"))
        payload = F.substring(key, 6, 2**31 - 1)  # the bytes after the 5-byte Confluent header
        for writer_id, writer_schema in key_writers.items():
            places = avro_key_places(writer_schema, key_fields)
            if places is None:
                continue
            record = from_avro(payload, writer_schema, {"mode": "PERMISSIVE"})
            for index, (f, place) in enumerate(zip(key_fields, places, strict=True)):
                value = F.lit(None) if place is None else record if place == "" else record.getField(place)
                # An Avro key of a known schema is read as Avro only, never as JSON or text.
                columns[index] = F.when(
                    schema_id == writer_id, value.cast(spark_type(f.field_type))
                ).otherwise(columns[index])
    return columns


def with_deletes(
    decoded: DataFrame, schema: Schema, key_writers: Mapping[int, str] | None = None
) -> DataFrame:
    """Decoded records with `_floe_delete`: a tombstone deletes the key its Kafka record key names, and
    is a dead letter when that key cannot be read (`key_writers`: see `record_key_columns`)."""
    from pyspark.sql import functions as F

    keys = key_fields_of(schema)
    tombstone = F.col(source("value")).isNull()
    if [f.name for f in keys] == [KEY_COLUMN]:
        return _with_record_key(decoded, tombstone)
    from_key = record_key_columns(keys, key_writers)
    missing = F.coalesce(
        *(F.when(column.isNull(), F.lit(f.name)) for f, column in zip(keys, from_key, strict=True))
    )
    names = ", ".join(f.name for f in keys)
    shape = (
        f"a JSON or registry Avro record with {names}"
        if len(keys) > 1
        else f"a JSON or registry Avro record with {names}, or its plain value"
    )
    error = F.when(
        missing.isNotNull(),
        F.concat(
            F.lit("tombstone without a usable key: the record key must be "),
            F.lit(shape),
            F.lit(" (missing or not readable: "),
            missing,
            F.lit(")"),
        ),
    )
    already = F.col(DELETE_COLUMN) if DELETE_COLUMN in decoded.columns else F.lit(False)
    result = decoded
    for f, column in zip(keys, from_key, strict=True):
        result = result.withColumn(f.name, F.when(tombstone, column).otherwise(F.col(f.name)))
    return result.withColumn(
        ERROR_COLUMN, F.when(tombstone, error).otherwise(F.col(ERROR_COLUMN))
    ).withColumn(DELETE_COLUMN, tombstone | F.coalesce(already, F.lit(False)))


def _with_record_key(decoded: DataFrame, tombstone: Column) -> DataFrame:
    """`with_deletes` for a table keyed by the Kafka record key: `_key` is the key's bytes; a record
    without a key (a tombstone too) is a dead letter."""
    from pyspark.sql import functions as F

    key = F.col(source("key"))
    error = (
        F.when(
            key.isNull() & tombstone,
            F.lit("tombstone without a record key: the table is keyed by the Kafka record key"),
        )
        .when(tombstone, F.lit(None).cast("string"))  # the decoder's "no value" does not apply: it deletes
        .when(key.isNull() & F.col(ERROR_COLUMN).isNull(), F.lit(_NO_RECORD_KEY))
        .otherwise(F.col(ERROR_COLUMN))
    )
    already = F.col(DELETE_COLUMN) if DELETE_COLUMN in decoded.columns else F.lit(False)
    return (
        decoded.withColumn(KEY_COLUMN, key)
        .withColumn(ERROR_COLUMN, error)
        .withColumn(DELETE_COLUMN, tombstone | F.coalesce(already, F.lit(False)))
    )


_NO_RECORD_KEY = "record has no key: the table is keyed by the Kafka record key (it has no key_fields)"


def latest_rows(good: DataFrame, keys: Sequence[str]) -> DataFrame:
    """One row per key: the record with the highest offset (then partition) of the batch."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    order = Window.partitionBy(*[F.col(k) for k in keys]).orderBy(
        F.col(source("offset")).desc(), F.col(source("partition")).desc()
    )
    return (
        good.withColumn("_floe_rank", F.row_number().over(order)).where("_floe_rank = 1").drop("_floe_rank")
    )


def lost_a_race(exc: BaseException) -> bool:
    """Whether `exc` is Iceberg refusing a commit that conflicts with one committed meanwhile (a
    `ValidationException` anywhere in the Java cause chain)."""
    java = getattr(exc, "java_exception", None)
    seen = 0
    while java is not None and seen < 20:  # a cause chain is short; never loop on a cyclic one
        if str(java.getClass().getName()) == _VALIDATION_EXCEPTION:
            return True
        java = java.getCause()
        seen += 1
    return _VALIDATION_EXCEPTION in str(exc)


def merge_batch(good: DataFrame, schema: Schema, target: str, write_options: Mapping[str, str]) -> int:
    """Merge a batch's good records into the upsert table `target`, as one snapshot whose summary
    carries `write_options`' `snapshot-property.*` entries (the batch's Kafka offsets). Returns how many
    runs lost a race with a concurrent rewrite and were planned again."""
    keys = [f.name for f in key_fields_of(schema)]
    columns = table_columns(schema)
    source = latest_rows(good, keys).select(*columns, DELETE_COLUMN)
    session = good.sparkSession
    view = f"floe_upsert_{uuid.uuid4().hex}"
    properties = {
        _SESSION_SNAPSHOT_PROPERTY + key[len(_WRITE_SNAPSHOT_PROPERTY) :]: value
        for key, value in write_options.items()
        if key.startswith(_WRITE_SNAPSHOT_PROPERTY)
    }
    source.createOrReplaceTempView(view)
    statement = merge_statement(target, quote(view), keys, columns)
    try:
        for key, value in properties.items():
            session.conf.set(key, value)
        started = time.monotonic()
        for attempt in range(1, MERGE_ATTEMPTS + 1):
            try:
                session.sql(statement)
                return attempt - 1
            except Exception as exc:
                out_of_time = time.monotonic() - started > MERGE_RETRY_SECONDS
                if attempt == MERGE_ATTEMPTS or out_of_time or not lost_a_race(exc):
                    raise
                log.info("%s: the merge lost a race with a concurrent rewrite, merging again", target)
        raise AssertionError("unreachable")  # the loop returns or raises
    finally:
        for key in properties:
            session.conf.unset(key)
        session.catalog.dropTempView(view)


__all__ = [
    "DELETE_COLUMN",
    "Change",
    "apply_batch",
    "avro_key_places",
    "key_fields_of",
    "latest_per_key",
    "latest_rows",
    "lost_a_race",
    "merge_batch",
    "merge_statement",
    "quote",
    "record_key_columns",
    "table_columns",
    "with_deletes",
]
