"""Request and response bodies of the REST API (msgspec), named after the spec's schemas.

Field names are the spec's (kebab-case). Nested Iceberg structures (schemas, partition specs, updates,
requirements, metadata) stay plain JSON objects: pyiceberg's models validate them in the commit core,
which words errors the way clients expect. Their descriptions name the spec schema they follow, so the
generated OpenAPI document (`floe openapi`) still says what goes there.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

# Descriptions only: `msgspec.Meta(description=...)` changes the OpenAPI document, never decoding.
JsonObject = dict[str, Any]
IcebergSchema = Annotated[JsonObject, msgspec.Meta(description="An Iceberg `Schema` (spec schema `Schema`)")]
TableMetadata = Annotated[
    JsonObject,
    msgspec.Meta(description="Table metadata as in the metadata file (spec schema `TableMetadata`)"),
]
ViewMetadata = Annotated[
    JsonObject, msgspec.Meta(description="View metadata as in the metadata file (spec schema `ViewMetadata`)")
]
TableRequirements = Annotated[
    list[JsonObject],
    msgspec.Meta(description="Assertions checked before the updates apply (spec schema `TableRequirement`)"),
]
TableUpdates = Annotated[
    list[JsonObject], msgspec.Meta(description="Changes to the table metadata (spec schema `TableUpdate`)")
]
ViewRequirements = Annotated[
    list[JsonObject],
    msgspec.Meta(description="Assertions checked before the updates apply (spec schema `ViewRequirement`)"),
]
ViewUpdates = Annotated[
    list[JsonObject], msgspec.Meta(description="Changes to the view metadata (spec schema `ViewUpdate`)")
]
Properties = dict[str, str]
# The spec's `integer` `format: int64`: Python's ints are unbounded, and a larger one would reach the
# database (or a reader in another language) instead of being the client's 400.
Int64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
Config = Annotated[
    Properties,
    msgspec.Meta(description="Table- or view-specific client configuration, e.g. FileIO and S3 settings"),
]


class _Kebab(msgspec.Struct, rename="kebab", omit_defaults=True):
    pass


class ErrorModel(msgspec.Struct):
    """JSON error payload returned in a response with further details on the error."""

    message: Annotated[str, msgspec.Meta(description="Human-readable error message")]
    type: Annotated[
        str,
        msgspec.Meta(description="Iceberg exception type, e.g. NoSuchTableException, CommitFailedException"),
    ]
    code: Annotated[int, msgspec.Meta(ge=400, le=600, description="HTTP response code")]
    stack: list[str] | None = None


class IcebergErrorResponse(msgspec.Struct, forbid_unknown_fields=True):
    """JSON wrapper for all error responses (non-2xx)."""

    error: ErrorModel


class CatalogConfig(_Kebab):
    defaults: Annotated[
        Properties, msgspec.Meta(description="Client configuration applied before the client's own")
    ]
    overrides: Annotated[
        Properties,
        msgspec.Meta(
            description="Client configuration applied after the client's own; `prefix` names the warehouse"
        ),
    ]
    endpoints: Annotated[
        list[str] | None,
        msgspec.Meta(description="Every route this server answers, as `<HTTP verb> <path from the spec>`"),
    ] = None
    idempotency_key_lifetime: Annotated[
        str | None,
        msgspec.Meta(
            description="How long an `Idempotency-Key` may be reused for retries (ISO-8601 duration)"
        ),
    ] = None


class CreateNamespaceRequest(_Kebab):
    namespace: list[str]
    properties: Properties | None = None


class CreateNamespaceResponse(_Kebab):
    namespace: list[str]
    properties: Properties = msgspec.field(default_factory=dict)


class GetNamespaceResponse(_Kebab):
    namespace: list[str]
    properties: Properties = msgspec.field(default_factory=dict)


class ListNamespacesResponse(msgspec.Struct, rename="kebab"):
    namespaces: list[list[str]]
    next_page_token: str | None = None


class UpdateNamespacePropertiesRequest(_Kebab):
    removals: list[str] | None = None
    updates: Properties | None = None


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
    schema: IcebergSchema
    location: str | None = None
    partition_spec: Annotated[
        JsonObject | None, msgspec.Meta(description="spec schema `PartitionSpec`; unpartitioned when absent")
    ] = None
    write_order: Annotated[
        JsonObject | None, msgspec.Meta(description="spec schema `SortOrder`; unsorted when absent")
    ] = None
    stage_create: bool | None = None
    properties: Properties | None = None


class RegisterTableRequest(_Kebab):
    name: str
    metadata_location: str
    overwrite: bool | None = None


class CommitTableRequest(_Kebab):
    requirements: TableRequirements
    updates: TableUpdates
    identifier: TableIdentifier | None = None


class CommitTransactionRequest(_Kebab):
    table_changes: Annotated[
        list[JsonObject],
        msgspec.Meta(description="One `CommitTableRequest` per table, each with its `identifier`"),
    ]


class RenameTableRequest(msgspec.Struct):
    source: TableIdentifier
    destination: TableIdentifier


class ReportMetricsRequest(_Kebab):
    """A `ScanReport` or `CommitReport`, stored as sent."""

    report_type: str
    table_name: str | None = None
    snapshot_id: Int64 | None = None
    filter: Annotated[Any, msgspec.Meta(description="spec schema `Expression`")] = None
    schema_id: Int64 | None = None
    projected_field_ids: list[Int64] | None = None
    projected_field_names: list[str] | None = None
    sequence_number: Int64 | None = None
    operation: str | None = None
    metrics: Annotated[JsonObject | None, msgspec.Meta(description="spec schema `Metrics`")] = None
    metadata: Properties | None = None


class StorageCredential(msgspec.Struct):
    prefix: Annotated[
        str, msgspec.Meta(description="The storage location prefix the credential applies to (longest wins)")
    ]
    config: Properties


class LoadTableResult(_Kebab):
    metadata: TableMetadata
    metadata_location: Annotated[
        str | None, msgspec.Meta(description="Absent for a staged (not yet committed) table")
    ] = None
    config: Config | None = None
    storage_credentials: list[StorageCredential] | None = None


class UnregisterTableResult(_Kebab):
    """The table as it was when it left the catalog."""

    metadata_location: str
    metadata: TableMetadata


class CommitTableResponse(_Kebab):
    metadata_location: str
    metadata: TableMetadata


class LoadCredentialsResponse(msgspec.Struct, rename="kebab"):
    storage_credentials: list[StorageCredential]


class CreateViewRequest(_Kebab):
    name: str
    schema: IcebergSchema
    view_version: Annotated[JsonObject, msgspec.Meta(description="spec schema `ViewVersion`")]
    properties: Properties
    location: str | None = None


class CommitViewRequest(_Kebab):
    updates: ViewUpdates
    requirements: ViewRequirements | None = None
    identifier: TableIdentifier | None = None


class RegisterViewRequest(_Kebab):
    name: str
    metadata_location: str


class LoadViewResult(_Kebab):
    metadata_location: str
    metadata: ViewMetadata
    config: Config | None = None


def to_json_dict(value: msgspec.Struct) -> dict[str, Any]:
    """A request struct as the plain JSON object the service layer takes (spec field names)."""
    result: dict[str, Any] = msgspec.to_builtins(value)
    return result
