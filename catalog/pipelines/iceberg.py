"""A configured table as Iceberg sees it: its schema (the user's field ids kept exactly, plus `_kafka`),
its partition spec and its properties; the same for its dead-letter table. Pure."""

from __future__ import annotations

from pyiceberg.partitioning import PARTITION_FIELD_ID_START, PartitionField, PartitionSpec
from pyiceberg.schema import Schema

from catalog.pipelines.columns import (
    CDC_FIELD,
    KAFKA_COLUMN,
    KAFKA_FIELD,
    KAFKA_FIELD_ID,
    KAFKA_STRUCT,
    KEY_FIELD,
    dlq_schema,
)
from catalog.pipelines.table_config import TableConfig

# Parquet's dictionary budget per column chunk (Iceberg's default: 2 MiB). A column falls back to plain
# encoding once its dictionary outgrows this, or after its first page when the dictionary does not pay;
# until then every value is hashed into the dictionary and, on fallback, re-encoded. An ingested file
# holds one Kafka partition's share of a micro-batch (25,000 rows of a 100,000-record batch on 4
# partitions), so with 2 MiB the unique columns (ids, offsets, keys, timestamps, free text) were
# dictionary-encoded for almost all their rows and then thrown away: 19 % of the ingester's JVM samples
# (JFR, benchmarks/ingest, 1 KiB JSON) against 5 % in the plain Spark job. With 64 KiB they give up within
# a few thousand rows, while low-cardinality columns (types, currencies, enums: dictionaries of a few KiB)
# keep theirs: 3.07 instead of 3.40 ingester CPU s per 100k records, the same data file bytes (248.0 vs
# 248.1 MiB for 1,000,000 records) and DuckDB query times within noise. Compaction rewrites with the same
# budget: a column with more than 64 KiB of distinct values per file is then stored plain (zstd still
# compresses its repeats).
PARQUET_DICTIONARY_BYTES = 64 * 1024
# Written on every table at creation: Parquet with zstd, and no shuffle before writing (ingestion
# writes each micro-batch as it comes; compaction reorganizes files later).
BASE_PROPERTIES = {
    "write.format.default": "parquet",
    "write.parquet.compression-codec": "zstd",
    "write.parquet.dict-size-bytes": str(PARQUET_DICTIONARY_BYTES),
    "write.distribution-mode": "none",
}
# floe's own properties: kept in sync with floe.yaml on every apply.
SOURCE_PROPERTIES = ("floe.source.cluster", "floe.source.topic", "floe.source.format")
DLQ_PROPERTY = "floe.dlq-for"
# append | upsert, set at creation; `floe apply` refuses to change it (absent: append).
TABLE_MODE_PROPERTY = "floe.table-mode"
# Upsert tables are merged with merge-on-read: a batch writes its new rows and position delete files for
# the rows it replaces, instead of rewriting every data file it touches (copy-on-write). Position
# deletes (format v2) are what every engine floe serves reads: pyiceberg 0.12 cannot read equality
# deletes, and Spark's MERGE never writes them. On a v3 table (`format_version: 3`) the same settings make
# Spark write deletion vectors instead. Partition-scoped delete files (v2): with Iceberg's default
# (file-scoped) a merge writes one delete file per data file it touches (every file, for a batch of
# random keys) and carries every earlier delete of those files into it, so each batch rewrote all the
# table's deletes (56,675 positions and 192 files for 5,000 keys after 12 batches, 7.6 s per MERGE);
# partition-scoped, it writes one per bucket holding only its own (4,698 positions, 16 files, 3.6 s).
# Deletion vectors are per data file whatever this says.
# Every merge scans the key column of each live data file; Spark's Iceberg reader weighs a file as at
# least `read.split.open-file-cost` per file it opens (the data file and each delete file applying to it),
# so with the default 4 MB a small data file of a bucket with a few partition-scoped delete files filled a
# whole split: one Spark task per data file (136 tasks for 144 files). At 64 KB the same scan is 4 tasks,
# and a merge of 20,000 changes into 100,000 keys took 2.58 s of JVM CPU instead of 3.61 s (-29 %,
# benchmarks/upsert/README.md "Where a merge's time goes"). Only Spark reads it; other engines ignore it.
UPSERT_PROPERTIES = {
    TABLE_MODE_PROPERTY: "upsert",
    "write.merge.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    "write.delete.mode": "merge-on-read",
    "write.delete.granularity": "partition",
    "read.split.open-file-cost": str(64 * 1024),
}


def data_schema(table: TableConfig, schema_id: int = 0) -> Schema:
    """The data table's schema: the user's fields with their ids, then the `_kafka` column (and `_cdc`
    for Debezium tables); an upsert table's key fields are its identifier fields, or, without
    `key_fields`, the `_key` column (the Kafka record key) before `_kafka` is."""
    extra = (CDC_FIELD,) if table.envelope == "debezium" else ()
    by_record_key = table.keyed_by_record_key
    return Schema(
        *(f.nested_field() for f in table.fields),
        *((KEY_FIELD,) if by_record_key else ()),
        KAFKA_FIELD,
        *extra,
        schema_id=schema_id,
        identifier_field_ids=(
            [KEY_FIELD.field_id] if by_record_key else [f.id for f in table.key_field_configs]
        ),
    )


def source_id(table: TableConfig, column: str) -> int:
    """The field id of a (validated) partition source column, dotted through structs (`_key`: the record
    key column of a table keyed by it)."""
    if table.keyed_by_record_key and column == KEY_FIELD.name:
        return KEY_FIELD.field_id
    if column.startswith(KAFKA_COLUMN + "."):
        name = column[len(KAFKA_COLUMN) + 1 :]
        return next(f.field_id for f in KAFKA_STRUCT.fields if f.name == name)
    fields = table.fields
    remaining = column
    while True:
        exact = next((f for f in fields if f.name == remaining), None)
        if exact is not None:
            return exact.id
        parent = next(f for f in fields if f.type == "struct" and remaining.startswith(f.name + "."))
        remaining = remaining[len(parent.name) + 1 :]
        fields = parent.fields


def partition_spec(table: TableConfig, spec_id: int = 0) -> PartitionSpec:
    """The table's partition spec (partition field ids from 1000, as Java assigns them)."""
    return PartitionSpec(
        *(
            PartitionField(
                source_id=source_id(table, p.source),
                field_id=PARTITION_FIELD_ID_START + index,
                transform=p.iceberg_transform(),
                name=p.name,
            )
            for index, p in enumerate(table.partitioning)
        ),
        spec_id=spec_id,
    )


def source_properties(table: TableConfig) -> dict[str, str]:
    return {
        "floe.source.cluster": table.source_cluster_name,
        "floe.source.topic": table.source_topic,
        "floe.source.format": table.source_format,
    }


def data_properties(table: TableConfig) -> dict[str, str]:
    """The data table's properties at creation."""
    mode = UPSERT_PROPERTIES if table.is_upsert else {}
    return {**BASE_PROPERTIES, **source_properties(table), **mode}


def dlq_properties(table: TableConfig) -> dict[str, str]:
    """The dead-letter table's properties at creation."""
    return {**BASE_PROPERTIES, **source_properties(table), DLQ_PROPERTY: table.table_name}


__all__ = [
    "BASE_PROPERTIES",
    "DLQ_PROPERTY",
    "KAFKA_FIELD_ID",
    "SOURCE_PROPERTIES",
    "TABLE_MODE_PROPERTY",
    "UPSERT_PROPERTIES",
    "data_properties",
    "data_schema",
    "dlq_properties",
    "dlq_schema",
    "partition_spec",
    "source_id",
    "source_properties",
]
