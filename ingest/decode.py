"""Decoding Kafka records into table rows, as Spark column expressions (it all runs in the JVM).

A micro-batch of raw Kafka rows (`key`, `value`, `topic`, `partition`, `offset`, `timestamp`,
`timestampType`, `headers`) is first given floe's internal column names (`source_columns`), so a table
field named like one of them (a field `value`, `offset`…) never makes a reference ambiguous. It then
becomes one DataFrame with the table's columns, the `_kafka` column, the error column (NULL for a good
record, else why the record cannot become a row: it then goes to the dead-letter table) and the
undeclared-fields column (the top-level fields a good record carries that the table does not declare).
A bad record never fails the batch: JSON is parsed PERMISSIVE with a corrupt-record column, Avro with
`from_avro` in PERMISSIVE mode, and required fields are checked explicitly. When a value does not parse,
the error column says so generically (`JSON_MISMATCH`, `AVRO_MISMATCH`); `ingest.reasons` then says
precisely why, for the failed rows only, so the good rows' path stays in the JVM.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from pyiceberg.schema import Schema
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
    UUIDType,
)

from catalog.pipelines.columns import INTERNAL_PREFIX
from catalog.pipelines.columns import KAFKA_COLUMN as KAFKA_COLUMN
from catalog.pipelines.columns import KEY_COLUMN as KEY_COLUMN

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql import types as st

log = logging.getLogger(__name__)
T = TypeVar("T")

# floe's internal columns start with INTERNAL_PREFIX: a table's top-level fields cannot (floe.yaml
# validation refuses it), so none of them ever shares a name with a table field.
ERROR_COLUMN = INTERNAL_PREFIX + "error"
UNDECLARED_COLUMN = INTERNAL_PREFIX + "undeclared"
RECORD_COLUMN = INTERNAL_PREFIX + "record"  # the decoded value, a struct of the table's fields
_RECORD = RECORD_COLUMN
_CORRUPT = INTERNAL_PREFIX + "corrupt_record"
_UNDECLARED = INTERNAL_PREFIX + "undeclared_keys"  # in the JSON decoder's result
_DECODED = INTERNAL_PREFIX + "decoded"
# The Kafka source's own columns (with `includeHeaders`).
KAFKA_SOURCE_COLUMNS = (
    "key",
    "value",
    "topic",
    "partition",
    "offset",
    "timestamp",
    "timestampType",
    "headers",
)
# The generic errors Spark's decoding gives; `ingest.reasons` replaces them with the precise reason.
JSON_MISMATCH = "value is not a JSON object matching the table schema"
AVRO_MISMATCH = "value is not Avro matching the table schema"
GENERIC_ERRORS = (JSON_MISMATCH, AVRO_MISMATCH)


def source(name: str) -> str:
    """The internal name of the Kafka source's column `name` (`value` → `__floe_value`)."""
    return INTERNAL_PREFIX + name


def source_columns(raw: DataFrame) -> DataFrame:
    """The raw Kafka rows with every column renamed to its internal name (see `source`)."""
    from pyspark.sql import functions as F

    names = tuple(raw.columns)
    renamed = cached_columns(
        raw.sparkSession, ("source_columns", names), lambda: [F.col(f"`{c}`").alias(source(c)) for c in names]
    )
    return raw.select(*renamed)


# Spark column expressions a batch builds, kept per Spark context (see `cached_columns`).
_COLUMNS: dict[tuple[Any, ...], tuple[Any, Any]] = {}
_COLUMNS_KEPT = 512  # entries; a long-running ingest adds a few per table and schema version


def cached_columns(spark: SparkSession, key: tuple[Any, ...], build: Callable[[], T]) -> T:
    """`build()`'s column expressions, built once per Spark context and `key`.

    Every batch of a table reads the same expressions, and building one in Python costs py4j round
    trips into the JVM (F.col, getField, when, alias…): a one-pass JSON batch made ~2,200 of them,
    ~0.3 s of driver time during which the executors idle. Expressions are unresolved trees, so one
    built for a batch's DataFrame serves the next one's."""
    context = spark.sparkContext
    full = (id(context), *key)
    found = _COLUMNS.get(full)
    if found is None or found[0] is not context:
        if len(_COLUMNS) >= _COLUMNS_KEPT:
            _COLUMNS.pop(next(iter(_COLUMNS)))
        found = _COLUMNS[full] = (context, build())  # the context kept: its id is never reused meanwhile
    return cast("T", found[1])


def spark_type(iceberg: IcebergType) -> st.DataType:
    """The Spark type Iceberg's Spark runtime reads and writes for an Iceberg type."""
    from pyspark.sql import types as st

    simple: dict[type[IcebergType], Callable[[], st.DataType]] = {
        BooleanType: st.BooleanType,
        IntegerType: st.IntegerType,
        LongType: st.LongType,
        FloatType: st.FloatType,
        DoubleType: st.DoubleType,
        DateType: st.DateType,
        TimestampType: st.TimestampNTZType,
        TimestamptzType: st.TimestampType,
        StringType: st.StringType,
        UUIDType: st.StringType,
        BinaryType: st.BinaryType,
    }
    for kind, make in simple.items():
        if isinstance(iceberg, kind):
            return make()
    if isinstance(iceberg, FixedType):
        return st.BinaryType()
    if isinstance(iceberg, DecimalType):
        return st.DecimalType(iceberg.precision, iceberg.scale)
    if isinstance(iceberg, StructType):
        return st.StructType([_spark_field(f) for f in iceberg.fields])
    if isinstance(iceberg, ListType):
        return st.ArrayType(spark_type(iceberg.element_type), not iceberg.element_required)
    if isinstance(iceberg, MapType):
        return st.MapType(
            spark_type(iceberg.key_type), spark_type(iceberg.value_type), not iceberg.value_required
        )
    raise ValueError(f"floe cannot ingest Iceberg type {iceberg} with Spark")


def _spark_field(field: NestedField) -> st.StructField:
    from pyspark.sql import types as st

    return st.StructField(field.name, spark_type(field.field_type), True)


def table_columns(schema: Schema) -> list[str]:
    """The columns a batch writes: the table's own fields (and `_key`, `_cdc`), then `_kafka`."""
    return [f.name for f in schema.fields if f.name != KAFKA_COLUMN] + [KAFKA_COLUMN]


def written_columns(schema: Schema) -> list[Column]:
    """The columns a batch writes (`table_columns`), typed as the table declares them.

    A required field is checked before the write (a record without it is a dead letter), so it is
    declared non-null here (a `coalesce` whose default is never taken). Spark then takes the rows as
    they are; otherwise it adds its own projection (`assertnotnull` per required field, every struct
    rebuilt and the headers list copied by a lambda), which runs outside Spark's generated code, the
    rows copied once more: ~6 % of a task's time. A required field inside a list or map is left
    nullable (Spark checks it as before)."""
    from pyspark.sql import functions as F

    fields = {f.name: f for f in schema.fields}
    columns = []
    for name in table_columns(schema):
        column = F.col(f"`{name}`")
        field = fields.get(name)
        if field is not None:
            column = _non_null(column, field.field_type, field.required).alias(name)
        columns.append(column)
    return columns


def _non_null(value: Column, kind: IcebergType, required: bool) -> Column:
    """`value` with the required fields of its type (and itself, when `required`) declared non-null."""
    from pyspark.sql import functions as F

    if isinstance(kind, StructType) and _declares_required(kind):
        fields = [
            _non_null(value.getField(f.name), f.field_type, f.required).alias(f.name) for f in kind.fields
        ]
        rebuilt = F.struct(*fields)
        return rebuilt if required else F.when(value.isNotNull(), rebuilt)
    if not required:
        return value
    zero = _zero(kind)
    return value if zero is None else F.coalesce(value, zero)


def _declares_required(kind: StructType) -> bool:
    """Whether a struct has a required field, directly or in a struct field (not in lists or maps)."""
    return any(
        f.required or (isinstance(f.field_type, StructType) and _declares_required(f.field_type))
        for f in kind.fields
    )


def _zero(kind: IcebergType) -> Column | None:
    """A non-null literal of the Spark type of `kind` (None for a type without one)."""
    import datetime
    import decimal

    from pyspark.sql import functions as F

    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
    literals: dict[type[IcebergType], Callable[[], Column]] = {
        BooleanType: lambda: F.lit(False),
        IntegerType: lambda: F.lit(0).cast("int"),
        LongType: lambda: F.lit(0).cast("long"),
        FloatType: lambda: F.lit(0.0).cast("float"),
        DoubleType: lambda: F.lit(0.0).cast("double"),
        DateType: lambda: F.lit(epoch.date()),
        TimestamptzType: lambda: F.lit(epoch),
        TimestampType: lambda: F.lit(epoch).cast("timestamp_ntz"),
        StringType: lambda: F.lit(""),
        UUIDType: lambda: F.lit(""),
        BinaryType: lambda: F.lit(bytearray()),
        FixedType: lambda: F.lit(bytearray()),
    }
    for known, make in literals.items():
        if isinstance(kind, known):
            return make()
    if isinstance(kind, DecimalType):
        return F.lit(decimal.Decimal(0)).cast(spark_type(kind))
    if isinstance(kind, ListType):
        return F.array().cast(spark_type(kind))
    if isinstance(kind, MapType):
        return F.create_map().cast(spark_type(kind))
    return None


def user_fields(schema: Schema) -> list[NestedField]:
    """The columns a record's value fills: everything but `_kafka` (and the `_key` of an upsert table
    keyed by the Kafka record key, which comes from the record key)."""
    return [f for f in schema.fields if f.name not in (KAFKA_COLUMN, KEY_COLUMN)]


def _missing_required(value: Column, field: NestedField, path: str) -> Column | None:
    """A string column naming the first required field missing under `value` (NULL when none)."""
    from pyspark.sql import functions as F

    checks: list[Column] = []
    if field.required:
        checks.append(F.when(value.isNull(), F.lit(f"required field {path} is missing or null")))
    nested = _nested_missing(value, field.field_type, path)
    if nested is not None:
        checks.append(F.when(value.isNotNull(), nested))
    return F.coalesce(*checks) if checks else None


def _nested_missing(value: Column, kind: IcebergType, path: str) -> Column | None:
    from pyspark.sql import functions as F

    if isinstance(kind, StructType):
        checks: list[Column] = []
        for f in kind.fields:
            check = _missing_required(value.getField(f.name), f, f"{path}.{f.name}")
            if check is not None:
                checks.append(check)
        return F.coalesce(*checks) if checks else None
    if isinstance(kind, ListType):
        element = NestedField(0, "element", kind.element_type, required=kind.element_required)
        if not element.required and not isinstance(kind.element_type, StructType | ListType | MapType):
            return None
        return F.element_at(
            F.filter(
                F.transform(value, lambda x: _or_null(_missing_required(x, element, f"{path}[]"))),
                lambda m: m.isNotNull(),
            ),
            1,
        )
    if isinstance(kind, MapType):
        entry = NestedField(0, "value", kind.value_type, required=kind.value_required)
        if not entry.required and not isinstance(kind.value_type, StructType | ListType | MapType):
            return None
        return F.element_at(
            F.filter(
                F.transform(
                    F.map_values(value), lambda x: _or_null(_missing_required(x, entry, f"{path}{{}}"))
                ),
                lambda m: m.isNotNull(),
            ),
            1,
        )
    return None


def _or_null(check: Column | None) -> Column:
    from pyspark.sql import functions as F

    return check if check is not None else F.lit(None).cast("string")


def required_fields_error(record: Column, schema: Schema) -> Column:
    """NULL when every required field of the decoded record is present, else which one is not."""
    from pyspark.sql import functions as F

    checks: list[Column] = []
    for f in user_fields(schema):
        check = _missing_required(record.getField(f.name), f, f.name)
        if check is not None:
            checks.append(check)
    return F.coalesce(*checks) if checks else F.lit(None).cast("string")


def kafka_struct() -> Column:
    """The `_kafka` column from the (renamed) raw Kafka row."""
    from pyspark.sql import functions as F

    return F.struct(
        *[F.col(source(name)).alias(name) for name in ("partition", "offset", "timestamp", "key", "headers")]
    )


def decode_json(raw: DataFrame, schema: Schema) -> DataFrame:
    """Parse the value as a JSON object of the table's fields; `raw` has the internal column names
    (`source_columns`). Keys the table does not declare are not kept: they are listed per record in the
    undeclared-fields column, so ingestion can count them.

    floe's JVM decoder (ingest/jvm JsonDecoder) reads each value's bytes once for the fields and the
    undeclared keys; Spark's `from_json` read them through a char reader, and the keys took a second
    scan. Without a JDK compiler (or for a map with non-string keys), Spark's `from_json`."""
    from pyspark.sql import functions as F

    fields = user_fields(schema)
    from ingest.json_udfs import json_decoder, undeclared_keys

    decoder = json_decoder(raw.sparkSession, fields)  # registered in this batch's session
    present = tuple(raw.columns)
    # Without floe's decoder, the undeclared keys' UDF (registered in this batch's session too).
    value_column = F.col(source("value"))
    scanned = None if decoder is not None else undeclared_keys(raw.sparkSession, value_column, fields)

    def build() -> tuple[Column, list[Column]]:
        value = F.col(source("value"))
        record = F.col(_RECORD)
        if decoder is not None:
            parsed = F.call_udf(decoder, value)
            undeclared: Column = record.getField(_UNDECLARED)
        else:
            parsed = _from_json(value, fields)
            undeclared = cast("Column", scanned)
        error = (
            F.when(value.isNull(), F.lit("record has no value (tombstone)"))
            .when(record.getField(_CORRUPT).isNotNull(), F.lit(JSON_MISMATCH))
            .otherwise(required_fields_error(record, schema))
        )
        return evaluated_once(parsed), _finished_columns(present, fields, error, undeclared)

    key = ("json", decoder, schema.model_dump_json(), present)
    parsed, columns = cached_columns(raw.sparkSession, key, build)
    return raw.withColumn(_RECORD, parsed).select(*columns)


def _from_json(value: Column, fields: list[NestedField]) -> Column:
    """Spark's `from_json` of the value (PERMISSIVE, the corrupt-record column set when it fails)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as st

    record_type = st.StructType(
        [_spark_field(f) for f in fields] + [st.StructField(_CORRUPT, st.StringType(), True)]
    )
    text = value.cast("string")
    return F.from_json(text, record_type, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT})


def avro_reader_schema(avro_schema: Mapping[str, Any]) -> str:
    return json.dumps(avro_schema, separators=(",", ":"))


def decode_avro(
    raw: DataFrame,
    schema: Schema,
    reader_schema: Mapping[str, Any],
    *,
    confluent_framing: bool,
    writer_schemas: Mapping[int, str] | None = None,
) -> DataFrame:
    """Decode Avro binary values.

    Without `writer_schemas` every value is written with `reader_schema` (inline mode); with them, each
    value carries the Confluent wire format's schema id and is decoded with that writer schema, resolved
    to `reader_schema` (registry mode). `confluent_framing` strips the 5-byte prefix (magic byte 0 and
    the schema id) first.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    fields = user_fields(schema)
    # Spark's PERMISSIVE from_avro gives a record of NULL fields, not NULL, for a value it cannot
    # decode: the reader schema gets a field with a default that only a decoded record has.
    reader = avro_reader_schema(_with_decoded_marker(reader_schema))
    writer_inline = avro_reader_schema(reader_schema)
    value = F.col(source("value"))
    framed_ok = F.lit(True)
    payload = value
    if confluent_framing:
        framed_ok = (F.length(value) >= 5) & (F.substring(value, 1, 1) == F.lit(bytes([0])))
        payload = F.expr(f"substring({source('value')}, 6, length({source('value')}) - 5)")
    undeclared: Column = F.lit(None).cast("array<string>")
    options = {"mode": "PERMISSIVE"}
    if writer_schemas:
        schema_id = F.conv(F.hex(F.substring(value, 2, 4)), 16, 10).cast("long")
        decoded_col: Column = F.lit(None)
        branches = None
        for writer_id, writer_schema in writer_schemas.items():
            decoded = from_avro(payload, writer_schema, {**options, "avroSchema": reader})
            branches = (
                F.when(schema_id == writer_id, decoded)
                if branches is None
                else branches.when(schema_id == writer_id, decoded)
            )
        decoded_col = branches if branches is not None else F.lit(None)
        unknown_id = ~schema_id.isin(list(writer_schemas))
        # A writer schema's top-level fields the table does not declare: known per schema id.
        names = {f.name for f in fields}
        extra_by_id = {
            writer_id: [n for n in avro_field_names(writer_schema) if n not in names]
            for writer_id, writer_schema in writer_schemas.items()
        }
        extra_branches = None
        for writer_id, extra in extra_by_id.items():
            if extra:
                names_col = F.array(*[F.lit(n) for n in extra])
                extra_branches = (
                    F.when(schema_id == writer_id, names_col)
                    if extra_branches is None
                    else extra_branches.when(schema_id == writer_id, names_col)
                )
        if extra_branches is not None:
            undeclared = extra_branches
    else:
        decoded_col = from_avro(payload, writer_inline, {**options, "avroSchema": reader})
        unknown_id = F.lit(False)
    decoded_df = raw.withColumn(_RECORD, F.when(framed_ok, decoded_col))
    record = F.col(_RECORD)
    error = (
        F.when(value.isNull(), F.lit("record has no value (tombstone)"))
        .when(~framed_ok, F.lit("value is not in the Confluent wire format (magic byte 0 + schema id)"))
        .when(
            unknown_id,
            F.concat(F.lit("value's schema id "), schema_id_or_null(value), F.lit(" is not registered")),
        )
        .when(record.isNull() | record.getField(_DECODED).isNull(), F.lit(AVRO_MISMATCH))
        .otherwise(required_fields_error(record, schema))
    )
    return _finish(decoded_df, fields, error, undeclared)


def _with_decoded_marker(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The Avro record schema with a boolean field `_DECODED` defaulting to true (writers never have it)."""
    marker = {"name": _DECODED, "type": "boolean", "default": True}
    return {**schema, "fields": [*schema.get("fields", []), marker]}


def avro_field_names(schema: str | Mapping[str, Any]) -> list[str]:
    """The top-level field names of an Avro record schema (none for any other schema)."""
    parsed = json.loads(schema) if isinstance(schema, str) else schema
    if not isinstance(parsed, Mapping) or parsed.get("type") != "record":
        return []
    return [str(f["name"]) for f in parsed.get("fields", [])]


def _finish(
    decoded: DataFrame, fields: list[NestedField], error: Column, undeclared: Column | None = None
) -> DataFrame:
    """The decoded rows in the shape batches.py reads: the table's fields from RECORD_COLUMN, `_kafka`,
    the error, the undeclared fields of good records (NULL: not known for this format) and the source's
    columns (internal names)."""
    from pyspark.sql import functions as F

    decoded = decoded.withColumn(_RECORD, evaluated_once(F.col(_RECORD)))
    return decoded.select(*_finished_columns(tuple(decoded.columns), fields, error, undeclared))


def _finished_columns(
    present: tuple[str, ...], fields: list[NestedField], error: Column, undeclared: Column | None
) -> list[Column]:
    """`_finish`'s columns over a DataFrame with the columns `present` (RECORD_COLUMN among them)."""
    from pyspark.sql import functions as F

    if undeclared is None:
        undeclared = F.lit(None).cast("array<string>")
    columns = [F.col(_RECORD).getField(f.name).alias(f.name) for f in fields]
    return [
        *columns,
        kafka_struct().alias(KAFKA_COLUMN),
        error.alias(ERROR_COLUMN),
        F.when(error.isNull(), undeclared).alias(UNDECLARED_COLUMN),
        *[F.col(source(c)) for c in KAFKA_SOURCE_COLUMNS if source(c) in present],
    ]


def evaluated_once(column: Column) -> Column:
    """`column` unchanged, in a form Spark's optimizer evaluates once per row.

    The decode (from_json, from_avro, ...) is read by every field, the error checks and the batch's
    filters. Spark inlines a deterministic projection into a filter pushed below it
    (PushPredicateThroughNonJoin) and into the projections above it (CollapseProject), so the decode ran
    once per reference (10 times per JSON value). Neither rule moves a non-deterministic expression:
    gated on `spark_partition_id()` (never negative, costs a field read) the decode stays in the one
    projection that computes it, and everything above reads its result.
    """
    from pyspark.sql import functions as F

    return F.when(F.spark_partition_id() >= 0, column)


def confluent_schema_id(value: Column) -> Column:
    """The schema id of a Confluent-framed value (NULL when the value is not framed)."""
    from pyspark.sql import functions as F

    framed = (F.length(value) >= 5) & (F.substring(value, 1, 1) == F.lit(bytes([0])))
    return F.when(framed, F.conv(F.hex(F.substring(value, 2, 4)), 16, 10).cast("long"))


def schema_id_or_null(value: Column) -> Column:
    """The schema id of a Confluent-framed value as text, for messages."""
    from pyspark.sql import functions as F

    return F.coalesce(confluent_schema_id(value).cast("string"), F.lit("?"))
