"""One floe.yaml table: a Kafka topic and the Iceberg table it becomes (`<cluster>.<topic, sanitized>`,
plus `<table>_dlq` for records that do not decode).

`table_mode: upsert` makes the table the topic's current state: `key_fields` (required primitive value
fields) are the key and the table's Iceberg identifier fields; without them the Kafka record key's bytes
are (the `_key` column); a record with a null value (tombstone) deletes its key. `envelope: debezium`
reads Debezium change events (JSON, or Avro through the registry) into such a table. `format_version`
(2, the default, or 3) is the Iceberg format the table is created with: on 3, merges write deletion
vectors instead of position delete files."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    Field,
    PrivateAttr,
    ValidationInfo,
    field_serializer,
    field_validator,
    model_validator,
)
from pyiceberg.types import DoubleType, FloatType

from catalog.pipelines.columns import CDC_COLUMN, DLQ_SUFFIX, KEY_COLUMN
from catalog.pipelines.maintenance import MaintenanceConfig
from catalog.pipelines.partitioning import PartitionFieldConfig, check_partitioning, partition_fields
from catalog.pipelines.protobuf import ProtobufConfig
from catalog.pipelines.schema_fields import FieldConfig, TableSchema
from catalog.pipelines.validation import (
    ConfigModel,
    HttpUrl,
    Loc,
    NonEmpty,
    Text,
    choice,
    choose,
    context_of,
    none_as_empty,
    problem,
    problems,
)

SourceFormat = Literal["json", "avro", "protobuf"]
SchemaMode = Literal["inline", "registry"]
# How Avro values are framed: `confluent` (magic byte + 4-byte schema id first; in inline mode the
# prefix is stripped and the id ignored, as WarpStream does) or `raw` (plain Avro binary).
AvroFraming = Literal["confluent", "raw"]
TableMode = Literal["append", "upsert"]
# The Iceberg format versions a floe.yaml table may have: 2 (default; every engine here reads its
# position deletes) or 3 (deletion vectors; Trino 476 cannot read a table holding them).
FormatVersion = Literal[2, 3]
FORMAT_VERSIONS = (2, 3)
DEFAULT_FORMAT_VERSION: FormatVersion = 2
Envelope = Literal["none", "debezium"]
# How `floe ingest` reads the table: `auto` (the shared consumer when it reads the table: inline-JSON
# append tables; else a Spark query of its own) or `spark` (always a Spark query of its own: a hot table
# whose records are better decoded and written by Spark's executors).
IngestPath = Literal["auto", "spark"]
INGEST_PATHS = ("auto", "spark")
TABLE_MODES = ("append", "upsert")
ENVELOPES = ("none", "debezium")
SOURCE_FORMATS = ("json", "avro", "protobuf")
SCHEMA_MODES = ("inline", "registry")
AVRO_FRAMINGS = ("confluent", "raw")
# Protobuf values: `confluent` (magic byte, schema id, message indexes; inline mode skips them) or `raw`.
ProtobufFraming = Literal["confluent", "raw"]
PROTOBUF_FRAMINGS = ("confluent", "raw")
TOPIC_NAME = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
MAX_COMMIT_INTERVAL_SECONDS = 86_400
# The shortest commit interval, in floe.yaml and on the command line alike (one rule).
MIN_COMMIT_INTERVAL_SECONDS = 0.1
_UNSAFE_TABLE_CHARS = re.compile(r"[^A-Za-z0-9_]")


def table_name_for_topic(topic: str) -> str:
    """The Iceberg table name of a topic: characters outside `[A-Za-z0-9_]` become `_`."""
    return _UNSAFE_TABLE_CHARS.sub("_", topic)


def _source_format(value: Any) -> str:
    return choose(value, SOURCE_FORMATS)


def _format_version(value: Any) -> int:
    # Strict like every number in floe.yaml: `"3"` is a string. bool is excluded (True == 1).
    if isinstance(value, bool) or not isinstance(value, int) or value not in FORMAT_VERSIONS:
        raise problem(f"expected 2 or 3 (the Iceberg format version); got {value!r}")
    return value


class TableConfig(ConfigModel):
    """One topic and the Iceberg table it becomes: `<cluster>.<topic, sanitized>` (plus `<table>_dlq`)."""

    source_cluster_name: Text
    source_topic: Text
    source_format: Annotated[SourceFormat, BeforeValidator(_source_format)]
    schema_mode: Annotated[SchemaMode, choice(SCHEMA_MODES)] = "inline"
    table_schema: TableSchema = Field(alias="schema")
    partitioning_scheme: str | tuple[str, ...] = "unpartitioned"
    schema_registry_url: HttpUrl | None = None
    commit_interval_seconds: (
        Annotated[float, Field(ge=MIN_COMMIT_INTERVAL_SECONDS, le=MAX_COMMIT_INTERVAL_SECONDS)] | None
    ) = None
    avro_framing: Annotated[AvroFraming, choice(AVRO_FRAMINGS)] = Field(
        default="confluent", exclude_if=lambda framing: framing == "confluent"
    )
    protobuf_framing: Annotated[ProtobufFraming, choice(PROTOBUF_FRAMINGS)] = Field(
        default="confluent", exclude_if=lambda framing: framing == "confluent"
    )
    # An inline-schema protobuf table's message type and `.proto` text.
    protobuf: ProtobufConfig | None = None
    maintenance: MaintenanceConfig | None = None
    # Defaults are left out of the normalized form, so tables configured before these keys existed keep
    # their stored form (and their ingestion fingerprint).
    table_mode: Annotated[TableMode, choice(TABLE_MODES)] = Field(
        default="append", exclude_if=lambda mode: mode == "append"
    )
    key_fields: Annotated[tuple[Text, ...], NonEmpty] | None = Field(default=None, strict=False)
    envelope: Annotated[Envelope, choice(ENVELOPES)] = Field(
        default="none", exclude_if=lambda envelope: envelope == "none"
    )
    format_version: Annotated[FormatVersion, BeforeValidator(_format_version)] = Field(
        default=DEFAULT_FORMAT_VERSION, exclude_if=lambda version: version == DEFAULT_FORMAT_VERSION
    )
    ingest_path: Annotated[IngestPath, choice(INGEST_PATHS)] = Field(
        default="auto", exclude_if=lambda path: path == "auto"
    )

    @field_serializer("commit_interval_seconds")
    def _whole_seconds_stay_integers(self, seconds: float | None) -> float | int | None:
        # Stored revisions (and what `floe apply` prints) keep `30`, not `30.0`.
        return int(seconds) if seconds is not None and seconds.is_integer() else seconds

    # The registry this table's records are decoded with: its own URL, else the top-level one.
    _registry_url: str | None = PrivateAttr(default=None)

    @property
    def fields(self) -> tuple[FieldConfig, ...]:
        return self.table_schema.fields

    @property
    def partitioning(self) -> tuple[PartitionFieldConfig, ...]:
        return partition_fields(self.partitioning_scheme)

    @property
    def registry_url(self) -> str | None:
        return self._registry_url

    @property
    def namespace(self) -> str:
        return self.source_cluster_name

    @property
    def table_name(self) -> str:
        return table_name_for_topic(self.source_topic)

    @property
    def dlq_table_name(self) -> str:
        return self.table_name + DLQ_SUFFIX

    @property
    def is_upsert(self) -> bool:
        return self.table_mode == "upsert"

    @property
    def keyed_by_record_key(self) -> bool:
        """An upsert table without key_fields: keyed by the Kafka record key's bytes (`_key`)."""
        return self.table_mode == "upsert" and not self.key_fields

    @property
    def key_field_configs(self) -> tuple[FieldConfig, ...]:
        """The (validated) key fields, in key_fields order; empty for append tables."""
        by_name = {f.name: f for f in self.fields}
        return tuple(by_name[name] for name in self.key_fields or ())

    def walk_fields(self) -> Iterator[FieldConfig]:
        for f in self.fields:
            yield from f.walk()

    @field_validator("source_cluster_name")
    @classmethod
    def _known_cluster(cls, name: str, info: ValidationInfo) -> str:
        context = context_of(info)
        if context is not None and name not in context.clusters:
            known = ", ".join(sorted(context.clusters)) or "none are defined"
            raise problem(f"unknown source cluster {name!r} (source_clusters: {known})")
        return name

    @field_validator("source_topic")
    @classmethod
    def _topic_name(cls, topic: str) -> str:
        if not TOPIC_NAME.match(topic) or topic in (".", ".."):
            raise problem(
                f"invalid Kafka topic name {topic!r}: letters, digits, '.', '_' and '-' (at most 249)"
            )
        return topic

    @field_validator("partitioning_scheme", mode="before")
    @classmethod
    def _partitioning(cls, value: Any, info: ValidationInfo) -> Any:
        schema = info.data.get("table_schema")
        if isinstance(schema, TableSchema):
            return check_partitioning(value, schema.fields)
        # An invalid schema: check against the top-level fields that did parse.
        context = context_of(info)
        parsed: list[FieldConfig] = []
        if context is not None:
            base = f"{context.path}.schema.fields"
            index = 0
            while f"{base}[{index}]" in context.order:
                found = context.parsed.get(f"{base}[{index}]")
                if isinstance(found, FieldConfig):
                    parsed.append(found)
                index += 1
        return check_partitioning(value, tuple(parsed), complete=False)

    @field_validator("maintenance", mode="before")
    @classmethod
    def _empty_maintenance(cls, value: Any) -> Any:
        return none_as_empty(value)

    @model_validator(mode="after")
    def _source_rules(self, info: ValidationInfo) -> TableConfig:
        """Registry mode needs a registry (and the Confluent framing); Avro framing needs Avro."""
        context = context_of(info)
        found: list[tuple[Loc, str]] = []
        given = self.model_fields_set
        top_level = context.registry_url if context is not None else None
        registry_url = self.schema_registry_url or top_level
        if self.schema_mode == "registry" and registry_url is None:
            found.append(
                (
                    ("schema_mode",),
                    "schema_mode registry needs a schema registry: set schema_registry.url at the top level "
                    "or schema_registry_url on the table",
                )
            )
        if self.schema_mode == "inline" and "schema_registry_url" in given:
            found.append(
                (("schema_registry_url",), "schema_registry_url is only used with schema_mode: registry")
            )
        if "avro_framing" in given and self.source_format != "avro":
            found.append((("avro_framing",), "avro_framing is only used with source_format: avro"))
        if self.avro_framing == "raw" and self.schema_mode == "registry":
            found.append(
                (("avro_framing",), "schema_mode registry needs the Confluent framing (the schema id)")
            )
        found += self._protobuf_rules(given)
        if found:
            raise problems(found)
        self._registry_url = registry_url if self.schema_mode == "registry" else None
        return self

    def _protobuf_rules(self, given: set[str]) -> list[tuple[Loc, str]]:
        found: list[tuple[Loc, str]] = []
        if self.source_format != "protobuf":
            for key in ("protobuf", "protobuf_framing"):
                if key in given:
                    found.append(((key,), f"{key} is only used with source_format: protobuf"))
            return found
        if self.schema_mode == "registry":
            if "protobuf" in given:
                found.append(
                    (
                        ("protobuf",),
                        "schema_mode registry takes each record's message type from the registry: "
                        "remove the protobuf block",
                    )
                )
            if self.protobuf_framing == "raw":
                found.append(
                    (
                        ("protobuf_framing",),
                        "schema_mode registry needs the Confluent framing (the schema id)",
                    )
                )
        elif "protobuf" not in given:
            found.append(
                (
                    ("protobuf",),
                    "source_format protobuf with schema_mode inline needs a protobuf block: "
                    "message (the type's full name) and schema (the .proto text)",
                )
            )
        return found

    @model_validator(mode="after")
    def _upsert_rules(self) -> TableConfig:
        """Upsert tables have a key of required primitive top-level fields; Debezium needs upsert."""
        found: list[tuple[Loc, str]] = []
        given = self.model_fields_set
        if self.keyed_by_record_key:
            for index, f in enumerate(self.fields):
                if f.name == KEY_COLUMN:
                    found.append(
                        (
                            ("schema", "fields", index, "name"),
                            f"{KEY_COLUMN} is reserved: an upsert table without key_fields is keyed by the "
                            f"Kafka record key, which floe adds as {KEY_COLUMN}",
                        )
                    )
        declared = {f.name for f in self.fields}
        # A list scheme here is valid item by item, so `partitioning` holds one transform per item.
        for index, partition in enumerate(self.partitioning):
            if partition.source == KEY_COLUMN and KEY_COLUMN not in declared and not self.keyed_by_record_key:
                found.append(
                    (
                        ("partitioning_scheme", index),
                        f"{KEY_COLUMN} is the record key column of upsert tables without key_fields; "
                        + (
                            f"this table is keyed by {', '.join(self.key_fields or ())}: partition by them"
                            if self.key_fields
                            else "this table has no such column"
                        ),
                    )
                )
        if self.table_mode != "upsert" and "key_fields" in given:
            found.append((("key_fields",), "key_fields is only used with table_mode: upsert"))
        if self.envelope == "debezium":
            if self.table_mode != "upsert":
                found.append(
                    (
                        ("envelope",),
                        "envelope debezium needs table_mode: upsert (the table holds the source "
                        "table's current rows)",
                    )
                )
            if self.table_mode == "upsert" and self.key_fields is None:
                found.append(
                    (
                        ("envelope",),
                        "envelope debezium needs key_fields: the source table's primary key columns, "
                        "e.g. key_fields: [id] (read from each event's after or before, and from the "
                        "record key of a tombstone). The record key's bytes are not a stable key here: "
                        "Debezium's JSON key carries its schema and an Avro key its schema id, so a "
                        "converter or key schema change would give every row a second key",
                    )
                )
            if self.source_format == "protobuf" or (
                self.source_format == "avro" and self.schema_mode != "registry"
            ):
                found.append(
                    (
                        ("envelope",),
                        "envelope debezium reads JSON change events (source_format: json) or Avro ones "
                        "through a schema registry (source_format: avro, schema_mode: registry)",
                    )
                )
            for index, f in enumerate(self.fields):
                if f.name == CDC_COLUMN:
                    found.append(
                        (
                            ("schema", "fields", index, "name"),
                            f"{CDC_COLUMN} is reserved: floe adds it with the change event's metadata",
                        )
                    )
        by_name = {f.name: f for f in self.fields}
        seen: set[str] = set()
        for index, name in enumerate(self.key_fields or ()):
            where: Loc = ("key_fields", index)
            column = by_name.get(name)
            if name in seen:
                found.append((where, f"key field {name!r} is listed twice"))
            elif column is None:
                known = ", ".join(by_name)
                nested = " (key fields are top-level fields)" if "." in name else ""
                found.append((where, f"unknown field {name!r}{nested}; the schema's fields: {known}"))
            elif column.optional:
                found.append(
                    (where, f"key field {name!r} must be required: remove optional: true from {column.path}")
                )
            elif column.type in ("struct", "list", "map"):
                found.append((where, f"key field {name!r} must be a primitive type; it is a {column.type}"))
            elif isinstance(column.iceberg_type(), FloatType | DoubleType):
                found.append(
                    (
                        where,
                        f"key field {name!r} cannot be a {column.type} (Iceberg identifier fields exclude "
                        "float and double: equality on them is unreliable)",
                    )
                )
            seen.add(name)
        if found:
            raise problems(found)
        return self


__all__ = [
    "AVRO_FRAMINGS",
    "DEFAULT_FORMAT_VERSION",
    "ENVELOPES",
    "FORMAT_VERSIONS",
    "MAX_COMMIT_INTERVAL_SECONDS",
    "PROTOBUF_FRAMINGS",
    "SCHEMA_MODES",
    "SOURCE_FORMATS",
    "TABLE_MODES",
    "AvroFraming",
    "Envelope",
    "FormatVersion",
    "ProtobufFraming",
    "SchemaMode",
    "SourceFormat",
    "TableConfig",
    "TableMode",
    "table_name_for_topic",
]
