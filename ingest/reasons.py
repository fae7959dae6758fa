"""Why a record could not become a row, precisely: which field and why, or where its value stops parsing.

Spark decodes every record in the JVM (ingest/decode.py) and only knows that a value did not parse
(`JSON_MISMATCH`, `AVRO_MISMATCH`). For those records alone — the dead letters — these pure functions
look again, in Python, and say why:

- `not valid JSON: Expecting ',' delimiter at byte 17`; `not a JSON object (got array)`;
- `field 'amount': expected long, got string "abc"` (nested fields dotted, list elements `[2]`);
- `field 'profile.country': Avro string of 40 bytes needs 40 bytes, the value has 3 left (at byte 12)`.

They follow the rules of Spark's JSON reader (a long takes an integral number only, a string takes any
JSON value, a timestamp takes ISO text or epoch seconds…) and of Avro's binary encoding. When they find
nothing wrong where Spark refused, the generic reason stays (with a hint that it is Spark's).
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import decimal
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

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

from ingest.decode import AVRO_MISMATCH, JSON_MISMATCH, user_fields

INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)
# Spark's JSON reader takes these strings for a float or a double.
_NON_FINITE = {"NaN", "Infinity", "+Infinity", "-Infinity", "+INF", "-INF"}
_JAVA_DECIMAL = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")
_SHOWN = 40  # characters of an offending value shown in a reason


# -- JSON -----------------------------------------------------------------------------------------------


def json_reason(value: bytes, fields: Sequence[NestedField], base: int = 0) -> str | None:
    """Why `value` is not a JSON object of `fields` as Spark reads it (None when nothing is wrong);
    byte positions count `base` bytes before `value` (a Confluent prefix) too."""
    document, reason = json_object(value, base)
    if document is None:
        return reason
    return _object_reason(document, fields, "")


def json_object(value: bytes, base: int = 0) -> tuple[dict[str, Any] | None, str | None]:
    """`value` parsed as a JSON object, or None and why it is not one (`json_reason`'s first checks)."""
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"not valid JSON: not UTF-8 text at byte {base + exc.start}"
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, f"not valid JSON: {exc.msg} at byte {base + len(text[: exc.pos].encode())}"
    except RecursionError:
        return None, "not valid JSON: nested too deeply"
    if not isinstance(document, dict):
        return None, f"not a JSON object (got {_kind(document)})"
    return document, None


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _shown(value: Any) -> str:
    """The offending value as the reason shows it: its kind and (shortened) JSON text."""
    if isinstance(value, dict | list):
        return _kind(value)
    text = json.dumps(value, ensure_ascii=False)
    if len(text) > _SHOWN:
        text = text[: _SHOWN - 1] + "…"
    return f"{_kind(value)} {text}"


def _type_name(kind: IcebergType) -> str:
    if isinstance(kind, StructType):
        return "struct (a JSON object)"
    if isinstance(kind, ListType):
        return "list (a JSON array)"
    if isinstance(kind, MapType):
        return "map (a JSON object)"
    return str(kind)


def _object_reason(document: Mapping[str, Any], fields: Sequence[NestedField], prefix: str) -> str | None:
    for f in fields:
        if f.name in document:
            reason = value_reason(document[f.name], f.field_type, f"{prefix}{f.name}")
            if reason is not None:
                return reason
    return None


def value_reason(value: Any, kind: IcebergType, path: str) -> str | None:
    """Why `value` cannot be read as `kind` (None when it can); `path` names the field."""
    if value is None:
        return None  # a missing required field is Spark's own check (ingest/decode.py)
    problem = _problem(value, kind, path)
    if problem is None or problem.startswith("field '"):
        return problem
    return f"field '{path}': {problem}"


def plain_value_check(kind: IcebergType) -> Callable[[Any], bool] | None:
    """A shortcut of `value_reason` for the values most records carry: True when a JSON value is valid
    for `kind` and read as it is (an int in range for an int or long, a str for a string, a float for a
    double, a bool for a boolean); False (or None for other kinds) leaves the value to the full rules."""
    if isinstance(kind, StringType):
        return lambda value: type(value) is str
    if isinstance(kind, BooleanType):
        return lambda value: type(value) is bool
    if isinstance(kind, IntegerType | LongType):
        low, high = INT32 if isinstance(kind, IntegerType) else INT64
        return lambda value: type(value) is int and low <= value <= high
    if isinstance(kind, DoubleType):
        return lambda value: type(value) is float
    return None


def _problem(value: Any, kind: IcebergType, path: str) -> str | None:
    # The reason's text is built only for a value at fault: most are not, and showing the value (its
    # JSON text) cost more than the checks.
    def expected() -> str:
        return f"expected {_type_name(kind)}, got {_shown(value)}"

    if isinstance(kind, StringType | UUIDType):
        return None  # Spark keeps any JSON value as its text
    if isinstance(kind, BooleanType):
        return None if isinstance(value, bool) else expected()
    if isinstance(kind, IntegerType | LongType):
        if isinstance(value, bool) or not isinstance(value, int):
            return expected()
        low, high = INT32 if isinstance(kind, IntegerType) else INT64
        return None if low <= value <= high else f"{expected()} (out of range)"
    if isinstance(kind, FloatType | DoubleType):
        if isinstance(value, bool):
            return expected()
        if isinstance(value, int | float) or (isinstance(value, str) and value in _NON_FINITE):
            return None
        return expected()
    if isinstance(kind, DecimalType):
        return _decimal_problem(value, kind, expected)
    if isinstance(kind, DateType):
        return _temporal_problem(value, expected, dt.date.fromisoformat)
    if isinstance(kind, TimestamptzType):
        if isinstance(value, int) and not isinstance(value, bool):
            return None  # epoch seconds
        problem = _temporal_problem(value, expected, dt.datetime.fromisoformat)
        offset = None if problem is not None else dt.datetime.fromisoformat(value.strip()).utcoffset()
        if offset is not None and abs(offset) > dt.timedelta(hours=18):
            return f"{expected()} (its offset is beyond ±18:00)"  # Java's limit; Python allows ±24:00
        return problem
    if isinstance(kind, TimestampType):  # without time zone: ISO text only, and no offset in it
        problem = _temporal_problem(value, expected, dt.datetime.fromisoformat)
        if problem is None and dt.datetime.fromisoformat(value.strip()).tzinfo is not None:
            return f"{expected()} (a timestamp without time zone takes no offset)"
        return problem
    if isinstance(kind, BinaryType | FixedType):
        if not isinstance(value, str):
            return expected()
        try:
            base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            return f"expected base64 text ({kind}), got {_shown(value)}"
        return None
    if isinstance(kind, StructType):
        if not isinstance(value, dict):
            return expected()
        return _object_reason(value, kind.fields, f"{path}.")
    if isinstance(kind, ListType):
        if not isinstance(value, list):
            return expected()
        for i, element in enumerate(value):
            reason = value_reason(element, kind.element_type, f"{path}[{i}]")
            if reason is not None:
                return reason
        return None
    if isinstance(kind, MapType):
        if not isinstance(value, dict):
            return expected()
        for key, entry in value.items():
            reason = value_reason(entry, kind.value_type, f"{path}[{json.dumps(key)}]")
            if reason is not None:
                return reason
        return None
    return None


def _decimal_problem(value: Any, kind: DecimalType, expected: Callable[[], str]) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return expected()
    if isinstance(value, str):
        # Spark drops grouping commas, then reads the text as Java's BigDecimal does (no spaces,
        # underscores or words, which Python's Decimal would take).
        value = value.replace(",", "")
        if not _JAVA_DECIMAL.fullmatch(value):
            return expected()
    try:
        number = decimal.Decimal(str(value))
    except decimal.InvalidOperation:
        return expected()
    if not number.is_finite():
        return expected()
    rounded = number.quantize(decimal.Decimal(1).scaleb(-kind.scale), rounding=decimal.ROUND_HALF_UP)
    digits = len(rounded.as_tuple().digits)
    integral = max(digits - kind.scale, 0) if rounded != 0 else 0
    if integral > kind.precision - kind.scale:
        return f"{expected()} (does not fit {kind})"
    return None


def _temporal_problem(value: Any, expected: Callable[[], str], parse: Any) -> str | None:
    if not isinstance(value, str):
        return expected()
    text = value.strip()
    # Python also reads the basic layout (20240102) and any character between date and time; Spark
    # reads dashes, and `T` or a space.
    if text[4:5] != "-" or (len(text) > 10 and text[10] not in "T "):
        return _not_iso(expected, parse)
    try:
        parse(text)
    except ValueError:
        return _not_iso(expected, parse)
    return None


def _not_iso(expected: Callable[[], str], parse: Any) -> str:
    return f"{expected()} (not an ISO 8601 {'date' if parse is dt.date.fromisoformat else 'timestamp'})"


# -- Avro -----------------------------------------------------------------------------------------------


class _AvroEnd(Exception):
    """Where the Avro binary data stops making sense."""


class _Cursor:
    def __init__(self, data: bytes, base: int) -> None:
        self.data = data
        self.pos = 0
        self.base = base  # bytes before `data` in the Kafka value (the Confluent prefix)

    def at(self) -> int:
        return self.base + self.pos

    def take(self, size: int, what: str) -> bytes:
        if self.pos + size > len(self.data):
            left = len(self.data) - self.pos
            raise _AvroEnd(f"{what} needs {size} bytes, the value has {left} left (at byte {self.at()})")
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        return chunk

    def varint(self, what: str, max_bytes: int) -> int:
        shift = result = 0
        for _ in range(max_bytes):
            if self.pos >= len(self.data):
                raise _AvroEnd(f"{what} is cut off: the value ends at byte {self.at()}")
            byte = self.data[self.pos]
            self.pos += 1
            result |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return (result >> 1) ^ -(result & 1)
        raise _AvroEnd(f"{what} is not a valid varint (longer than {max_bytes} bytes, at byte {self.at()})")


def avro_reason(
    value: bytes, writer_schema: str | Mapping[str, Any], *, confluent_framing: bool
) -> str | None:
    """Why `value` is not Avro binary data of `writer_schema` (None when it decodes)."""
    schema = json.loads(writer_schema) if isinstance(writer_schema, str) else writer_schema
    payload, base = (value[5:], 5) if confluent_framing else (value, 0)
    cursor = _Cursor(payload, base)
    try:
        _read(cursor, schema, "", {}, namespace=None)
    except _AvroEnd as exc:
        return str(exc)
    return None


def _named(schema: Mapping[str, Any], namespace: str | None) -> tuple[str, str | None]:
    name = str(schema["name"])
    space = schema.get("namespace", namespace)
    if "." in name:
        return name, name.rsplit(".", 1)[0]
    return (f"{space}.{name}" if space else name), space


def _read(cursor: _Cursor, schema: Any, path: str, names: dict[str, Any], namespace: str | None) -> None:
    """Skip one value of `schema` at `cursor`, raising _AvroEnd (naming the field) where it breaks."""
    where = f"field '{path}': " if path else ""
    if isinstance(schema, list):
        branch = cursor.varint(f"{where}union branch index", 10)
        if not 0 <= branch < len(schema):
            raise _AvroEnd(f"{where}union branch {branch} does not exist ({len(schema)} branches)")
        _read(cursor, schema[branch], path, names, namespace)
        return
    if isinstance(schema, str):
        if schema in names:
            _read(cursor, names[schema], path, names, namespace)
            return
        qualified = f"{namespace}.{schema}" if namespace and "." not in schema else schema
        if qualified in names:
            _read(cursor, names[qualified], path, names, namespace)
            return
        schema = {"type": schema}
    kind = schema.get("type")
    if isinstance(kind, list | dict):
        _read(cursor, kind, path, names, namespace)
        return
    if kind == "null":
        return
    if kind == "boolean":
        cursor.take(1, f"{where}Avro boolean")
    elif kind == "int":
        cursor.varint(f"{where}Avro int", 5)
    elif kind == "long":
        cursor.varint(f"{where}Avro long", 10)
    elif kind == "float":
        cursor.take(4, f"{where}Avro float")
    elif kind == "double":
        cursor.take(8, f"{where}Avro double")
    elif kind in ("bytes", "string"):
        size = cursor.varint(f"{where}Avro {kind} length", 10)
        if size < 0:
            raise _AvroEnd(f"{where}Avro {kind} length {size} is negative (at byte {cursor.at()})")
        cursor.take(size, f"{where}Avro {kind} of {size} bytes")
    elif kind == "fixed":
        full, _ = _named(schema, namespace)
        names[full] = schema
        cursor.take(int(schema["size"]), f"{where}Avro fixed of {schema['size']} bytes")
    elif kind == "enum":
        full, _ = _named(schema, namespace)
        names[full] = schema
        index = cursor.varint(f"{where}Avro enum index", 5)
        symbols = schema.get("symbols", [])
        if not 0 <= index < len(symbols):
            raise _AvroEnd(f"{where}enum index {index} is out of range ({len(symbols)} symbols)")
    elif kind in ("record", "error"):
        full, space = _named(schema, namespace)
        names[full] = schema
        for f in schema.get("fields", []):
            _read(cursor, f["type"], f"{path}.{f['name']}" if path else str(f["name"]), names, space)
    elif kind in ("array", "map"):
        item = schema["items"] if kind == "array" else schema["values"]
        index = 0
        while True:
            count = cursor.varint(f"{where}Avro {kind} block count", 10)
            if count == 0:
                return
            if count < 0:
                count = -count
                cursor.varint(f"{where}Avro {kind} block size", 10)
            for _ in range(count):
                if kind == "map":
                    size = cursor.varint(f"{where}Avro map key length", 10)
                    if size < 0:
                        raise _AvroEnd(
                            f"{where}Avro map key length {size} is negative (at byte {cursor.at()})"
                        )
                    key = cursor.take(size, f"{where}Avro map key of {size} bytes")
                    child = f"{path}[{json.dumps(key.decode('utf-8', 'replace'))}]"
                else:
                    child = f"{path}[{index}]"
                _read(cursor, item, child, names, namespace)
                index += 1
    else:
        raise _AvroEnd(f"{where}unknown Avro type {kind!r} in the writer schema")


def _int(cursor: _Cursor, what: str, max_bytes: int) -> int:
    return cursor.varint(what, max_bytes)


# -- the dead letters of a batch ------------------------------------------------------------------------


@dataclass(frozen=True)
class DeadLetterReasons:
    """Refines the error column of a batch's dead letters (see `refine`)."""

    source_format: str  # json | avro | protobuf (whose decoder's errors are precise already)
    schema: Schema
    avro_schema: Mapping[str, Any] | None = None  # inline mode: every value is written with it
    writer_schemas: Mapping[int, str] | None = None  # registry mode: writer schema per schema id
    confluent_framing: bool = False

    def reason(self, value: bytes | None, generic: str) -> str:
        """The precise reason for a record Spark refused with `generic`."""
        if value is None:
            return generic
        found: str | None = None
        if generic == JSON_MISMATCH:
            base = 5 if self.confluent_framing else 0
            found = json_reason(value[base:], user_fields(self.schema), base)
        elif generic == AVRO_MISMATCH:
            found = self._avro(value)
        else:
            return generic
        return found or f"{generic} (Spark's decoder refused it; no field is at fault as floe reads it)"

    def _avro(self, value: bytes) -> str | None:
        writer: str | Mapping[str, Any] | None = self.avro_schema
        if self.writer_schemas is not None:
            writer = self.writer_schemas.get(int.from_bytes(value[1:5], "big")) if len(value) >= 5 else None
        if writer is None:
            return None
        found = avro_reason(value, writer, confluent_framing=self.confluent_framing)
        if found is None and self.writer_schemas is not None:
            return "value decodes with its writer schema, which cannot be resolved to the table's Avro schema"
        return f"not valid Avro: {found}" if found else None

    def refine(self, value: bytes | None, error: str) -> str:
        """`error` made precise when it is one of Spark's generic ones (batches.py asks on the driver,
        for dead letters only). Never raises: a dead letter must be written whatever its value."""
        if error not in (JSON_MISMATCH, AVRO_MISMATCH):
            return error
        try:
            return self.reason(value, error)
        except Exception:
            return error
