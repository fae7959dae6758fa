"""The view commit core: pure functions over pyiceberg's immutable `ViewMetadata` model.

pyiceberg has view metadata models but no view updates, so this module types the spec's `ViewUpdate`
(pyiceberg's table update classes where a view update has the same shape) and applies each, in
pyiceberg's `update_table_metadata` style, the way the Java `ViewMetadata.Builder` does: versions are
de-duplicated, `schema-id: -1` and `view-version-id: -1` mean "the one added in this commit", and the
version log records every change of the current version. Nothing here does I/O.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from functools import singledispatch
from typing import Annotated, Any, Literal, TypeVar

from pydantic import Field, TypeAdapter
from pydantic import ValidationError as PydanticValidationError
from pyiceberg.exceptions import ValidationError as IcebergValidationError
from pyiceberg.schema import Schema
from pyiceberg.table.update import (
    AddSchemaUpdate,
    AssignUUIDUpdate,
    RemovePropertiesUpdate,
    SetLocationUpdate,
    SetPropertiesUpdate,
    UpgradeFormatVersionUpdate,
)
from pyiceberg.typedef import IcebergBaseModel
from pyiceberg.view.metadata import ViewHistoryEntry, ViewMetadata, ViewVersion

from catalog.commit import metadata_version
from catalog.errors import BadRequest, InvalidArgument
from catalog.json_booleans import check_booleans
from catalog.metadata_files import metadata_folder
from catalog.requirements import ViewRequirement, check_view_requirements, parse_view_requirements

VIEW_UPDATE_ACTIONS = frozenset(
    {
        "assign-uuid",
        "upgrade-format-version",
        "add-schema",
        "set-location",
        "set-properties",
        "remove-properties",
        "add-view-version",
        "set-current-view-version",
    }
)
HISTORY_ENTRIES_PROPERTY = "version.history.num-entries"
DEFAULT_HISTORY_ENTRIES = 10
INITIAL_SCHEMA_ID = 0

T = TypeVar("T")


class AddViewVersionUpdate(IcebergBaseModel):
    """Add a version; `schema-id: -1` names the schema added earlier in the same commit."""

    action: Literal["add-view-version"] = Field(default="add-view-version")
    view_version: ViewVersion = Field(alias="view-version")


class SetCurrentViewVersionUpdate(IcebergBaseModel):
    """Make a version current; `-1` names the version added earlier in the same commit."""

    action: Literal["set-current-view-version"] = Field(default="set-current-view-version")
    view_version_id: int = Field(alias="view-version-id", strict=True)


# The spec's `ViewUpdate`: the table updates that apply to views as well, and the two of views only.
ViewUpdate = Annotated[
    AssignUUIDUpdate
    | UpgradeFormatVersionUpdate
    | AddSchemaUpdate
    | SetLocationUpdate
    | SetPropertiesUpdate
    | RemovePropertiesUpdate
    | AddViewVersionUpdate
    | SetCurrentViewVersionUpdate,
    Field(discriminator="action"),
]

_SCHEMA = TypeAdapter(Schema)
_VERSION = TypeAdapter(ViewVersion)
_METADATA = TypeAdapter(ViewMetadata)
_UPDATES = TypeAdapter(list[ViewUpdate])


def _now_ms() -> int:
    return int(time.time() * 1000)


def _where(error: Any, skip: int = 0) -> str:
    return ".".join(str(part) for part in error.get("loc", ())[skip:])


def _parse(adapter: TypeAdapter[T], value: Any, what: str) -> T:
    try:
        return adapter.validate_python(value)
    except PydanticValidationError as exc:
        first = exc.errors()[0]
        raise BadRequest(f"Invalid {what}: {first.get('msg')} at {_where(first)}") from exc


def parse_view_metadata(text: str | bytes) -> ViewMetadata:
    try:
        return ViewMetadata.model_validate_json(text)
    except PydanticValidationError as exc:
        raise BadRequest(f"Invalid view metadata: {exc.errors()[0].get('msg')}") from exc


def _check_update_shape(update: Any) -> None:
    """What the typed models would coerce or word vaguely, refused with the field's own words."""
    if (
        not isinstance(update, dict)
        or not isinstance(update.get("action"), str)  # a list or object is not hashable
        or update["action"] not in VIEW_UPDATE_ACTIONS
    ):
        action = update.get("action") if isinstance(update, dict) else update
        raise BadRequest(f"Unknown view update action: {action}")
    action = update["action"]
    if action == "set-location" and (not isinstance(update.get("location"), str) or not update["location"]):
        raise BadRequest("Invalid set-location: 'location' must be a non-empty string")
    props = update.get("updates")
    if action == "set-properties" and (
        not isinstance(props, dict) or not all(isinstance(v, str) for v in props.values())
    ):
        raise BadRequest("Invalid set-properties: 'updates' must map names to strings")
    removals = update.get("removals")
    if action == "remove-properties" and (
        not isinstance(removals, list) or not all(isinstance(r, str) for r in removals)
    ):
        raise BadRequest("Invalid remove-properties: 'removals' must be an array of strings")
    if action == "add-view-version" and not isinstance(update.get("view-version"), dict):
        raise BadRequest("Invalid add-view-version: 'view-version' must be an object")
    if action == "set-current-view-version" and not isinstance(update.get("view-version-id"), int):
        raise BadRequest("Invalid set-current-view-version: 'view-version-id' must be an integer")


def parse_view_updates(raw: Any) -> tuple[ViewUpdate, ...]:
    """The `updates` of a `CommitViewRequest` as typed updates; anything malformed is a 400."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise BadRequest("Invalid commit request: updates must be an array")
    check_booleans(raw, "view update")
    for update in raw:
        _check_update_shape(update)
    try:
        return tuple(_UPDATES.validate_python(raw))
    except PydanticValidationError as exc:
        first = exc.errors()[0]
        loc = first.get("loc", ())
        action = loc[1] if len(loc) > 1 else "view update"
        raise BadRequest(f"Invalid {action}: {first.get('msg')} at {_where(first, 2)}") from None
    except (IcebergValidationError, AttributeError, TypeError) as exc:
        # pyiceberg's own validators (types, transforms) raise these for shapes they do not expect.
        raise BadRequest(f"Invalid view update: {exc}") from None


def _check_one_query_per_dialect(version: ViewVersion) -> None:
    """At most one SQL representation per dialect (case-insensitive), refused as the Java reference does."""
    seen: set[str] = set()
    for representation in version.representations:
        dialect = representation.root.dialect.lower()
        if dialect in seen:
            raise InvalidArgument(f"Invalid view version: Cannot add multiple queries for dialect {dialect}")
        seen.add(dialect)


def _same_version(a: ViewVersion, b: ViewVersion) -> bool:
    """Versions are equal when all but id and timestamp match (Java's `sameViewVersion`)."""
    return (
        a.summary == b.summary
        and a.representations == b.representations
        and a.default_catalog == b.default_catalog
        and list(a.default_namespace) == list(b.default_namespace)
        and a.schema_id == b.schema_id
    )


@dataclass
class _ViewUpdateContext:
    """What `-1` refers to in the rest of a commit (as pyiceberg's `_TableMetadataUpdateContext`)."""

    last_added_schema_id: int | None = None
    last_added_version_id: int | None = None


@singledispatch
def _apply_view_update(update: Any, base: ViewMetadata, context: _ViewUpdateContext) -> ViewMetadata:
    """`base` with `update` applied (a new model; `base` is never changed)."""
    raise TypeError(f"Unsupported view update: {update}")


@_apply_view_update.register(AssignUUIDUpdate)
def _(update: AssignUUIDUpdate, base: ViewMetadata, context: _ViewUpdateContext) -> ViewMetadata:
    if str(update.uuid) != base.view_uuid.lower():
        raise BadRequest("Cannot reassign the UUID of an existing view")
    return base


@_apply_view_update.register(UpgradeFormatVersionUpdate)
def _(update: UpgradeFormatVersionUpdate, base: ViewMetadata, context: _ViewUpdateContext) -> ViewMetadata:
    if update.format_version != 1:
        raise BadRequest(f"Unsupported view format version: {update.format_version}")
    return base


@_apply_view_update.register(AddSchemaUpdate)
def _(update: AddSchemaUpdate, base: ViewMetadata, context: _ViewUpdateContext) -> ViewMetadata:
    schema = update.schema_
    for existing in base.schemas:
        if existing.fields == schema.fields and existing.identifier_field_ids == schema.identifier_field_ids:
            context.last_added_schema_id = existing.schema_id
            return base
    new_id = max((s.schema_id for s in base.schemas), default=-1) + 1
    context.last_added_schema_id = new_id
    return base.model_copy(
        update={"schemas": [*base.schemas, schema.model_copy(update={"schema_id": new_id})]}
    )


@_apply_view_update.register(SetLocationUpdate)
def _(update: SetLocationUpdate, base: ViewMetadata, context: _ViewUpdateContext) -> ViewMetadata:
    return base.model_copy(update={"location": update.location})


@_apply_view_update.register(SetPropertiesUpdate)
def _(update: SetPropertiesUpdate, base: ViewMetadata, context: _ViewUpdateContext) -> ViewMetadata:
    return base.model_copy(update={"properties": {**base.properties, **update.updates}})


@_apply_view_update.register(RemovePropertiesUpdate)
def _(update: RemovePropertiesUpdate, base: ViewMetadata, context: _ViewUpdateContext) -> ViewMetadata:
    removals = set(update.removals)
    return base.model_copy(
        update={"properties": {k: v for k, v in base.properties.items() if k not in removals}}
    )


@_apply_view_update.register(AddViewVersionUpdate)
def _(update: AddViewVersionUpdate, base: ViewMetadata, context: _ViewUpdateContext) -> ViewMetadata:
    version = update.view_version
    if version.schema_id == -1:
        if context.last_added_schema_id is None:
            raise BadRequest("Cannot set last added schema: no schema has been added")
        version = version.model_copy(update={"schema_id": context.last_added_schema_id})
    if not any(s.schema_id == version.schema_id for s in base.schemas):
        raise BadRequest(f"Cannot add version with unknown schema: {version.schema_id}")
    _check_one_query_per_dialect(version)
    for existing in base.versions:
        if _same_version(existing, version):
            context.last_added_version_id = existing.version_id
            return base
    new_id = max((v.version_id for v in base.versions), default=0) + 1
    context.last_added_version_id = new_id
    version = version.model_copy(update={"version_id": new_id})
    return base.model_copy(update={"versions": [*base.versions, version]})


@_apply_view_update.register(SetCurrentViewVersionUpdate)
def _(update: SetCurrentViewVersionUpdate, base: ViewMetadata, context: _ViewUpdateContext) -> ViewMetadata:
    version_id = update.view_version_id
    if version_id == -1:
        if context.last_added_version_id is None:
            raise BadRequest("Cannot set last version: no views have been added")
        version_id = context.last_added_version_id
    version = next((v for v in base.versions if v.version_id == version_id), None)
    if version is None:
        raise BadRequest(f"Cannot set current version to unknown version: {version_id}")
    if version_id == base.current_version_id:
        return base
    entry = ViewHistoryEntry(**{"timestamp-ms": version.timestamp_ms, "version-id": version_id})
    return base.model_copy(
        update={"current_version_id": version_id, "version_log": [*base.version_log, entry]}
    )


def _retain_history(meta: ViewMetadata) -> ViewMetadata:
    """Retain the newest versions (`version.history.num-entries`), never the current one."""
    keep = int(meta.properties.get(HISTORY_ENTRIES_PROPERTY, DEFAULT_HISTORY_ENTRIES))
    if keep < 1:
        raise BadRequest(f"{HISTORY_ENTRIES_PROPERTY} must be positive but was {keep}")
    versions = sorted(meta.versions, key=lambda v: v.version_id)
    if len(versions) <= keep:
        return meta
    retained = versions[-keep:]
    if not any(v.version_id == meta.current_version_id for v in retained):
        current = next(v for v in versions if v.version_id == meta.current_version_id)
        retained = [current, *retained[1:]]
    ids = {v.version_id for v in retained}
    log = [e for e in meta.version_log if e.version_id in ids]
    return meta.model_copy(update={"versions": retained, "version_log": log[-keep:]})


def apply_view_updates(base: ViewMetadata, updates: Sequence[ViewUpdate]) -> ViewMetadata:
    """Apply typed `ViewUpdate`s to `base`, as Java's `ViewMetadata.Builder` does."""
    context = _ViewUpdateContext()
    new = base
    for update in updates:
        new = _apply_view_update(update, new, context)
    new = _retain_history(new)
    return _parse(_METADATA, new.model_dump(by_alias=True), "view metadata")


def commit_view(
    base: ViewMetadata, requirements: Sequence[ViewRequirement], updates: Sequence[ViewUpdate]
) -> ViewMetadata:
    """Validate `requirements` on `base`, then apply `updates`: the whole pure commit step."""
    check_view_requirements(requirements, base)
    return apply_view_updates(base, updates)


def create_view_metadata(
    *, location: str, schema: Any, view_version: Any, properties: dict[str, str]
) -> ViewMetadata:
    """Metadata for `createView`: one schema, one version, current."""
    check_booleans(schema, "schema")
    check_booleans(view_version, "view version")
    parsed_schema: Schema = _parse(_SCHEMA, schema, "schema")
    if not isinstance(view_version, dict):
        raise BadRequest("Invalid view: 'view-version' must be an object")
    # The view's first schema gets id 0 whatever id the client sent, as the Java reference assigns it
    # (`ViewMetadata.Builder.setCurrentVersion`); the version points at it.
    parsed_schema = parsed_schema.model_copy(update={"schema_id": INITIAL_SCHEMA_ID})
    version_body = {**view_version, "schema-id": INITIAL_SCHEMA_ID}
    version: ViewVersion = _parse(_VERSION, version_body, "view version")
    _check_one_query_per_dialect(version)
    version = version.model_copy(update={"version_id": 1})
    return _parse(
        _METADATA,
        {
            "view-uuid": str(uuid.uuid4()),
            "format-version": 1,
            "location": location,
            "schemas": [parsed_schema.model_dump(by_alias=True)],
            "current-version-id": 1,
            "versions": [version.model_dump(by_alias=True)],
            "version-log": [{"timestamp-ms": version.timestamp_ms or _now_ms(), "version-id": 1}],
            "properties": dict(properties),
        },
        "view metadata",
    )


def new_view_metadata_location(metadata: ViewMetadata, previous_location: str | None) -> str:
    """Where the next view metadata file goes, numbered like table metadata files."""
    folder = metadata_folder(metadata.location, metadata.properties)
    return f"{folder}/{metadata_version(previous_location) + 1:05d}-{uuid.uuid4()}.metadata.json"


__all__: Sequence[str] = [
    "ViewRequirement",
    "ViewUpdate",
    "apply_view_updates",
    "check_view_requirements",
    "commit_view",
    "create_view_metadata",
    "new_view_metadata_location",
    "parse_view_metadata",
    "parse_view_requirements",
    "parse_view_updates",
]
