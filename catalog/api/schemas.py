"""Request and response bodies of the REST API (msgspec), named after the spec's schemas.

Nested Iceberg structures (schemas, partition specs, updates, metadata) stay plain JSON objects here:
they are validated by pyiceberg's models in the commit core, which words errors the way clients expect.
"""

from __future__ import annotations

from typing import Any

import msgspec


class _Kebab(msgspec.Struct, rename="kebab", omit_defaults=True):
    pass


class ErrorModel(msgspec.Struct):
    message: str
    type: str
    code: int
    stack: list[str] | None = None


class IcebergErrorResponse(msgspec.Struct):
    error: ErrorModel


class CatalogConfig(_Kebab):
    defaults: dict[str, str]
    overrides: dict[str, str]
    endpoints: list[str] | None = None
    idempotency_key_lifetime: str | None = None


class CreateNamespaceRequest(_Kebab):
    namespace: list[str]
    properties: dict[str, str] | None = None


class CreateNamespaceResponse(_Kebab):
    namespace: list[str]
    properties: dict[str, str] = msgspec.field(default_factory=dict)


class GetNamespaceResponse(_Kebab):
    namespace: list[str]
    properties: dict[str, str] = msgspec.field(default_factory=dict)


class ListNamespacesResponse(msgspec.Struct, rename="kebab"):
    namespaces: list[list[str]]
    next_page_token: str | None = None


class UpdateNamespacePropertiesRequest(_Kebab):
    removals: list[str] | None = None
    updates: dict[str, str] | None = None


class UpdateNamespacePropertiesResponse(msgspec.Struct, rename="kebab"):
    updated: list[str]
    removed: list[str]
    missing: list[str] | None = None


class TableIdentifier(msgspec.Struct):
    namespace: list[str]
    name: str


class ListTablesResponse(msgspec.Struct, rename="kebab"):
    identifiers: list[TableIdentifier]
    next_page_token: str | None = None


class CreateTableRequest(_Kebab):
    name: str
    schema: dict[str, Any]
    location: str | None = None
    partition_spec: dict[str, Any] | None = None
    write_order: dict[str, Any] | None = None
    stage_create: bool | None = None
    properties: dict[str, str] | None = None


class RegisterTableRequest(_Kebab):
    name: str
    metadata_location: str
    overwrite: bool | None = None


class CommitTableRequest(_Kebab):
    requirements: list[dict[str, Any]]
    updates: list[dict[str, Any]]
    identifier: TableIdentifier | None = None


class CommitTransactionRequest(_Kebab):
    table_changes: list[dict[str, Any]]


class RenameTableRequest(msgspec.Struct):
    source: TableIdentifier
    destination: TableIdentifier


class ReportMetricsRequest(_Kebab):
    """A `ScanReport` or `CommitReport`, stored as sent."""

    report_type: str
    table_name: str | None = None
    snapshot_id: int | None = None
    filter: Any = None
    schema_id: int | None = None
    projected_field_ids: list[int] | None = None
    projected_field_names: list[str] | None = None
    sequence_number: int | None = None
    operation: str | None = None
    metrics: dict[str, Any] | None = None
    metadata: dict[str, str] | None = None


class LoadTableResult(_Kebab):
    metadata: dict[str, Any]
    metadata_location: str | None = None
    config: dict[str, str] | None = None
    storage_credentials: list[dict[str, Any]] | None = None


class CommitTableResponse(_Kebab):
    metadata_location: str
    metadata: dict[str, Any]


class StorageCredential(msgspec.Struct):
    prefix: str
    config: dict[str, str]


class LoadCredentialsResponse(msgspec.Struct, rename="kebab"):
    storage_credentials: list[StorageCredential]


class CreateViewRequest(_Kebab):
    name: str
    schema: dict[str, Any]
    view_version: dict[str, Any]
    properties: dict[str, str]
    location: str | None = None


class CommitViewRequest(_Kebab):
    updates: list[dict[str, Any]]
    requirements: list[dict[str, Any]] | None = None
    identifier: TableIdentifier | None = None


class RegisterViewRequest(_Kebab):
    name: str
    metadata_location: str


class LoadViewResult(_Kebab):
    metadata_location: str
    metadata: dict[str, Any]
    config: dict[str, str] | None = None


def to_json_dict(value: msgspec.Struct) -> dict[str, Any]:
    """A request struct as the plain JSON object the service layer takes (spec field names)."""
    result: dict[str, Any] = msgspec.to_builtins(value)
    return result
