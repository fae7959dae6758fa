"""Iceberg table metadata as an AWS Glue `TableInput`: names, Hive type strings, columns and parameters,
exactly as pyiceberg's and Iceberg Java's `GlueCatalog`s write them (pure functions)."""

from __future__ import annotations

from typing import Any

from pyiceberg.table.metadata import TableMetadata
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
    StringType,
    StructType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

from catalog.identifiers import Namespace

# The parameter names pyiceberg's and Iceberg Java's GlueCatalog write and read.
TABLE_TYPE = "table_type"
METADATA_LOCATION = "metadata_location"
PREVIOUS_METADATA_LOCATION = "previous_metadata_location"
ICEBERG_FIELD_ID = "iceberg.field.id"
ICEBERG_FIELD_OPTIONAL = "iceberg.field.optional"
ICEBERG_FIELD_CURRENT = "iceberg.field.current"
# floe's ownership mark on the Glue tables it publishes.
FLOE_WAREHOUSE = "floe.warehouse"

S3_SCHEMES = ("s3://", "s3a://", "s3n://")
# Glue's limits (CreateTable API reference): longer values make the whole call fail.
_MAX_PARAMETER_KEY = 255
_MAX_PARAMETER_VALUE = 512_000
_MAX_COMMENT = 255
_MAX_DESCRIPTION = 2048

_GLUE_PRIMITIVES: dict[type[IcebergType], str] = {
    BooleanType: "boolean",
    IntegerType: "int",
    LongType: "bigint",
    FloatType: "float",
    DoubleType: "double",
    DateType: "date",
    TimeType: "string",
    StringType: "string",
    UUIDType: "string",
    TimestampType: "timestamp",
    TimestamptzType: "timestamp",
    # Glue (Hive) types have no nanosecond timestamp: engines read the precise type from the metadata.
    TimestampNanoType: "timestamp",
    TimestamptzNanoType: "timestamp",
    FixedType: "binary",
    BinaryType: "binary",
}


def publishes_to_glue(warehouse_location: str) -> bool:
    """Only tables in S3 can be read through Glue by AWS engines."""
    return warehouse_location.startswith(S3_SCHEMES)


def glue_database_name(namespace: Namespace) -> str:
    return "_".join(namespace.levels).lower()


def glue_table_name(name: str) -> str:
    return name.lower()


def glue_type(iceberg_type: IcebergType) -> str:
    """The Hive type string Glue shows for an Iceberg type (as pyiceberg and Iceberg Java write it)."""
    if isinstance(iceberg_type, StructType):
        return "struct<" + ",".join(f"{f.name}:{glue_type(f.field_type)}" for f in iceberg_type.fields) + ">"
    if isinstance(iceberg_type, ListType):
        return f"array<{glue_type(iceberg_type.element_type)}>"
    if isinstance(iceberg_type, MapType):
        return f"map<{glue_type(iceberg_type.key_type)},{glue_type(iceberg_type.value_type)}>"
    if isinstance(iceberg_type, DecimalType):
        return f"decimal({iceberg_type.precision},{iceberg_type.scale})"
    return _GLUE_PRIMITIVES.get(type(iceberg_type), str(iceberg_type))


def glue_columns(metadata: TableMetadata) -> list[dict[str, Any]]:
    """The current schema's columns, then columns only older schemas have (`iceberg.field.current`
    false), each name once."""
    columns: dict[str, dict[str, Any]] = {}
    current = metadata.schema_by_id(metadata.current_schema_id)
    schemas = ([current] if current is not None else []) + [
        s for s in metadata.schemas if s.schema_id != metadata.current_schema_id
    ]
    for schema in schemas:
        is_current = schema.schema_id == metadata.current_schema_id
        for field in schema.columns:
            if field.name in columns:
                continue
            column: dict[str, Any] = {
                "Name": field.name,
                "Type": glue_type(field.field_type),
                "Parameters": {
                    ICEBERG_FIELD_ID: str(field.field_id),
                    ICEBERG_FIELD_OPTIONAL: str(field.optional).lower(),
                    ICEBERG_FIELD_CURRENT: str(is_current).lower(),
                },
            }
            if field.doc:
                column["Comment"] = field.doc[:_MAX_COMMENT]
            columns[field.name] = column
    return list(columns.values())


def previous_metadata_location(metadata: TableMetadata) -> str | None:
    """The metadata file this version replaced: the last entry of the metadata log."""
    return metadata.metadata_log[-1].metadata_file if metadata.metadata_log else None


def glue_table_input(
    name: str,
    metadata_location: str,
    metadata: TableMetadata,
    warehouse_id: str,
    existing_parameters: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The `TableInput` of CreateTable/UpdateTable for one table version.

    Parameters: the Glue table's existing ones (kept, as the GlueCatalogs do), the Iceberg table
    properties, then the pointer parameters and floe's mark, which nothing may override."""
    parameters = dict(existing_parameters or {})
    for key, value in metadata.properties.items():
        if len(key) <= _MAX_PARAMETER_KEY and len(str(value).encode()) <= _MAX_PARAMETER_VALUE:
            parameters[key] = str(value)
    parameters.pop(PREVIOUS_METADATA_LOCATION, None)
    parameters[TABLE_TYPE] = "ICEBERG"
    parameters[METADATA_LOCATION] = metadata_location
    previous = previous_metadata_location(metadata)
    if previous:
        parameters[PREVIOUS_METADATA_LOCATION] = previous
    parameters[FLOE_WAREHOUSE] = warehouse_id
    table_input: dict[str, Any] = {
        "Name": name,
        "TableType": "EXTERNAL_TABLE",
        "Parameters": parameters,
        "StorageDescriptor": {"Columns": glue_columns(metadata), "Location": metadata.location},
    }
    # Spark's `COMMENT` and Iceberg Java's GlueCatalog use the `comment` property.
    description = metadata.properties.get("comment")
    if description:
        table_input["Description"] = description[:_MAX_DESCRIPTION]
    return table_input
