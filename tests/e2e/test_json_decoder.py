"""floe's JVM JSON decoder (ingest/jvm JsonDecoder) reads values as Spark's `from_json` does, in a real
local Spark session: the same rows for every value both accept, a refusal where Spark refuses, and the
refusals where floe is stricter on purpose (empty, more than one JSON value, not UTF-8).

The corpus covers every type floe's JSON tables map to a Spark type, with the edge cases of Spark's
reader: any JSON value into a string, integral numbers only for ints and longs, non-finite spellings
for floats, half-up rounding and overflow of decimals, ISO text and epoch seconds for timestamps,
offsets refused for timestamps without zone, base64 binary, repeated keys, single quotes, escapes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import (
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
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
    UUIDType,
)

from ingest.decode import (
    _CORRUPT,
    _UNDECLARED,
    _from_json,
    decode_json,
    source,
    source_columns,
    user_fields,
)
from ingest.json_udfs import json_decoder, undeclared_keys
from ingest.reasons import json_reason
from ingest.service import KAFKA_SOURCE_SCHEMA
from tests.e2e.local_spark import spark_without_tables

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SCHEMA = Schema(
    NestedField(1, "s", StringType(), required=False),
    NestedField(2, "i", IntegerType(), required=False),
    NestedField(3, "l", LongType(), required=False),
    NestedField(4, "f", FloatType(), required=False),
    NestedField(5, "d", DoubleType(), required=False),
    NestedField(6, "b", BooleanType(), required=False),
    NestedField(7, "dec", DecimalType(10, 2), required=False),
    NestedField(8, "ts", TimestamptzType(), required=False),
    NestedField(9, "tsn", TimestampType(), required=False),
    NestedField(10, "dt", DateType(), required=False),
    NestedField(11, "bin", BinaryType(), required=False),
    NestedField(
        12,
        "st",
        StructType(
            NestedField(13, "x", IntegerType(), required=False),
            NestedField(14, "y", StringType(), required=False),
        ),
        required=False,
    ),
    NestedField(15, "arr", ListType(16, LongType(), element_required=False), required=False),
    NestedField(17, "m", MapType(18, StringType(), 19, DoubleType(), value_required=False), required=False),
    NestedField(
        20,
        "structs",
        ListType(21, StructType(NestedField(22, "x", IntegerType(), required=False)), element_required=False),
        required=False,
    ),
    NestedField(23, "u", UUIDType(), required=False),
    NestedField(24, "req", StringType(), required=True),
)

# Every value carries the required field, so each one tests the field it is about.
FIELD_VALUES: dict[str, list[str]] = {
    "s": [
        '"text"',
        '""',
        "12",
        "-1.50",
        "1e10",
        "true",
        "null",
        '{"a": [1, 2.5, "x"], "b": null}',
        '[1, "two"]',
        '"\\u00e9\\n\\"q\\""',
        "'single'",
        "NaN",
        '"日本語 ß"',
        "0.1",
        "123456789012345678901234",
        # Plain ASCII is copied from the value's bytes; escapes and other characters are decoded.
        '"  spaced out  "',
        '"a\\\\b"',
        '"tab\\there"',
        '"x\\u0041y"',
        '"\\ud83d\\ude00 and 😀"',
        '"' + "long ascii " * 200 + '"',
    ],
    "i": ["7", "-2147483648", "2147483647", "2147483648", "1.0", "1.5", '"7"', "true", "[]", "-0", "1e2"],
    "l": ["9223372036854775807", "9223372036854775808", "-9223372036854775808", "3", "3.0", '"3"'],
    "f": [
        "1.5",
        "3",
        "1e39",
        '"NaN"',
        '"Infinity"',
        '"-INF"',
        '"+INF"',
        '"INF"',
        '"1.5"',
        '""',
        "NaN",
        "-Infinity",
        "true",
    ],
    "d": ["1.5", "-0.0", "1e308", "1e309", '"+Infinity"', '"-Infinity"', '"nan"', "12345678901234567890"],
    "b": ["true", "false", '"true"', "1", "0"],
    "dec": [
        "1.005",
        "1.004",
        "-1.005",
        "12345678.99",
        "123456789.99",
        "99999999.995",
        '"1,234.5"',
        '"1.5"',
        '"abc"',
        '""',
        "1e3",
        "1E-5",
        "0",
        '"  2.5"',
        "true",
    ],
    "ts": [
        '"2024-01-02T03:04:05Z"',
        '"2024-01-02T03:04:05.123456+02:00"',
        '"2024-01-02 03:04:05"',
        '"2024-01-02T03:04"',
        '"2024-01-02"',
        '"2024-01-02T03:04:05 GMT"',
        '"2024"',
        '"not a time"',
        '""',
        "1700000000",
        "-1",
        "1.5",
        '"2024-13-01T00:00:00Z"',
        '"2024-01-02T03:04:05.1234567Z"',
        '"  2024-01-02T03:04:05Z  "',
        '"2024-01-02T03:04:05+0100"',
        # The layouts floe reads without Spark's parser, and their edges.
        '"2024-02-29T23:59:59.999999-05:30"',
        '"2023-02-29T00:00:00Z"',
        '"2024-04-31T00:00:00Z"',
        '"2024-01-02 03:04:05Z"',
        '"2024-01-02T03:04:05"',
        '"2024-01-02T03:04:05.5+00:00"',
        '"1969-12-31T23:59:59.999999Z"',
        '"0001-01-01T00:00:00Z"',
        '"9999-12-31T23:59:59.999999Z"',
        '"2024-01-02T24:00:00Z"',
        '"2024-01-02T03:04:60Z"',
        '"2024-01-02T03:60:00Z"',
        '"2024-01-02T03:04:05+18:00"',
        '"2024-01-02T03:04:05-17:59"',
        '"2024-01-02T03:04:05+19:00"',
        '"2024-01-02T03:04:05.Z"',
        '"2024-01-02T03:04:05.123Zx"',
        '"2024-01-02t03:04:05Z"',
        '"2024-1-02T03:04:05Z"',
        '"+2024-01-02T03:04:05Z"',
    ],
    "tsn": [
        '"2024-01-02T03:04:05"',
        '"2024-01-02 03:04:05.5"',
        '"2024-01-02T03:04:05Z"',
        '"2024-01-02T03:04:05+01:00"',
        '"2024-01-02"',
        "1700000000",
        '""',
        '"x"',
    ],
    "dt": [
        '"2024-01-02"',
        '"2024-1-2"',
        '"2024-01-02T10:00:00"',
        '"2024-01"',
        '"18000"',
        '"-5"',
        '"x"',
        '""',
        "18000",
        '"2024-02-30"',
    ],
    "bin": ['"aGVsbG8="', '""', '"not base64!"', '"aGVsbG8"', "12", '"YQ=="'],
    "st": [
        '{"x": 1, "y": "a"}',
        '{"x": 1, "x": 2}',
        '{"y": 5, "z": {"deep": [1]}}',
        '{"y": "a\\"b", "x": 3}',
        "{}",
        "[]",
        '"x"',
        '{"x": "1"}',
        '{"x": null, "y": null}',
    ],
    "arr": ["[1, 2, 3]", "[]", "[1, null]", "[1.5]", '["1"]', "1", "[[1]]", "null"],
    "m": ['{"a": 1.5, "b": null}', "{}", '{"a": "x"}', '{"a": "NaN"}', "[]"],
    "structs": ['[{"x": 1}, null, {"x": 2, "q": 3}]', "[]", '[{"x": 1.5}]', "[1]", '{"x": 1}'],
    "u": ['"0a1b2c3d-0000-0000-0000-000000000000"', "5", '{"k": 1}'],
}
WHOLE_VALUES = [
    '{"req": "r"}',
    '{"req": "r", "extra": 1, "other": {"n": [1, 2]}, "extra": 2}',
    "{'req': 'r', 's': 'single quoted'}",
    '{"req": "r", "s": "a\\u0000b"}',
    '  {"req" : "r" ,\n "i" : 1 }  ',
    '{"req": "r", "i": 01}',
    '{"req": "r", "s": "unterminated}',
    '{"req": "r",}',
    '{req: "r"}',
    '{"req": "r", "s": "x" /* comment */}',
    '[{"req": "r"}]',
    '"just a string"',
    "42",
    "null",
    '{"req": null}',
    "{}",
    '{"req": "r", "d": Infinity, "f": -Infinity}',
    '{"r\\u0065q": "escaped key"}',
]
# floe refuses these on purpose (Spark reads them: a row of NULLs, the first object, U+FFFD for a byte
# that is not UTF-8).
STRICTER = [b"", b"   ", b'{"req": "r"} {"req": "s"}', b'{"req": "r"} trailing', b'{"req": "r\xff"}']


def _corpus() -> list[bytes]:
    values = [v.encode() for v in WHOLE_VALUES]
    for name, cases in FIELD_VALUES.items():
        values.extend(('{"req": "r", "%s": %s}' % (name, case)).encode() for case in cases)  # noqa: UP031
    return values


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    with spark_without_tables("floe-json-decoder-tests") as session:
        session.conf.set("spark.sql.session.timeZone", "UTC")
        yield session


def _decoded(spark: SparkSession, values: list[bytes]) -> list[Any]:
    from pyspark.sql import functions as F

    fields = user_fields(SCHEMA)
    decoder = json_decoder(spark, fields)
    assert decoder is not None, "the JVM decoder must build here (JDK 17+)"
    value = F.col(source("value"))
    frame = spark.createDataFrame([(i, v) for i, v in enumerate(values)], f"n int, {source('value')} binary")

    def shown(record: Any) -> Any:
        # As JSON text, compared in Python: NaN equals NaN, and dates beyond Python's year 9999 compare.
        fields_of = F.struct(*[record.getField(f.name).alias(f.name) for f in fields])
        return F.when(record.isNotNull(), F.to_json(fields_of))

    floe, spark_record = F.call_udf(decoder, value), _from_json(value, fields)
    return (
        frame.select(
            "n",
            shown(floe).alias("floe"),
            floe.getField(_CORRUPT).alias("floe_corrupt"),
            floe.getField(_UNDECLARED).alias("floe_undeclared"),
            shown(spark_record).alias("spark"),
            spark_record.getField(_CORRUPT).alias("spark_corrupt"),
            undeclared_keys(spark, value, fields).alias("scanned"),
        )
        .orderBy("n")
        .collect()
    )


def test_the_decoder_reads_what_sparks_from_json_reads(spark: SparkSession) -> None:
    values = _corpus()
    rows = _decoded(spark, values)
    assert len(rows) == len(values)
    accepted = refused = 0
    for row, value in zip(rows, values, strict=True):
        text = value.decode()
        spark_refused = row["spark_corrupt"] is not None
        floe_refused = row["floe_corrupt"] is not None
        assert floe_refused == spark_refused, text
        if floe_refused:
            refused += 1
            assert row["floe"] == "{}", text  # every field NULL
            # The dead letter's reason names what is wrong, as for a value Spark refused.
            assert json_reason(value, user_fields(SCHEMA)) is not None, text
            continue
        accepted += 1
        assert row["floe"] == row["spark"], text
        assert row["floe_undeclared"] == row["scanned"], text
    # The corpus exercises both sides of the rules.
    assert accepted > 80
    assert refused > 50


def test_values_spark_changes_silently_are_refused(spark: SparkSession) -> None:
    rows = _decoded(spark, STRICTER)
    for row, value in zip(rows, STRICTER, strict=True):
        assert row["floe_corrupt"] is not None, value
        assert row["spark_corrupt"] is None, value  # what Spark did: accepted, changed or partly
        reason = json_reason(value, user_fields(SCHEMA))
        assert reason is not None, value
        assert reason.startswith(("not valid JSON", "not a JSON object")), value


def test_a_repeated_map_key_keeps_its_last_value(spark: SparkSession) -> None:
    # Spark's reader keeps both entries, a map no engine reads back as written; floe keeps the last, as
    # for a struct's fields.
    (row,) = _decoded(spark, [b'{"req": "r", "m": {"a": 1, "a": 2, "b": 3}}'])
    assert row["floe"] == '{"m":{"a":2.0,"b":3.0},"req":"r"}'
    assert row["spark"] == '{"m":{"a":1.0,"a":2.0,"b":3.0},"req":"r"}'


def _raw(spark: SparkSession, values: list[bytes | None]) -> Any:
    """Kafka source rows with these values, columns renamed as ingestion does."""
    rows: list[tuple[Any, ...]] = [(None, v, "t", 0, i, None, 0, []) for i, v in enumerate(values)]
    return source_columns(spark.createDataFrame(rows, KAFKA_SOURCE_SCHEMA))


def test_undeclared_keys_and_a_tombstone(spark: SparkSession) -> None:
    raw = _raw(spark, [b'{"req": "r", "zz": 1, "aa": {"s": 2}, "zz": 3, "s": "x"}', None])
    rows = decode_json(raw, SCHEMA).select("s", "req", "__floe_error", "__floe_undeclared").collect()
    assert rows[0]["s"] == "x"
    assert rows[0]["req"] == "r"
    assert rows[0]["__floe_error"] is None
    assert rows[0]["__floe_undeclared"] == ["zz", "aa"]
    assert rows[1]["__floe_error"] == "record has no value (tombstone)"
    # One decode per value in the executed plan: floe's decoder, not from_json.
    execution = decode_json(raw, SCHEMA)._jdf.queryExecution()
    plan = execution.executedPlan().toString()
    assert "floe_json_decode_" in plan
    assert "from_json" not in plan
    # Inside Spark's generated code (whole-stage), which calls it with the value's bytes and takes its
    # row as is: no interpreted fallback, no per-row conversion of a Java UDF's Row.
    jvm = spark._jvm
    assert jvm is not None
    debug = jvm.org.apache.spark.sql.execution.debug.package
    generated = debug.codegenString(execution.executedPlan())
    (call,) = [line for line in generated.splitlines() if "/* decoder */" in line]
    assert "(InternalRow) ((java.util.function.Function) references[" in call


def test_a_required_field_missing_is_reported(spark: SparkSession) -> None:
    raw = _raw(spark, [json.dumps({"s": "x"}).encode()])
    rows = decode_json(raw, SCHEMA).select("__floe_error").collect()
    assert rows[0]["__floe_error"] == "required field req is missing or null"


def test_a_type_the_decoder_does_not_read_falls_back_once(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ingest import jvm_decoder

    calls: list[str] = []
    register = jvm_decoder.register_json_decoder

    def counted(session: Any, name: str, result_type_json: str) -> None:
        calls.append(name)
        register(session, name, result_type_json)

    monkeypatch.setattr(jvm_decoder, "register_json_decoder", counted)
    fields = [
        NestedField(1, "m", MapType(2, IntegerType(), 3, StringType(), value_required=False), required=False)
    ]
    assert json_decoder(spark, fields) is None  # map keys other than strings: Spark's from_json reads it
    assert json_decoder(spark, fields) is None
    assert len(calls) == 1  # refused once, not tried again on every batch
