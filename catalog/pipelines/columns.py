"""The columns floe adds to every table: the `_kafka` record metadata and the dead-letter table's schema.

Debezium tables also get `_cdc` (the change event's op, source time and source block); upsert tables
without `key_fields` get `_key` (the Kafka record key's bytes: their key and identifier field).

`_kafka`, `_cdc` and `_key` use RESERVED field ids from 2_000_000_000 up, so the user's ids
(1..1_999_999_999) never collide with them and a table's schema keeps exactly the ids written in
floe.yaml. Every `_kafka` field is optional: writers (Spark's Iceberg sink checks nullability) may hand
over nullable columns.
"""

from __future__ import annotations

from functools import cache

from pyiceberg.schema import Schema
from pyiceberg.types import (
    BinaryType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestamptzType,
)

KAFKA_COLUMN = "_kafka"
# The prefix of ingestion's internal column names (the Kafka source's columns renamed, the decode
# error…): a table's top-level field may not start with it, so none ever collides with them.
INTERNAL_PREFIX = "__floe_"
MAX_USER_FIELD_ID = 1_999_999_999
KAFKA_FIELD_ID = 2_000_000_000
KAFKA_PARTITION_ID = 2_000_000_001
KAFKA_OFFSET_ID = 2_000_000_002
KAFKA_TIMESTAMP_ID = 2_000_000_003
KAFKA_KEY_ID = 2_000_000_004
KAFKA_HEADERS_ID = 2_000_000_005
KAFKA_HEADERS_ELEMENT_ID = 2_000_000_006
KAFKA_HEADER_KEY_ID = 2_000_000_007
KAFKA_HEADER_VALUE_ID = 2_000_000_008

# The record timestamp the shorthand partitioning schemes (`hour`, `day`) partition by.
KAFKA_TIMESTAMP_PATH = f"{KAFKA_COLUMN}.timestamp"

KAFKA_STRUCT = StructType(
    NestedField(KAFKA_PARTITION_ID, "partition", IntegerType(), required=False),
    NestedField(KAFKA_OFFSET_ID, "offset", LongType(), required=False),
    NestedField(KAFKA_TIMESTAMP_ID, "timestamp", TimestamptzType(), required=False),
    NestedField(KAFKA_KEY_ID, "key", BinaryType(), required=False),
    NestedField(
        KAFKA_HEADERS_ID,
        "headers",
        ListType(
            KAFKA_HEADERS_ELEMENT_ID,
            StructType(
                NestedField(KAFKA_HEADER_KEY_ID, "key", StringType(), required=False),
                NestedField(KAFKA_HEADER_VALUE_ID, "value", BinaryType(), required=False),
            ),
            element_required=False,
        ),
        required=False,
    ),
)

KAFKA_FIELD = NestedField(
    KAFKA_FIELD_ID, KAFKA_COLUMN, KAFKA_STRUCT, required=False, doc="Kafka record metadata (floe)"
)

# Debezium tables (`envelope: debezium`) also get `_cdc`: what the change event said about the change.
CDC_COLUMN = "_cdc"
CDC_FIELD_ID = 2_000_000_100
CDC_OP_ID = 2_000_000_101
CDC_TS_MS_ID = 2_000_000_102
CDC_SOURCE_ID = 2_000_000_103
CDC_SOURCE_KEY_ID = 2_000_000_104
CDC_SOURCE_VALUE_ID = 2_000_000_105

CDC_STRUCT = StructType(
    NestedField(CDC_OP_ID, "op", StringType(), required=False, doc="c, r (snapshot read), u or d"),
    NestedField(
        CDC_TS_MS_ID, "ts_ms", LongType(), required=False, doc="source.ts_ms: when the source changed"
    ),
    NestedField(
        CDC_SOURCE_ID,
        "source",
        MapType(CDC_SOURCE_KEY_ID, StringType(), CDC_SOURCE_VALUE_ID, StringType(), value_required=False),
        required=False,
        doc="the event's source block (connector, db, table and its position: lsn, file/pos, …)",
    ),
)

CDC_FIELD = NestedField(
    CDC_FIELD_ID, CDC_COLUMN, CDC_STRUCT, required=False, doc="the change event behind the row (floe)"
)

# Upsert tables without `key_fields` are keyed by the Kafka record key: its bytes, as received, are the
# required column `_key` and the table's identifier field (`_kafka.key` holds the same bytes, but sits in
# an optional struct, which Iceberg identifier fields cannot).
KEY_COLUMN = "_key"
KEY_FIELD_ID = 2_000_000_200
KEY_FIELD = NestedField(
    KEY_FIELD_ID,
    KEY_COLUMN,
    BinaryType(),
    required=True,
    doc="the Kafka record key, the row's key (floe; upsert tables without key_fields)",
)

DLQ_SUFFIX = "_dlq"

# The dead-letter table of every data table: records that could not be decoded or written, as received.
DLQ_TOPIC_ID = 1
DLQ_PARTITION_ID = 2
DLQ_OFFSET_ID = 3
DLQ_TIMESTAMP_ID = 4
DLQ_KEY_ID = 5
DLQ_VALUE_ID = 6
DLQ_HEADERS_ID = 7
DLQ_ERROR_ID = 8
DLQ_FAILED_AT_ID = 9
DLQ_HEADERS_ELEMENT_ID = 10
DLQ_HEADER_KEY_ID = 11
DLQ_HEADER_VALUE_ID = 12


@cache
def dlq_schema(schema_id: int = 0) -> Schema:
    """The dead-letter table's schema (the same for every table: built once, as pyiceberg's models are
    immutable; an apply of a thousand tables built it a thousand times)."""
    return Schema(
        NestedField(DLQ_TOPIC_ID, "topic", StringType(), required=False),
        NestedField(DLQ_PARTITION_ID, "partition", IntegerType(), required=True),
        NestedField(DLQ_OFFSET_ID, "offset", LongType(), required=True),
        NestedField(DLQ_TIMESTAMP_ID, "timestamp", TimestamptzType(), required=False),
        NestedField(DLQ_KEY_ID, "key", BinaryType(), required=False),
        NestedField(DLQ_VALUE_ID, "value", BinaryType(), required=False),
        NestedField(
            DLQ_HEADERS_ID,
            "headers",
            ListType(
                DLQ_HEADERS_ELEMENT_ID,
                StructType(
                    NestedField(DLQ_HEADER_KEY_ID, "key", StringType(), required=False),
                    NestedField(DLQ_HEADER_VALUE_ID, "value", BinaryType(), required=False),
                ),
                element_required=False,
            ),
            required=False,
        ),
        NestedField(DLQ_ERROR_ID, "error", StringType(), required=True),
        NestedField(DLQ_FAILED_AT_ID, "failed_at", TimestamptzType(), required=False),
        schema_id=schema_id,
    )
