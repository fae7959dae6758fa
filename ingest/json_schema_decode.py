"""Decoding registry-framed JSON values (Confluent's `JSONSerializer`: magic byte 0, a 4-byte JSON Schema
id, then the JSON text) into table rows, as Spark column expressions.

The writer's JSON Schema only has to be registered (and be a JSON schema): the values are read as JSON
against the table's schema, as inline JSON is, so the table's schema stays what floe.yaml declares.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from pyiceberg.schema import Schema

from ingest.decode import (
    _CORRUPT,
    JSON_MISMATCH,
    RECORD_COLUMN,
    _finish,
    _spark_field,
    required_fields_error,
    source,
    user_fields,
)
from ingest.json_udfs import undeclared_keys

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from ingest.registry_client import RegistryClient

NOT_FRAMED = "value is not in the Confluent wire format (magic byte 0 + schema id)"


def json_schema_ids(registry: RegistryClient, schema_ids: Iterable[int]) -> dict[int, str | None]:
    """Each schema id: None when the registry has it as a JSON schema, else why it cannot be used."""
    from ingest.registry_client import SchemaNotFoundError

    found: dict[int, str | None] = {}
    for schema_id in schema_ids:
        try:
            schema_type = registry.schema(schema_id).schema_type
        except SchemaNotFoundError:
            found[schema_id] = f"value's schema id {schema_id} is not registered"
            continue
        found[schema_id] = (
            None
            if schema_type == "JSON"
            else f"value's schema id {schema_id} is a {schema_type} schema, not JSON"
        )
    return found


def decode_registry_json(raw: DataFrame, schema: Schema, schema_ids: Mapping[int, str | None]) -> DataFrame:
    """Confluent-framed JSON values as the table's rows; `schema_ids` as `json_schema_ids` gives them.
    `raw` has the internal column names (`ingest.decode.source_columns`)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as st

    fields = user_fields(schema)
    record_type = st.StructType(
        [_spark_field(f) for f in fields] + [st.StructField(_CORRUPT, st.StringType(), True)]
    )
    value = F.col(source("value"))
    framed = (F.length(value) >= 5) & (F.substring(value, 1, 1) == F.lit(bytes([0])))
    schema_id = F.conv(F.hex(F.substring(value, 2, 4)), 16, 10).cast("long")
    payload_bytes = F.expr(f"substring({source('value')}, 6, length({source('value')}) - 5)")
    payload = payload_bytes.cast("string")
    parsed = F.from_json(payload, record_type, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT})
    decoded = raw.withColumn(RECORD_COLUMN, F.when(framed, parsed))
    record = F.col(RECORD_COLUMN)
    error = (
        F.when(value.isNull(), F.lit("record has no value (tombstone)"))
        .when(~framed, F.lit(NOT_FRAMED))
        .when(_id_error(schema_id, schema_ids).isNotNull(), _id_error(schema_id, schema_ids))
        .when(record.isNull() | record.getField(_CORRUPT).isNotNull(), F.lit(JSON_MISMATCH))
        .otherwise(required_fields_error(record, schema))
    )
    return _finish(decoded, fields, error, undeclared_keys(raw.sparkSession, payload_bytes, fields))


def _id_error(schema_id: Column, schema_ids: Mapping[int, str | None]) -> Column:
    """NULL for a usable schema id, else the reason (ids the batch did not look up: not registered)."""
    from pyspark.sql import functions as F

    usable = [i for i, reason in schema_ids.items() if reason is None]
    branches = F.when(schema_id.isin(usable), F.lit(None).cast("string")) if usable else None
    for i, reason in schema_ids.items():
        if reason is not None:
            branches = (
                F.when(schema_id == i, F.lit(reason))
                if branches is None
                else branches.when(schema_id == i, F.lit(reason))
            )
    unknown = F.concat(F.lit("value's schema id "), schema_id.cast("string"), F.lit(" is not registered"))
    return branches.otherwise(unknown) if branches is not None else unknown
