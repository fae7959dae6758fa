"""floe's JVM protobuf decoder (ingest/jvm, compiled at first use) in a local Spark session: the mapping of
every protobuf type to the table's columns, presence, oneofs, well-known types, type conflicts and the
dead letters' reasons, value by value. Values are built with the Python protobuf runtime from the same
`.proto` text floe.yaml would carry; the Kafka and registry side is in tests/e2e/test_protobuf.py, the
pure parts (wire format, descriptors, floe.yaml) in tests/unit/test_protobuf.py.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pytest
from google.protobuf import descriptor_pb2, json_format, message_factory
from google.protobuf.message import Message
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
)

from benchmarks.protobuf_decode.wire_format import encode_message_indexes
from catalog.pipelines.protobuf import build_pool, descriptor_set
from ingest.decode import source
from ingest.protobuf_decode import DECODE_ERROR, RECORD, WriterSchema, decode_protobuf
from tests.e2e.local_spark import spark_without_tables
from tests.protobuf_schemas import COMMON, ORDER

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    with spark_without_tables("floe-protobuf-decoder-tests") as session:
        yield session


def _schema() -> tuple[descriptor_pb2.FileDescriptorSet, str]:
    return descriptor_set(ORDER, {"common.proto": COMMON})


def _order_class(files: descriptor_pb2.FileDescriptorSet | None = None) -> Any:
    files = files or _schema()[0]
    return message_factory.GetMessageClass(build_pool(files).FindMessageTypeByName("shop.Order"))


def _framed(schema_id: int, indexes: list[int], message: Message | bytes) -> bytes:
    payload = message if isinstance(message, bytes) else message.SerializeToString()
    return b"\x00" + schema_id.to_bytes(4, "big") + encode_message_indexes(indexes) + payload


def _decode(
    spark: SparkSession, fields: list[NestedField], values: Sequence[bytes | None], **decoder: Any
) -> list[tuple[dict[str, Any] | None, str | None]]:
    """Each value's record (a dict, or None) and error, decoded by the JVM decoder in Spark."""
    if "inline" not in decoder:
        files, main = _schema()
        decoder.setdefault("writers", {1: WriterSchema.of(files, main)})
    raw = spark.createDataFrame([(i, v) for i, v in enumerate(values)], f"i int, {source('value')} binary")
    rows = decode_protobuf(raw, fields, **decoder).orderBy("i").collect()
    return [
        (None if row[RECORD] is None else row[RECORD].asDict(recursive=True), row[DECODE_ERROR])
        for row in rows
    ]


def _decode_one(spark: SparkSession, fields: list[NestedField], message: Message | bytes) -> dict[str, Any]:
    ((record, error),) = _decode(spark, fields, [_framed(1, [0], message)])
    assert error is None
    assert record is not None
    return record


def _error_of(
    spark: SparkSession, fields: list[NestedField], value: bytes | None, **decoder: Any
) -> str | None:
    ((_, error),) = _decode(spark, fields, [value], **decoder)
    return error


def _field(name: str, kind: IcebergType, field_id: int = 1) -> NestedField:
    return NestedField(field_id, name, kind, required=False)


def test_scalars_enums_and_bytes(spark: SparkSession) -> None:
    order = _order_class()(
        id=7, customer="ada", gift=True, blob=b"\x00\x01", big=12, delta=-3, ratio=0.5, status=2, small=9
    )
    fields = [
        _field("id", LongType(), 1),
        _field("customer", StringType(), 2),
        _field("gift", BooleanType(), 3),
        _field("blob", BinaryType(), 4),
        _field("big", LongType(), 5),
        _field("delta", IntegerType(), 6),
        _field("ratio", FloatType(), 7),
        _field("status", StringType(), 8),
        _field("score", DoubleType(), 9),
        _field("small", DoubleType(), 10),
    ]
    assert _decode_one(spark, fields, order) == {
        "id": 7,
        "customer": "ada",
        "gift": True,
        "blob": bytearray(b"\x00\x01"),
        "big": 12,
        "delta": -3,
        "ratio": 0.5,
        "status": "SHIPPED",
        "score": None,  # proto3 optional, unset
        "small": 9.0,
    }


def test_presence_optional_set_to_zero_is_zero_and_plain_scalars_read_their_default(
    spark: SparkSession,
) -> None:
    order = _order_class()(score=0.0)
    got = _decode_one(spark, [_field("score", DoubleType(), 1), _field("id", LongType(), 2)], order)
    assert got == {"score": 0.0, "id": 0}


def test_unknown_enum_number_is_kept_as_the_number(spark: SparkSession) -> None:
    order = _order_class()()
    order.status = 9  # proto3 enums are open
    assert _decode_one(spark, [_field("status", StringType())], order) == {"status": "9"}


def test_nested_repeated_and_maps(spark: SparkSession) -> None:
    order = _order_class()(
        address={"city": "Oslo"},
        tags=["a", "b"],
        quantities={"apple": 3},
        history=[{"city": "Rome", "zip": 1}],
        by_code={5: {"city": "Bergen"}},
    )
    address = StructType(
        NestedField(2, "city", StringType(), required=True),
        NestedField(3, "zip", IntegerType(), required=False),
    )
    fields = [
        _field("address", address, 1),
        _field("tags", ListType(4, StringType(), element_required=True), 5),
        _field("quantities", MapType(6, StringType(), 7, LongType()), 8),
        _field("history", ListType(9, address), 10),
        _field("by_code", MapType(11, LongType(), 12, address), 13),
    ]
    assert _decode_one(spark, fields, order) == {
        "address": {"city": "Oslo", "zip": None},
        "tags": ["a", "b"],
        "quantities": {"apple": 3},
        "history": [{"city": "Rome", "zip": 1}],
        "by_code": {5: {"city": "Bergen", "zip": None}},
    }
    unset = _decode_one(spark, fields, _order_class()())
    assert unset == {"address": None, "tags": [], "quantities": {}, "history": [], "by_code": {}}


def test_oneof_is_a_struct_with_the_set_member(spark: SparkSession) -> None:
    payment = StructType(
        NestedField(2, "card", StringType(), required=False),
        NestedField(
            3,
            "cash",
            StructType(NestedField(4, "currency", StringType()), NestedField(5, "units", LongType())),
            required=False,
        ),
    )
    fields = [_field("payment", payment)]
    cls = _order_class()
    values = [
        _framed(1, [0], m) for m in (cls(card="visa"), cls(cash={"currency": "EUR", "units": 2}), cls())
    ]
    assert [record for record, _ in _decode(spark, fields, values)] == [
        {"payment": {"card": "visa", "cash": None}},
        {"payment": {"card": None, "cash": {"currency": "EUR", "units": 2}}},
        {"payment": None},
    ]


def test_well_known_types(spark: SparkSession) -> None:
    order = _order_class()(
        placed_at={"seconds": 1_795_000_000, "nanos": 123_456_789},
        ttl={"seconds": 90, "nanos": 500_000_000},
        discount={"value": 0},
        as_json={"city": 'Zürich "q"', "zip": 8001},
    )
    order.extra.update({"note": "x", "n": 2, "list": [1.5, True, None], "tiny": 1e-05, "big": 1e16})
    order.anything.string_value = "hi"
    fields = [
        _field("placed_at", TimestamptzType(), 1),
        _field("ttl", LongType(), 2),
        _field("discount", LongType(), 3),
        _field("extra", StringType(), 4),
        _field("anything", StringType(), 5),
        _field("as_json", StringType(), 6),
        _field("naive", TimestampType(), 7),
    ]
    got = _decode_one(spark, fields, order)
    # Spark hands timestamps to Python as naive datetimes in this process's zone: compare instants.
    assert got.pop("placed_at").astimezone(dt.UTC) == dt.datetime(
        2026, 11, 18, 11, 6, 40, 123456, tzinfo=dt.UTC
    )
    assert got == {
        "ttl": 90_500_000,
        "discount": 0,  # a wrapper that is set, to zero
        "extra": '{"big":1e+16,"list":[1.5,true,null],"n":2.0,"note":"x","tiny":1e-05}',
        "anything": '"hi"',
        "as_json": '{"city":"Z\\u00fcrich \\"q\\"","zip":8001}',
        "naive": None,  # not in the writer's schema
    }
    # The JSON is what protobuf's Python runtime writes for the same messages (keys sorted).
    for name in ("extra", "anything", "as_json"):
        assert got[name] == json.dumps(
            json_format.MessageToDict(getattr(order, name)), separators=(",", ":"), sort_keys=True
        )
    unset = _decode_one(spark, fields, _order_class()())
    assert unset == dict.fromkeys(unset)  # every one NULL when absent
    naive = _decode_one(spark, [_field("placed_at", TimestampType())], order)
    assert naive == {"placed_at": dt.datetime(2026, 11, 18, 11, 6, 40, 123456)}


def test_table_fields_the_writer_lacks_are_null_and_fields_the_table_lacks_are_ignored(
    spark: SparkSession,
) -> None:
    order = _order_class()(id=1, customer="c")
    assert _decode_one(
        spark, [_field("id", LongType(), 1), _field("added_later", StringType(), 2)], order
    ) == {
        "id": 1,
        "added_later": None,
    }


def test_unknown_field_numbers_in_the_value_are_ignored(spark: SparkSession) -> None:
    # Field 99 (varint 5) is not in the schema: a newer writer's field.
    value = _order_class()(id=4).SerializeToString() + b"\x98\x06\x05"
    assert _decode_one(spark, [_field("id", LongType())], value) == {"id": 4}


def test_conflicting_types_and_out_of_range_values_are_precise_reasons(spark: SparkSession) -> None:
    cls = _order_class()
    cases: list[tuple[NestedField, Message, str | None]] = [
        (
            _field("customer", LongType()),
            cls(customer="x"),
            "field customer: protobuf string does not fit the table's long",
        ),
        (
            _field("big", IntegerType()),
            cls(big=1 << 40),
            f"field big: {1 << 40} is out of range for the table's type",
        ),
        (
            _field("big", LongType()),
            cls(big=(1 << 64) - 1),
            f"field big: {(1 << 64) - 1} is out of range for the table's type",
        ),
        (_field("blob", FixedType(4)), cls(blob=b"12"), "field blob: 2 bytes, the table's fixed[4] needs 4"),
        (
            _field("tags", StringType()),
            cls(tags=["a"]),
            "field tags: protobuf repeated string does not fit the table's string",
        ),
        (
            _field("quantities", ListType(2, LongType())),
            cls(quantities={"a": 1}),
            "field quantities: protobuf map does not fit the table's list<long>",
        ),
        # A field with presence that is unset is no conflict (a proto3 scalar always has its value).
        (_field("address", LongType()), cls(), None),
        (
            _field("address", LongType()),
            cls(address={}),
            "field address: protobuf shop.Order.Address does not fit the table's long",
        ),
    ]
    for field, message, reason in cases:
        assert _error_of(spark, [field], _framed(1, [0], message)) == reason, field


def test_records_that_do_not_decode_get_their_reason(spark: SparkSession) -> None:
    fields = [_field("id", LongType())]
    whole = _order_class()(id=5, customer="a long enough name").SerializeToString()
    values = [
        None,
        _framed(1, [0], whole[:-4]),
        _framed(2, [0], whole),
        _framed(3, [0], whole),
        _framed(1, [4], whole),
        b"\x01\x00\x00\x00\x05\x00",
        b"\x00\x00\x00",
        b"\x00\xff\xff\xff\xff\x00",
        b"\x00\x00\x00\x00\x05\x04\x02",
        b"\x00\x00\x00\x00\x05\x03\x02",
        b"\x00\x00\x00\x00\x05\x02\x01",
    ]
    errors = [
        error for _, error in _decode(spark, fields, values, unusable={3: "is a AVRO schema, not PROTOBUF"})
    ]
    assert errors == [
        "record has no value (tombstone)",
        "value is not a protobuf shop.Order (truncated or corrupt)",
        "value's schema id 2 is not registered",
        "value's schema id 3 is a AVRO schema, not PROTOBUF",
        "value's schema id 1: message index [4] is not in the schema",
        "value is not in the Confluent wire format (magic byte 0 + schema id)",
        "value is not in the Confluent wire format (magic byte 0 + schema id)",
        "value is not in the Confluent wire format (negative schema id)",
        "value's message indexes are truncated",
        "value's message indexes are malformed (count -2)",
        "value's message indexes are malformed (index -1)",
    ]


def test_two_writer_schema_versions_and_nested_messages_decode_by_id_and_indexes(spark: SparkSession) -> None:
    v1, main1 = descriptor_set('syntax = "proto3"; package p; message M { int64 id = 1; }', {})
    nested_message = "message N { int64 id = 1; }"
    v2, main2 = descriptor_set(
        f'syntax = "proto3"; package p; message M {{ int64 id = 1; string note = 2; {nested_message} }}', {}
    )
    cls1 = message_factory.GetMessageClass(build_pool(v1).FindMessageTypeByName("p.M"))
    cls2 = message_factory.GetMessageClass(build_pool(v2).FindMessageTypeByName("p.M"))
    nested = message_factory.GetMessageClass(build_pool(v2).FindMessageTypeByName("p.M.N"))
    got = _decode(
        spark,
        [_field("id", LongType(), 1), _field("note", StringType(), 2)],
        [
            _framed(10, [0], cls1(id=1)),
            _framed(11, [0], cls2(id=2, note="n")),
            _framed(11, [0, 0], nested(id=3)),
        ],
        writers={10: WriterSchema.of(v1, main1), 11: WriterSchema.of(v2, main2)},
    )
    assert got == [
        ({"id": 1, "note": None}, None),
        ({"id": 2, "note": "n"}, None),
        ({"id": 3, "note": None}, None),
    ]


def test_inline_schema_framed_and_raw(spark: SparkSession) -> None:
    files, main = _schema()
    order = _order_class()(id=9)
    inline = (WriterSchema.of(files, main), "shop.Order")
    fields = [_field("id", LongType())]
    raw = _decode(spark, fields, [order.SerializeToString()], inline=inline, framed=False)
    # Framed: the schema id and indexes are skipped, the message is the one floe.yaml names.
    framed = _decode(spark, fields, [_framed(77, [1], order)], inline=inline, framed=True)
    assert raw == framed == [({"id": 9}, None)]
