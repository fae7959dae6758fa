"""JSON record values as table rows, in Python: the shared consumer's decoder (`ingest.shared`).

It reads a value exactly as Spark's path does (ingest/decode.py with the rules `ingest.reasons` spells
out): a long takes an integral number, a string any JSON value (kept as its JSON text), a timestamp
ISO text or epoch seconds, binary base64 text; keys the table does not declare are not kept but
listed; a required field that is missing or null makes the record a dead letter, named the way the
Spark path names it. A value that cannot be a row gets the precise reason `ingest.reasons` gives.

Types outside `SUPPORTED` (UUID, fixed) are not read here: a table with one keeps its own query.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyiceberg.schema import Schema
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
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
)

from ingest.decode import user_fields
from ingest.reasons import json_object, plain_value_check, value_reason

SUPPORTED = (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
)
_NON_FINITE = {
    "NaN": float("nan"),
    "Infinity": float("inf"),
    "+Infinity": float("inf"),
    "-Infinity": float("-inf"),
    "+INF": float("inf"),
    "-INF": float("-inf"),
}
TOMBSTONE = "record has no value (tombstone)"


def readable(schema: Schema) -> bool:
    """Whether every user field's type (nested ones too) is read by this decoder; map keys are strings."""

    def ok(kind: IcebergType) -> bool:
        if not isinstance(kind, SUPPORTED):
            return False
        if isinstance(kind, StructType):
            return all(ok(f.field_type) for f in kind.fields)
        if isinstance(kind, ListType):
            return ok(kind.element_type)
        if isinstance(kind, MapType):
            return isinstance(kind.key_type, StringType) and ok(kind.value_type)
        return True

    return all(ok(f.field_type) for f in user_fields(schema))


@dataclass(frozen=True)
class Decoded:
    """A record's row (None for a dead letter), why it is a dead letter, its undeclared keys."""

    row: dict[str, Any] | None
    error: str | None = None
    undeclared: tuple[str, ...] = ()


class JsonRows:
    """Decodes the values of one table's records (its user fields)."""

    def __init__(self, schema: Schema) -> None:
        self.fields: list[NestedField] = user_fields(schema)
        self._names = frozenset(f.name for f in self.fields)
        # Per field, worked out once: a check of the values most records carry (an int for a long, a
        # str for a string) that needs no conversion, ahead of the full rules.
        self._plan = [(f.name, f.field_type, plain_value_check(f.field_type)) for f in self.fields]

    def decode(self, value: bytes | None) -> Decoded:
        if value is None:
            return Decoded(None, TOMBSTONE)
        document, reason = json_object(value)
        if document is None:
            return Decoded(None, reason)
        # Field by field in the schema's order, the first at fault giving the reason (as `json_reason`).
        row: dict[str, Any] = {}
        for name, kind, plain in self._plan:
            found = document.get(name)
            if found is None or (plain is not None and plain(found)):
                row[name] = found
                continue
            reason = value_reason(found, kind, name)
            if reason is not None:
                return Decoded(None, reason)
            row[name] = _convert(found, kind)
        missing = _first_missing(row, self.fields, "")
        if missing is not None:
            return Decoded(None, f"required field {missing} is missing or null")
        undeclared = tuple(k for k in document if k not in self._names)
        return Decoded(row, None, undeclared)


def _convert(value: Any, kind: IcebergType) -> Any:
    """`value` (valid for `kind`: `value_reason` found nothing wrong) as pyarrow takes it."""
    if value is None:
        return None
    if isinstance(kind, StringType):
        return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    if isinstance(kind, FloatType | DoubleType):
        return _NON_FINITE[value] if isinstance(value, str) else float(value)
    if isinstance(kind, DecimalType):
        number = decimal.Decimal(str(value).replace(",", "") if isinstance(value, str) else str(value))
        return number.quantize(decimal.Decimal(1).scaleb(-kind.scale), rounding=decimal.ROUND_HALF_UP)
    if isinstance(kind, DateType):
        return dt.date.fromisoformat(value.strip())
    if isinstance(kind, TimestamptzType):
        if isinstance(value, int):
            return dt.datetime.fromtimestamp(value, dt.UTC)
        parsed = dt.datetime.fromisoformat(value.strip())
        # Without an offset the text is in the session's time zone: floe's Spark sessions run in UTC.
        return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=dt.UTC)
    if isinstance(kind, TimestampType):
        return dt.datetime.fromisoformat(value.strip())
    if isinstance(kind, BinaryType):
        return base64.b64decode(value)
    if isinstance(kind, StructType):
        return {f.name: _convert(value.get(f.name), f.field_type) for f in kind.fields}
    if isinstance(kind, ListType):
        return [_convert(v, kind.element_type) for v in value]
    if isinstance(kind, MapType):
        return [(k, _convert(v, kind.value_type)) for k, v in value.items()]
    return value  # boolean, int, long: as JSON gave them


def _first_missing(values: dict[str, Any], fields: Sequence[NestedField], prefix: str) -> str | None:
    """The path of the first required field that is missing or null, as the Spark path names it
    (nested `a.b`, list elements `a[]`, map values `a{}`)."""
    for f in fields:
        path = f"{prefix}{f.name}"
        found = _missing_in(values.get(f.name), f.field_type, f.required, path)
        if found is not None:
            return found
    return None


def _missing_in(value: Any, kind: IcebergType, required: bool, path: str) -> str | None:
    if value is None:
        return path if required else None
    if isinstance(kind, StructType):
        return _first_missing(value, kind.fields, f"{path}.")
    if isinstance(kind, ListType):
        for element in value:
            found = _missing_in(element, kind.element_type, kind.element_required, f"{path}[]")
            if found is not None:
                return found
    if isinstance(kind, MapType):
        for _, entry in value:
            found = _missing_in(entry, kind.value_type, kind.value_required, f"{path}{{}}")
            if found is not None:
                return found
    return None
