"""The schema registry, pure pieces: the registry a table reads from and its credentials (handed to
confluent-kafka's client, never shown), and the Confluent wire format. The real registry is in
tests/e2e/test_schema_registry.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from catalog.pipelines import CredentialError, parse_config
from devtools.ports import free_port
from devtools.schema_registry import CCOMPAT_PATH
from ingest.registry_client import (
    BasicAuth,
    RegistryClient,
    RegistryConnection,
    SchemaRegistryError,
    decode_confluent_header,
    encode_confluent,
)
from ingest.tables import ingest_tables, registry_connection
from tests.e2e.registry_proxy import REGISTRY_PASSWORD, REGISTRY_USER

ORDER_V1: dict[str, Any] = {
    "type": "record",
    "name": "Order",
    "namespace": "floe.test",
    "fields": [{"name": "id", "type": "long"}, {"name": "amount", "type": "double"}],
}
# v2 adds an optional field: a backward-compatible evolution, as producers do it.
ORDER_V2: dict[str, Any] = {
    **ORDER_V1,
    "fields": [*ORDER_V1["fields"], {"name": "note", "type": ["null", "string"], "default": None}],
}


def registry_credentials(password: str = REGISTRY_PASSWORD) -> BasicAuth:
    return BasicAuth(REGISTRY_USER, password, "REGISTRY_USER", "REGISTRY_PASSWORD")


def test_credentials_go_to_confluent_kafka_and_never_into_a_repr() -> None:
    connection = RegistryConnection("https://registry:8081", registry_credentials("s3cret"))
    assert connection.client_config(timeout=5) == {
        "url": "https://registry:8081",
        "timeout": 5,
        "basic.auth.user.info": f"{REGISTRY_USER}:s3cret",
    }
    assert "s3cret" not in repr(connection)
    assert RegistryConnection("http://r:8081").client_config(timeout=5) == {
        "url": "http://r:8081",
        "timeout": 5,
    }


def _pipeline(**registry: Any) -> dict[str, Any]:
    table = {
        "source_cluster_name": "c",
        "source_format": "avro",
        "schema_mode": "registry",
        "schema": {"fields": [{"name": "id", "id": 1, "type": "long"}]},
    }
    return {
        "source_clusters": [{"name": "c", "bootstrap_brokers": [{"hostname": "k", "port": 9092}]}],
        "schema_registry": {"url": "http://registry:8081/apis/ccompat/v7", **registry},
        "tables": [
            {**table, "source_topic": "default-registry"},
            {
                **table,
                "source_topic": "same-registry",
                "schema_registry_url": "http://registry:8081/apis/ccompat/v7",
            },
            {**table, "source_topic": "other-registry", "schema_registry_url": "http://other:8081"},
            {**table, "source_topic": "inline", "schema_mode": "inline"},
        ],
    }


def test_a_table_reads_from_its_registry_with_the_credentials_floe_yaml_names() -> None:
    config = parse_config(_pipeline(basic_auth_username_env="SR_USER", basic_auth_password_env="SR_PASSWORD"))
    environ = {"SR_USER": "alice", "TABLEFLOW_SR_PASSWORD": "s3cret"}
    default, same, other, inline = (registry_connection(config, t, environ) for t in config.tables)
    auth = BasicAuth("alice", "s3cret", "SR_USER", "SR_PASSWORD")
    assert default == RegistryConnection("http://registry:8081/apis/ccompat/v7", auth, "schema_registry.url")
    assert same == RegistryConnection(
        "http://registry:8081/apis/ccompat/v7", auth, "tables[1].schema_registry_url"
    )
    # floe.yaml names credentials for the top-level registry only.
    assert other == RegistryConnection("http://other:8081", None, "tables[2].schema_registry_url")
    assert inline is None

    without = parse_config(_pipeline())
    assert registry_connection(without, without.tables[0], environ) == RegistryConnection(
        "http://registry:8081/apis/ccompat/v7"
    )
    with pytest.raises(CredentialError, match=r"SR_PASSWORD .* schema_registry\.basic_auth_password_env"):
        registry_connection(config, config.tables[0], {"SR_USER": "alice"})


def test_ingestion_takes_each_tables_registry_and_leaves_out_a_table_without_its_credentials(
    caplog: pytest.LogCaptureFixture,
) -> None:
    raw = _pipeline(basic_auth_username_env="SR_USER", basic_auth_password_env="SR_PASSWORD")
    tables = ingest_tables({"config": raw}, environ={"SR_USER": "alice", "SR_PASSWORD": "s3cret"})
    auth = BasicAuth("alice", "s3cret", "SR_USER", "SR_PASSWORD")
    assert [(t.topic, t.registry) for t in tables] == [
        ("default-registry", RegistryConnection("http://registry:8081/apis/ccompat/v7", auth)),
        (
            "same-registry",
            RegistryConnection("http://registry:8081/apis/ccompat/v7", auth, "tables[1].schema_registry_url"),
        ),
        ("other-registry", RegistryConnection("http://other:8081", None, "tables[2].schema_registry_url")),
        ("inline", None),
    ]
    # The password variable is not set: the tables that need it are left out, with the reason logged.
    assert [t.topic for t in ingest_tables({"config": raw}, environ={"SR_USER": "alice"})] == [
        "other-registry",
        "inline",
    ]
    assert "SR_PASSWORD (or TABLEFLOW_SR_PASSWORD) is not set" in caplog.text


def test_unreachable_registry_is_a_clear_error() -> None:
    url = f"http://127.0.0.1:{free_port()}{CCOMPAT_PATH}"
    with RegistryClient(url, timeout=5) as unreachable, pytest.raises(SchemaRegistryError, match=url):
        unreachable.register("orders-value", json.dumps(ORDER_V1))


def test_client_rejects_a_non_http_url() -> None:
    with pytest.raises(ValueError, match="http:// or https://"):
        RegistryClient("registry:8081")


def test_wire_format_layout() -> None:
    framed = encode_confluent(0x01020304, b"payload")
    assert framed == b"\x00\x01\x02\x03\x04payload"
    assert decode_confluent_header(framed) == (0x01020304, b"payload")
    assert decode_confluent_header(encode_confluent(0, b"")) == (0, b"")
    assert decode_confluent_header(bytearray(b"\x00\x7f\xff\xff\xff")) == (2**31 - 1, b"")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (b"", "0 bytes, the header alone is 5"),
        (b"\x00\x00\x00\x01", "4 bytes, the header alone is 5"),
        (b"\x01\x00\x00\x00\x01{}", "magic byte is 0x01, expected 0x00"),
        (b'{"id": 1}', "magic byte is 0x7b"),
        (b"\x00\xff\xff\xff\xfe", "negative schema id -2"),
        (None, "null"),
    ],
)
def test_bad_wire_input_is_a_value_error(value: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        decode_confluent_header(value)


@pytest.mark.parametrize("schema_id", [-1, 2**31, True, 1.0])
def test_encode_rejects_ids_outside_int32(schema_id: Any) -> None:
    with pytest.raises(ValueError, match="Schema id must be an integer"):
        encode_confluent(schema_id, b"x")
