"""The schema registry: a real Apicurio through its Confluent-compatible API, also behind basic
authentication, read and written with floe's client (confluent-kafka's). The pure pieces (the registry a
table reads from, credentials, the wire format) are in tests/unit/test_schema_registry.py."""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Iterator
from typing import Any

import fastavro
import httpx
import pytest

from devtools.schema_registry import CCOMPAT_PATH, LocalSchemaRegistry
from ingest.registry_client import (
    RegisteredSchema,
    RegistryClient,
    RegistryConnection,
    SchemaNotFoundError,
    SchemaRegistryError,
    decode_confluent_header,
    encode_confluent,
)
from tests.e2e.registry_proxy import BasicAuthProxy
from tests.unit.test_schema_registry import ORDER_V1, ORDER_V2, registry_credentials


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


@pytest.mark.e2e
def test_schemas_are_cached_by_id(authenticated_registry: BasicAuthProxy, client: RegistryClient) -> None:
    schema_id = client.register(_subject(), json.dumps(ORDER_V1))
    # The proxy in front of the registry sees every request the client sends.
    seen = len(authenticated_registry.requests)
    with RegistryClient(RegistryConnection(authenticated_registry.url, registry_credentials())) as fresh:
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
    connection = RegistryConnection(authenticated_registry.url, registry_credentials())
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
    wrong = RegistryConnection(authenticated_registry.url, registry_credentials("wrong password"))
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
