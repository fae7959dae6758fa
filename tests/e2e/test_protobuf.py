"""Protobuf and registry-framed JSON topics end to end: values produced by confluent-kafka's own
`ProtobufSerializer` and `JSONSerializer` through the local registry's Confluent-compatible API (Apicurio),
an inline-schema protobuf topic with an import and raw framing, all ingested by one `floe ingest` (Spark)
into tables read back value by value, with the dead letters' reasons.

The pure parts (wire format, descriptors, the type mapping) are in tests/unit/test_protobuf.py.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import message_factory
from pyiceberg.catalog.rest import RestCatalog

from catalog.pipelines.protobuf import build_pool, descriptor_set
from devtools.catalog_server import CatalogProcess
from devtools.kafka_broker import LocalKafka
from devtools.postgres import LocalPostgres
from devtools.schema_registry import LocalSchemaRegistry
from ingest.registry_client import RegistryClient
from tests.e2e.ingest_harness import IngestProcess, apply_pipeline, produce, wait_until_committed
from tests.protobuf_schemas import COMMON

CLUSTER = "protobuf"

ORDER_V1 = """
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
  string internal = 14;  // not a table column: ignored
}
"""
# The second writer version adds a field the table has (`note`).
ORDER_V2 = ORDER_V1.replace("  string internal = 14;", "  string internal = 14;\n  string note = 15;")

ORDER_FIELDS: list[dict[str, Any]] = [
    {"name": "id", "id": 1, "type": "long"},
    {"name": "customer", "id": 2, "type": "string"},
    {"name": "score", "id": 3, "type": "double", "optional": True},
    {"name": "placed_at", "id": 4, "type": "timestamptz", "optional": True},
    {
        "name": "address",
        "id": 5,
        "type": "struct",
        "fields": [
            {"name": "city", "id": 6, "type": "string"},
            {"name": "zip", "id": 7, "type": "int", "optional": True},
        ],
    },
    {
        "name": "tags",
        "id": 8,
        "type": "list",
        "optional": True,
        "fields": [{"name": "element", "id": 9, "type": "string"}],
    },
    {
        "name": "quantities",
        "id": 10,
        "type": "map",
        "optional": True,
        "fields": [{"name": "key", "id": 11, "type": "string"}, {"name": "value", "id": 12, "type": "long"}],
    },
    {"name": "status", "id": 13, "type": "string", "optional": True},
    {
        "name": "payment",
        "id": 14,
        "type": "struct",
        "optional": True,
        "fields": [
            {"name": "card", "id": 15, "type": "string", "optional": True},
            {
                "name": "cash",
                "id": 16,
                "type": "struct",
                "optional": True,
                "fields": [
                    {"name": "currency", "id": 17, "type": "string"},
                    {"name": "units", "id": 18, "type": "long"},
                ],
            },
        ],
    },
    {"name": "discount", "id": 19, "type": "long", "optional": True},
    {"name": "extra", "id": 20, "type": "string", "optional": True},
    {"name": "ttl", "id": 21, "type": "long", "optional": True},
    {"name": "note", "id": 22, "type": "string", "optional": True},
]
STATUSES = ["STATUS_UNKNOWN", "PLACED", "SHIPPED"]


@pytest.fixture(scope="module")
def server(postgres: LocalPostgres, tmp_path_factory: pytest.TempPathFactory) -> Iterator[CatalogProcess]:
    url = postgres.create_database(f"floe_protobuf_{uuid.uuid4().hex[:8]}")
    with CatalogProcess(url, home=tmp_path_factory.mktemp("protobuf-floe")) as process:
        yield process


@pytest.fixture(scope="module")
def admin(server: CatalogProcess) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {server.token()}"}, timeout=60
    ) as client:
        yield client


@pytest.fixture(scope="module")
def catalog(server: CatalogProcess) -> RestCatalog:
    return server.catalog()


def _topic(kafka: LocalKafka, name: str) -> str:
    topic = f"{name}.{uuid.uuid4().hex[:6]}"
    kafka.create_topic(topic, 2)
    return topic


def _order_class(schema: str) -> Any:
    files, _ = descriptor_set(schema, {"common.proto": COMMON}, main_name="shop/order.proto")
    return message_factory.GetMessageClass(build_pool(files).FindMessageTypeByName("shop.Order"))


def _order(cls: Any, i: int) -> Any:
    order = cls(
        id=i,
        customer=f"c{i}",
        placed_at={"seconds": 1_795_000_000 + i, "nanos": 1000 * i},
        address={"city": f"city{i % 3}"},
        tags=[f"t{i % 2}"],
        quantities={"apple": i},
        status=i % 3,
        discount={"value": i % 2},
        ttl={"seconds": i},
        internal="ignored",
    )
    if i % 2:
        order.score = i / 2
        order.address.zip = i
        order.cash.currency, order.cash.units = "EUR", i
    else:
        order.card = f"card{i}"
    order.extra.update({"i": i})
    return order


def _expected(i: int, note: str | None) -> dict[str, Any]:
    odd = bool(i % 2)
    return {
        "id": i,
        "customer": f"c{i}",
        "score": i / 2 if odd else None,
        "placed_at_micros": (1_795_000_000 + i) * 1_000_000 + i,
        "address": {"city": f"city{i % 3}", "zip": i if odd else None},
        "tags": [f"t{i % 2}"],
        "quantities": [("apple", i)],
        "status": STATUSES[i % 3],
        "payment": {"card": None, "cash": {"currency": "EUR", "units": i}}
        if odd
        else {"card": f"card{i}", "cash": None},
        "discount": i % 2,
        "extra": json.dumps({"i": float(i)}, separators=(",", ":")),
        "ttl": i * 1_000_000,
        "note": note,
    }


def _rows(catalog: RestCatalog, table: str) -> list[dict[str, Any]]:
    return list(catalog.load_table(f"{CLUSTER}.{table}").scan().to_arrow().to_pylist())


def _as_expected(row: dict[str, Any]) -> dict[str, Any]:
    row = {k: v for k, v in row.items() if k != "_kafka"}
    placed = row.pop("placed_at")
    row["placed_at_micros"] = round(placed.timestamp() * 1_000_000) if placed else None
    return row


def test_protobuf_json_schema_and_inline_topics(
    kafka: LocalKafka,
    schema_registry: LocalSchemaRegistry,
    server: CatalogProcess,
    admin: httpx.Client,
    catalog: RestCatalog,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    host, port = kafka.bootstrap_servers.split(":")
    proto_topic = _topic(kafka, "orders-proto")
    json_topic = _topic(kafka, "orders-json-schema")
    inline_topic = _topic(kafka, "orders-inline")
    names = {t: t.replace(".", "_").replace("-", "_") for t in (proto_topic, json_topic, inline_topic)}
    inline_proto = """
syntax = "proto3";
package shop.inline;
import "common.proto";
import "google/protobuf/timestamp.proto";
message Payment { int64 id = 1; shop.common.Money amount = 2; google.protobuf.Timestamp at = 3; }
"""
    config = {
        "schema_registry": {"url": schema_registry.url},
        "source_clusters": [{"name": CLUSTER, "bootstrap_brokers": [{"hostname": host, "port": int(port)}]}],
        "tables": [
            {
                "source_cluster_name": CLUSTER,
                "source_topic": proto_topic,
                "source_format": "protobuf",
                "schema_mode": "registry",
                "schema": {"fields": ORDER_FIELDS},
            },
            {
                "source_cluster_name": CLUSTER,
                "source_topic": json_topic,
                "source_format": "json",
                "schema_mode": "registry",
                "schema": {
                    "fields": [
                        {"name": "id", "id": 1, "type": "long"},
                        {"name": "name", "id": 2, "type": "string", "optional": True},
                        {
                            "name": "tags",
                            "id": 3,
                            "type": "list",
                            "optional": True,
                            "fields": [{"name": "element", "id": 4, "type": "string"}],
                        },
                    ]
                },
            },
            {
                "source_cluster_name": CLUSTER,
                "source_topic": inline_topic,
                "source_format": "protobuf",
                "protobuf_framing": "raw",
                "protobuf": {
                    "message": "shop.inline.Payment",
                    "schema": inline_proto,
                    "imports": {"common.proto": COMMON},
                },
                "schema": {
                    "fields": [
                        {"name": "id", "id": 1, "type": "long"},
                        {
                            "name": "amount",
                            "id": 2,
                            "type": "struct",
                            "fields": [
                                {"name": "currency", "id": 3, "type": "string"},
                                {"name": "units", "id": 4, "type": "long"},
                            ],
                        },
                        {"name": "at", "id": 5, "type": "timestamptz", "optional": True},
                    ]
                },
            },
        ],
    }
    apply_pipeline(admin, config)

    # -- produce: the registry's own serializers ---------------------------------------------------
    registry = RegistryClient(schema_registry.url)
    proto_context = SerializationContext(proto_topic, MessageField.VALUE)
    v1, v2 = _order_class(ORDER_V1), _order_class(ORDER_V2)
    serialize_v1 = ProtobufSerializer(v1, registry.confluent)
    serialize_v2 = ProtobufSerializer(v2, registry.confluent)
    values = [serialize_v1(_order(v1, i), proto_context) for i in range(40)]
    values += [serialize_v2(_order(v2, i), proto_context) for i in range(40, 60)]  # the second version
    ids = {int.from_bytes(v[1:5], "big") for v in values}
    assert len(ids) == 2, ids  # two writer schema versions, both registered by the serializer
    truncated = values[0][:-6]
    no_address = serialize_v2(v2(id=999, customer="x"), proto_context)  # the table requires `address`
    unknown_id = (
        b"\x00" + (987_654_321).to_bytes(4, "big") + b"\x00" + bytes(_order(v1, 1).SerializeToString())
    )
    proto_bad = [truncated, no_address, unknown_id, b"plain bytes", None]
    proto_produced = produce(kafka.bootstrap_servers, proto_topic, [*values, *proto_bad])

    json_schema = json.dumps(
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "title": "Customer",
            "type": "object",
            "properties": {
                "id": {"type": "integer"},
                "name": {"type": "string"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "ignored": {"type": "boolean"},
            },
            "required": ["id"],
        }
    )
    json_context = SerializationContext(json_topic, MessageField.VALUE)
    serialize_json = JSONSerializer(json_schema, registry.confluent)
    json_values: list[bytes | None] = [
        serialize_json({"id": i, "name": f"n{i}", "tags": ["a", str(i)], "ignored": True}, json_context)
        for i in range(30)
    ]
    framed_json = json_values[0]
    assert framed_json is not None
    json_values += [
        b'{"id": 1000}',  # not framed
        framed_json[:5] + b"{not json",
        b"\x00" + (987_654_321).to_bytes(4, "big") + b'{"id": 1}',
        framed_json[:5] + b'{"name": "no id"}',
    ]
    json_produced = produce(kafka.bootstrap_servers, json_topic, json_values)

    payment = message_factory.GetMessageClass(
        build_pool(descriptor_set(inline_proto, {"common.proto": COMMON})[0]).FindMessageTypeByName(
            "shop.inline.Payment"
        )
    )
    inline_values: list[bytes | None] = [
        payment(id=i, amount={"currency": "NOK", "units": 10 * i}, at={"seconds": i}).SerializeToString()
        for i in range(25)
    ]
    whole = payment(id=1, amount={"currency": "a fairly long currency"}).SerializeToString()
    inline_values += [whole[:-5], payment(id=7).SerializeToString()]  # truncated; no amount (required)
    inline_produced = produce(kafka.bootstrap_servers, inline_topic, inline_values)

    # -- ingest ----------------------------------------------------------------------------------------
    home = tmp_path_factory.mktemp("protobuf-ingest")
    with IngestProcess(server, home, args=["--commit-interval", "1", "--cluster", CLUSTER]) as ingest:
        for topic, produced in (
            (proto_topic, proto_produced),
            (json_topic, json_produced),
            (inline_topic, inline_produced),
        ):
            # The table's offsets pass the dead letters too (they are committed first, in the same batch).
            ends = produced.end_offsets()
            wait_until_committed(admin, CLUSTER, names[topic], topic, ends, ingest=ingest, timeout=400)

    # -- protobuf through the registry: every value, and the dead letters' reasons ------------------------
    rows = sorted((_as_expected(r) for r in _rows(catalog, names[proto_topic])), key=lambda r: r["id"])
    assert rows == [_expected(i, None) for i in range(40)] + [_expected(i, "") for i in range(40, 60)]
    dead = _rows(catalog, names[proto_topic] + "_dlq")
    assert sorted(
        ((d["value"], d["error"]) for d in dead), key=lambda pair: (pair[0] or b"", pair[1])
    ) == sorted(
        [
            (truncated, "value is not a protobuf shop.Order (truncated or corrupt)"),
            (no_address, "required field address is missing or null"),
            (unknown_id, "value's schema id 987654321 is not registered"),
            (b"plain bytes", "value is not in the Confluent wire format (magic byte 0 + schema id)"),
            (None, "record has no value (tombstone)"),
        ],
        key=lambda pair: (pair[0] or b"", pair[1]),
    )
    # The registry kept the import as its own subject: the writer schema was read through its reference.
    assert any(r.name == "common.proto" for r in registry.schema(min(ids)).references)

    # -- JSON Schema through the registry ------------------------------------------------------------------
    json_rows = sorted(_rows(catalog, names[json_topic]), key=lambda r: r["id"])
    assert [(r["id"], r["name"], r["tags"]) for r in json_rows] == [
        (i, f"n{i}", ["a", str(i)]) for i in range(30)
    ]
    json_dead = sorted(d["error"] for d in _rows(catalog, names[json_topic] + "_dlq"))
    assert json_dead == [
        # Where the JSON stops parsing, counting the 5 bytes of the Confluent prefix.
        "not valid JSON: Expecting property name enclosed in double quotes at byte 6",
        "required field id is missing or null",
        "value is not in the Confluent wire format (magic byte 0 + schema id)",
        "value's schema id 987654321 is not registered",
    ]

    # -- inline protobuf, raw framing, with an import -------------------------------------------------------
    inline_rows = sorted(_rows(catalog, names[inline_topic]), key=lambda r: r["id"])
    assert [(r["id"], r["amount"], r["at"].timestamp()) for r in inline_rows] == [
        (i, {"currency": "NOK", "units": 10 * i}, float(i)) for i in range(25)
    ]
    inline_dead = sorted(d["error"] for d in _rows(catalog, names[inline_topic] + "_dlq"))
    assert inline_dead == [
        "required field amount is missing or null",
        "value is not a protobuf shop.inline.Payment (truncated or corrupt)",
    ]
