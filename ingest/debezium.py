"""Debezium change events (JSON, or Avro through a schema registry) as upsert-table rows, as Spark column
expressions.

A Debezium value is `{"before": {…}, "after": {…}, "op": …, "source": {…}, "ts_ms": …}`, or the same
inside `{"schema": {…}, "payload": {…}}` when the Kafka Connect JSON converter writes schemas. With
Confluent's AvroConverter it is a Confluent-framed Avro record `Envelope` (`before`/`after` as unions of
null and the row record, `source` a record of the connector's fields, `op`, `ts_ms`, `transaction`),
decoded with the writer schema the registry holds for its id; its `source` fields become the same
text map as JSON's. `op` `c`
(insert), `r` (snapshot read) and `u` (update) upsert `after`; `d` deletes the key held in `before`;
the tombstone Debezium sends after a delete deletes the key of its record key (see `ingest.upsert`).
The row gets `_cdc`: the op, `source.ts_ms` and the whole `source` block (connector, database, table and
its position: `lsn`, `file`/`pos`, …). Anything else (`t` truncate, `m` message, not an event) is a
dead letter with the reason.

The row values are read as the table's types; Debezium's own encodings (temporal types as epoch numbers,
decimals as bytes unless `decimal.handling.mode` is `string` or `double`) need matching column types.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pyiceberg.schema import Schema

from catalog.pipelines.columns import CDC_COLUMN, INTERNAL_PREFIX
from ingest.decode import (
    ERROR_COLUMN,
    KAFKA_COLUMN,
    KAFKA_SOURCE_COLUMNS,
    UNDECLARED_COLUMN,
    confluent_schema_id,
    kafka_struct,
    required_fields_error,
    schema_id_or_null,
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

    unreadable = F.when(
        event.getField(_CORRUPT).isNotNull(), F.lit("value is not a JSON Debezium change event")
    )
    change = _Change(member("op"), member("before"), member("after"), member("source"))
    return _change_rows(decoded, schema, change, unreadable)


class _Change:
    """A decoded change event's members: `op`, `before`/`after` (structs of the table's fields) and
    `source` (a map of text)."""

    def __init__(self, op: Column, before: Column, after: Column, source: Column) -> None:
        self.op, self.before, self.after, self.source = op, before, after, source


def _change_rows(decoded: DataFrame, schema: Schema, change: _Change, unreadable: Column) -> DataFrame:
    """The rows of decoded change events: the table's columns, `_kafka`, `_cdc`, `_floe_delete`, the
    error (`unreadable` first: NULL when the value decoded) and the raw Kafka columns."""
    from pyspark.sql import functions as F

    fields = row_fields(schema)
    op, before, after, source = change.op, change.before, change.after, change.source
    is_upsert = op.isin(*UPSERT_OPS)
    is_delete = op == DELETE_OP
    record = F.when(is_delete, before).otherwise(after)
    keys = key_fields_of(schema)
    missing_key = F.coalesce(*(F.when(before.getField(k.name).isNull(), F.lit(k.name)) for k in keys))
    error = (
        F.when(F.col(kafka_column("value")).isNull(), F.lit("record has no value (tombstone)"))
        .when(unreadable.isNotNull(), unreadable)
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


# -- Avro (Confluent's AvroConverter, through the registry) ----------------------------------------


def _record_fields(avro_type: Any, named: Mapping[str, Mapping[str, Any]]) -> list[str] | None:
    """The field names of an Avro record type (or of the record in a union with null), following a
    reference to a named record; None when it is not a record."""
    if isinstance(avro_type, list):
        records = [t for t in avro_type if t != "null"]
        return _record_fields(records[0], named) if len(records) == 1 else None
    if isinstance(avro_type, str):
        found = named.get(avro_type) or next(
            (r for full, r in named.items() if full.rsplit(".", 1)[-1] == avro_type), None
        )
        return None if found is None else _record_fields(found, named)
    if isinstance(avro_type, Mapping) and avro_type.get("type") == "record":
        return [str(f["name"]) for f in avro_type.get("fields", [])]
    return None


def _named_records(avro_type: Any, namespace: str, into: dict[str, Mapping[str, Any]]) -> None:
    """Every named record of a schema by its full name (for references such as `"type": "Value"`)."""
    if isinstance(avro_type, list):
        for member in avro_type:
            _named_records(member, namespace, into)
    elif isinstance(avro_type, Mapping) and avro_type.get("type") == "record":
        space = str(avro_type.get("namespace", namespace))
        name = str(avro_type.get("name", ""))
        into[name if "." in name else f"{space}.{name}"] = avro_type
        for f in avro_type.get("fields", []):
            _named_records(f.get("type"), space, into)


def envelope_fields(writer_schema: str) -> tuple[list[str], list[str]] | None:
    """A Debezium Avro envelope's row fields (`before`/`after`'s record) and `source` fields; None when
    the schema is not such an envelope (a record with before, after, op and source)."""
    try:
        parsed = json.loads(writer_schema)
    except ValueError:
        return None
    if not isinstance(parsed, Mapping) or parsed.get("type") != "record":
        return None
    named: dict[str, Mapping[str, Any]] = {}
    _named_records(parsed, "", named)
    members = {str(f.get("name")): f.get("type") for f in parsed.get("fields", []) if isinstance(f, Mapping)}
    if not {"before", "after", "op", "source"} <= set(members):
        return None
    row = _record_fields(members["before"], named) or _record_fields(members["after"], named)
    source = _record_fields(members["source"], named)
    return None if row is None or source is None else (row, source)


def decode_debezium_avro(raw: DataFrame, schema: Schema, writer_schemas: Mapping[int, str]) -> DataFrame:
    """Decode Confluent-framed Avro Debezium change events (`writer_schemas`: the registry's schema of each
    id in the batch) into the same rows as `decode_debezium_json`."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as st
    from pyspark.sql.avro.functions import from_avro

    fields = row_fields(schema)
    row_type = st.StructType([st.StructField(f.name, spark_type(f.field_type), True) for f in fields.fields])
    value = F.col(kafka_column("value"))
    schema_id = confluent_schema_id(value)
    payload = F.substring(value, 6, 2**31 - 1)  # the bytes after the 5-byte Confluent header
    none = F.lit(None)
    op: Column = none.cast("string")
    before: Column = none.cast(row_type)
    after: Column = none.cast(row_type)
    source: Column = none.cast("map<string,string>")
    usable: list[int] = []
    not_envelope: list[int] = []
    for writer_id, writer_schema in writer_schemas.items():
        parts = envelope_fields(writer_schema)
        if parts is None:
            not_envelope.append(writer_id)
            continue
        usable.append(writer_id)
        row_names, source_names = parts
        chosen = schema_id == writer_id
        # Decoded once per record, in a column of its own (each member below reads it).
        column = f"{_EVENT}_{writer_id}"
        raw = raw.withColumn(
            column, F.when(chosen, from_avro(payload, writer_schema, {"mode": "PERMISSIVE"}))
        )
        event = F.col(column)

        def row_of(member: Column, names: list[str] = row_names) -> Column:
            # The table's fields, as its types, from the event's row (a field it lacks is NULL).
            columns = [
                (member.getField(f.name) if f.name in names else F.lit(None)).cast(spark_type(f.field_type))
                for f in fields.fields
            ]
            return F.when(
                member.isNotNull(),
                F.struct(*[c.alias(f.name) for c, f in zip(columns, fields.fields, strict=True)]),
            )

        pairs: list[Column] = []
        for name in source_names:
            pairs += [F.lit(name), event.getField("source").getField(name).cast("string")]
        op = F.when(chosen, event.getField("op")).otherwise(op)
        before = F.when(chosen, row_of(event.getField("before"))).otherwise(before)
        after = F.when(chosen, row_of(event.getField("after"))).otherwise(after)
        source = F.when(chosen, F.create_map(*pairs)).otherwise(source)
    unreadable = (
        F.when(value.isNull(), none.cast("string"))
        .when(
            schema_id.isNull(),
            F.lit("value is not in the Confluent wire format (magic byte 0 + schema id)"),
        )
        .when(
            schema_id.isin(not_envelope),
            F.concat(
                F.lit("value's schema id "),
                schema_id_or_null(value),
                F.lit(" is not a Debezium change event envelope (a record with before, after, op, source)"),
            ),
        )
        .when(
            ~schema_id.isin(usable),
            F.concat(F.lit("value's schema id "), schema_id_or_null(value), F.lit(" is not registered")),
        )
        .when(
            op.isNull(),
            F.concat(
                F.lit("value does not decode with its writer schema (id "),
                schema_id_or_null(value),
                F.lit(")"),
            ),
        )
    )
    return _change_rows(raw, schema, _Change(op, before, after, source), unreadable)


__all__ = [
    "DELETE_OP",
    "UPSERT_OPS",
    "decode_debezium_avro",
    "decode_debezium_json",
    "envelope_fields",
    "row_fields",
]
