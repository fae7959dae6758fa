"""Protobuf topics, the pure parts: schemas as text and as base64 FileDescriptorProtos (with references
and well-known imports), the JVM decoder's configuration, and floe.yaml's protobuf settings. The mapping
of every protobuf type to the table's columns and the Confluent framing run in the JVM decoder
(tests/e2e/test_protobuf_decoder.py); the Kafka and registry side is in tests/e2e/test_protobuf.py."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import descriptor_pb2, message_factory
from pyiceberg.types import (
    DateType,
    FixedType,
    IcebergType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
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
from ingest.protobuf_decode import WriterSchema, decoder_config
from tests.protobuf_schemas import COMMON, ORDER


def _schema() -> tuple[descriptor_pb2.FileDescriptorSet, str]:
    return descriptor_set(ORDER, {"common.proto": COMMON})


def _order_class(files: descriptor_pb2.FileDescriptorSet | None = None) -> Any:
    files = files or _schema()[0]
    return message_factory.GetMessageClass(build_pool(files).FindMessageTypeByName("shop.Order"))


def _field(name: str, kind: IcebergType, field_id: int = 1) -> NestedField:
    return NestedField(field_id, name, kind, required=False)


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


# -- the JVM decoder's configuration (the decoding itself: tests/e2e/test_protobuf_decoder.py) -------------


def test_decoder_config_describes_the_table_types_writers_and_framing() -> None:
    files, main = _schema()
    address = StructType(NestedField(2, "city", StringType(), required=True))
    fields = [
        _field("id", LongType(), 1),
        _field("blob", FixedType(4), 3),
        _field("address", address, 4),
        _field("tags", ListType(5, StringType()), 6),
        _field("quantities", MapType(7, StringType(), 8, LongType()), 9),
        _field("placed_at", TimestamptzType(), 10),
        _field("day", DateType(), 11),
    ]
    writer = WriterSchema.of(files, main)
    config = json.loads(decoder_config(fields, writers={7: writer}, unusable={8: "is not registered"}))
    assert config["framed"] is True
    assert config["unusable"] == {"8": "is not registered"}
    assert base64.b64decode(config["writers"]["7"]["descriptor_set"]) == files.SerializeToString()
    assert config["writers"]["7"]["main_file"] == main
    assert "inline" not in config
    assert config["fields"] == [
        {"name": "id", "type": {"kind": "long", "text": "long"}},
        {"name": "blob", "type": {"kind": "fixed", "text": "fixed[4]", "size": 4}},
        {
            "name": "address",
            "type": {
                "kind": "struct",
                "text": str(address),
                "fields": [{"name": "city", "type": {"kind": "string", "text": "string"}}],
            },
        },
        {
            "name": "tags",
            "type": {"kind": "list", "text": "list<string>", "element": {"kind": "string", "text": "string"}},
        },
        {
            "name": "quantities",
            "type": {
                "kind": "map",
                "text": "map<string, long>",
                "key": {"kind": "string", "text": "string"},
                "value": {"kind": "long", "text": "long"},
            },
        },
        {"name": "placed_at", "type": {"kind": "timestamptz", "text": "timestamptz"}},
        {"name": "day", "type": {"kind": "other", "text": "date"}},  # no protobuf value maps to it
    ]
    inline = json.loads(decoder_config(fields[:1], inline=(writer, "shop.Order"), framed=False))
    assert inline["framed"] is False
    assert inline["inline"]["message"] == "shop.Order"
    assert inline["inline"]["main_file"] == main
    # The same batch configuration is the same bytes: the JVM parses it once (cached by its hash).
    assert decoder_config(fields, writers={7: writer}) == decoder_config(fields, writers={7: writer})


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
