"""Protobuf topics, the pure parts: Confluent's wire format for protobuf, schemas as text and as base64
FileDescriptorProtos (with references and well-known imports), the mapping of every protobuf type to the
table's columns, and floe.yaml's protobuf settings. The Spark and registry side is in
tests/e2e/test_protobuf.py."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from google.protobuf import descriptor_pb2, message_factory
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

from catalog.pipelines import InvalidConfig, load_yaml, parse_config
from catalog.pipelines.protobuf import (
    ProtoSchemaError,
    build_pool,
    descriptor_set,
    inline_schema_files,
    message_name_at,
    message_names,
    parse_file_descriptor,
)
from ingest.protobuf_decode import (
    Decoder,
    RecordError,
    WriterSchema,
    arrow_record_type,
    decode_batches,
    encode_message_indexes,
    read_message_indexes,
    split_confluent,
)

COMMON = """
syntax = "proto3";
package shop.common;
message Money { string currency = 1; int64 units = 2; }
"""
ORDER = """
syntax = "proto3";
package shop;
import "common.proto";
import "google/protobuf/timestamp.proto";
import "google/protobuf/duration.proto";
import "google/protobuf/wrappers.proto";
import "google/protobuf/struct.proto";

enum Status { STATUS_UNKNOWN = 0; PLACED = 1; SHIPPED = 2; }

message Order {
  int64 id = 1;
  string customer = 2;
  optional double score = 3;
  google.protobuf.Timestamp placed_at = 4;
  message Address { string city = 1; optional int32 zip = 2; }
  Address address = 5;
  repeated string tags = 6;
  map<string, int64> quantities = 7;
  Status status = 8;
  oneof payment { string card = 9; shop.common.Money cash = 10; }
  google.protobuf.Int64Value discount = 11;
  google.protobuf.Struct extra = 12;
  google.protobuf.Duration ttl = 13;
  bool gift = 14;
  bytes blob = 15;
  uint64 big = 16;
  sint32 delta = 17;
  float ratio = 18;
  repeated Address history = 19;
  google.protobuf.Value anything = 20;
  map<int32, Address> by_code = 21;
}
message Refund { int64 order_id = 1; }
"""


def _schema() -> tuple[descriptor_pb2.FileDescriptorSet, str]:
    return descriptor_set(ORDER, {"common.proto": COMMON})


def _order_class(files: descriptor_pb2.FileDescriptorSet | None = None) -> Any:
    files = files or _schema()[0]
    return message_factory.GetMessageClass(build_pool(files).FindMessageTypeByName("shop.Order"))


def _framed(schema_id: int, indexes: list[int], message: Message | bytes) -> bytes:
    payload = message if isinstance(message, bytes) else message.SerializeToString()
    return b"\x00" + schema_id.to_bytes(4, "big") + encode_message_indexes(indexes) + payload


def _decode_one(fields: list[NestedField], message: Message | bytes) -> dict[str, Any]:
    files, main = _schema()
    decoder = Decoder(fields, writers={1: WriterSchema.of(files, main)})
    columns, valid, errors = decoder.decode([_framed(1, [0], message)])
    assert valid == [True], errors
    return {f.name: column[0] for f, column in zip(fields, columns, strict=True)}


def _error_of(fields: list[NestedField], value: bytes | None, **decoder: Any) -> str | None:
    files, main = _schema()
    decoder.setdefault("writers", {1: WriterSchema.of(files, main)})
    _, _, errors = Decoder(fields, **decoder).decode([value])
    return errors[0]


def _field(name: str, kind: IcebergType, field_id: int = 1) -> NestedField:
    return NestedField(field_id, name, kind, required=False)


# -- the wire format ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("indexes", "encoded"),
    [([0], b"\x00"), ([1], b"\x02\x02"), ([0, 2], b"\x04\x00\x04"), ([70], b"\x02\x8c\x01")],
)
def test_message_indexes_are_zigzag_varints_and_zero_alone_means_the_first(
    indexes: list[int], encoded: bytes
) -> None:
    assert encode_message_indexes(indexes) == encoded
    assert read_message_indexes(encoded + b"rest", 0) == (indexes, len(encoded))


def test_split_confluent_gives_schema_id_indexes_and_where_the_message_starts() -> None:
    assert split_confluent(b"\x00\x00\x00\x01\x07\x00payload") == (263, [0], 6)
    assert split_confluent(b"\x00\x00\x00\x00\x05\x04\x02\x00msg") == (5, [1, 0], 8)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (b"\x01\x00\x00\x00\x05\x00", "not in the Confluent wire format"),
        (b"\x00\x00\x00", "not in the Confluent wire format"),
        (b"\x00\xff\xff\xff\xff\x00", "negative schema id"),
        (b"\x00\x00\x00\x00\x05\x04\x02", "message indexes are truncated"),
        (b"\x00\x00\x00\x00\x05\x03\x02", "message indexes are malformed (count -2)"),
        (b"\x00\x00\x00\x00\x05\x02\x01", "message indexes are malformed (index -1)"),
    ],
)
def test_malformed_framing_is_a_precise_reason(value: bytes, reason: str) -> None:
    with pytest.raises(RecordError, match=reason.replace("(", r"\(").replace(")", r"\)")):
        split_confluent(value)


# -- schemas: text, base64 descriptors, references, well-known imports -------------------------------------


def test_text_schema_compiles_with_its_references_and_well_known_imports() -> None:
    files, main = _schema()
    names = [f.name for f in files.file]
    assert main == "floe_main.proto"
    assert names[-1] == main  # dependencies first
    assert {"common.proto", "google/protobuf/timestamp.proto", "google/protobuf/struct.proto"} <= set(names)
    assert message_names(files, main) == ["shop.Order", "shop.Order.Address", "shop.Refund"]
    assert message_name_at(files, main, [0]) == "shop.Order"
    assert message_name_at(files, main, [0, 0]) == "shop.Order.Address"
    assert message_name_at(files, main, [1]) == "shop.Refund"
    with pytest.raises(ProtoSchemaError, match=r"message index \[2\] is not in the schema"):
        message_name_at(files, main, [2])


def test_base64_descriptors_are_accepted_for_the_schema_and_its_references() -> None:
    """What confluent-kafka's ProtobufSerializer registers (and a registry may hand back)."""
    files, _ = _schema()
    by_name = {f.name: f for f in files.file}
    main_b64 = base64.b64encode(by_name["floe_main.proto"].SerializeToString()).decode()
    common_b64 = base64.b64encode(by_name["common.proto"].SerializeToString()).decode()
    parsed = parse_file_descriptor("orders.proto", main_b64)
    assert parsed is not None
    assert parsed.name == "orders.proto"
    assert parse_file_descriptor("x.proto", ORDER) is None

    # base64 main, base64 reference; base64 main, text reference; text main, base64 reference.
    for main_str, common in ((main_b64, common_b64), (main_b64, COMMON), (ORDER, common_b64)):
        got, main = descriptor_set(main_str, {"common.proto": common})
        assert message_names(got, main)[0] == "shop.Order"
        order = _order_class(got)(id=3, cash={"currency": "EUR", "units": 4})
        assert order.cash.units == 4


def test_missing_import_and_syntax_errors_say_what_is_wrong() -> None:
    with pytest.raises(ProtoSchemaError, match=r"common\.proto"):
        descriptor_set(ORDER, {})
    with pytest.raises(ProtoSchemaError, match=r"does not compile: floe_main.proto:1:\d+"):
        descriptor_set('syntax = "proto3"; message X { int64 a = 1 }', {})
    with pytest.raises(ProtoSchemaError, match=r"invalid \.proto file name"):
        descriptor_set(ORDER, {"../common.proto": COMMON})


# -- the mapping, type by type ------------------------------------------------------------------------------


def test_scalars_enums_and_bytes() -> None:
    order = _order_class()(
        id=7, customer="ada", gift=True, blob=b"\x00\x01", big=12, delta=-3, ratio=0.5, status=2
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
    ]
    assert _decode_one(fields, order) == {
        "id": 7,
        "customer": "ada",
        "gift": True,
        "blob": b"\x00\x01",
        "big": 12,
        "delta": -3,
        "ratio": 0.5,
        "status": "SHIPPED",
        "score": None,  # proto3 optional, unset
    }


def test_presence_optional_set_to_zero_is_zero_and_plain_scalars_read_their_default() -> None:
    order = _order_class()(score=0.0)
    got = _decode_one([_field("score", DoubleType(), 1), _field("id", LongType(), 2)], order)
    assert got == {"score": 0.0, "id": 0}


def test_unknown_enum_number_is_kept_as_the_number() -> None:
    order = _order_class()()
    order.status = 9  # proto3 enums are open
    assert _decode_one([_field("status", StringType())], order) == {"status": "9"}


def test_nested_repeated_and_maps() -> None:
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
    assert _decode_one(fields, order) == {
        "address": {"city": "Oslo", "zip": None},
        "tags": ["a", "b"],
        "quantities": {"apple": 3},
        "history": [{"city": "Rome", "zip": 1}],
        "by_code": [(5, {"city": "Bergen", "zip": None})],
    }
    unset = _decode_one(fields, _order_class()())
    assert unset == {"address": None, "tags": [], "quantities": {}, "history": [], "by_code": []}


def test_oneof_is_a_struct_with_the_set_member() -> None:
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
    assert _decode_one(fields, cls(card="visa")) == {"payment": {"card": "visa", "cash": None}}
    assert _decode_one(fields, cls(cash={"currency": "EUR", "units": 2})) == {
        "payment": {"card": None, "cash": {"currency": "EUR", "units": 2}}
    }
    assert _decode_one(fields, cls()) == {"payment": None}


def test_well_known_types() -> None:
    order = _order_class()(
        placed_at={"seconds": 1_795_000_000, "nanos": 123_456_789},
        ttl={"seconds": 90, "nanos": 500_000_000},
        discount={"value": 0},
    )
    order.extra.update({"note": "x", "n": 2})
    order.anything.string_value = "hi"
    fields = [
        _field("placed_at", TimestamptzType(), 1),
        _field("ttl", LongType(), 2),
        _field("discount", LongType(), 3),
        _field("extra", StringType(), 4),
        _field("anything", StringType(), 5),
    ]
    assert _decode_one(fields, order) == {
        "placed_at": 1_795_000_000_123_456,
        "ttl": 90_500_000,
        "discount": 0,  # a wrapper that is set, to zero
        "extra": '{"n":2.0,"note":"x"}',
        "anything": '"hi"',
    }
    unset = _decode_one(fields, _order_class()())
    assert unset == dict.fromkeys(unset)  # every one NULL when absent
    naive = _decode_one([_field("placed_at", TimestampType())], order)
    assert naive == {"placed_at": 1_795_000_000_123_456}


def test_table_fields_the_writer_lacks_are_null_and_fields_the_table_lacks_are_ignored() -> None:
    order = _order_class()(id=1, customer="c")
    assert _decode_one([_field("id", LongType(), 1), _field("added_later", StringType(), 2)], order) == {
        "id": 1,
        "added_later": None,
    }


def test_unknown_field_numbers_in_the_value_are_ignored() -> None:
    # Field 99 (varint 5) is not in the schema: a newer writer's field.
    value = _order_class()(id=4).SerializeToString() + b"\x98\x06\x05"
    assert _decode_one([_field("id", LongType())], value) == {"id": 4}


def test_conflicting_types_and_out_of_range_values_are_precise_reasons() -> None:
    cls = _order_class()
    assert _error_of([_field("customer", LongType())], _framed(1, [0], cls(customer="x"))) == (
        "field customer: protobuf string does not fit the table's long"
    )
    assert _error_of([_field("big", IntegerType())], _framed(1, [0], cls(big=1 << 40))) == (
        f"field big: {1 << 40} is out of range for the table's type"
    )
    assert _error_of([_field("blob", FixedType(4))], _framed(1, [0], cls(blob=b"12"))) == (
        "field blob: 2 bytes, the table's fixed[4] needs 4"
    )
    assert _error_of([_field("tags", StringType())], _framed(1, [0], cls(tags=["a"]))) == (
        "field tags: protobuf repeated string does not fit the table's string"
    )
    # A field with presence that is unset is no conflict (a proto3 scalar always has its value).
    assert _error_of([_field("address", LongType())], _framed(1, [0], cls())) is None
    assert _error_of([_field("address", LongType())], _framed(1, [0], cls(address={}))) == (
        "field address: protobuf shop.Order.Address does not fit the table's long"
    )


def test_records_that_do_not_decode_get_their_reason() -> None:
    fields = [_field("id", LongType())]
    whole = _order_class()(id=5, customer="a long enough name").SerializeToString()
    assert _error_of(fields, None) == "record has no value (tombstone)"
    assert _error_of(fields, _framed(1, [0], whole[:-4])) == (
        "value is not a protobuf shop.Order (truncated or corrupt)"
    )
    assert _error_of(fields, _framed(2, [0], whole)) == "value's schema id 2 is not registered"
    assert _error_of(fields, _framed(3, [0], whole), unusable={3: "is a AVRO schema, not PROTOBUF"}) == (
        "value's schema id 3 is a AVRO schema, not PROTOBUF"
    )
    assert _error_of(fields, _framed(1, [4], whole)) == (
        "value's schema id 1: message index [4] is not in the schema"
    )


def test_two_writer_schema_versions_decode_by_id() -> None:
    v1, main1 = descriptor_set('syntax = "proto3"; package p; message M { int64 id = 1; }', {})
    v2, main2 = descriptor_set(
        'syntax = "proto3"; package p; message M { int64 id = 1; string note = 2; }', {}
    )
    cls1 = message_factory.GetMessageClass(build_pool(v1).FindMessageTypeByName("p.M"))
    cls2 = message_factory.GetMessageClass(build_pool(v2).FindMessageTypeByName("p.M"))
    decoder = Decoder(
        [_field("id", LongType(), 1), _field("note", StringType(), 2)],
        writers={10: WriterSchema.of(v1, main1), 11: WriterSchema.of(v2, main2)},
    )
    columns, valid, _ = decoder.decode([_framed(10, [0], cls1(id=1)), _framed(11, [0], cls2(id=2, note="n"))])
    assert valid == [True, True]
    assert columns == [[1, 2], [None, "n"]]


def test_inline_schema_framed_and_raw() -> None:
    files, main = _schema()
    order = _order_class()(id=9)
    inline = (WriterSchema.of(files, main), "shop.Order")
    fields = [_field("id", LongType())]
    raw = Decoder(fields, inline=inline, framed=False).decode([order.SerializeToString()])
    # Framed: the schema id and indexes are skipped, the message is the one floe.yaml names.
    framed = Decoder(fields, inline=inline, framed=True).decode([_framed(77, [1], order)])
    assert raw[0] == framed[0] == [[9]]


def test_decoded_batches_are_the_arrow_columns_spark_expects() -> None:
    address = StructType(NestedField(2, "city", StringType(), required=True))
    fields = [
        NestedField(1, "id", LongType(), required=True),
        _field("placed_at", TimestamptzType(), 3),
        _field("address", address, 4),
        _field("quantities", MapType(5, StringType(), 6, LongType()), 7),
    ]
    files, main = _schema()
    order = _order_class()(id=1, placed_at={"seconds": 1}, address={"city": "Oslo"}, quantities={"a": 1})
    batch = pa.RecordBatch.from_pydict(
        {"__floe_value": pa.array([_framed(1, [0], order), b"junk"], pa.binary()), "__floe_offset": [0, 1]}
    )
    record_type = arrow_record_type(fields)
    decoder = Decoder(fields, writers={1: WriterSchema.of(files, main)})
    (out,) = decode_batches([batch], decoder, record_type)
    assert out.schema.names == ["__floe_value", "__floe_offset", "__floe_record", "__floe_decode_error"]
    assert out.column("__floe_record").type == record_type
    rows = out.to_pylist()
    assert rows[0]["__floe_record"]["id"] == 1
    assert rows[0]["__floe_record"]["placed_at"].timestamp() == 1
    assert rows[0]["__floe_record"]["quantities"] == [("a", 1)]
    assert rows[0]["__floe_decode_error"] is None
    assert rows[1]["__floe_record"] is None
    assert rows[1]["__floe_decode_error"] == (
        "value is not in the Confluent wire format (magic byte 0 + schema id)"
    )


# -- floe.yaml ---------------------------------------------------------------------------------------------


def _config(**table: Any) -> dict[str, Any]:
    return {
        "source_clusters": [{"name": "c", "bootstrap_brokers": [{"hostname": "localhost", "port": 9092}]}],
        "tables": [
            {
                "source_cluster_name": "c",
                "source_topic": "orders",
                "source_format": "protobuf",
                "schema": {"fields": [{"name": "id", "id": 1, "type": "long"}]},
                **table,
            }
        ],
    }


def _errors(config: dict[str, Any]) -> list[str]:
    with pytest.raises(InvalidConfig) as caught:
        parse_config(config)
    return [str(e) for e in caught.value.errors]


def test_inline_protobuf_table_is_valid_with_its_message_and_imports() -> None:
    config = parse_config(
        _config(protobuf={"message": "shop.Order", "schema": ORDER, "imports": {"common.proto": COMMON}})
    )
    table = config.tables[0]
    assert table.protobuf is not None
    assert table.protobuf.message == "shop.Order"
    assert table.protobuf_framing == "confluent"
    assert parse_config(config.to_json()) == config


@pytest.mark.parametrize(
    ("table", "error"),
    [
        ({}, "tables[0].protobuf: source_format protobuf with schema_mode inline needs a protobuf block"),
        (
            {"protobuf": {"message": "shop.Nope", "schema": ORDER, "imports": {"common.proto": COMMON}}},
            "tables[0].protobuf.message: the schema defines no message 'shop.Nope' (it defines: shop.Order, "
            "shop.Order.Address, shop.Refund)",
        ),
        ({"protobuf": {"message": "shop.Order", "schema": ORDER}}, "tables[0].protobuf.schema: "),
        ({"protobuf": {"message": "1bad"}}, "tables[0].protobuf.message: expected a message's full name"),
        ({"protobuf": {"message": "a.B"}}, "tables[0].protobuf.schema: schema is required"),
        (
            {"protobuf": {"message": "a.B", "schema_file": "x.proto"}},
            "tables[0].protobuf.schema_file: schema_file is read by `floe apply -f floe.yaml`",
        ),
        (
            {"schema_mode": "registry", "schema_registry_url": "http://r", "protobuf_framing": "raw"},
            "tables[0].protobuf_framing: schema_mode registry needs the Confluent framing",
        ),
        (
            {
                "schema_mode": "registry",
                "schema_registry_url": "http://r",
                "protobuf": {"message": "p.M", "schema": 'syntax = "proto3"; package p; message M {}'},
            },
            "tables[0].protobuf: schema_mode registry takes each record's message type from the registry",
        ),
        (
            {"source_format": "json", "protobuf_framing": "raw"},
            "tables[0].protobuf_framing: protobuf_framing ",
        ),
    ],
)
def test_protobuf_settings_errors_carry_their_yaml_path(table: dict[str, Any], error: str) -> None:
    errors = _errors(_config(**table))
    assert any(e.startswith(error) for e in errors), errors


def test_schema_file_is_read_next_to_floe_yaml_with_its_local_imports(tmp_path: Path) -> None:
    (tmp_path / "protos").mkdir()
    (tmp_path / "protos" / "order.proto").write_text(ORDER)
    (tmp_path / "protos" / "common.proto").write_text(COMMON)
    text = """
source_clusters:
  - name: c
    bootstrap_brokers: [{hostname: localhost, port: 9092}]
tables:
  - source_cluster_name: c
    source_topic: orders
    source_format: protobuf
    protobuf_framing: raw
    protobuf:
      message: shop.Order
      schema_file: protos/order.proto
    schema:
      fields: [{name: id, id: 1, type: long}]
"""
    config = load_yaml(text, base=tmp_path)
    block = config.tables[0].protobuf
    assert block is not None
    assert block.schema_text == ORDER
    assert block.imports == {"common.proto": COMMON}

    missing = text.replace("protos/order.proto", "protos/nope.proto")
    with pytest.raises(InvalidConfig) as caught:
        load_yaml(missing, base=tmp_path)
    (error,) = caught.value.errors
    assert error.path == "tables[0].protobuf.schema_file"
    assert error.message == "cannot read 'protos/nope.proto': No such file or directory"
    assert str(tmp_path) not in str(error)

    data: dict[str, Any] = {"tables": [{"protobuf": {"schema_file": "protos/order.proto"}}]}
    assert inline_schema_files(data, tmp_path) == []
    assert data["tables"][0]["protobuf"]["schema"] == ORDER
