"""The view commit core: pure functions over pyiceberg's `ViewMetadata` model.

pyiceberg has view metadata models but no update logic, so this module applies the spec's `ViewUpdate`
actions the way the Java `ViewMetadata.Builder` does: versions are de-duplicated, `schema-id: -1` and
`view-version-id: -1` mean "the one added in this commit", and the version log records every change of
the current version.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import Any, TypeVar

from pydantic import TypeAdapter
from pydantic import ValidationError as PydanticValidationError
from pyiceberg.schema import Schema
from pyiceberg.view.metadata import ViewHistoryEntry, ViewMetadata, ViewVersion

from catalog.commit import metadata_version
from catalog.errors import BadRequest, CommitFailed, InvalidArgument
from catalog.json_booleans import check_booleans

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
VIEW_REQUIREMENT_TYPES = frozenset({"assert-view-uuid"})
HISTORY_ENTRIES_PROPERTY = "version.history.num-entries"
DEFAULT_HISTORY_ENTRIES = 10
INITIAL_SCHEMA_ID = 0

T = TypeVar("T")

_SCHEMA = TypeAdapter(Schema)
_VERSION = TypeAdapter(ViewVersion)
_METADATA = TypeAdapter(ViewMetadata)


def _now_ms() -> int:
    return int(time.time() * 1000)


def _parse(adapter: TypeAdapter[T], value: Any, what: str) -> T:
    try:
        return adapter.validate_python(value)
    except PydanticValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise BadRequest(f"Invalid {what}: {first.get('msg')} at {where}") from exc


def parse_view_metadata(text: str | bytes) -> ViewMetadata:
    try:
        return ViewMetadata.model_validate_json(text)
    except PydanticValidationError as exc:
        raise BadRequest(f"Invalid view metadata: {exc.errors()[0].get('msg')}") from exc


def check_view_requirements(requirements: Any, base: ViewMetadata) -> None:
    if requirements is None:
        return
    if not isinstance(requirements, list):
        raise BadRequest("Invalid commit request: requirements must be an array")
    for req in requirements:
        if not isinstance(req, dict) or req.get("type") not in VIEW_REQUIREMENT_TYPES:
            kind = req.get("type") if isinstance(req, dict) else req
            raise BadRequest(f"Unknown view requirement type: {kind}")
        expected = str(req.get("uuid", ""))
        if expected.lower() != base.view_uuid.lower():
            raise CommitFailed(
                f"Requirement failed: view UUID does not match: expected {base.view_uuid} != {expected}"
            )


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


class _ViewBuilder:
    """Mutable scratch state for one commit; the result is a new immutable `ViewMetadata`."""

    def __init__(self, base: ViewMetadata) -> None:
        self.meta = base
        self.last_added_schema_id: int | None = None
        self.last_added_version_id: int | None = None

    def _copy(self, **changes: Any) -> None:
        self.meta = self.meta.model_copy(update=changes)

    def add_schema(self, raw: Any) -> None:
        schema: Schema = _parse(_SCHEMA, raw, "schema")
        for existing in self.meta.schemas:
            if (
                existing.fields == schema.fields
                and existing.identifier_field_ids == schema.identifier_field_ids
            ):
                self.last_added_schema_id = existing.schema_id
                return
        new_id = max((s.schema_id for s in self.meta.schemas), default=-1) + 1
        schema = schema.model_copy(update={"schema_id": new_id})
        self._copy(schemas=[*self.meta.schemas, schema])
        self.last_added_schema_id = new_id

    def add_version(self, raw: Any) -> None:
        if not isinstance(raw, dict):
            raise BadRequest("Invalid add-view-version: 'view-version' must be an object")
        version: ViewVersion = _parse(_VERSION, raw, "view version")
        if version.schema_id == -1:
            if self.last_added_schema_id is None:
                raise BadRequest("Cannot set last added schema: no schema has been added")
            version = version.model_copy(update={"schema_id": self.last_added_schema_id})
        if not any(s.schema_id == version.schema_id for s in self.meta.schemas):
            raise BadRequest(f"Cannot add version with unknown schema: {version.schema_id}")
        _check_one_query_per_dialect(version)
        for existing in self.meta.versions:
            if _same_version(existing, version):
                self.last_added_version_id = existing.version_id
                return
        new_id = max((v.version_id for v in self.meta.versions), default=0) + 1
        version = version.model_copy(update={"version_id": new_id})
        self._copy(versions=[*self.meta.versions, version])
        self.last_added_version_id = new_id

    def set_current_version(self, version_id: Any) -> None:
        if not isinstance(version_id, int):
            raise BadRequest("Invalid set-current-view-version: 'view-version-id' must be an integer")
        if version_id == -1:
            if self.last_added_version_id is None:
                raise BadRequest("Cannot set last version: no views have been added")
            version_id = self.last_added_version_id
        version = next((v for v in self.meta.versions if v.version_id == version_id), None)
        if version is None:
            raise BadRequest(f"Cannot set current version to unknown version: {version_id}")
        if version_id == self.meta.current_version_id:
            return
        entry = ViewHistoryEntry(**{"timestamp-ms": version.timestamp_ms, "version-id": version_id})
        self._copy(current_version_id=version_id, version_log=[*self.meta.version_log, entry])

    def finish(self) -> ViewMetadata:
        """Retain the newest versions (`version.history.num-entries`), never the current one."""
        keep = int(self.meta.properties.get(HISTORY_ENTRIES_PROPERTY, DEFAULT_HISTORY_ENTRIES))
        if keep < 1:
            raise BadRequest(f"{HISTORY_ENTRIES_PROPERTY} must be positive but was {keep}")
        versions = sorted(self.meta.versions, key=lambda v: v.version_id)
        if len(versions) > keep:
            retained = versions[-keep:]
            if not any(v.version_id == self.meta.current_version_id for v in retained):
                current = next(v for v in versions if v.version_id == self.meta.current_version_id)
                retained = [current, *retained[1:]]
            ids = {v.version_id for v in retained}
            log = [e for e in self.meta.version_log if e.version_id in ids]
            self._copy(versions=retained, version_log=log[-keep:])
        return _parse(_METADATA, self.meta.model_dump(by_alias=True), "view metadata")


def apply_view_updates(base: ViewMetadata, updates: Any) -> ViewMetadata:
    """Apply the spec's `ViewUpdate` list to `base`."""
    if updates is None:
        updates = []
    if not isinstance(updates, list):
        raise BadRequest("Invalid commit request: updates must be an array")
    check_booleans(updates, "view update")
    builder = _ViewBuilder(base)
    for update in updates:
        if (
            not isinstance(update, dict)
            or not isinstance(update.get("action"), str)  # a list or object is not hashable
            or update["action"] not in VIEW_UPDATE_ACTIONS
        ):
            action = update.get("action") if isinstance(update, dict) else update
            raise BadRequest(f"Unknown view update action: {action}")
        action = update["action"]
        if action == "assign-uuid":
            if str(update.get("uuid", "")).lower() != base.view_uuid.lower():
                raise BadRequest("Cannot reassign the UUID of an existing view")
        elif action == "upgrade-format-version":
            if update.get("format-version") != 1:
                raise BadRequest(f"Unsupported view format version: {update.get('format-version')}")
        elif action == "add-schema":
            builder.add_schema(update.get("schema"))
        elif action == "set-location":
            if not isinstance(update.get("location"), str) or not update["location"]:
                raise BadRequest("Invalid set-location: 'location' must be a non-empty string")
            builder._copy(location=update["location"])
        elif action == "set-properties":
            props = update.get("updates")
            if not isinstance(props, dict) or not all(isinstance(v, str) for v in props.values()):
                raise BadRequest("Invalid set-properties: 'updates' must map names to strings")
            builder._copy(properties={**builder.meta.properties, **props})
        elif action == "remove-properties":
            removals = update.get("removals")
            if not isinstance(removals, list) or not all(isinstance(r, str) for r in removals):
                raise BadRequest("Invalid remove-properties: 'removals' must be an array of strings")
            builder._copy(properties={k: v for k, v in builder.meta.properties.items() if k not in removals})
        elif action == "add-view-version":
            builder.add_version(update.get("view-version"))
        elif action == "set-current-view-version":
            builder.set_current_version(update.get("view-version-id"))
    return builder.finish()


def commit_view(base: ViewMetadata, requirements: Any, updates: Any) -> ViewMetadata:
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
    folder = metadata.properties.get("write.metadata.path") or f"{metadata.location.rstrip('/')}/metadata"
    return f"{folder.rstrip('/')}/{metadata_version(previous_location) + 1:05d}-{uuid.uuid4()}.metadata.json"


__all__: Sequence[str] = [
    "apply_view_updates",
    "check_view_requirements",
    "commit_view",
    "create_view_metadata",
    "new_view_metadata_location",
    "parse_view_metadata",
]
