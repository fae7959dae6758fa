"""Debezium change events (JSON) as upsert-table rows, as Spark column expressions.

A Debezium value is `{"before": {…}, "after": {…}, "op": …, "source": {…}, "ts_ms": …}`, or the same
inside `{"schema": {…}, "payload": {…}}` when the Kafka Connect JSON converter writes schemas. `op` `c`
(insert), `r` (snapshot read) and `u` (update) upsert `after`; `d` deletes the key held in `before`;
the tombstone Debezium sends after a delete deletes the key of its record key (see `ingest.upsert`).
The row gets `_cdc`: the op, `source.ts_ms` and the whole `source` block (connector, database, table and
its position: `lsn`, `file`/`pos`, …). Anything else (`t` truncate, `m` message, not an event) is a
dead letter with the reason.

The row values are read as the table's types; Debezium's own encodings (temporal types as epoch numbers,
decimals as bytes unless `decimal.handling.mode` is `string` or `double`) need matching column types.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyiceberg.schema import Schema

from catalog.pipelines.columns import CDC_COLUMN, INTERNAL_PREFIX
from ingest.decode import (
    ERROR_COLUMN,
    KAFKA_COLUMN,
    KAFKA_SOURCE_COLUMNS,
    UNDECLARED_COLUMN,
    kafka_struct,
    required_fields_error,
    spark_type,
    user_fields,
)
from ingest.decode import source as kafka_column  # `source` is also a Debezium event's member
from ingest.upsert import DELETE_COLUMN, key_fields_of

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

_CORRUPT = INTERNAL_PREFIX + "corrupt_record"
_EVENT = INTERNAL_PREFIX + "event"
UPSERT_OPS = ("c", "r", "u")
DELETE_OP = "d"


def row_fields(schema: Schema) -> Schema:
    """The fields a change event's `before`/`after` carry: the table's own (not `_kafka`, `_cdc`)."""
    return Schema(*(f for f in user_fields(schema) if f.name != CDC_COLUMN))


def decode_debezium_json(raw: DataFrame, schema: Schema) -> DataFrame:
    """Decode Debezium JSON change events into the table's columns, `_kafka`, `_cdc`, `_floe_delete` and
    the error (NULL for a change that applies), next to the raw Kafka columns (`raw` has their internal
    names, `ingest.decode.source_columns`)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as st

    fields = row_fields(schema)
    row = st.StructType([st.StructField(f.name, spark_type(f.field_type), True) for f in fields.fields])
    envelope = [
        st.StructField("before", row, True),
        st.StructField("after", row, True),
        st.StructField("op", st.StringType(), True),
        st.StructField("ts_ms", st.LongType(), True),
        st.StructField("source", st.MapType(st.StringType(), st.StringType(), True), True),
    ]
    value_type = st.StructType(
        [
            st.StructField("payload", st.StructType(envelope), True),
            *envelope,
            st.StructField(_CORRUPT, st.StringType(), True),
        ]
    )
    parsed = F.from_json(
        F.col(kafka_column("value")).cast("string"),
        value_type,
        {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT},
    )
    decoded = raw.withColumn(_EVENT, parsed)
    event = F.col(_EVENT)

    def member(name: str) -> Column:
        # With the schema wrapper the event is under `payload`; without, at the top level.
        return F.when(
            event.getField("payload").isNotNull(), event.getField("payload").getField(name)
        ).otherwise(event.getField(name))

    op, before, after, source = member("op"), member("before"), member("after"), member("source")
    is_upsert = op.isin(*UPSERT_OPS)
    is_delete = op == DELETE_OP
    record = F.when(is_delete, before).otherwise(after)
    keys = key_fields_of(schema)
    missing_key = F.coalesce(*(F.when(before.getField(k.name).isNull(), F.lit(k.name)) for k in keys))
    error = (
        F.when(F.col(kafka_column("value")).isNull(), F.lit("record has no value (tombstone)"))
        .when(event.getField(_CORRUPT).isNotNull(), F.lit("value is not a JSON Debezium change event"))
        .when(
            op.isNull(),
            F.lit(
                "value is not a Debezium change event (no op; for unwrapped rows, e.g. from Debezium's "
                "ExtractNewRecordState, use envelope: none)"
            ),
        )
        .when(
            ~(is_upsert | is_delete),
            F.concat(F.lit("Debezium op '"), op, F.lit("' is not applied (only c, r, u and d change rows)")),
        )
        .when(is_upsert & after.isNull(), F.concat(F.lit("Debezium '"), op, F.lit("' event without after")))
        .when(is_upsert, required_fields_error(after, fields))
        .when(
            before.isNull(),
            F.lit("Debezium 'd' event without before (the source must send the deleted row's key)"),
        )
        .when(
            missing_key.isNotNull(),
            F.concat(F.lit("Debezium 'd' event whose before lacks key field "), missing_key),
        )
    )
    cdc = F.struct(
        op.alias("op"),
        source.getItem("ts_ms").cast("long").alias("ts_ms"),
        source.alias("source"),
    )
    return decoded.select(
        *[record.getField(f.name).alias(f.name) for f in fields.fields],
        kafka_struct().alias(KAFKA_COLUMN),
        cdc.alias(CDC_COLUMN),
        F.coalesce(is_delete, F.lit(False)).alias(DELETE_COLUMN),
        error.alias(ERROR_COLUMN),
        F.lit(None).cast("array<string>").alias(UNDECLARED_COLUMN),
        *[kafka_column(c) for c in KAFKA_SOURCE_COLUMNS if kafka_column(c) in decoded.columns],
    )


__all__ = ["DELETE_OP", "UPSERT_OPS", "decode_debezium_json", "row_fields"]
