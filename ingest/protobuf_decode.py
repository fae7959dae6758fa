"""Decoding protobuf Kafka values into table rows, in Spark's JVM (floe's Java UDF, ingest/jvm).

Spark has no protobuf reader here (Maven Central does not serve `spark-protobuf` 4.0), so floe brings
its own: `ProtobufDecoder.java`, compiled at first use (`ingest.jvm_decoder`) and given to the session
as a jar, parses each value with protobuf-java (`DynamicMessage`) and fills the table's struct with
readers compiled once per (writer message, table schema): fields are matched by name, the table's schema
(and its field ids) stays what floe.yaml declares. Per batch the driver passes one configuration as a
binary literal (the table's fields, the writer schemas by id or the inline one, the framing); each JVM
parses it once (cached by hash). Executors run no Python. The required-field check and the split into
rows and dead letters are the same Spark expressions as for JSON and Avro (`ingest.decode`).
benchmarks/protobuf_decode measured this against upb in Python workers (`mapInArrow`), the path it
replaced (benchmarks/results/protobuf-decode.md).

Mapping (protobuf → Iceberg): bool, integers, float/double, string, bytes as themselves (integers
widen, never narrow); enum → string (its name; an unknown number as the number); message → struct
(by field name) or, into a string column, its JSON (protobuf's JSON mapping, keys sorted); repeated →
list; map → map; oneof → struct named after the oneof with one member set; Timestamp →
timestamptz/timestamp; Duration → long (microseconds) or string; wrappers (`Int64Value`…) → their
optional scalar; Struct/Value/ListValue → JSON string. Fields with presence (proto3 `optional`,
messages, oneof members, proto2) are NULL when unset; proto3 scalars without presence read as their
default. Unknown fields are ignored.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from google.protobuf import descriptor_pb2
from pyiceberg.types import (
    BinaryType,
    BooleanType,
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
from catalog.pipelines.protobuf import ProtoSchemaError, descriptor_set
from ingest.decode import RECORD_COLUMN, source

if TYPE_CHECKING:
    from pyiceberg.schema import Schema
    from pyspark.sql import DataFrame

    from ingest.registry_client import RegistryClient

RECORD = RECORD_COLUMN
DECODE_ERROR = INTERNAL_PREFIX + "decode_error"
# The decoder's result (the record and the error) before it is split into the two columns.
_DECODED = INTERNAL_PREFIX + "protobuf_decoded"


# -- the decoder's configuration ------------------------------------------------------------------------


@dataclass(frozen=True)
class WriterSchema:
    """A writer schema as the decoder gets it: the serialized FileDescriptorSet and its main file."""

    descriptor_set: bytes
    main_file: str

    @classmethod
    def of(cls, files: descriptor_pb2.FileDescriptorSet, main_file: str) -> WriterSchema:
        return cls(files.SerializeToString(), main_file)

    def config(self) -> dict[str, str]:
        return {"descriptor_set": base64.b64encode(self.descriptor_set).decode(), "main_file": self.main_file}


_KINDS: tuple[tuple[type[IcebergType], str], ...] = (
    (BooleanType, "boolean"),
    (IntegerType, "int"),
    (LongType, "long"),
    (FloatType, "float"),
    (DoubleType, "double"),
    (StringType, "string"),
    (UUIDType, "uuid"),
    (BinaryType, "binary"),
    (FixedType, "fixed"),
    (TimestamptzType, "timestamptz"),
    (TimestampType, "timestamp"),
    (StructType, "struct"),
    (ListType, "list"),
    (MapType, "map"),
)


def type_config(kind: IcebergType) -> dict[str, Any]:
    """A table type as the JVM decoder reads it: its kind, its text (reasons quote it), its parts. Kinds
    no protobuf value maps to (date, decimal, …) are `other`: a value for them is a type conflict."""
    name = next((k for cls, k in _KINDS if isinstance(kind, cls)), "other")
    node: dict[str, Any] = {"kind": name, "text": str(kind)}
    if isinstance(kind, FixedType):
        node["size"] = len(kind)
    elif isinstance(kind, StructType):
        node["fields"] = fields_config(kind.fields)
    elif isinstance(kind, ListType):
        node["element"] = type_config(kind.element_type)
    elif isinstance(kind, MapType):
        node["key"] = type_config(kind.key_type)
        node["value"] = type_config(kind.value_type)
    return node


def fields_config(fields: Sequence[NestedField]) -> list[dict[str, Any]]:
    return [{"name": f.name, "type": type_config(f.field_type)} for f in fields]


def decoder_config(
    fields: Sequence[NestedField],
    *,
    writers: Mapping[int, WriterSchema] | None = None,
    unusable: Mapping[int, str] | None = None,
    inline: tuple[WriterSchema, str] | None = None,
    framed: bool = True,
) -> bytes:
    """One batch's configuration of the JVM decoder (JSON): the table's fields; registry mode's writer
    schemas by id and the ids the driver could not use (with why); or inline mode's one schema and
    message name, with `framed` saying whether values carry the Confluent prefix (skipped)."""
    config: dict[str, Any] = {
        "fields": fields_config(fields),
        "framed": framed or inline is None,
        "writers": {str(i): w.config() for i, w in sorted((writers or {}).items())},
        "unusable": {str(i): why for i, why in sorted((unusable or {}).items())},
    }
    if inline is not None:
        config["inline"] = {**inline[0].config(), "message": inline[1]}
    return json.dumps(config, sort_keys=True, separators=(",", ":")).encode()


# -- in Spark -------------------------------------------------------------------------------------------


def _register(spark: Any, result_json: str) -> str:
    """Register the decoder UDF for this result type in the session (idempotent); its name."""
    from ingest.jvm_decoder import register_decoder

    name = "floe_protobuf_" + hashlib.sha256(result_json.encode()).hexdigest()[:16]
    register_decoder(spark, name, result_json)
    return name


def decode_protobuf(
    raw: DataFrame,
    fields: Sequence[NestedField],
    *,
    writers: Mapping[int, WriterSchema] | None = None,
    unusable: Mapping[int, str] | None = None,
    inline: tuple[WriterSchema, str] | None = None,
    framed: bool = True,
) -> DataFrame:
    """`raw` with `_record` (the decoded table fields, NULL when the value did not decode) and
    `_decode_error` (why not), decoded in the JVM."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as st

    from ingest.decode import spark_type

    record = st.StructType([st.StructField(f.name, spark_type(f.field_type), True) for f in fields])
    result = st.StructType(
        [st.StructField(RECORD, record, True), st.StructField(DECODE_ERROR, st.StringType(), True)]
    )
    name = _register(raw.sparkSession, result.json())
    config = decoder_config(fields, writers=writers, unusable=unusable, inline=inline, framed=framed)
    decoded = F.call_udf(name, F.col(source("value")), F.lit(bytearray(config)))
    return raw.select("*", decoded.alias(_DECODED)).select(
        *[F.col(c) for c in raw.columns],
        F.col(_DECODED).getField(RECORD).alias(RECORD),
        F.col(_DECODED).getField(DECODE_ERROR).alias(DECODE_ERROR),
    )


def decode_protobuf_table(
    raw: DataFrame,
    schema: Schema,
    *,
    writers: Mapping[int, WriterSchema] | None = None,
    unusable: Mapping[int, str] | None = None,
    inline: tuple[WriterSchema, str] | None = None,
    framed: bool = True,
) -> DataFrame:
    """Protobuf values as the table's rows and dead letters (the shape `ingest.decode` gives JSON and
    Avro): the required-field check runs on the decoded record as for the other formats."""
    from pyspark.sql import functions as F

    from ingest.decode import _finish, required_fields_error, user_fields

    fields = user_fields(schema)
    decoded = decode_protobuf(raw, fields, writers=writers, unusable=unusable, inline=inline, framed=framed)
    error = F.coalesce(F.col(DECODE_ERROR), required_fields_error(F.col(RECORD), schema))
    return _finish(decoded, fields, error)


def registry_writers(
    registry: RegistryClient, schema_ids: Iterable[int], known: dict[int, WriterSchema] | None = None
) -> tuple[dict[int, WriterSchema], dict[int, str]]:
    """The writer schemas of these ids from the registry (references resolved), and the ids that cannot
    be used with why (unknown id, not a protobuf schema, does not compile). `known` keeps the usable ones
    across batches (a schema id never changes)."""
    from ingest.registry_client import SchemaNotFoundError

    known = {} if known is None else known
    writers: dict[int, WriterSchema] = {}
    unusable: dict[int, str] = {}
    for schema_id in schema_ids:
        if schema_id in known:
            writers[schema_id] = known[schema_id]
            continue
        try:
            found = registry.schema(schema_id)
        except SchemaNotFoundError:
            unusable[schema_id] = "is not registered"
            continue
        if found.schema_type != "PROTOBUF":
            unusable[schema_id] = f"is a {found.schema_type} schema, not PROTOBUF"
            continue
        try:
            files, main = descriptor_set(found.schema_str, registry.referenced_schemas(found))
        except ProtoSchemaError as exc:
            unusable[schema_id] = f"cannot be used: {exc}"
            continue
        writers[schema_id] = known[schema_id] = WriterSchema.of(files, main)
    return writers, unusable


__all__ = [
    "DECODE_ERROR",
    "RECORD",
    "WriterSchema",
    "decode_protobuf",
    "decode_protobuf_table",
    "decoder_config",
    "registry_writers",
    "type_config",
]
