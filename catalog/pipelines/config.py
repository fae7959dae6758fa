"""floe.yaml: the declarative pipeline configuration, parsed and validated (pure, no I/O).

The format is WarpStream Tableflow's (`source_clusters`, `tables`, `destination_bucket_url`) with a few
floe extensions (`warehouse`, `schema_registry`, `glue`, per-table `schema_registry_url`,
`commit_interval_seconds`, partition transforms). `load_yaml(text)` and `parse_config(data)` return a
`PipelineConfig` or raise `InvalidConfig` listing EVERY problem, each a `ConfigError` with the YAML path
of the offending value (`tables[1].schema.fields[3].id`) and, when parsed from YAML text, its line.

The blocks are pydantic models, one module each: `sources` (clusters, registry, Glue, bucket),
`table_config`, `schema_fields`, `partitioning`, `maintenance`; `validation` holds what they share and
turns pydantic's errors into floe's. This module is the whole document and re-exports the rest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import (
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)

from catalog.pipelines.bounds import check_document
from catalog.pipelines.errors import ConfigError, InvalidConfig
from catalog.pipelines.maintenance import MaintenanceConfig
from catalog.pipelines.partitioning import PartitionFieldConfig, resolve_column
from catalog.pipelines.protobuf import inline_schema_files
from catalog.pipelines.schema_fields import (
    NESTED_TYPES,
    PRIMITIVE_TYPES,
    TYPE_NAMES,
    FieldConfig,
    primitive_type,
)
from catalog.pipelines.sources import (
    Broker,
    BucketDestination,
    Credentials,
    GlueConfig,
    SchemaRegistryConfig,
    SourceCluster,
    parse_bucket_url,
)
from catalog.pipelines.table_config import (
    AvroFraming,
    SchemaMode,
    SourceFormat,
    TableConfig,
    table_name_for_topic,
)
from catalog.pipelines.validation import (
    ConfigModel,
    Loc,
    ParseContext,
    Text,
    none_as_empty,
    problem,
    problems,
    to_config_errors,
)
from catalog.pipelines.yaml_values import Marks, read_yaml, with_line

# The order of the normalized form's keys (validation needs another: clusters and registry first).
_KEY_ORDER = (
    "source_clusters",
    "tables",
    "destination_bucket_url",
    "warehouse",
    "schema_registry",
    "glue",
    "maintenance",
)


class PipelineConfig(ConfigModel):
    """A whole floe.yaml: the desired state `floe apply` stores."""

    # Declared in validation order: tables refer to the clusters and the registry.
    source_clusters: tuple[SourceCluster, ...] = Field(default=(), strict=False)
    schema_registry: SchemaRegistryConfig | None = None
    tables: tuple[TableConfig, ...] = Field(default=(), strict=False)
    destination_bucket_url: Text | None = None
    warehouse: Text | None = None
    glue: GlueConfig | None = None
    maintenance: MaintenanceConfig | None = None

    @property
    def destination(self) -> BucketDestination | None:
        if self.destination_bucket_url is None:
            return None
        found = parse_bucket_url(self.destination_bucket_url)
        assert isinstance(found, BucketDestination), found
        return found

    def cluster(self, name: str) -> SourceCluster:
        for cluster in self.source_clusters:
            if cluster.name == name:
                return cluster
        raise KeyError(name)

    def table(self, namespace: str, name: str) -> TableConfig:
        for table in self.tables:
            if (table.namespace, table.table_name) == (namespace, name):
                return table
        raise KeyError((namespace, name))

    def for_cluster(self, name: str) -> PipelineConfig:
        """Only what concerns one source cluster (what a cluster-scoped key may see): its cluster and
        tables, the shared schema registry only when one of its tables reads it, no Glue mirror (the
        operator's account)."""
        tables = tuple(t for t in self.tables if t.source_cluster_name == name)
        registry = self.schema_registry
        if registry is not None and not any(t.registry_url == registry.url for t in tables):
            registry = None
        return self.model_copy(
            update={
                "source_clusters": tuple(c for c in self.source_clusters if c.name == name),
                "tables": tables,
                "schema_registry": registry,
                "glue": None,
            }
        )

    @model_validator(mode="before")
    @classmethod
    def _not_empty(cls, data: Any) -> Any:
        if data is None:
            raise problem("the configuration is empty: expected source_clusters and tables")
        return data

    @field_validator("schema_registry", mode="before")
    @classmethod
    def _registry_block(cls, value: Any) -> Any:
        if value is None:  # `schema_registry:` with nothing below: its url is missing
            return {}
        return value

    @field_validator("glue", "maintenance", mode="before")
    @classmethod
    def _empty_block(cls, value: Any) -> Any:
        return none_as_empty(value)

    @field_validator("destination_bucket_url")
    @classmethod
    def _bucket(cls, url: str) -> str:
        found = parse_bucket_url(url)
        if isinstance(found, list):
            raise problems([((), message) for message in found])
        return url

    @model_validator(mode="after")
    def _document_rules(self, info: ValidationInfo) -> PipelineConfig:
        found: list[tuple[Loc, str]] = []
        if self.destination_bucket_url is not None and self.warehouse is not None:
            found.append(
                (
                    ("warehouse",),
                    "set either destination_bucket_url (floe keeps a warehouse in that bucket) or warehouse "
                    "(an existing floe warehouse), not both",
                )
            )
        found += _table_name_clashes(self.tables)
        if found:
            raise problems(found)
        return self

    @model_serializer(mode="wrap")
    def _in_key_order(
        self, handler: SerializerFunctionWrapHandler, info: SerializationInfo
    ) -> dict[str, Any]:
        body: dict[str, Any] = handler(self)
        return {key: body[key] for key in _KEY_ORDER if key in body}


def _table_name_clashes(tables: tuple[TableConfig, ...]) -> list[tuple[Loc, str]]:
    """No two tables (or dead-letter tables) may land on the same Iceberg table."""
    found: list[tuple[Loc, str]] = []
    taken: dict[tuple[str, str], tuple[str, TableConfig]] = {}
    for index, table in enumerate(tables):
        ours = (
            ((table.namespace, table.table_name), "table"),
            ((table.namespace, table.dlq_table_name), "dead-letter table"),
        )
        clashes = [(key, role) for key, role in ours if key in taken]
        if not clashes:
            for key, role in ours:
                taken[key] = (role, table)
            continue
        key, role = clashes[0]
        other_role, other = taken[key]
        if other.source_topic == table.source_topic:
            message = (
                f"topic {table.source_topic!r} of cluster {table.source_cluster_name!r} is already "
                f"configured at {other.path}"
            )
        else:
            message = (
                f"topic {table.source_topic!r} would become {role} {key[0]}.{key[1]}, which is already the "
                f"{other_role} of topic {other.source_topic!r} at {other.path} (characters outside "
                "[A-Za-z0-9_] become '_')"
            )
        found.append((("tables", index, "source_topic"), message))
    return found


def parse_config(data: Any) -> PipelineConfig:
    """Validate a parsed floe.yaml (or its JSON form); raises `InvalidConfig` with every problem."""
    check_document(data)  # bounded (depth, values) before anything below walks it recursively
    data = _unshared(data)
    context = ParseContext.of(data)
    try:
        return PipelineConfig.model_validate(data, context=context)
    except ValidationError as exc:
        errors = to_config_errors(exc, PipelineConfig)
    # Document order (pydantic reports in declaration order; the sort is stable).
    errors.sort(key=lambda e: context.position(e.path))
    raise InvalidConfig(errors or [ConfigError("", "the configuration is empty")])


def _unshared(value: Any) -> Any:
    """`value` with every mapping and list its own object: the parse context finds a block's YAML path
    by `id()`, and a YAML alias or a caller's reused dict would otherwise give two blocks one path
    (and its field names would count twice). `copy.deepcopy` keeps such sharing, so copy by hand."""
    if isinstance(value, dict):
        return {key: _unshared(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_unshared(item) for item in value]
    return value


def load_yaml(text: str, base: Path | None = None) -> PipelineConfig:
    """Parse and validate floe.yaml text; errors carry their line numbers. With `base` (floe.yaml's
    folder), the `.proto` files its protobuf blocks name as `schema_file` are read from there."""
    return validate_read(read_yaml(text), base)


def validate_read(
    read_yaml_result: tuple[Any, Marks, list[ConfigError]], base: Path | None = None
) -> PipelineConfig:
    """`load_yaml` of what `read_yaml` returned (the text is parsed once by callers that keep its data
    and lines); with `base`, the data's `schema_file`s are replaced by their text in place."""
    data, marks, duplicates = read_yaml_result
    read = inline_schema_files(data, base) if base is not None else []
    unread = [ConfigError(where, message) for where, message in read]
    try:
        config = parse_config(data)
        if unread:
            raise InvalidConfig([])
    except InvalidConfig as exc:
        # A file that could not be read: its error, not "schema_file is read by floe apply".
        errors = [*unread, *(e for e in exc.errors if e.path not in {u.path for u in unread})]
        located = [*duplicates, *(with_line(e, marks) for e in errors)]
        # Document order (Python's sort is stable: errors without a line keep their order, last).
        located.sort(key=lambda e: e.line if e.line is not None else 1 << 30)
        raise InvalidConfig(located) from None
    if duplicates:
        raise InvalidConfig(duplicates)
    return config


def field_paths(table: TableConfig) -> dict[int, str]:
    """Field id → the YAML path of the field (for errors about existing tables)."""
    return {f.id: f.path for f in table.walk_fields()}


__all__ = [
    "NESTED_TYPES",
    "PRIMITIVE_TYPES",
    "TYPE_NAMES",
    "AvroFraming",
    "Broker",
    "BucketDestination",
    "ConfigError",
    "Credentials",
    "FieldConfig",
    "GlueConfig",
    "InvalidConfig",
    "MaintenanceConfig",
    "PartitionFieldConfig",
    "PipelineConfig",
    "SchemaMode",
    "SchemaRegistryConfig",
    "SourceCluster",
    "SourceFormat",
    "TableConfig",
    "field_paths",
    "load_yaml",
    "parse_config",
    "primitive_type",
    "read_yaml",
    "resolve_column",
    "table_name_for_topic",
    "validate_read",
    "with_line",
]
