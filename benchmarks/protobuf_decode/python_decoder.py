"""The protobuf decode path floe's JVM decoder replaced, kept for benchmarks/protobuf_decode to measure
against: values decoded in Spark's Python workers (`mapInArrow`).

Each value is parsed by the protobuf runtime (upb) and converted to the table's columns by converters
compiled once per (writer message, table schema): fields are matched by name. The rows come back as
Arrow columns; the required-field check and the split into rows and dead letters are the same Spark
expressions as for JSON and Avro (`ingest.decode`). The framing is read in Python too (`wire_format`);
the decoder's configuration and the registry lookups are floe's own (`ingest.protobuf_decode`).

Mapping (protobuf → Iceberg): bool, integers, float/double, string, bytes as themselves (integers
widen, never narrow); enum → string (its name; an unknown number as the number); message → struct
(by field name) or, into a string column, its JSON; repeated → list; map → map; oneof → struct named
after the oneof with one member set; Timestamp → timestamptz/timestamp; Duration → long (microseconds)
or string; wrappers (`Int64Value`…) → their optional scalar; Struct/Value/ListValue → JSON string.
Fields with presence (proto3 `optional`, messages, oneof members, proto2) are NULL when unset; proto3
scalars without presence read as their default. Unknown fields are ignored.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from google.protobuf import descriptor_pb2, json_format, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError, Message
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

from benchmarks.protobuf_decode.wire_format import RecordError, split_confluent
from catalog.pipelines.protobuf import ProtoSchemaError, build_pool, message_name_at
from ingest.decode import RECORD_COLUMN, source
from ingest.protobuf_decode import DECODE_ERROR, WriterSchema

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.schema import Schema
    from pyspark.sql import DataFrame


RECORD = RECORD_COLUMN
_INT32 = (-(1 << 31), (1 << 31) - 1)
_INT64 = (-(1 << 63), (1 << 63) - 1)
_WRAPPERS = {
    "google.protobuf.DoubleValue",
    "google.protobuf.FloatValue",
    "google.protobuf.Int64Value",
    "google.protobuf.UInt64Value",
    "google.protobuf.Int32Value",
    "google.protobuf.UInt32Value",
    "google.protobuf.BoolValue",
    "google.protobuf.StringValue",
    "google.protobuf.BytesValue",
}
_JSON_TYPES = {"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"}
_TIMESTAMP = "google.protobuf.Timestamp"
_DURATION = "google.protobuf.Duration"


# -- converters: one protobuf value → one table value ----------------------------------------------------

Convert = Callable[[Any], Any]
Read = Callable[[Message], Any]


def _kind(field: FieldDescriptor) -> str:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        return str(field.message_type.full_name)
    if field.type == FieldDescriptor.TYPE_ENUM:
        return f"enum {field.enum_type.full_name}"
    names = {v: k[5:].lower() for k, v in vars(FieldDescriptor).items() if k.startswith("TYPE_")}
    return str(names.get(field.type, field.type))


def _mismatch(path: str, source: str, target: IcebergType) -> Convert:
    reason = f"field {path}: protobuf {source} does not fit the table's {target}"

    def fail(_: Any) -> Any:
        raise RecordError(reason)

    return fail


def _ranged(path: str, low: int, high: int) -> Convert:
    def check(value: int) -> int:
        if not low <= value <= high:
            raise RecordError(f"field {path}: {value} is out of range for the table's type")
        return value

    return check


def _identity(value: Any) -> Any:
    return value


def _as_json(value: Message) -> str:
    return json.dumps(json_format.MessageToDict(value), separators=(",", ":"), sort_keys=True)


def _timestamp_micros(value: Message) -> int:
    return int(value.seconds) * 1_000_000 + int(value.nanos) // 1000


def _scalar(field: FieldDescriptor, target: IcebergType, path: str) -> Convert:
    """A converter of one (non-repeated) value of `field` into `target`."""
    t = field.type
    signed32 = (FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_SINT32, FieldDescriptor.TYPE_SFIXED32)
    signed64 = (FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_SINT64, FieldDescriptor.TYPE_SFIXED64)
    unsigned32 = (FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_FIXED32)
    unsigned64 = (FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED64)
    if t == FieldDescriptor.TYPE_MESSAGE:
        return _message_value(field.message_type, target, path)
    if isinstance(target, BooleanType) and t == FieldDescriptor.TYPE_BOOL:
        return _identity
    if isinstance(target, IntegerType):
        if t in signed32:
            return _identity
        if t in (*unsigned32, *signed64, *unsigned64):
            return _ranged(path, *_INT32)
    if isinstance(target, LongType):
        if t in (*signed32, *unsigned32, *signed64):
            return _identity
        if t in unsigned64:
            return _ranged(path, *_INT64)
    if isinstance(target, DoubleType | FloatType) and t in (
        FieldDescriptor.TYPE_DOUBLE,
        FieldDescriptor.TYPE_FLOAT,
        *signed32,
        *unsigned32,
    ):
        return float
    if isinstance(target, StringType | UUIDType):
        if t == FieldDescriptor.TYPE_STRING:
            return _identity
        if t == FieldDescriptor.TYPE_ENUM and isinstance(target, StringType):
            names = {v.number: v.name for v in field.enum_type.values}
            return lambda number: names.get(number, str(number))
    if isinstance(target, BinaryType) and t == FieldDescriptor.TYPE_BYTES:
        return _identity
    if isinstance(target, FixedType) and t == FieldDescriptor.TYPE_BYTES:
        size = len(target)

        def fixed(value: bytes) -> bytes:
            if len(value) != size:
                raise RecordError(f"field {path}: {len(value)} bytes, the table's fixed[{size}] needs {size}")
            return value

        return fixed
    return _mismatch(path, _kind(field), target)


def _message_value(message: Descriptor, target: IcebergType, path: str) -> Convert:
    name = message.full_name
    if name == _TIMESTAMP and isinstance(target, TimestamptzType | TimestampType):
        return _timestamp_micros  # Arrow takes microseconds since the epoch (UTC) for both
    if name == _DURATION and isinstance(target, LongType):
        return lambda d: int(d.seconds) * 1_000_000 + int(d.nanos) // 1000
    if name in _WRAPPERS and not isinstance(target, StructType):
        inner = _scalar(message.fields_by_name["value"], target, path)
        return lambda wrapper: inner(wrapper.value)
    if isinstance(target, StringType) and (name in _JSON_TYPES or name in (_TIMESTAMP, _DURATION)):
        return _as_json
    if isinstance(target, StructType):
        return _struct(message, target.fields, path)
    if isinstance(target, StringType):
        return _as_json
    return _mismatch(path, name, target)


def _struct(message: Descriptor, fields: Sequence[NestedField], path: str) -> Convert:
    readers = [(f.name, reader(message, f, f"{path}.{f.name}" if path else f.name)) for f in fields]

    def convert(value: Message) -> dict[str, Any]:
        return {name: read(value) for name, read in readers}

    return convert


def _none(_: Message) -> None:
    return None


def reader(message: Descriptor, target: NestedField, path: str) -> Read:
    """How to read the table field `target` from a message of type `message` (by name)."""
    field = message.fields_by_name.get(target.name)
    if field is None:
        oneof = message.oneofs_by_name.get(target.name)
        if oneof is not None and isinstance(target.field_type, StructType):
            return _oneof(message, oneof.name, target.field_type, path)
        return _none  # not in the writer's schema: NULL (a required one goes to the DLQ)
    name = field.name
    kind = target.field_type
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        if not isinstance(kind, MapType):
            return _read_fail(name, _mismatch(path, "map", kind))
        key = _scalar(field.message_type.fields_by_name["key"], kind.key_type, f"{path}.key")
        value = _scalar(field.message_type.fields_by_name["value"], kind.value_type, f"{path}.value")
        if key is _identity and value is _identity:
            # Indexing the map is faster than its items() view (measured); Arrow takes a dict.

            def plain(m: Message) -> dict[Any, Any]:
                entries = getattr(m, name)
                return {k: entries[k] for k in entries}

            return plain

        def converted(m: Message) -> list[tuple[Any, Any]]:
            entries = getattr(m, name)
            return [(key(k), value(entries[k])) for k in entries]

        return converted
    if _repeated(field):
        if not isinstance(kind, ListType):
            return _read_fail(name, _mismatch(path, f"repeated {_kind(field)}", kind))
        element = _scalar(field, kind.element_type, f"{path}[]")
        if element is _identity:
            return lambda m: list(getattr(m, name))
        return lambda m: [element(v) for v in getattr(m, name)]
    convert = _scalar(field, kind, path)
    if field.has_presence:
        if convert is _identity:
            return lambda m: getattr(m, name) if m.HasField(name) else None
        return lambda m: convert(getattr(m, name)) if m.HasField(name) else None
    if convert is _identity:
        return lambda m: getattr(m, name)
    return lambda m: convert(getattr(m, name))


def _repeated(field: FieldDescriptor) -> bool:
    # protobuf 7 dropped `label` for `is_repeated`; older runtimes have only `label`.
    flag = getattr(field, "is_repeated", None)
    return bool(flag) if flag is not None else field.label == FieldDescriptor.LABEL_REPEATED


def _read_fail(name: str, fail: Convert) -> Read:
    # Only a value that is there fails: an empty repeated field or map is no conflict.
    return lambda m: fail(None) if len(getattr(m, name)) else None


def _oneof(message: Descriptor, oneof: str, target: StructType, path: str) -> Read:
    readers = [(f.name, reader(message, f, f"{path}.{f.name}")) for f in target.fields]

    def read(m: Message) -> dict[str, Any] | None:
        if m.WhichOneof(oneof) is None:
            return None
        return {name: get(m) for name, get in readers}

    return read


# -- decoding values ------------------------------------------------------------------------------------


@dataclass
class _Compiled:
    message_class: type[Message]
    readers: list[Read]


class Decoder:
    """Values → the table's top-level columns (as Python lists) and a reason per value that failed.

    `writers` maps schema ids to writer schemas (registry mode: the message comes from the indexes);
    `inline` is the one (schema, message name) of inline mode, with `framed` saying whether values
    carry the Confluent prefix (skipped)."""

    def __init__(
        self,
        fields: Sequence[NestedField],
        *,
        writers: Mapping[int, WriterSchema] | None = None,
        inline: tuple[WriterSchema, str] | None = None,
        framed: bool = True,
        unusable: Mapping[int, str] | None = None,
    ) -> None:
        self.fields = list(fields)
        self.writers = dict(writers or {})
        self.unusable = dict(unusable or {})  # schema ids the driver could not use, and why
        self.inline = inline
        self.framed = framed or inline is None
        self._compiled: dict[tuple[bytes, str], _Compiled | RecordError] = {}
        self._pools: dict[bytes, Any] = {}
        self._by_index: dict[tuple[int, tuple[int, ...]], _Compiled | RecordError] = {}

    def _compile(self, schema: WriterSchema, message: str) -> _Compiled | RecordError:
        key = (hashlib.sha256(schema.descriptor_set).digest(), message)
        found = self._compiled.get(key)
        if found is None:
            try:
                pool = self._pools.get(key[0])
                if pool is None:
                    files = descriptor_pb2.FileDescriptorSet.FromString(schema.descriptor_set)
                    pool = self._pools[key[0]] = build_pool(files)
                descriptor = pool.FindMessageTypeByName(message)
                found = _Compiled(
                    message_factory.GetMessageClass(descriptor),
                    [reader(descriptor, f, f.name) for f in self.fields],
                )
            except (ProtoSchemaError, KeyError) as exc:
                found = RecordError(f"the writer schema cannot be used: {exc}")
            self._compiled[key] = found
        return found

    def _for_record(self, value: bytes) -> tuple[_Compiled, int]:
        if self.inline is not None:
            start = split_confluent(value)[2] if self.framed else 0
            compiled = self._compile(*self.inline)
        else:
            schema_id, indexes, start = split_confluent(value)
            key = (schema_id, tuple(indexes))
            compiled = self._by_index.get(key)  # type: ignore[assignment]
            if compiled is None:
                writer = self.writers.get(schema_id)
                if writer is None:
                    why = self.unusable.get(schema_id, "is not registered")
                    compiled = RecordError(f"value's schema id {schema_id} {why}")
                else:
                    try:
                        files = descriptor_pb2.FileDescriptorSet.FromString(writer.descriptor_set)
                        name = message_name_at(files, writer.main_file, indexes)
                    except ProtoSchemaError as exc:
                        compiled = RecordError(f"value's schema id {schema_id}: {exc}")
                    else:
                        compiled = self._compile(writer, name)
                self._by_index[key] = compiled
        if isinstance(compiled, RecordError):
            raise compiled
        return compiled, start

    def decode(self, values: Iterable[bytes | None]) -> tuple[list[list[Any]], list[bool], list[str | None]]:
        """Per top-level field a column of values; whether each record decoded; each one's error."""
        columns: list[list[Any]] = [[] for _ in self.fields]
        valid: list[bool] = []
        errors: list[str | None] = []
        width = range(len(self.fields))
        for value in values:
            if value is None:
                row: list[Any] | None = None
                error: str | None = "record has no value (tombstone)"
            else:
                try:
                    compiled, start = self._for_record(value)
                    try:
                        message = compiled.message_class.FromString(value[start:] if start else value)
                    except DecodeError:
                        name = compiled.message_class.DESCRIPTOR.full_name
                        raise RecordError(f"value is not a protobuf {name} (truncated or corrupt)") from None
                    row = [read(message) for read in compiled.readers]
                    error = None
                except RecordError as exc:
                    row, error = None, str(exc)
            if row is None:
                for i in width:
                    columns[i].append(None)
                valid.append(False)
            else:
                for i in width:
                    columns[i].append(row[i])
                valid.append(True)
            errors.append(error)
        return columns, valid, errors


# -- in Spark -------------------------------------------------------------------------------------------


def arrow_record_type(fields: Sequence[NestedField]) -> pa.StructType:
    """The Arrow type Spark expects for the decoded record struct."""
    from pyspark.sql import types as st
    from pyspark.sql.pandas.types import to_arrow_type

    from ingest.decode import spark_type

    spark = st.StructType([st.StructField(f.name, spark_type(f.field_type), True) for f in fields])
    arrow: pa.StructType = to_arrow_type(spark)
    return arrow


def decode_batches(
    batches: Iterable[pa.RecordBatch],
    decoder: Decoder,
    record_type: pa.StructType,
    value_column: str = source("value"),
) -> Iterator[pa.RecordBatch]:
    """Each Arrow batch of raw Kafka rows (internal column names) with the decoded record and the
    decode error added."""
    import pyarrow as pa

    for batch in batches:
        values = batch.column(value_column).to_pylist()
        columns, valid, errors = decoder.decode(values)
        arrays = [
            pa.array(column, type=record_type.field(i).type, from_pandas=False)
            for i, column in enumerate(columns)
        ]
        mask = pa.array([not v for v in valid], type=pa.bool_())
        record = pa.StructArray.from_arrays(arrays, fields=list(record_type), mask=mask)
        yield pa.RecordBatch.from_arrays(
            [*batch.columns, record, pa.array(errors, type=pa.string())],
            names=[*batch.schema.names, RECORD, DECODE_ERROR],
        )


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
    `_decode_error` (why not), decoded in the Python workers."""
    from pyspark.sql import types as st

    from ingest.decode import spark_type

    decoder_fields = list(fields)
    record = st.StructType([st.StructField(f.name, spark_type(f.field_type), True) for f in fields])
    schema = st.StructType(
        [
            *raw.schema.fields,
            st.StructField(RECORD, record, True),
            st.StructField(DECODE_ERROR, st.StringType(), True),
        ]
    )
    writer_map, unusable_map = dict(writers or {}), dict(unusable or {})

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        decoder = Decoder(
            decoder_fields, writers=writer_map, unusable=unusable_map, inline=inline, framed=framed
        )
        yield from decode_batches(batches, decoder, arrow_record_type(decoder_fields))

    return raw.mapInArrow(run, schema)


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


__all__ = ["Decoder", "arrow_record_type", "decode_batches", "decode_protobuf_table", "reader"]
