"""The precise dead-letter reasons (ingest/reasons.py): which field and why, or where parsing stops."""

from __future__ import annotations

import io
import json
from typing import Any

import fastavro
import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestamptzType,
)

from ingest.decode import AVRO_MISMATCH, JSON_MISMATCH
from ingest.reasons import DeadLetterReasons, avro_reason, json_reason

FIELDS = [
    NestedField(1, "amount", LongType(), required=True),
    NestedField(2, "count", IntegerType()),
    NestedField(3, "ratio", DoubleType()),
    NestedField(4, "ok", BooleanType()),
    NestedField(5, "price", DecimalType(5, 2)),
    NestedField(6, "day", DateType()),
    NestedField(7, "at", TimestamptzType()),
    NestedField(8, "blob", BinaryType()),
    NestedField(9, "note", StringType()),
    NestedField(
        10,
        "device",
        StructType(NestedField(11, "os", StringType()), NestedField(12, "version", IntegerType())),
    ),
    NestedField(13, "tags", ListType(14, LongType())),
    NestedField(15, "attributes", MapType(16, StringType(), 17, LongType())),
]


def _reason(document: Any) -> str | None:
    text = document if isinstance(document, str) else json.dumps(document)
    return json_reason(text.encode(), FIELDS)


def test_a_wrong_type_names_the_field_the_expected_type_and_the_value() -> None:
    assert _reason({"amount": "abc"}) == "field 'amount': expected long, got string \"abc\""
    assert _reason({"amount": 1.5}) == "field 'amount': expected long, got number 1.5"
    assert _reason({"amount": True}) == "field 'amount': expected long, got boolean true"
    assert _reason({"amount": 1, "count": 2**31}) == (
        "field 'count': expected int, got number 2147483648 (out of range)"
    )
    assert _reason({"amount": 1, "ratio": "x"}) == "field 'ratio': expected double, got string \"x\""
    assert _reason({"amount": 1, "ok": "yes"}) == "field 'ok': expected boolean, got string \"yes\""
    assert _reason({"amount": 1, "price": 12345.6}) == (
        "field 'price': expected decimal(5, 2), got number 12345.6 (does not fit decimal(5, 2))"
    )
    assert _reason({"amount": 1, "day": "21/11/2026"}).startswith(  # type: ignore[union-attr]
        "field 'day': expected date, got string \"21/11/2026\""
    )
    assert _reason({"amount": 1, "at": [1]}) == "field 'at': expected timestamptz, got array"
    assert _reason({"amount": 1, "blob": "not base64!"}) == (
        "field 'blob': expected base64 text (binary), got string \"not base64!\""
    )
    assert _reason({"amount": 1, "device": "linux"}) == (
        "field 'device': expected struct (a JSON object), got string \"linux\""
    )


def test_nested_fields_are_named_by_their_path() -> None:
    assert _reason({"amount": 1, "device": {"os": "linux", "version": "7"}}) == (
        "field 'device.version': expected int, got string \"7\""
    )
    assert _reason({"amount": 1, "tags": [1, 2, "three"]}) == (
        "field 'tags[2]': expected long, got string \"three\""
    )
    assert _reason({"amount": 1, "attributes": {"a": 1, "b": {}}}) == (
        "field 'attributes[\"b\"]': expected long, got object"
    )


def test_what_spark_accepts_is_not_a_reason() -> None:
    fine = {
        "amount": 7,
        "count": -5,
        "ratio": "NaN",
        "ok": False,
        "price": "123.45",
        "day": "2026-11-21",
        "at": 1_700_000_000,  # epoch seconds
        "blob": "aGVsbG8=",
        "note": {"any": ["json"]},  # a string field keeps any JSON value's text
        "device": {"os": "linux"},
        "tags": [],
        "attributes": {"k": 1},
        "undeclared": "ignored here",
    }
    assert _reason(fine) is None
    assert _reason({"amount": 1, "at": "2026-11-21T10:00:00Z"}) is None
    assert _reason({"amount": None}) is None  # missing required fields are Spark's own check


def test_invalid_json_says_the_parser_message_and_the_byte() -> None:
    assert _reason('{"amount": 1,, "note": "x"}') == (
        "not valid JSON: Expecting property name enclosed in double quotes at byte 13"
    )
    assert _reason('{"amount": 12') == "not valid JSON: Expecting ',' delimiter at byte 13"
    assert _reason("plain text") == "not valid JSON: Expecting value at byte 0"
    assert _reason("") == "not valid JSON: Expecting value at byte 0"
    # Bytes, not characters: "é" is two bytes in UTF-8.
    assert _reason('{"note": "é" x}') == "not valid JSON: Expecting ',' delimiter at byte 14"
    assert json_reason(b'{"note": "\xff"}', FIELDS) == "not valid JSON: not UTF-8 text at byte 10"


def test_a_json_value_that_is_not_an_object_says_what_it_is() -> None:
    assert _reason("[1, 2]") == "not a JSON object (got array)"
    assert _reason('"text"') == "not a JSON object (got string)"
    assert _reason("42") == "not a JSON object (got number)"


AVRO_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "Event",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
        {"name": "maybe", "type": ["null", "string"]},
        {
            "name": "profile",
            "type": {"type": "record", "name": "Profile", "fields": [{"name": "country", "type": "string"}]},
        },
        {"name": "scores", "type": {"type": "array", "items": "double"}},
        {"name": "again", "type": "Profile"},
    ],
}
GOOD_RECORD = {
    "id": 5,
    "name": "n",
    "kind": "B",
    "maybe": "x",
    "profile": {"country": "FR"},
    "scores": [1.0, 2.0],
    "again": {"country": "DE"},
}


def _avro(record: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(AVRO_SCHEMA), record)
    return out.getvalue()


def test_avro_that_decodes_has_no_reason() -> None:
    value = _avro(GOOD_RECORD)
    assert avro_reason(value, AVRO_SCHEMA, confluent_framing=False) is None
    framed = b"\x00\x00\x00\x00\x07" + value
    assert avro_reason(framed, json.dumps(AVRO_SCHEMA), confluent_framing=True) is None


def test_truncated_avro_names_the_field_and_the_byte() -> None:
    value = _avro(GOOD_RECORD)
    # id (1 byte), name (2), kind (1), maybe (branch 1 + 2), profile.country: length (byte 7), "FR".
    assert avro_reason(value[:9], AVRO_SCHEMA, confluent_framing=False) == (
        "field 'profile.country': Avro string of 2 bytes needs 2 bytes, the value has 1 left (at byte 8)"
    )
    assert avro_reason(value[:1], AVRO_SCHEMA, confluent_framing=False) == (
        "field 'name': Avro string length is cut off: the value ends at byte 1"
    )
    framed = b"\x00\x00\x00\x00\x07" + value[:1]
    assert avro_reason(framed, AVRO_SCHEMA, confluent_framing=True) == (
        "field 'name': Avro string length is cut off: the value ends at byte 6"
    )
    # A named type used again (`again` is a Profile) is followed too.
    assert avro_reason(value[:-2], AVRO_SCHEMA, confluent_framing=False) == (
        "field 'again.country': Avro string of 2 bytes needs 2 bytes, the value has 0 left "
        f"(at byte {len(value) - 2})"
    )


def test_avro_indexes_out_of_range_and_negative_lengths() -> None:
    bad_enum = b"\x02" + b"\x02n" + b"\x0a"  # id 1, name "n", enum index 5
    assert avro_reason(bad_enum, AVRO_SCHEMA, confluent_framing=False) == (
        "field 'kind': enum index 5 is out of range (2 symbols)"
    )
    bad_union = b"\x02" + b"\x02n" + b"\x00" + b"\x08"  # union branch 4
    assert avro_reason(bad_union, AVRO_SCHEMA, confluent_framing=False) == (
        "field 'maybe': union branch 4 does not exist (2 branches)"
    )
    negative = b"\x02" + b"\x05"  # name's length -3
    assert avro_reason(negative, AVRO_SCHEMA, confluent_framing=False) == (
        "field 'name': Avro string length -3 is negative (at byte 2)"
    )
    endless = b"\xff" * 11
    assert avro_reason(endless, AVRO_SCHEMA, confluent_framing=False) == (
        "field 'id': Avro long is not a valid varint (longer than 10 bytes, at byte 10)"
    )


def test_dead_letter_rows_get_precise_reasons_and_others_keep_theirs() -> None:
    reasons = DeadLetterReasons("json", Schema(*FIELDS))
    assert reasons.refine(b'{"amount": "abc"}', JSON_MISMATCH) == (
        "field 'amount': expected long, got string \"abc\""
    )
    assert reasons.refine(b"null", JSON_MISMATCH) == "not a JSON object (got null)"
    assert reasons.refine(None, "record has no value (tombstone)") == "record has no value (tombstone)"
    # Spark refused what floe finds nothing wrong with: the generic reason stays, marked as Spark's.
    assert reasons.refine(b'{"amount": 1}', JSON_MISMATCH) == (
        f"{JSON_MISMATCH} (Spark's decoder refused it; no field is at fault as floe reads it)"
    )


def test_registry_framed_json_positions_count_the_prefix() -> None:
    reasons = DeadLetterReasons("json", Schema(*FIELDS), confluent_framing=True)
    assert reasons.refine(b'\x00\x00\x00\x00\x01{"amount": 12', JSON_MISMATCH) == (
        "not valid JSON: Expecting ',' delimiter at byte 18"
    )


def test_refining_never_fails_the_batch() -> None:
    # A writer schema floe cannot walk (a field without a type): the generic reason stays.
    odd = {"type": "record", "name": "X", "fields": [{"name": "a"}]}
    assert DeadLetterReasons("avro", Schema(*FIELDS), avro_schema=odd).refine(b"\x02", AVRO_MISMATCH) == (
        AVRO_MISMATCH
    )
    nested = b"[" * 100_000
    assert (
        DeadLetterReasons("json", Schema(*FIELDS)).refine(nested, JSON_MISMATCH).startswith("not valid JSON")
    )


def test_avro_dead_letters_by_writer_schema_id() -> None:
    schema = Schema(NestedField(1, "id", LongType()))
    writers = {7: json.dumps(AVRO_SCHEMA)}
    reasons = DeadLetterReasons("avro", schema, writer_schemas=writers, confluent_framing=True)
    truncated = b"\x00\x00\x00\x00\x07" + _avro(GOOD_RECORD)[:1]
    assert reasons.reason(truncated, AVRO_MISMATCH) == (
        "not valid Avro: field 'name': Avro string length is cut off: the value ends at byte 6"
    )
    whole = b"\x00\x00\x00\x00\x07" + _avro(GOOD_RECORD)
    assert reasons.reason(whole, AVRO_MISMATCH) == (
        "value decodes with its writer schema, which cannot be resolved to the table's Avro schema"
    )


@pytest.mark.parametrize("generic", ["record has no value (tombstone)", "required field id is missing"])
def test_reasons_spark_already_gave_precisely_are_kept(generic: str) -> None:
    reasons = DeadLetterReasons("json", Schema(*FIELDS))
    assert reasons.reason(b"{}", generic) == generic
