"""Schema-registry access for registry mode: confluent-kafka's client, configured from floe.yaml.

The HTTP client, its schema cache, retries with backoff, TLS (`https://` URLs; a private CA through
`SSL_CERT_FILE`) and basic authentication are confluent-kafka's
(`confluent_kafka.schema_registry.SchemaRegistryClient`). floe adds what it needs on top:
`RegistryConnection` (a registry's URL and the credentials floe.yaml names, resolved), errors that
say which registry and which floe.yaml setting to check, and the Confluent wire format (magic byte 0
and a big-endian schema id before the payload), which `ingest.decode` reads in Spark and the tests and
benchmarks write.

The registry is only reached from the Python driver: `ingest.batches` looks up each batch's writer
schemas here and hands their text to Spark's `from_avro`, so the JVM never talks to the registry.
"""

from __future__ import annotations

import struct
import warnings
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from catalog.client import TRANSPORT_ERRORS

with warnings.catch_warnings():
    # Authlib (imported by confluent-kafka's registry client) warns on import that it prefers httpx2 over
    # httpx; floe depends on httpx, and the warning would open every `floe ingest` log. Its module
    # `deprecate` installs an "always" filter on import, so import it first and put "ignore" in front.
    import authlib.deprecate  # type: ignore[import-untyped]  # noqa: F401

    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
    from confluent_kafka.schema_registry.error import SchemaRegistryError as ConfluentRegistryError

SCHEMA_TYPES = ("AVRO", "JSON", "PROTOBUF")
# What a registry call may fail with: the registry's answer, or the transport under confluent's client
# (httpx, or httpx2 where installed).
_REGISTRY_ERRORS: tuple[type[Exception], ...] = (ConfluentRegistryError, *TRANSPORT_ERRORS)
# Confluent's error code for "schema not found" (HTTP 404); its other 404xx codes name a missing
# subject or version. A 404 without one of them means the path itself is unknown.
_SCHEMA_NOT_FOUND = 40403
_NOT_FOUND_CODES = range(40400, 40500)


@dataclass(frozen=True, slots=True)
class BasicAuth:
    """Basic-auth credentials, and the environment variables floe.yaml took them from."""

    username: str
    password: str = field(repr=False)
    username_env: str
    password_env: str


@dataclass(frozen=True, slots=True)
class RegistryConnection:
    """A schema registry as a table reaches it: the Confluent-compatible API's base URL, credentials.

    `setting` is the floe.yaml key that names the URL (error messages point at it).
    """

    url: str
    basic_auth: BasicAuth | None = None
    setting: str = "schema_registry.url"

    def client_config(self, timeout: float) -> dict[str, Any]:
        """The configuration of confluent-kafka's SchemaRegistryClient for this registry."""
        config: dict[str, Any] = {"url": self.url, "timeout": timeout}
        if self.basic_auth is not None:
            config["basic.auth.user.info"] = f"{self.basic_auth.username}:{self.basic_auth.password}"
        return config


class SchemaRegistryError(RuntimeError):
    """A schema-registry request failed: unreachable, refused, or an HTTP error (its status and code)."""

    def __init__(
        self, message: str, *, status_code: int | None = None, error_code: int | None = None
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.error_code = error_code


class SchemaNotFoundError(SchemaRegistryError, LookupError):
    """The registry has no schema with that id."""


@dataclass(frozen=True, slots=True)
class SchemaReference:
    """A schema's reference to another (a protobuf import): the import name, the subject and version."""

    name: str
    subject: str
    version: int


@dataclass(frozen=True, slots=True)
class RegisteredSchema:
    id: int
    schema_type: str
    schema_str: str
    references: tuple[SchemaReference, ...] = ()


class RegistryClient:
    """confluent-kafka's SchemaRegistryClient for one registry, raising floe's `SchemaRegistryError`s.

    Schemas are immutable per id, so confluent-kafka's client caches them for its lifetime; `confluent`
    is that client, for anything beyond registering and reading schemas.
    """

    def __init__(self, connection: RegistryConnection | str, *, timeout: float = 30.0) -> None:
        if isinstance(connection, str):
            connection = RegistryConnection(connection)
        if not connection.url.startswith(("http://", "https://")):
            raise ValueError(
                f"Schema registry URL must start with http:// or https://, got {connection.url!r}"
            )
        self.connection = connection
        self.url = connection.url.rstrip("/")
        self.confluent = SchemaRegistryClient(connection.client_config(timeout))
        # confluent-kafka caches the registry's answers; this keeps one RegisteredSchema per id on top.
        self._schemas: dict[int, RegisteredSchema] = {}

    def register(self, subject: str, schema_str: str, schema_type: str = "AVRO") -> int:
        """Register `schema_str` under `subject` (a new version unless already there); its schema id."""
        if not subject:
            raise ValueError("Subject must not be empty")
        if schema_type not in SCHEMA_TYPES:
            raise ValueError(f"Schema type must be one of {', '.join(SCHEMA_TYPES)}, got {schema_type!r}")
        try:
            return self.confluent.register_schema(subject, Schema(schema_str, schema_type))
        except _REGISTRY_ERRORS as exc:
            raise self._error(f"POST /subjects/{subject}/versions", exc) from exc

    def schema(self, schema_id: int) -> RegisteredSchema:
        """The schema with this id; SchemaNotFoundError (a LookupError) when the registry has none."""
        if isinstance(schema_id, bool) or not isinstance(schema_id, int) or schema_id < 0:
            raise ValueError(f"Schema id must be a non-negative integer, got {schema_id!r}")
        cached = self._schemas.get(schema_id)
        if cached is not None:
            return cached
        try:
            found = self.confluent.get_schema(schema_id)
        except _REGISTRY_ERRORS as exc:
            raise self._error(f"GET /schemas/ids/{schema_id}", exc) from exc
        if found.schema_str is None:
            raise SchemaRegistryError(
                f"Schema registry {self.url} answered schema id {schema_id} without a schema"
            )
        registered = RegisteredSchema(
            schema_id, found.schema_type or "AVRO", found.schema_str, _references(found)
        )
        self._schemas[schema_id] = registered
        return registered

    def version(self, subject: str, version: int) -> RegisteredSchema:
        """A subject's version (what a schema reference points at)."""
        try:
            found = self.confluent.get_version(subject, version)
        except _REGISTRY_ERRORS as exc:
            raise self._error(f"GET /subjects/{subject}/versions/{version}", exc) from exc
        schema = found.schema
        if schema is None or schema.schema_str is None or found.schema_id is None:
            raise SchemaRegistryError(
                f"Schema registry {self.url} answered {subject} version {version} without a schema"
            )
        return RegisteredSchema(
            found.schema_id, schema.schema_type or "AVRO", schema.schema_str, _references(schema)
        )

    def referenced_schemas(self, schema: RegisteredSchema) -> dict[str, str]:
        """Every schema `schema` references, directly or not: import name → schema string."""
        found: dict[str, str] = {}
        pending = list(schema.references)
        while pending:
            reference = pending.pop()
            if reference.name in found:
                continue
            target = self.version(reference.subject, reference.version)
            found[reference.name] = target.schema_str
            pending += target.references
        return found

    def check(self) -> None:
        """Raise SchemaRegistryError unless the registry answers and accepts floe's credentials."""
        try:
            # Any registry user may list the schema types; it needs no subject permission.
            self.confluent.get_schema_types()
        except _REGISTRY_ERRORS as exc:
            raise self._error("GET /schemas/types", exc) from exc

    def _error(self, request: str, exc: Exception) -> SchemaRegistryError:
        where = f"Schema registry {self.url} ({self.connection.setting}): {request}"
        if not isinstance(exc, ConfluentRegistryError):  # a transport failure (httpx or httpx2)
            return SchemaRegistryError(f"{where} failed: {exc}")
        status, code = exc.http_status_code, exc.error_code
        known_code = code if code != ConfluentRegistryError.UNKNOWN else None
        message = (
            f"{where}: HTTP {status}"
            + (f" (error {known_code})" if known_code not in (None, status) else "")
            + f": {exc.error_message}"
        )
        if known_code == _SCHEMA_NOT_FOUND:
            return SchemaNotFoundError(message, status_code=status, error_code=code)
        if status in (401, 403):
            message += self._auth_hint(status)
        elif status == 404 and known_code not in _NOT_FOUND_CODES:
            message += f" (is {self.connection.setting} the registry's Confluent-compatible API base?)"
        return SchemaRegistryError(message, status_code=status, error_code=known_code)

    def _auth_hint(self, status: int) -> str:
        auth = self.connection.basic_auth
        if auth is None:
            return (
                " (the registry requires authentication: name its credentials in floe.yaml with "
                "schema_registry.basic_auth_username_env and schema_registry.basic_auth_password_env)"
            )
        refused = "refused" if status == 401 else "gave no permission to"
        return (
            f" (the registry {refused} the credentials of user {auth.username!r}, from the environment "
            f"variables {auth.username_env} and {auth.password_env} that floe.yaml's "
            "schema_registry.basic_auth_username_env and schema_registry.basic_auth_password_env name)"
        )

    def close(self) -> None:
        self.confluent.close()

    def __enter__(self) -> RegistryClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _references(schema: Schema) -> tuple[SchemaReference, ...]:
    return tuple(
        SchemaReference(r.name, r.subject, int(r.version))
        for r in schema.references or ()
        if r.name is not None and r.subject is not None and r.version is not None
    )


# -- Confluent wire format: magic byte 0, big-endian int32 schema id, then the serialized payload ---------

MAGIC_BYTE = 0
_HEADER = struct.Struct(">Bi")
HEADER_SIZE = _HEADER.size


def encode_confluent(schema_id: int, payload: bytes) -> bytes:
    """`payload` framed as Confluent serializers write it, for the schema `schema_id`."""
    if isinstance(schema_id, bool) or not isinstance(schema_id, int) or not 0 <= schema_id <= 0x7FFFFFFF:
        raise ValueError(f"Schema id must be an integer from 0 to 2^31-1, got {schema_id!r}")
    return _HEADER.pack(MAGIC_BYTE, schema_id) + bytes(payload)


def decode_confluent_header(value: bytes | bytearray | memoryview | None) -> tuple[int, bytes]:
    """(schema id, payload) of a Confluent-framed message value; ValueError when it is not one."""
    if value is None:
        raise ValueError("Not Confluent wire format: the value is null")
    data = bytes(value)
    if len(data) < HEADER_SIZE:
        raise ValueError(
            f"Not Confluent wire format: {len(data)} bytes, the header alone is {HEADER_SIZE} "
            "(magic byte 0 and a 4-byte schema id)"
        )
    magic, schema_id = _HEADER.unpack_from(data)
    if magic != MAGIC_BYTE:
        raise ValueError(f"Not Confluent wire format: magic byte is {magic:#04x}, expected {MAGIC_BYTE:#04x}")
    if schema_id < 0:
        raise ValueError(f"Not Confluent wire format: negative schema id {schema_id}")
    return schema_id, data[HEADER_SIZE:]
