"""Commit requirements as typed models: pyiceberg's `TableRequirement` classes and the view spec's
`assert-view-uuid`, each checked by its own `validate()`.

The table requirements subclass pyiceberg's only to word their failures as the Java reference
implementation does (the Java client and the REST compatibility kit match these texts) and to raise
floe's `CommitFailed` (409). Parsing is strict: `"0"` or `true` where an id belongs is a 400, as Java
refuses it, never a coerced value. Nothing here does I/O.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Annotated, Any, Literal, TypeVar

from pydantic import Field, TypeAdapter
from pydantic import ValidationError as PydanticValidationError
from pyiceberg.table import update as iceberg
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.typedef import IcebergBaseModel
from pyiceberg.view.metadata import ViewMetadata

from catalog.errors import BadRequest, CommitFailed

T = TypeVar("T")


def _existing(base: TableMetadata | None) -> TableMetadata:
    if base is None:
        raise CommitFailed("Requirement failed: table does not exist")
    return base


def _changed(what: str, expected: object, found: object) -> CommitFailed:
    return CommitFailed(f"Requirement failed: {what} changed: expected id {expected} != {found}")


class AssertCreate(iceberg.AssertCreate):
    def validate(self, base_metadata: TableMetadata | None) -> None:  # type: ignore[override]
        if base_metadata is not None:
            raise CommitFailed("Requirement failed: table already exists")


class AssertTableUUID(iceberg.AssertTableUUID):
    def validate(self, base_metadata: TableMetadata | None) -> None:  # type: ignore[override]
        base = _existing(base_metadata)
        if self.uuid != base.table_uuid:
            raise CommitFailed(
                f"Requirement failed: UUID does not match: expected {base.table_uuid} != {self.uuid}"
            )


class AssertRefSnapshotId(iceberg.AssertRefSnapshotId):
    """Unlike pyiceberg's, a table without snapshots may have its branches and tags created (Java)."""

    def validate(self, base_metadata: TableMetadata | None) -> None:  # type: ignore[override]
        base = _existing(base_metadata)
        ref = base.refs.get(self.ref)
        if ref is not None:
            ref_type = str(ref.snapshot_ref_type)
            if self.snapshot_id is None:
                raise CommitFailed(f"Requirement failed: {ref_type} {self.ref} was created concurrently")
            if self.snapshot_id != ref.snapshot_id:
                raise CommitFailed(
                    f"Requirement failed: {ref_type} {self.ref} has changed: "
                    f"expected id {self.snapshot_id} != {ref.snapshot_id}"
                )
        elif self.snapshot_id is not None:
            raise CommitFailed(
                f"Requirement failed: branch or tag {self.ref} is missing, expected {self.snapshot_id}"
            )


class AssertLastAssignedFieldId(iceberg.AssertLastAssignedFieldId):
    """Holds for a table being created (Java checks it only against an existing table)."""

    def validate(self, base_metadata: TableMetadata | None) -> None:  # type: ignore[override]
        if base_metadata is not None and base_metadata.last_column_id != self.last_assigned_field_id:
            raise _changed(
                "last assigned field id", self.last_assigned_field_id, base_metadata.last_column_id
            )


class AssertCurrentSchemaId(iceberg.AssertCurrentSchemaId):
    def validate(self, base_metadata: TableMetadata | None) -> None:  # type: ignore[override]
        base = _existing(base_metadata)
        if self.current_schema_id != base.current_schema_id:
            raise _changed("current schema", self.current_schema_id, base.current_schema_id)


class AssertLastAssignedPartitionId(iceberg.AssertLastAssignedPartitionId):
    """Holds for a table being created (Java checks it only against an existing table)."""

    def validate(self, base_metadata: TableMetadata | None) -> None:  # type: ignore[override]
        if base_metadata is not None and base_metadata.last_partition_id != self.last_assigned_partition_id:
            raise _changed(
                "last assigned partition id", self.last_assigned_partition_id, base_metadata.last_partition_id
            )


class AssertDefaultSpecId(iceberg.AssertDefaultSpecId):
    def validate(self, base_metadata: TableMetadata | None) -> None:  # type: ignore[override]
        base = _existing(base_metadata)
        if self.default_spec_id != base.default_spec_id:
            raise _changed("default partition spec", self.default_spec_id, base.default_spec_id)


class AssertDefaultSortOrderId(iceberg.AssertDefaultSortOrderId):
    def validate(self, base_metadata: TableMetadata | None) -> None:  # type: ignore[override]
        base = _existing(base_metadata)
        if self.default_sort_order_id != base.default_sort_order_id:
            raise _changed("default sort order", self.default_sort_order_id, base.default_sort_order_id)


TableRequirement = Annotated[
    AssertCreate
    | AssertTableUUID
    | AssertRefSnapshotId
    | AssertLastAssignedFieldId
    | AssertCurrentSchemaId
    | AssertLastAssignedPartitionId
    | AssertDefaultSpecId
    | AssertDefaultSortOrderId,
    Field(discriminator="type"),
]


class AssertViewUUID(IcebergBaseModel):
    """The view's UUID must match the requirement's `uuid` (the spec's only `ViewRequirement`)."""

    type: Literal["assert-view-uuid"] = Field(default="assert-view-uuid")
    uuid: uuid.UUID

    def validate(self, base_metadata: ViewMetadata) -> None:  # type: ignore[override]
        if str(self.uuid) != base_metadata.view_uuid.lower():
            raise CommitFailed(
                "Requirement failed: view UUID does not match: "
                f"expected {base_metadata.view_uuid} != {self.uuid}"
            )


ViewRequirement = AssertViewUUID

TABLE_REQUIREMENT_TYPES = frozenset(
    {
        "assert-create",
        "assert-table-uuid",
        "assert-ref-snapshot-id",
        "assert-last-assigned-field-id",
        "assert-current-schema-id",
        "assert-last-assigned-partition-id",
        "assert-default-spec-id",
        "assert-default-sort-order-id",
    }
)
VIEW_REQUIREMENT_TYPES = frozenset({"assert-view-uuid"})

_TABLE_REQUIREMENTS = TypeAdapter(list[TableRequirement])
_VIEW_REQUIREMENTS = TypeAdapter(list[ViewRequirement])


def _parse(raw: Any, adapter: TypeAdapter[list[T]], types: frozenset[str], unknown: str) -> tuple[T, ...]:
    """Parse a `requirements` array: the shape and the type names first (worded for the client), then
    the fields strictly, as JSON (where a UUID is a string)."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise BadRequest("Invalid commit request: requirements must be an array")
    for item in raw:
        if not isinstance(item, dict) or not isinstance(item.get("type"), str):
            raise BadRequest("Invalid requirement: each requirement must be an object with a 'type'")
        if item["type"] not in types:
            raise BadRequest(f"{unknown}: {item['type']}")
    try:
        return tuple(adapter.validate_json(json.dumps(raw), strict=True))
    except (TypeError, ValueError) as exc:  # includes pydantic's ValidationError
        raise BadRequest(f"Invalid requirement: {_describe(exc, raw)}") from None


def _describe(exc: Exception, raw: list[Any]) -> str:
    """Which requirement and field is wrong, and how, without quoting the value."""
    if not isinstance(exc, PydanticValidationError):
        return "not valid JSON"  # NaN or a value json cannot write
    first = exc.errors()[0]
    loc = first.get("loc", ())
    index = loc[0] if loc and isinstance(loc[0], int) else None
    kind = raw[index]["type"] if index is not None else "requirement"
    # A union's errors name the member (its `type`) after the index.
    fields = loc[2:] if len(loc) > 1 and loc[1] == kind else loc[1:]
    where = ".".join(str(part) for part in fields)
    message = f"{kind}: {first.get('msg', 'invalid value')}"
    return f"{message} at '{where}'" if where else message


def parse_table_requirements(raw: Any) -> tuple[TableRequirement, ...]:
    """The `requirements` of a `CommitTableRequest`; anything malformed or unknown is a 400."""
    return _parse(raw, _TABLE_REQUIREMENTS, TABLE_REQUIREMENT_TYPES, "Unknown requirement type")


def parse_view_requirements(raw: Any) -> tuple[ViewRequirement, ...]:
    """The `requirements` of a `CommitViewRequest`; anything malformed or unknown is a 400."""
    return _parse(raw, _VIEW_REQUIREMENTS, VIEW_REQUIREMENT_TYPES, "Unknown view requirement type")


def check_table_requirements(requirements: Sequence[TableRequirement], base: TableMetadata | None) -> None:
    """Raise `CommitFailed` for the first requirement that does not hold on `base` (None: the table
    does not exist yet)."""
    for requirement in requirements:
        requirement.validate(base)


def check_view_requirements(requirements: Sequence[ViewRequirement], base: ViewMetadata) -> None:
    """Raise `CommitFailed` for the first requirement that does not hold on `base`."""
    for requirement in requirements:
        requirement.validate(base)
