"""Size limits on what a client may create, and the per-cluster quotas (issue 29).

Limits apply to every caller, global administrators included: the length of a namespace level and of a
table or view name (UTF-8 bytes), a namespace's depth, a schema's width (fields, nested ones included)
and a namespace's, table's or view's properties. They are checked before anything is parsed further or
written, and break with `LimitExceeded` (400). Quotas bound what one cluster (its namespace and every one
below it) holds: namespaces, tables, views and keys. Namespace, table and view quotas are counted by the
store inside the creating transaction (`catalog.store.quotas`) and break with `QuotaExceeded` (403).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.update import AddSchemaUpdate, SetPropertiesUpdate
from pyiceberg.types import ListType, MapType, NestedField, StructType

from catalog.class_properties import check_no_class_properties
from catalog.errors import LimitExceeded, QuotaExceeded
from catalog.identifiers import Namespace, TableIdent
from catalog.metadata_files import check_metadata_codec
from catalog.settings import Settings
from catalog.store.interfaces import TabularStore
from catalog.store.records import ClusterQuota, TabularKind, WarehouseRecord

if TYPE_CHECKING:
    from catalog.service.table_model import TableChange

_SHOWN_CHARS = 40
# Nested types (struct, list, map) in one schema: far beyond real schemas, and well within pyiceberg's
# recursive parsing (about 15 Python frames a struct level: 65 levels exhaust a bare interpreter's stack).
MAX_SCHEMA_DEPTH = 32


@dataclass(frozen=True, slots=True)
class Limits:
    """The size limits of `Settings` (`FLOE_MAX_*`)."""

    name_bytes: int
    namespace_depth: int
    schema_fields: int
    properties: int
    properties_bytes: int
    transaction_tables: int = 1_000

    @classmethod
    def of(cls, settings: Settings) -> Limits:
        return cls(
            settings.max_name_bytes,
            settings.max_namespace_depth,
            settings.max_schema_fields,
            settings.max_properties,
            settings.max_properties_bytes,
            settings.max_transaction_tables,
        )

    def check_transaction(self, tables: int) -> None:
        """A multi-table commit of at most `FLOE_MAX_TRANSACTION_TABLES` tables: checked before any
        change is parsed, and each table's commit holds its lock and a share of the database's time."""
        if tables > self.transaction_tables:
            raise LimitExceeded(
                f"Invalid transaction: {tables} table changes, more than the limit of "
                f"{self.transaction_tables} (FLOE_MAX_TRANSACTION_TABLES)"
            )

    def check_name(self, name: str, what: str) -> None:
        """A namespace level, table or view name no longer than `FLOE_MAX_NAME_BYTES`."""
        size = len(name.encode("utf-8", "surrogatepass"))
        if size > self.name_bytes:
            shown = name if len(name) <= _SHOWN_CHARS else name[:_SHOWN_CHARS] + "…"
            raise LimitExceeded(
                f"Invalid {what} {shown!r}: {size} bytes, more than the limit of {self.name_bytes} "
                "(FLOE_MAX_NAME_BYTES)"
            )

    def check_namespace(self, namespace: Namespace) -> None:
        if len(namespace.levels) > self.namespace_depth:
            raise LimitExceeded(
                f"Invalid namespace: {len(namespace.levels)} levels, more than the limit of "
                f"{self.namespace_depth} (FLOE_MAX_NAMESPACE_DEPTH)"
            )
        for level in namespace.levels:
            self.check_name(level, "namespace level")

    def check_properties(self, properties: Mapping[str, str], what: str) -> None:
        if len(properties) > self.properties:
            raise LimitExceeded(
                f"Invalid {what}: {len(properties)} properties, more than the limit of {self.properties} "
                "(FLOE_MAX_PROPERTIES)"
            )
        size = sum(len(str(k).encode("utf-8", "surrogatepass")) for k in properties) + sum(
            len(str(v).encode("utf-8", "surrogatepass")) for v in properties.values()
        )
        if size > self.properties_bytes:
            raise LimitExceeded(
                f"Invalid {what}: {size} bytes of properties, more than the limit of "
                f"{self.properties_bytes} (FLOE_MAX_PROPERTIES_BYTES)"
            )
        # Not sizes, but every property map a client sends passes here (bounded first).
        check_no_class_properties(properties, what)
        check_metadata_codec(properties)

    def _check_width(self, width: int, what: str) -> None:
        if width > self.schema_fields:
            raise LimitExceeded(
                f"Invalid {what}: more than {self.schema_fields} fields, nested ones included "
                "(FLOE_MAX_SCHEMA_FIELDS)"
            )

    def check_schema_json(self, schema: Any, what: str = "schema") -> None:
        """A schema as the spec's JSON (before it is parsed): its fields, counted until the limit, and
        its nesting (pyiceberg parses nested types recursively: deeper is a RecursionError, a 500)."""
        self._check_width(json_schema_width(schema, self.schema_fields + 1), what)
        if json_schema_depth(schema, MAX_SCHEMA_DEPTH + 1) > MAX_SCHEMA_DEPTH:
            raise LimitExceeded(f"Invalid {what}: types nested more than {MAX_SCHEMA_DEPTH} levels deep")

    def check_schema(self, schema: Schema, what: str = "schema") -> None:
        self._check_width(schema_width(schema), what)
        if schema_depth(schema) > MAX_SCHEMA_DEPTH:
            raise LimitExceeded(f"Invalid {what}: types nested more than {MAX_SCHEMA_DEPTH} levels deep")

    def check_table_change(self, change: TableChange) -> None:
        """A table commit's added schemas and properties set, and the name of a table it creates."""
        if any(r.type == "assert-create" for r in change.requirements):
            self.check_name(change.ident.name, "table name")
        for update in change.updates:
            if isinstance(update, AddSchemaUpdate):
                self.check_schema(update.schema_, "add-schema update")
            elif isinstance(update, SetPropertiesUpdate):
                self.check_properties(update.updates, "set-properties update")

    def check_committed(self, change: TableChange, properties: Mapping[str, str]) -> None:
        """The properties a table holds after a commit that set some."""
        if any(isinstance(update, SetPropertiesUpdate) for update in change.updates):
            self.check_properties(properties, "table properties")

    def check_table_metadata(self, metadata: TableMetadata) -> None:
        """Metadata taken in as a whole (`register`): every schema and the properties."""
        for schema in metadata.schemas:
            self.check_schema(schema, f"schema {schema.schema_id}")
        self.check_properties(metadata.properties, "table properties")

    def check_updates_json(self, updates: Any) -> None:
        """A table or view commit's updates as the spec's JSON, before they are parsed (pyiceberg takes
        seconds over a 100,000-field schema): its added schemas and properties set."""
        for update in updates if isinstance(updates, list) else ():
            if not isinstance(update, Mapping):
                continue
            if update.get("action") == "add-schema":
                self.check_schema_json(update.get("schema"), "add-schema update")
            elif update.get("action") == "set-properties" and isinstance(update.get("updates"), Mapping):
                self.check_properties(update["updates"], "set-properties update")


def json_schema_width(schema: Any, stop_at: int) -> int:
    """Fields of a JSON schema (struct fields, list elements, map keys and values, at every depth),
    counted without recursion and only up to `stop_at`."""
    count, pending = 0, [schema]
    while pending and count < stop_at:
        node = pending.pop()
        if not isinstance(node, Mapping):
            continue
        kind = node.get("type")
        if kind == "struct" and isinstance(node.get("fields"), list):
            fields = node["fields"]
            count += len(fields)
            pending.extend(f.get("type") for f in fields if isinstance(f, Mapping))
        elif kind == "list":
            count += 1
            pending.append(node.get("element"))
        elif kind == "map":
            count += 2
            pending.extend((node.get("key"), node.get("value")))
    return count


def json_schema_depth(schema: Any, stop_at: int) -> int:
    """How deep a JSON schema's types nest (a struct of primitives: 1), found without recursion and
    only up to `stop_at`."""
    deepest, pending = 0, [(schema, 1)]
    while pending and deepest < stop_at:
        node, depth = pending.pop()
        if not isinstance(node, Mapping):
            continue
        deepest = max(deepest, depth)
        kind = node.get("type")
        if kind == "struct" and isinstance(node.get("fields"), list):
            pending.extend((f.get("type"), depth + 1) for f in node["fields"] if isinstance(f, Mapping))
        elif kind == "list":
            pending.append((node.get("element"), depth + 1))
        elif kind == "map":
            pending.extend(((node.get("key"), depth + 1), (node.get("value"), depth + 1)))
    return deepest


def schema_depth(schema: Schema) -> int:
    """How deep a parsed schema's types nest, as `json_schema_depth` counts (without recursion)."""
    deepest, pending = 1, [(field, 2) for field in schema.fields]
    while pending:
        field, depth = pending.pop()
        kind = field.field_type
        if isinstance(kind, StructType | ListType | MapType):
            deepest = max(deepest, depth)
        if isinstance(kind, StructType):
            pending.extend((child, depth + 1) for child in kind.fields)
        elif isinstance(kind, ListType):
            pending.append((kind.element_field, depth + 1))
        elif isinstance(kind, MapType):
            pending.extend(((kind.key_field, depth + 1), (kind.value_field, depth + 1)))
    return deepest


def schema_width(schema: Schema) -> int:
    """Fields of a parsed schema, nested ones included."""
    count, pending = 0, list(schema.fields)
    while pending:
        field: NestedField = pending.pop()
        count += 1
        kind = field.field_type
        if isinstance(kind, StructType):
            pending.extend(kind.fields)
        elif isinstance(kind, ListType):
            pending.append(kind.element_field)
        elif isinstance(kind, MapType):
            pending.extend((kind.key_field, kind.value_field))
    return count


_QUOTA_SETTINGS: dict[str, str] = {
    "namespace": "quota_namespaces",
    "table": "quota_tables",
    "view": "quota_views",
}


def cluster_quota(
    settings: Settings, warehouse: WarehouseRecord, namespace: Namespace, kind: TabularKind | str
) -> ClusterQuota:
    """The quota of `kind` ("namespace", "table" or "view") of the cluster `namespace` belongs to (its
    top-level namespace), for the store to count in the creating transaction."""
    name = _QUOTA_SETTINGS[kind]
    return ClusterQuota(
        warehouse.id, namespace.levels[0], int(getattr(settings, name)), Settings.variable(name)
    )


async def check_move(
    store: TabularStore,
    settings: Settings,
    warehouse: WarehouseRecord,
    source: TableIdent,
    destination: TableIdent,
    kind: TabularKind,
) -> None:
    """A rename into another cluster (only a global administrator reaches two) counts against that
    cluster's quota. Counted before the rename: such renames are rare and made by hand."""
    if source.namespace.levels[0] == destination.namespace.levels[0]:
        return
    quota = cluster_quota(settings, warehouse, destination.namespace, kind)
    held = await store.count_in_cluster(warehouse.id, quota.root, kind)
    if held >= quota.limit:
        raise QuotaExceeded(
            f"Quota exceeded: cluster {quota.root} already holds {held} {kind}s, its quota of {quota.limit} "
            f"({quota.variable})"
        )
