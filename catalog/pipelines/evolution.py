"""What applying a configuration does to each table: create it, evolve it, or leave it (pure).

Existing tables are compared with the configuration BY FIELD ID. Allowed: adding an optional column,
required → optional, int → long, float → double, a wider decimal precision, renames, doc changes and
re-ordering. Refused, with the YAML path of the offending field: dropping a field, optional →
required, any other type change, moving a field to another parent, changing the partitioning, and
changing an existing table's `table_mode` or `key_fields` (its rows were written under the old key).
A data table's `format_version` may go up (2 → 3, one `upgrade-format-version` update) but never down.

A create is one commit with an `assert-create` requirement and add-schema/add-spec/… updates (which keep
the configured field ids; the createTable route reassigns them). An evolution is one commit with
`add-schema` (the full new schema, ids kept) and `set-current-schema -1`, guarded by
`assert-current-schema-id`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.transforms import VoidTransform
from pyiceberg.types import (
    DecimalType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    StructType,
)

from catalog.pipelines.columns import dlq_schema
from catalog.pipelines.config import ConfigError, InvalidConfig, PipelineConfig, field_paths
from catalog.pipelines.iceberg import (
    TABLE_MODE_PROPERTY,
    data_properties,
    data_schema,
    dlq_properties,
    partition_spec,
    source_properties,
)
from catalog.pipelines.table_config import DEFAULT_FORMAT_VERSION

TableKind = Literal["data", "dlq"]
Action = Literal["create", "evolve", "unchanged", "resumed", "removed"]
# Dead-letter tables, and data tables whose floe.yaml names no format_version.
FORMAT_VERSION = DEFAULT_FORMAT_VERSION


@dataclass(frozen=True)
class TableTarget:
    """One Iceberg table a configuration wants, as it should be."""

    namespace: str
    name: str
    kind: TableKind
    cluster: str
    topic: str
    schema: Schema
    spec: PartitionSpec
    properties: dict[str, str]
    # Properties kept in sync with the configuration on every apply (the others are set at creation).
    synced_properties: dict[str, str]
    field_paths: dict[int, str] = field(default_factory=dict)
    fields_path: str = ""
    partitioning_path: str = ""
    table_path: str = ""
    table_mode: str = "append"
    key_fields: tuple[str, ...] = ()
    format_version: int = FORMAT_VERSION


def table_targets(config: PipelineConfig) -> list[TableTarget]:
    """Every table of the configuration, each followed by its dead-letter table."""
    targets: list[TableTarget] = []
    for table in config.tables:
        synced = source_properties(table)
        targets.append(
            TableTarget(
                namespace=table.namespace,
                name=table.table_name,
                kind="data",
                cluster=table.source_cluster_name,
                topic=table.source_topic,
                schema=data_schema(table),
                spec=partition_spec(table),
                properties=data_properties(table),
                synced_properties=synced,
                field_paths=field_paths(table),
                fields_path=f"{table.path}.schema.fields",
                partitioning_path=f"{table.path}.partitioning_scheme",
                table_path=table.path,
                table_mode=table.table_mode,
                key_fields=table.key_fields or (),
                format_version=table.format_version,
            )
        )
        targets.append(
            TableTarget(
                namespace=table.namespace,
                name=table.dlq_table_name,
                kind="dlq",
                cluster=table.source_cluster_name,
                topic=table.source_topic,
                schema=dlq_schema(),
                spec=PartitionSpec(),
                properties=dlq_properties(table),
                synced_properties=synced,
                fields_path=table.path,
                partitioning_path=table.path,
                table_path=table.path,
            )
        )
    return targets


@dataclass(frozen=True, slots=True)
class TableName:
    """Which table a configuration wants, without its schema (cheap: what the previous revision had)."""

    namespace: str
    name: str
    kind: TableKind
    cluster: str
    topic: str
    table_path: str  # the YAML path of the table's entry


def table_names(config: PipelineConfig) -> list[TableName]:
    """Every table of the configuration by name, each followed by its dead-letter table."""
    names: list[TableName] = []
    for t in config.tables:
        source = (t.source_cluster_name, t.source_topic, t.path)
        names.append(TableName(t.namespace, t.table_name, "data", *source))
        names.append(TableName(t.namespace, t.dlq_table_name, "dlq", *source))
    return names


@dataclass(frozen=True)
class TablePlan:
    """What an apply does to one table, and the commit that does it (none when unchanged)."""

    namespace: str
    table: str
    kind: TableKind
    cluster: str
    topic: str
    action: Action
    changes: tuple[str, ...] = ()
    requirements: tuple[dict[str, Any], ...] = ()
    updates: tuple[dict[str, Any], ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "table": self.table,
            "kind": self.kind,
            "cluster": self.cluster,
            "topic": self.topic,
            "action": self.action,
            "changes": list(self.changes),
        }


@dataclass(frozen=True)
class PipelinePlan:
    tables: tuple[TablePlan, ...]

    @property
    def commits(self) -> tuple[TablePlan, ...]:
        """The tables to create or evolve."""
        return tuple(t for t in self.tables if t.action in ("create", "evolve"))

    def to_json(self) -> list[dict[str, Any]]:
        return [t.to_json() for t in self.tables]


def plan_pipeline(
    config: PipelineConfig,
    current: Mapping[tuple[str, str], TableMetadata | None],
    previous: PipelineConfig | None = None,
) -> PipelinePlan:
    """The plan of every table of `config` given the tables' current metadata (keyed by (namespace,
    table); missing or None: the table does not exist). Tables of `previous` that `config` no longer
    has are listed as removed: they are kept, only no longer ingested. Raises `InvalidConfig` with
    every refused change."""
    plans: list[TablePlan] = []
    errors: list[ConfigError] = []
    wanted: set[tuple[str, str]] = set()
    previous_names = table_names(previous) if previous is not None else None
    ingested = {(t.namespace, t.name) for t in previous_names} if previous_names is not None else None
    for target in table_targets(config):
        key = (target.namespace, target.name)
        wanted.add(key)
        try:
            plan = plan_table(target, current.get(key))
        except InvalidConfig as exc:
            errors.extend(exc.errors)
            continue
        if ingested is not None and key not in ingested and plan.action != "create":
            # An existing table the applied revision no longer ingests: applying resumes its ingestion.
            resumed = "ingested again (the applied revision does not ingest it)"
            if plan.action == "unchanged":
                plan = replace(plan, action="resumed", changes=(resumed,))
            else:
                plan = replace(plan, changes=(*plan.changes, resumed))
        plans.append(plan)
    if errors:
        raise InvalidConfig(errors)
    for gone in previous_names or ():
        if (gone.namespace, gone.name) not in wanted:
            kept = ("kept with its data; no longer ingested",)
            plans.append(
                TablePlan(gone.namespace, gone.name, gone.kind, gone.cluster, gone.topic, "removed", kept)
            )
    return PipelinePlan(tuple(plans))


def plan_table(target: TableTarget, current: TableMetadata | None) -> TablePlan:
    """Create, evolve or leave one table; raises `InvalidConfig` when the change is refused."""
    base = (target.namespace, target.name, target.kind, target.cluster, target.topic)
    if current is None:
        created = (
            f"create with {len(target.schema.fields)} columns, {_describe_spec(target.spec, target.schema)}"
        )
        return TablePlan(*base, "create", (created,), ({"type": "assert-create"},), create_updates(target))
    current_schema = current.schema()
    changes: list[str] = []
    errors: list[ConfigError] = []
    if not _same_schema(current_schema, target.schema):  # most tables of an apply are unchanged
        used_ids = {f for s in current.schemas for f in _ids(s)} - set(_ids(current_schema))
        changes, errors = diff_schema(current_schema, target, used_ids)
    current_spec = current.spec()
    if _spec_key(current_spec) != _spec_key(target.spec):
        errors.append(
            ConfigError(
                target.partitioning_path,
                f"changing the partitioning of {target.namespace}.{target.name} from "
                f"{_describe_spec(current_spec, current_schema)} to "
                f"{_describe_spec(target.spec, target.schema)} is not supported",
            )
        )
    if target.kind == "data":
        refused = _mode_changes(target, current)
        if refused:  # adding or dropping `_key` follows from the mode or key change: name only its cause
            raise InvalidConfig(refused)
        errors += _format_downgrade(target, current)
    if errors:
        raise InvalidConfig(errors)
    updates: list[dict[str, Any]] = []
    if target.kind == "data" and current.format_version < target.format_version:
        updates.append({"action": "upgrade-format-version", "format-version": target.format_version})
        changes = [
            f"upgrade the format version from {current.format_version} to {target.format_version}",
            *changes,
        ]
    if changes:
        new_id = max(s.schema_id for s in current.schemas) + 1
        identifiers = list(target.schema.identifier_field_ids)
        schema = Schema(*target.schema.fields, schema_id=new_id, identifier_field_ids=identifiers)
        updates += [
            {
                "action": "add-schema",
                "schema": _json(schema),
                "last-column-id": max(current.last_column_id, schema.highest_field_id),
            },
            {"action": "set-current-schema", "schema-id": -1},
        ]
    stale = {k: v for k, v in target.synced_properties.items() if current.properties.get(k) != v}
    if stale:
        updates.append({"action": "set-properties", "updates": stale})
        changes += [f"set property {k}={v}" for k, v in stale.items()]
    if not updates:
        return TablePlan(*base, "unchanged")
    requirements = (
        {"type": "assert-table-uuid", "uuid": str(current.table_uuid)},
        {"type": "assert-current-schema-id", "current-schema-id": current.current_schema_id},
        {"type": "assert-default-spec-id", "default-spec-id": current.default_spec_id},
    )
    return TablePlan(*base, "evolve", tuple(changes), requirements, tuple(updates))


def _same_schema(current: Schema, wanted: Schema) -> bool:
    """Whether the columns (ids, names, types, nullability, docs, defaults) and identifier fields are
    the same: then `diff_schema` has nothing to say."""
    return current.fields == wanted.fields and set(current.identifier_field_ids) == set(
        wanted.identifier_field_ids
    )


def _mode_changes(target: TableTarget, current: TableMetadata) -> list[ConfigError]:
    """An existing table keeps its mode and key: its rows were merged (or appended) under them."""
    name = f"{target.namespace}.{target.name}"
    mode = current.properties.get(TABLE_MODE_PROPERTY, "append")
    if mode != target.table_mode:
        return [
            ConfigError(
                f"{target.table_path}.table_mode",
                f"{name} is an {mode} table: its table_mode cannot change to {target.table_mode} (create "
                "a new table for the other mode, e.g. from another topic, and drop this one)",
            )
        ]
    schema = current.schema()
    old_key = list(schema.identifier_field_ids)
    new_key = list(target.schema.identifier_field_ids)
    if mode == "upsert" and sorted(old_key) != sorted(new_key):
        old_names = ", ".join(schema.find_column_name(i) or f"field {i}" for i in old_key)
        new_names = ", ".join(target.key_fields) or "the Kafka record key (_key)"
        return [
            ConfigError(
                f"{target.table_path}.key_fields",
                f"{name} is keyed by [{old_names}] (field ids {old_key}): key_fields cannot change to "
                f"[{new_names}] (field ids {new_key}); renaming a key field (same id) is allowed",
            )
        ]
    return []


def _format_downgrade(target: TableTarget, current: TableMetadata) -> list[ConfigError]:
    """Iceberg has no downgrade: a v3 table's metadata (row lineage, deletion vectors) has no v2 form."""
    if current.format_version <= target.format_version:
        return []
    name = f"{target.namespace}.{target.name}"
    return [
        ConfigError(
            f"{target.table_path}.format_version",
            f"{name} is an Iceberg format version {current.format_version} table: its format_version "
            f"cannot go down to {target.format_version} (Iceberg tables are only upgraded); set "
            f"format_version: {current.format_version}",
        )
    ]


def create_updates(target: TableTarget) -> tuple[dict[str, Any], ...]:
    """The updates of a create transaction that keeps the configured ids (as pyiceberg's
    `create_table_transaction` sends them)."""
    return (
        {"action": "assign-uuid", "uuid": str(uuid.uuid4())},
        {"action": "upgrade-format-version", "format-version": target.format_version},
        {
            "action": "add-schema",
            "schema": _json(target.schema),
            "last-column-id": target.schema.highest_field_id,
        },
        {"action": "set-current-schema", "schema-id": -1},
        {"action": "add-spec", "spec": _json(target.spec)},
        {"action": "set-default-spec", "spec-id": -1},
        {"action": "add-sort-order", "sort-order": {"order-id": 0, "fields": []}},
        {"action": "set-default-sort-order", "sort-order-id": -1},
        {"action": "set-properties", "updates": dict(target.properties)},
    )


def _json(model: Schema | PartitionSpec) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(model.model_dump_json(by_alias=True))
    return value


# -- schema comparison -----------------------------------------------------------------------------

Role = Literal["field", "element", "key", "value"]


@dataclass(frozen=True)
class _Node:
    id: int
    parent: int | None
    role: Role
    name: str
    type: IcebergType
    required: bool
    doc: str | None


def _ids(schema: Schema) -> list[int]:
    return list(_index(schema)[0])


def _index(schema: Schema) -> tuple[dict[int, _Node], dict[int | None, list[int]]]:
    """Every field (list elements and map keys/values included) by id, and each parent's children in order."""
    nodes: dict[int, _Node] = {}
    children: dict[int | None, list[int]] = {}

    def add(node: _Node) -> None:
        nodes[node.id] = node
        children.setdefault(node.parent, []).append(node.id)
        visit(node.type, node.id)

    def visit(field_type: IcebergType, parent: int | None) -> None:
        if isinstance(field_type, StructType):
            for nested in field_type.fields:
                add(
                    _Node(
                        nested.field_id,
                        parent,
                        "field",
                        nested.name,
                        nested.field_type,
                        nested.required,
                        nested.doc,
                    )
                )
        elif isinstance(field_type, ListType):
            add(
                _Node(
                    field_type.element_id,
                    parent,
                    "element",
                    "element",
                    field_type.element_type,
                    field_type.element_required,
                    None,
                )
            )
        elif isinstance(field_type, MapType):
            add(_Node(field_type.key_id, parent, "key", "key", field_type.key_type, True, None))
            add(
                _Node(
                    field_type.value_id,
                    parent,
                    "value",
                    "value",
                    field_type.value_type,
                    field_type.value_required,
                    None,
                )
            )

    visit(schema.as_struct(), None)
    return nodes, children


def _display(nodes: Mapping[int, _Node], field_id: int) -> str:
    names: list[str] = []
    node: _Node | None = nodes[field_id]
    while node is not None:
        names.append(node.name)
        node = nodes.get(node.parent) if node.parent is not None else None
    return ".".join(reversed(names))


def _kind(field_type: IcebergType) -> str:
    if isinstance(field_type, StructType):
        return "struct"
    if isinstance(field_type, ListType):
        return "list"
    if isinstance(field_type, MapType):
        return "map"
    return str(field_type)


_WIDENINGS = {(IntegerType(), LongType()), (FloatType(), DoubleType())}


def _widens(old: IcebergType, new: IcebergType) -> bool:
    if (old, new) in _WIDENINGS:
        return True
    return (
        isinstance(old, DecimalType)
        and isinstance(new, DecimalType)
        and old.scale == new.scale
        and new.precision > old.precision
    )


def diff_schema(
    current: Schema, target: TableTarget, used_ids: AbstractSet[int] = frozenset()
) -> tuple[list[str], list[ConfigError]]:
    """The allowed changes from `current` to the target's schema, and the refused ones (as errors at the
    YAML path of the field concerned)."""
    old_nodes, old_children = _index(current)
    new_nodes, new_children = _index(target.schema)
    changes: list[str] = []
    errors: list[ConfigError] = []

    def path_of(field_id: int | None, suffix: str) -> str:
        if field_id is None:
            return target.fields_path
        found = target.field_paths.get(field_id)
        return f"{found}{suffix}" if found else target.table_path

    def refuse(path: str, message: str) -> None:
        prefix = "" if target.kind == "data" else f"dead-letter table {target.namespace}.{target.name}: "
        errors.append(ConfigError(path, prefix + message))

    for field_id, old in old_nodes.items():
        if field_id in new_nodes or (old.parent is not None and old.parent not in new_nodes):
            continue
        refuse(
            path_of(old.parent, ".fields"),
            f"dropping {_display(old_nodes, field_id)} (id {field_id}) is not supported: keep it in the "
            "schema (make it optional if producers stopped sending it)",
        )
    for field_id, new in new_nodes.items():
        name = _display(new_nodes, field_id)
        found = old_nodes.get(field_id)
        if found is None:
            if field_id in used_ids:
                refuse(
                    path_of(field_id, ".id"),
                    f"field id {field_id} belonged to a column this table dropped earlier: use a new id",
                )
            elif new.parent is not None and new.parent not in old_nodes:
                continue  # inside a new struct, list or map: added with it
            elif new.role != "field":
                continue  # a container's new element/key/value: its old one is reported as dropped
            elif new.required:
                refuse(
                    path_of(field_id, ".optional"),
                    f"new column {name} must be optional (optional: true): existing rows have no value",
                )
            else:
                changes.append(f"add column {name} (id {field_id}, {_kind(new.type)})")
            continue
        old = found
        old_name = _display(old_nodes, field_id)
        if old.parent != new.parent or old.role != new.role:
            refuse(path_of(field_id, ".id"), f"moving {old_name} (id {field_id}) to {name} is not supported")
            continue
        if old.name != new.name:
            changes.append(f"rename {old_name} to {name}")
        old_kind, new_kind = _kind(old.type), _kind(new.type)
        if old.type.is_primitive and new.type.is_primitive and old.type != new.type:
            if _widens(old.type, new.type) and new.role != "key":
                changes.append(f"widen {name} from {old.type} to {new.type}")
            else:
                allowed = (
                    "map keys cannot change type"
                    if new.role == "key"
                    else ("allowed: int → long, float → double, a wider decimal precision")
                )
                refuse(
                    path_of(field_id, ".type"),
                    f"changing {name} from {old.type} to {new.type} is not supported ({allowed})",
                )
        elif old_kind != new_kind and not (old.type.is_primitive and new.type.is_primitive):
            refuse(
                path_of(field_id, ".type"), f"changing {name} from {old_kind} to {new_kind} is not supported"
            )
            continue
        if old.required and not new.required:
            changes.append(f"make {name} optional")
        elif not old.required and new.required:
            refuse(path_of(field_id, ".optional"), f"making optional column {name} required is not supported")
        if (old.doc or None) != (new.doc or None):
            changes.append(f"update the doc of {name}")
    for parent, ids in new_children.items():
        if parent is not None and (
            parent not in old_nodes or old_nodes[parent].parent != new_nodes[parent].parent
        ):
            continue
        kept_new = [i for i in ids if i in old_nodes and old_nodes[i].parent == parent]
        kept_old = [
            i for i in old_children.get(parent, []) if i in new_nodes and new_nodes[i].parent == parent
        ]
        if kept_new != kept_old:
            where = "the table" if parent is None else _display(new_nodes, parent)
            changes.append(f"reorder the columns of {where}")
    return changes, errors


# -- partitioning ----------------------------------------------------------------------------------


def _spec_key(spec: PartitionSpec) -> tuple[tuple[int, str], ...]:
    return tuple(
        (f.source_id, str(f.transform)) for f in spec.fields if not isinstance(f.transform, VoidTransform)
    )


def _describe_spec(spec: PartitionSpec, schema: Schema) -> str:
    parts = []
    for f in spec.fields:
        if isinstance(f.transform, VoidTransform):
            continue
        column = schema.find_column_name(f.source_id) or f"field {f.source_id}"
        parts.append(f"{f.transform}({column})")
    return f"partitioned by {', '.join(parts)}" if parts else "unpartitioned"


__all__ = [
    "PipelinePlan",
    "TablePlan",
    "TableTarget",
    "create_updates",
    "diff_schema",
    "plan_pipeline",
    "plan_table",
    "table_targets",
]
