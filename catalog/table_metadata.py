"""Table metadata models floe reads and writes: pyiceberg 0.12's, completed for format v3.

pyiceberg 0.12 parses v3 metadata but refuses to serialize it (`TableMetadataV3.model_dump_json` raises
`NotImplementedError`), leaves `next-row-id` unset on new v3 tables, refuses `upgrade-format-version` to 3,
and has no model for `encryption-keys`, a snapshot's `key-id` or the encryption-key updates. This module
holds the spec's missing parts as subclasses of pyiceberg's models, and the rules of applying them (row
lineage as the spec and Iceberg Java's `TableMetadata.Builder` define it). Pure: no I/O.
"""

from __future__ import annotations

import base64
import binascii
from operator import attrgetter
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter, field_serializer, field_validator
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata as PyIcebergTableMetadata
from pyiceberg.table.metadata import TableMetadataCommonFields, TableMetadataV1, TableMetadataV2
from pyiceberg.table.metadata import TableMetadataV3 as PyIcebergTableMetadataV3
from pyiceberg.table.snapshots import Snapshot
from pyiceberg.table.update import (
    AddPartitionSpecUpdate,
    AddSchemaUpdate,
    AddSortOrderUpdate,
    AssignUUIDUpdate,
    RemovePartitionSpecsUpdate,
    RemovePartitionStatisticsUpdate,
    RemovePropertiesUpdate,
    RemoveSchemasUpdate,
    RemoveSnapshotRefUpdate,
    RemoveSnapshotsUpdate,
    RemoveStatisticsUpdate,
    SetCurrentSchemaUpdate,
    SetDefaultSortOrderUpdate,
    SetDefaultSpecUpdate,
    SetLocationUpdate,
    SetPartitionStatisticsUpdate,
    SetPropertiesUpdate,
    SetSnapshotRefUpdate,
    SetStatisticsUpdate,
    UpgradeFormatVersionUpdate,
    _apply_table_update,
    _TableMetadataUpdateContext,
)
from pyiceberg.table.update import AddSnapshotUpdate as PyIcebergAddSnapshotUpdate
from pyiceberg.typedef import IcebergBaseModel
from pyiceberg.types import (
    GeographyType,
    GeometryType,
    IcebergType,
    TimestampNanoType,
    TimestamptzNanoType,
    UnknownType,
)

from catalog.errors import CommitFailed

# The newest table format floe reads and writes (Iceberg Java 1.11 knows v4, pyiceberg 0.12 does not).
MAX_FORMAT_VERSION = 3
ROW_LINEAGE_FORMAT_VERSION = 3
DEFAULT_VALUES_FORMAT_VERSION = 3
INITIAL_ROW_ID = 0


class EncryptedKey(IcebergBaseModel):
    """One entry of a v3 table's `encryption-keys`: a wrapped key, stored and served as sent."""

    key_id: str = Field(alias="key-id")
    encrypted_key_metadata: str = Field(alias="encrypted-key-metadata")
    encrypted_by_id: str | None = Field(alias="encrypted-by-id", default=None)
    properties: dict[str, str] | None = Field(default=None)

    @field_validator("encrypted_key_metadata")
    @classmethod
    def _base64(cls, value: str) -> str:
        try:
            base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("encrypted-key-metadata must be base64") from None
        return value


class EncryptedSnapshot(Snapshot):
    """A snapshot with the spec's `key-id` (the key that encrypts its manifest list's key metadata)."""

    key_id: str | None = Field(alias="key-id", default=None)


class TableMetadataV3(PyIcebergTableMetadataV3):
    """pyiceberg's v3 metadata with `next-row-id` required (0 on a new table), `encryption-keys`,
    snapshots with `key-id`, and serialization (which pyiceberg 0.12 refuses)."""

    next_row_id: int = Field(alias="next-row-id", default=INITIAL_ROW_ID)
    snapshots: list[EncryptedSnapshot] = Field(default_factory=list)  # type: ignore[assignment]
    encryption_keys: list[EncryptedKey] | None = Field(alias="encryption-keys", default=None)

    @field_serializer("snapshots")
    def serialize_snapshots(  # type: ignore[override]
        self, snapshots: list[EncryptedSnapshot]
    ) -> list[EncryptedSnapshot]:
        # Overrides pyiceberg's, whose `list[Snapshot]` return type would drop `key-id`.
        return snapshots

    def model_dump_json(  # type: ignore[override]
        self, exclude_none: bool = True, exclude: Any | None = None, by_alias: bool = True, **kwargs: Any
    ) -> str:
        # pyiceberg's base serializer: the v3 override only raises NotImplementedError.
        return IcebergBaseModel.model_dump_json(
            self, exclude_none=exclude_none, exclude=exclude, by_alias=by_alias, **kwargs
        )


TableMetadata = Annotated[
    TableMetadataV1 | TableMetadataV2 | TableMetadataV3, Field(discriminator="format_version")
]
_METADATA: TypeAdapter[TableMetadataV1 | TableMetadataV2 | TableMetadataV3] = TypeAdapter(TableMetadata)


def parse_metadata_json(text: str) -> PyIcebergTableMetadata:
    """Parse table metadata JSON (v1 to v3) into the models floe writes."""
    return _METADATA.validate_json(text)


def parse_metadata_obj(data: dict[str, Any]) -> PyIcebergTableMetadata:
    """`parse_metadata_json` for a JSON object already decoded."""
    return _METADATA.validate_python(data)


def as_writable(metadata: PyIcebergTableMetadata) -> PyIcebergTableMetadata:
    """pyiceberg's own v3 model (from `new_table_metadata`) as floe's; other versions as they are."""
    if isinstance(metadata, PyIcebergTableMetadataV3) and not isinstance(metadata, TableMetadataV3):
        data = metadata.model_dump(by_alias=True)
        data.setdefault("next-row-id", INITIAL_ROW_ID)
        return parse_metadata_obj(data)
    return metadata


# -- updates the spec has and pyiceberg 0.12 does not (or applies differently) ----------------------------


class AddSnapshotUpdate(PyIcebergAddSnapshotUpdate):
    """`add-snapshot` keeping the snapshot's `key-id`; applied with the spec's row-lineage rules."""

    snapshot: EncryptedSnapshot


class UpgradeToFormatVersionUpdate(UpgradeFormatVersionUpdate):
    """`upgrade-format-version`, up to v3."""


class AddEncryptionKeyUpdate(IcebergBaseModel):
    action: Literal["add-encryption-key"] = Field(default="add-encryption-key")
    encryption_key: EncryptedKey = Field(alias="encryption-key")


class RemoveEncryptionKeyUpdate(IcebergBaseModel):
    action: Literal["remove-encryption-key"] = Field(default="remove-encryption-key")
    key_id: str = Field(alias="key-id")


TableUpdate = Annotated[
    AssignUUIDUpdate
    | UpgradeToFormatVersionUpdate
    | AddSchemaUpdate
    | SetCurrentSchemaUpdate
    | AddPartitionSpecUpdate
    | SetDefaultSpecUpdate
    | AddSortOrderUpdate
    | SetDefaultSortOrderUpdate
    | AddSnapshotUpdate
    | SetSnapshotRefUpdate
    | RemoveSnapshotsUpdate
    | RemoveSnapshotRefUpdate
    | SetLocationUpdate
    | SetPropertiesUpdate
    | RemovePropertiesUpdate
    | SetStatisticsUpdate
    | RemoveStatisticsUpdate
    | RemovePartitionSpecsUpdate
    | RemoveSchemasUpdate
    | SetPartitionStatisticsUpdate
    | RemovePartitionStatisticsUpdate
    | AddEncryptionKeyUpdate
    | RemoveEncryptionKeyUpdate,
    Field(discriminator="action"),
]


def _snapshot_by_id(self: TableMetadataCommonFields, snapshot_id: int) -> Snapshot | None:
    """pyiceberg's `snapshot_by_id` (the first snapshot with that id, else None) with the ids gathered
    and searched in C: pyiceberg walks the snapshots in a Python generator, and a commit that adds a
    snapshot looks up its id twice (add-snapshot: not there yet; set-snapshot-ref: the last one), each a
    walk of every snapshot the table keeps (6.7 % of the catalog's py-spy samples at ~130 snapshots)."""
    snapshots = self.snapshots
    try:
        return snapshots[list(map(_SNAPSHOT_ID, snapshots)).index(snapshot_id)]
    except ValueError:
        return None


_SNAPSHOT_ID = attrgetter("snapshot_id")
# Every table model (v1-v3, floe's v3 too) inherits the method from the common fields; the contract test
# (tests/unit/test_table_metadata_lookups.py) fails if an upgrade moves or renames it.
TableMetadataCommonFields.snapshot_by_id = _snapshot_by_id  # type: ignore[method-assign]


# pyiceberg applies updates through a `functools.singledispatch` function; floe's update classes get their
# own handlers there (the most specific class wins), pyiceberg's own classes keep pyiceberg's behaviour.
_apply_pyiceberg_add_snapshot = _apply_table_update.dispatch(PyIcebergAddSnapshotUpdate)


@_apply_table_update.register(UpgradeToFormatVersionUpdate)
def _upgrade(
    update: UpgradeToFormatVersionUpdate, base: PyIcebergTableMetadata, context: _TableMetadataUpdateContext
) -> PyIcebergTableMetadata:
    # Worded as Iceberg Java's TableMetadata.Builder words it.
    if update.format_version > MAX_FORMAT_VERSION:
        raise ValueError(
            f"Cannot upgrade table to unsupported format version: v{update.format_version} "
            f"(supported: v{MAX_FORMAT_VERSION})"
        )
    if update.format_version < base.format_version:
        raise ValueError(f"Cannot downgrade v{base.format_version} table to v{update.format_version}")
    if update.format_version == base.format_version:
        return base
    context.add_update(update)
    fields = dict(base)
    fields["format_version"] = update.format_version
    if update.format_version >= ROW_LINEAGE_FORMAT_VERSION:
        # Spec, row lineage: "When a table is upgraded to v3, its next-row-id is initialized to 0 and
        # existing snapshots are not modified."
        fields["next_row_id"] = INITIAL_ROW_ID
        return TableMetadataV3.model_construct(**fields)
    return TableMetadataV2.model_construct(**fields)


@_apply_table_update.register(AddSnapshotUpdate)
def _add_snapshot(
    update: AddSnapshotUpdate, base: PyIcebergTableMetadata, context: _TableMetadataUpdateContext
) -> PyIcebergTableMetadata:
    snapshot = update.snapshot
    last_sequence_number = getattr(base, "last_sequence_number", 0)
    if (
        base.format_version >= 2
        and snapshot.sequence_number is not None
        and snapshot.sequence_number <= last_sequence_number
        and snapshot.parent_snapshot_id is not None
        and base.snapshot_by_id(snapshot.snapshot_id) is None
    ):
        # Java: a RetryableValidationException, answered 409 so the client retries on fresh metadata.
        raise CommitFailed(
            "Validation failed, please retry: Cannot add snapshot with sequence number "
            f"{snapshot.sequence_number} older than last sequence number {last_sequence_number}"
        )
    if base.format_version < ROW_LINEAGE_FORMAT_VERSION:
        return _apply_pyiceberg_add_snapshot(update, base, context)
    next_row_id: int = getattr(base, "next_row_id", None) or INITIAL_ROW_ID
    if snapshot.first_row_id is None:
        raise ValueError("Cannot add a snapshot: first-row-id is null")
    if snapshot.added_rows is None:
        raise ValueError("Cannot add a snapshot: added-rows is null")
    if snapshot.added_rows < 0:
        raise ValueError(f"Cannot add a snapshot: added-rows is negative: {snapshot.added_rows}")
    if snapshot.first_row_id < next_row_id:
        # The writer assigned its row ids from an older next-row-id (a concurrent commit took them).
        raise CommitFailed(
            "Validation failed, please retry: Cannot add a snapshot, first-row-id is behind table "
            f"next-row-id: {snapshot.first_row_id} < {next_row_id}"
        )
    added = _apply_pyiceberg_add_snapshot(update, base, context)
    # Spec: next-row-id "must always be higher than any assigned row ID"; the snapshot assigned
    # [first-row-id, first-row-id + added-rows). Java adds added-rows to next-row-id, the same value
    # whenever first-row-id = next-row-id, as every writer sends.
    return added.model_copy(update={"next_row_id": snapshot.first_row_id + snapshot.added_rows})


# floe's own update types are not in pyiceberg's `TableUpdate` union, which mypy checks dispatch against.
@_apply_table_update.register(AddEncryptionKeyUpdate)
def _add_encryption_key(  # type: ignore[misc]
    update: AddEncryptionKeyUpdate, base: PyIcebergTableMetadata, context: _TableMetadataUpdateContext
) -> PyIcebergTableMetadata:
    if not isinstance(base, TableMetadataV3):
        raise ValueError(
            f"Cannot add an encryption key to a v{base.format_version} table: encryption keys are format v3"
        )
    keys = list(base.encryption_keys or [])
    if any(key.key_id == update.encryption_key.key_id for key in keys):
        return base  # as Java: a key already present is a no-op
    context.add_update(update)  # type: ignore[arg-type]
    return base.model_copy(update={"encryption_keys": [*keys, update.encryption_key]})


@_apply_table_update.register(RemoveEncryptionKeyUpdate)
def _remove_encryption_key(  # type: ignore[misc]
    update: RemoveEncryptionKeyUpdate, base: PyIcebergTableMetadata, context: _TableMetadataUpdateContext
) -> PyIcebergTableMetadata:
    keys = list(getattr(base, "encryption_keys", None) or [])
    remaining = [key for key in keys if key.key_id != update.key_id]
    if len(remaining) == len(keys):
        return base  # as Java: removing an absent key is a no-op
    context.add_update(update)  # type: ignore[arg-type]
    return base.model_copy(update={"encryption_keys": remaining or None})


# -- schema rules of format versions -------------------------------------------------------------------

_MIN_FORMAT_VERSIONS: tuple[tuple[type[IcebergType], int], ...] = (
    (TimestampNanoType, 3),
    (TimestamptzNanoType, 3),
    (UnknownType, 3),
    (GeometryType, 3),
    (GeographyType, 3),
)


def check_schema_compatibility(schema: Schema, format_version: int) -> None:
    """Refuse a schema that needs a newer format (v3 types, non-null initial defaults), listing every
    problem as Iceberg Java's `Schema.checkCompatibility` does."""
    problems: dict[int, str] = {}
    for field_id, field in sorted(schema._lazy_id_to_field.items()):
        name = schema.find_column_name(field_id) or field.name
        for kind, minimum in _MIN_FORMAT_VERSIONS:
            if isinstance(field.field_type, kind) and format_version < minimum:
                problems[field_id] = (
                    f"Invalid type for {name}: {field.field_type} is not supported until v{minimum}"
                )
        if field.initial_default is not None and format_version < DEFAULT_VALUES_FORMAT_VERSION:
            problems[field_id] = (
                f"Invalid initial default for {name}: non-null default ({field.initial_default}) "
                f"is not supported until v{DEFAULT_VALUES_FORMAT_VERSION}"
            )
    if problems:
        raise ValueError(f"Invalid schema for v{format_version}:\n- " + "\n- ".join(problems.values()))


__all__ = [
    "MAX_FORMAT_VERSION",
    "AddEncryptionKeyUpdate",
    "AddSnapshotUpdate",
    "EncryptedKey",
    "EncryptedSnapshot",
    "RemoveEncryptionKeyUpdate",
    "TableMetadataV3",
    "TableUpdate",
    "UpgradeToFormatVersionUpdate",
    "as_writable",
    "check_schema_compatibility",
    "parse_metadata_json",
    "parse_metadata_obj",
]
