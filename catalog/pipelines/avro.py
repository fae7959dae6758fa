"""The Avro schema equivalent to a table's inline schema (pure).

In inline mode it is the writer schema Avro records are decoded with (WarpStream: "the provided schema
needs to match the schema the records were written with exactly"); in registry mode it is the reader
schema the registry's writer schemas resolve to. Fields carry Iceberg's `field-id` (and `element-id`,
`key-id`, `value-id`) so a decoded record maps to the table by id.

Mapping: optional → `["null", T]` with default null; int → int; long → long; decimal(P,S) → bytes with
logicalType decimal (what Kafka producers' Avro serializers write); date → int date; time → long
time-micros; timestamp → long local-timestamp-micros; timestamptz → long timestamp-micros; uuid →
string uuid; binary → bytes; fixed[N] → fixed; struct → record; list → array; map with string keys →
map, other keys → array of key/value records (Iceberg's convention).
"""

from __future__ import annotations

from typing import Any

from pyiceberg.types import DecimalType, FixedType

from catalog.pipelines.schema_fields import FieldConfig, primitive_type
from catalog.pipelines.table_config import TableConfig

_SIMPLE: dict[str, Any] = {
    "boolean": "boolean",
    "int": "int",
    "long": "long",
    "float": "float",
    "double": "double",
    "string": "string",
    "binary": "bytes",
    "date": {"type": "int", "logicalType": "date"},
    "time": {"type": "long", "logicalType": "time-micros"},
    "timestamp": {"type": "long", "logicalType": "local-timestamp-micros"},
    "timestamptz": {"type": "long", "logicalType": "timestamp-micros"},
    "uuid": {"type": "string", "logicalType": "uuid"},
}


def avro_schema(table: TableConfig) -> dict[str, Any]:
    """The Avro record schema of the table's values (without floe's `_kafka` column)."""
    return {
        "type": "record",
        "name": table.table_name,
        "fields": [_field(f) for f in table.fields],
    }


def _field(config: FieldConfig) -> dict[str, Any]:
    avro_type = _type(config)
    body: dict[str, Any] = {"name": config.name}
    if config.optional:
        body["type"] = ["null", avro_type]
        body["default"] = None
    else:
        body["type"] = avro_type
    if config.doc is not None:
        body["doc"] = config.doc
    body["field-id"] = config.id
    return body


def _optional(config: FieldConfig) -> Any:
    avro_type = _type(config)
    return ["null", avro_type] if config.optional else avro_type


def _type(config: FieldConfig) -> Any:
    if config.type == "struct":
        return {"type": "record", "name": f"r{config.id}", "fields": [_field(f) for f in config.fields]}
    if config.type == "list":
        (element,) = config.fields
        return {"type": "array", "items": _optional(element), "element-id": element.id}
    if config.type == "map":
        key, value = config.fields
        if key.type == "string":
            return {"type": "map", "values": _optional(value), "key-id": key.id, "value-id": value.id}
        entry = {
            "type": "record",
            "name": f"k{key.id}_v{value.id}",
            "fields": [
                {"name": "key", "type": _type(key), "field-id": key.id},
                {"name": "value", "type": _optional(value), "field-id": value.id},
            ],
        }
        return {"type": "array", "logicalType": "map", "items": entry}
    if config.type in _SIMPLE:
        return _SIMPLE[config.type]
    found = primitive_type(config.type)
    if isinstance(found, DecimalType):
        return {"type": "bytes", "logicalType": "decimal", "precision": found.precision, "scale": found.scale}
    if isinstance(found, FixedType):
        return {"type": "fixed", "name": f"fixed_{config.id}", "size": len(found)}
    raise ValueError(f"no Avro type for {config.type}")
