"""The schema registry (real Apicurio through its Confluent-compatible API, also behind basic
authentication), floe's use of confluent-kafka's client, the registry a table reads from, the wire format."""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Iterator
from typing import Any

import fastavro
import httpx
import pytest

from catalog.pipelines import CredentialError, parse_config
from devtools.ports import free_port
from devtools.schema_registry import CCOMPAT_PATH, LocalSchemaRegistry
from ingest.registry_client import (
    BasicAuth,
    RegisteredSchema,
    RegistryClient,
    RegistryConnection,
    SchemaNotFoundError,
    SchemaRegistryError,
    decode_confluent_header,
    encode_confluent,
)
from ingest.tables import ingest_tables, registry_connection
from tests.registry_fixtures import REGISTRY_PASSWORD, REGISTRY_USER, BasicAuthProxy

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


def _subject() -> str:
    return f"orders-{uuid.uuid4().hex[:8]}-value"


@pytest.fixture
def client(schema_registry: LocalSchemaRegistry) -> Iterator[RegistryClient]:
    with RegistryClient(schema_registry.url) as registry_client:
        yield registry_client


@pytest.mark.e2e
def test_url_is_the_confluent_compatible_api(schema_registry: LocalSchemaRegistry) -> None:
    assert schema_registry.url == f"http://127.0.0.1:{schema_registry.port}{CCOMPAT_PATH}"
    assert schema_registry.url.endswith("/apis/ccompat/v7")
    assert schema_registry.startup_seconds is not None
    assert isinstance(httpx.get(f"{schema_registry.url}/subjects", timeout=30).json(), list)


@pytest.mark.e2e
def test_two_versions_registered_and_read_back_by_id(
    schema_registry: LocalSchemaRegistry, client: RegistryClient
) -> None:
    subject = _subject()
    first = client.register(subject, json.dumps(ORDER_V1))
    second = client.register(subject, json.dumps(ORDER_V2))
    assert first != second

    # A fresh client has nothing cached: these come from the registry over HTTP.
    with RegistryClient(schema_registry.url) as fresh:
        got_first = fresh.schema(first)
        got_second = fresh.schema(second)
    assert got_first == RegisteredSchema(first, "AVRO", got_first.schema_str)
    assert json.loads(got_first.schema_str) == ORDER_V1
    assert got_second.id == second
    assert got_second.schema_type == "AVRO"
    assert json.loads(got_second.schema_str) == ORDER_V2

    # The ids are the ones Apicurio's ccompat API itself reports for the subject's versions.
    latest = httpx.get(f"{schema_registry.url}/subjects/{subject}/versions/latest", timeout=30).json()
    assert latest["id"] == second
    assert latest["version"] == 2
    assert latest["subject"] == subject
    assert json.loads(latest["schema"]) == ORDER_V2
    version_one = httpx.get(f"{schema_registry.url}/subjects/{subject}/versions/1", timeout=30).json()
    assert version_one["id"] == first
    assert httpx.get(f"{schema_registry.url}/subjects/{subject}/versions", timeout=30).json() == [1, 2]


@pytest.mark.e2e
def test_registering_the_same_schema_again_gives_the_same_id(client: RegistryClient) -> None:
    subject = _subject()
    schema_id = client.register(subject, json.dumps(ORDER_V1))
    assert client.register(subject, json.dumps(ORDER_V1)) == schema_id


def _credentials(password: str = REGISTRY_PASSWORD) -> BasicAuth:
    return BasicAuth(REGISTRY_USER, password, "REGISTRY_USER", "REGISTRY_PASSWORD")


@pytest.mark.e2e
def test_schemas_are_cached_by_id(authenticated_registry: BasicAuthProxy, client: RegistryClient) -> None:
    schema_id = client.register(_subject(), json.dumps(ORDER_V1))
    # The proxy in front of the registry sees every request the client sends.
    seen = len(authenticated_registry.requests)
    with RegistryClient(RegistryConnection(authenticated_registry.url, _credentials())) as fresh:
        first = fresh.schema(schema_id)
        assert fresh.schema(schema_id) is first
    assert authenticated_registry.requests[seen:] == [
        ("GET", f"{CCOMPAT_PATH}/schemas/ids/{schema_id}", True)
    ]


@pytest.mark.e2e
def test_unknown_schema_id_is_a_lookup_error(client: RegistryClient) -> None:
    with pytest.raises(SchemaNotFoundError, match=r"HTTP 404 \(error 40403\)") as caught:
        client.schema(987_654_321)
    assert isinstance(caught.value, LookupError)
    assert caught.value.status_code == 404
    assert caught.value.error_code == 40403


@pytest.mark.e2e
def test_invalid_schema_is_rejected_with_the_registry_message(client: RegistryClient) -> None:
    with pytest.raises(SchemaRegistryError, match=r"HTTP 422 \(error 42201\)") as caught:
        client.register(_subject(), "this is not a schema")
    assert caught.value.status_code == 422
    assert not isinstance(caught.value, LookupError)


@pytest.mark.e2e
def test_wrong_base_url_says_so(schema_registry: LocalSchemaRegistry) -> None:
    with (
        RegistryClient(schema_registry.base_url) as wrong,
        pytest.raises(SchemaRegistryError, match="Confluent-compatible API base"),
    ):
        wrong.schema(1)


@pytest.mark.e2e
def test_registry_behind_basic_auth_takes_the_credentials(
    authenticated_registry: BasicAuthProxy, client: RegistryClient
) -> None:
    connection = RegistryConnection(authenticated_registry.url, _credentials())
    with RegistryClient(connection) as authenticated:
        authenticated.check()
        subject = _subject()
        schema_id = authenticated.register(subject, json.dumps(ORDER_V1))
        assert json.loads(authenticated.schema(schema_id).schema_str) == ORDER_V1
    # Registered through the proxy, in the registry behind it.
    assert json.loads(client.schema(schema_id).schema_str) == ORDER_V1
    assert all(authorized for _, _, authorized in authenticated_registry.requests[-3:])


@pytest.mark.e2e
def test_registry_refusing_the_credentials_says_which_settings_to_check(
    authenticated_registry: BasicAuthProxy,
) -> None:
    wrong = RegistryConnection(authenticated_registry.url, _credentials("wrong password"))
    with RegistryClient(wrong) as refused, pytest.raises(SchemaRegistryError, match="HTTP 401") as caught:
        refused.check()
    message = str(caught.value)
    assert caught.value.status_code == 401
    assert authenticated_registry.url in message
    assert "refused the credentials of user 'floe-ingest'" in message
    assert "REGISTRY_USER and REGISTRY_PASSWORD" in message
    assert "schema_registry.basic_auth_password_env" in message
    assert "wrong password" not in message
    assert not isinstance(caught.value, LookupError)

    # No credentials at all: the error says which floe.yaml settings name them.
    anonymous = RegistryConnection(authenticated_registry.url)
    with RegistryClient(anonymous) as refused, pytest.raises(SchemaRegistryError) as caught:
        refused.schema(1)
    assert "the registry requires authentication" in str(caught.value)
    assert "schema_registry.basic_auth_username_env" in str(caught.value)
    assert not isinstance(caught.value, LookupError)


def test_credentials_go_to_confluent_kafka_and_never_into_a_repr() -> None:
    connection = RegistryConnection("https://registry:8081", _credentials("s3cret"))
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


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda c: c.register("", "{}"), "Subject must not be empty"),
        (lambda c: c.register("s", "{}", schema_type="XML"), "Schema type must be one of"),
        (lambda c: c.schema(-1), "non-negative integer"),
        (lambda c: c.schema(True), "non-negative integer"),
    ],
)
def test_client_rejects_bad_arguments(client: RegistryClient, call: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call(client)


def test_client_rejects_a_non_http_url() -> None:
    with pytest.raises(ValueError, match="http:// or https://"):
        RegistryClient("registry:8081")


def _avro_bytes(schema: dict[str, Any], record: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


@pytest.mark.e2e
def test_fastavro_record_round_trips_in_confluent_wire_format(
    schema_registry: LocalSchemaRegistry, client: RegistryClient
) -> None:
    subject = _subject()
    v1_id = client.register(subject, json.dumps(ORDER_V1))
    v2_id = client.register(subject, json.dumps(ORDER_V2))
    old_record = {"id": 7, "amount": 12.5}
    new_record = {"id": 8, "amount": 3.25, "note": "gift"}
    messages = [encode_confluent(v1_id, _avro_bytes(ORDER_V1, old_record))]
    messages.append(encode_confluent(v2_id, _avro_bytes(ORDER_V2, new_record)))

    # A consumer that knows only the registry: each message names its writer schema.
    reader = fastavro.parse_schema(ORDER_V2)
    decoded = []
    with RegistryClient(schema_registry.url) as consumer:
        for message in messages:
            schema_id, payload = decode_confluent_header(message)
            writer = fastavro.parse_schema(json.loads(consumer.schema(schema_id).schema_str))
            decoded.append(fastavro.schemaless_reader(io.BytesIO(payload), writer, reader))
    assert decoded == [{**old_record, "note": None}, new_record]


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
