"""floe.yaml: the declarative pipeline configuration, parsed and validated (pure, no I/O).

The format is WarpStream Tableflow's (`source_clusters`, `tables`, `destination_bucket_url`) with a few
floe extensions (`warehouse`, `schema_registry`, `glue`, per-table `schema_registry_url`,
`commit_interval_seconds`, partition transforms). `load_yaml(text)` and `parse_config(data)` return a
`PipelineConfig` or raise `InvalidConfig` listing EVERY problem, each a `ConfigError` with the YAML path
of the offending value (`tables[1].schema.fields[3].id`) and, when parsed from YAML text, its line.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast
from urllib.parse import parse_qsl, urlsplit

from pyiceberg.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    Transform,
    TruncateTransform,
    YearTransform,
)
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    PrimitiveType,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

from catalog.pipelines.columns import (
    DLQ_SUFFIX,
    KAFKA_COLUMN,
    KAFKA_STRUCT,
    KAFKA_TIMESTAMP_PATH,
    MAX_USER_FIELD_ID,
)
from catalog.pipelines.maintenance import MaintenanceConfig, parse_maintenance
from catalog.pipelines.yaml_values import describe_value

SourceFormat = Literal["json", "avro"]
SchemaMode = Literal["inline", "registry"]
AvroFraming = Literal["confluent", "raw"]

# -- errors ----------------------------------------------------------------------------------------


class ConfigError(Exception):
    """One problem in the configuration: the YAML path of the offending value and what is wrong."""

    def __init__(self, path: str, message: str, line: int | None = None, column: int | None = None) -> None:
        super().__init__(path, message)
        self.path = path
        self.message = message
        self.line = line
        self.column = column

    def __str__(self) -> str:
        where = self.path or "(top level)"
        if self.line is not None:
            where += f" (line {self.line})"
        return f"{where}: {self.message}"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ConfigError) and (self.path, self.message, self.line) == (
            other.path,
            other.message,
            other.line,
        )

    def __hash__(self) -> int:
        return hash((self.path, self.message, self.line))

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"path": self.path, "message": self.message}
        if self.line is not None:
            body["line"] = self.line
        return body


class InvalidConfig(ValueError):
    """The configuration cannot be applied: every problem found, in document order."""

    def __init__(self, errors: Sequence[ConfigError]) -> None:
        self.errors = tuple(errors)
        super().__init__(self.summary())

    def summary(self) -> str:
        count = len(self.errors)
        lines = [f"Invalid pipeline configuration ({count} error{'s' if count != 1 else ''}):"]
        lines += [f"  {error}" for error in self.errors]
        return "\n".join(lines)


# -- the model -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Broker:
    hostname: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.hostname}]" if ":" in self.hostname else self.hostname
        return f"{host}:{self.port}"


SASL_MECHANISMS = ("plain", "scram-256", "scram-512")
# The Kafka clients' names of the same mechanisms.
SASL_ALIASES = {"scram-sha-256": "scram-256", "scram-sha-512": "scram-512"}


@dataclass(frozen=True)
class Credentials:
    """How to connect to a source cluster. The `*_env` fields name environment variables (resolved by
    `catalog.pipelines.credentials.resolve_credentials`): secrets are never part of the configuration."""

    use_tls: bool = False
    tls_insecure_skip_verify: bool = False
    sasl_username_env: str | None = None
    sasl_password_env: str | None = None
    sasl_mechanism: str | None = None
    mtls_client_cert_env: str | None = None
    mtls_client_key_env: str | None = None
    mtls_server_ca_cert_env: str | None = None

    @property
    def uses_sasl(self) -> bool:
        return self.sasl_username_env is not None

    @property
    def uses_mtls(self) -> bool:
        return self.mtls_client_cert_env is not None


@dataclass(frozen=True)
class SourceCluster:
    name: str
    bootstrap_brokers: tuple[Broker, ...]
    credentials: Credentials = Credentials()
    path: str = field(default="", compare=False)

    @property
    def bootstrap_servers(self) -> str:
        """`host:port,host:port`: the Kafka clients' `bootstrap.servers`."""
        return ",".join(str(b) for b in self.bootstrap_brokers)


PRIMITIVE_TYPES: dict[str, PrimitiveType] = {
    "boolean": BooleanType(),
    "int": IntegerType(),
    "long": LongType(),
    "float": FloatType(),
    "double": DoubleType(),
    "date": DateType(),
    "time": TimeType(),
    "timestamp": TimestampType(),
    "timestamptz": TimestamptzType(),
    "string": StringType(),
    "uuid": UUIDType(),
    "binary": BinaryType(),
}
NESTED_TYPES = ("struct", "list", "map")
_DECIMAL = re.compile(r"^decimal\s*\(\s*(\d+)\s*,\s*(\d+)\s*\)$")
_FIXED = re.compile(r"^fixed\s*\[\s*(\d+)\s*\]$")
TYPE_NAMES = (*PRIMITIVE_TYPES, "decimal(P,S)", "fixed[N]", *NESTED_TYPES)


def primitive_type(name: str) -> PrimitiveType | None:
    """The Iceberg type a primitive type name stands for (`decimal(10, 2)`, `fixed[16]`, `long` …)."""
    if name in PRIMITIVE_TYPES:
        return PRIMITIVE_TYPES[name]
    if match := _DECIMAL.match(name):
        return DecimalType(int(match.group(1)), int(match.group(2)))
    if match := _FIXED.match(name):
        return FixedType(int(match.group(1)))
    return None


@dataclass(frozen=True)
class FieldConfig:
    """One field of an inline schema; `type` is canonical (`decimal(10, 2)`, `fixed[16]`, `struct` …).

    A struct lists its fields, a list its `element`, a map its `key` and `value` (in that order)."""

    id: int
    name: str
    type: str
    optional: bool = False
    doc: str | None = None
    fields: tuple[FieldConfig, ...] = ()
    path: str = field(default="", compare=False)

    @property
    def required(self) -> bool:
        return not self.optional

    def iceberg_type(self) -> IcebergType:
        """This field's type as a pyiceberg type, nested types included."""
        if self.type == "struct":
            return StructType(*(f.nested_field() for f in self.fields))
        if self.type == "list":
            (element,) = self.fields
            return ListType(element.id, element.iceberg_type(), element_required=element.required)
        if self.type == "map":
            key, value = self.fields
            return MapType(
                key.id, key.iceberg_type(), value.id, value.iceberg_type(), value_required=value.required
            )
        found = primitive_type(self.type)
        assert found is not None, self.type
        return found

    def nested_field(self) -> NestedField:
        return NestedField(self.id, self.name, self.iceberg_type(), required=self.required, doc=self.doc)

    def walk(self) -> Iterator[FieldConfig]:
        """This field and every field below it."""
        yield self
        for child in self.fields:
            yield from child.walk()

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "name": self.name,
            "id": self.id,
            "type": self.type,
            "optional": self.optional,
        }
        if self.doc is not None:
            body["doc"] = self.doc
        if self.fields:
            body["fields"] = [f.to_json() for f in self.fields]
        return body


TRANSFORMS = ("identity", "year", "month", "day", "hour", "bucket", "truncate")
SCHEMES = ("unpartitioned", "hour", "day")


@dataclass(frozen=True)
class PartitionFieldConfig:
    """One partition transform: `hour(event_time)`, `bucket(16, user_id)`, `identity(service)` …"""

    transform: str
    source: str
    argument: int | None = None

    def __str__(self) -> str:
        if self.argument is not None:
            return f"{self.transform}({self.argument}, {self.source})"
        return f"{self.transform}({self.source})"

    def iceberg_transform(self) -> Transform[Any, Any]:
        if self.transform == "bucket":
            assert self.argument is not None
            return BucketTransform(self.argument)
        if self.transform == "truncate":
            assert self.argument is not None
            return TruncateTransform(self.argument)
        return _SIMPLE_TRANSFORMS[self.transform]

    @property
    def name(self) -> str:
        """The partition field's name, as Java's PartitionSpec.Builder names it (dots become `_`)."""
        base = self.source.replace(".", "_")
        suffix = {"identity": "", "bucket": "_bucket", "truncate": "_trunc"}.get(
            self.transform, f"_{self.transform}"
        )
        return base + suffix


_SIMPLE_TRANSFORMS: dict[str, Transform[Any, Any]] = {
    "identity": IdentityTransform(),
    "year": YearTransform(),
    "month": MonthTransform(),
    "day": DayTransform(),
    "hour": HourTransform(),
}
_TIME_TRANSFORMS = frozenset({"year", "month", "day", "hour"})
_TRANSFORM_TYPES = {
    "identity": "a primitive column",
    "year": "a date, timestamp or timestamptz column",
    "month": "a date, timestamp or timestamptz column",
    "day": "a date, timestamp or timestamptz column",
    "hour": "a timestamp or timestamptz column",
    "bucket": (
        "an int, long, decimal, date, time, timestamp, timestamptz, string, uuid, fixed or binary column"
    ),
    "truncate": "an int, long, decimal, string or binary column",
}


_UNSAFE_TABLE_CHARS = re.compile(r"[^A-Za-z0-9_]")


def table_name_for_topic(topic: str) -> str:
    """The Iceberg table name of a topic: characters outside `[A-Za-z0-9_]` become `_`."""
    return _UNSAFE_TABLE_CHARS.sub("_", topic)


@dataclass(frozen=True)
class TableConfig:
    """One topic and the Iceberg table it becomes: `<cluster>.<topic, sanitized>` (plus `<table>_dlq`)."""

    source_cluster_name: str
    source_topic: str
    source_format: SourceFormat
    schema_mode: SchemaMode
    fields: tuple[FieldConfig, ...]
    partitioning_scheme: str | tuple[str, ...] = "unpartitioned"
    partitioning: tuple[PartitionFieldConfig, ...] = ()
    schema_registry_url: str | None = None
    commit_interval_seconds: int | None = None
    avro_framing: AvroFraming = "confluent"
    # The registry this table's records are decoded with: its own URL, else the top-level one.
    registry_url: str | None = None
    path: str = field(default="", compare=False)
    maintenance: MaintenanceConfig | None = None

    @property
    def namespace(self) -> str:
        return self.source_cluster_name

    @property
    def table_name(self) -> str:
        return table_name_for_topic(self.source_topic)

    @property
    def dlq_table_name(self) -> str:
        return self.table_name + DLQ_SUFFIX

    def walk_fields(self) -> Iterator[FieldConfig]:
        for f in self.fields:
            yield from f.walk()

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "source_cluster_name": self.source_cluster_name,
            "source_topic": self.source_topic,
            "source_format": self.source_format,
            "schema_mode": self.schema_mode,
            "schema": {"fields": [f.to_json() for f in self.fields]},
            "partitioning_scheme": (
                self.partitioning_scheme
                if isinstance(self.partitioning_scheme, str)
                else list(self.partitioning_scheme)
            ),
        }
        if self.schema_registry_url is not None:
            body["schema_registry_url"] = self.schema_registry_url
        if self.commit_interval_seconds is not None:
            body["commit_interval_seconds"] = self.commit_interval_seconds
        if self.source_format == "avro" and self.avro_framing != "confluent":
            body["avro_framing"] = self.avro_framing
        if self.maintenance is not None:
            body["maintenance"] = self.maintenance.to_json()
        return body


@dataclass(frozen=True)
class SchemaRegistryConfig:
    """A Confluent-compatible schema registry (records carry the 5-byte wire-format prefix)."""

    url: str
    basic_auth_username_env: str | None = None
    basic_auth_password_env: str | None = None

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"url": self.url}
        if self.basic_auth_username_env is not None:
            body["basic_auth_username_env"] = self.basic_auth_username_env
            body["basic_auth_password_env"] = self.basic_auth_password_env
        return body


@dataclass(frozen=True)
class GlueConfig:
    """Where the Glue publisher mirrors the tables (stored now, used by the publisher)."""

    region: str | None = None
    catalog_id: str | None = None
    endpoint: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            key: value
            for key, value in (
                ("region", self.region),
                ("catalog_id", self.catalog_id),
                ("endpoint", self.endpoint),
            )
            if value is not None
        }


# Tables go below this folder of the bucket (and prefix), as WarpStream's go below `warpstream/_tableflow`.
BUCKET_FOLDER = "floe"
_BUCKET_PARAMETERS = ("region", "prefix", "endpoint", "s3ForcePathStyle", "use_path_style", "awssdk")
_WAREHOUSE_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.\-]+")


@dataclass(frozen=True)
class BucketDestination:
    """`destination_bucket_url` parsed: `s3://bucket?region=..&prefix=..` (or `file:///path` locally).

    floe keeps the tables in a warehouse of its own at `<bucket>/<prefix>/floe`, named after the bucket
    and prefix."""

    url: str
    scheme: Literal["s3", "file"]
    bucket: str
    region: str | None = None
    prefix: str | None = None
    endpoint: str | None = None
    path_style: bool = False

    @property
    def location(self) -> str:
        parts = [self.bucket.rstrip("/")]
        if self.prefix:
            parts.append(self.prefix)
        parts.append(BUCKET_FOLDER)
        root = "/".join(parts)
        return f"s3://{root}" if self.scheme == "s3" else f"file://{root}"

    @property
    def warehouse_name(self) -> str:
        base = self.bucket if self.scheme == "s3" else "file-" + self.bucket.strip("/")
        if self.prefix:
            base += "-" + self.prefix
        return _WAREHOUSE_NAME_CHARS.sub("-", base).strip("-.")[:200] or "bucket"

    def storage_properties(self) -> dict[str, str]:
        """The warehouse's storage settings this URL asks for."""
        props: dict[str, str] = {}
        if self.region:
            props["s3.region"] = self.region
        if self.endpoint:
            props["s3.endpoint"] = self.endpoint
        if self.path_style:
            props["s3.path-style-access"] = "true"
        return props


@dataclass(frozen=True)
class PipelineConfig:
    """A whole floe.yaml: the desired state `floe apply` stores."""

    source_clusters: tuple[SourceCluster, ...] = ()
    tables: tuple[TableConfig, ...] = ()
    destination_bucket_url: str | None = None
    destination: BucketDestination | None = None
    warehouse: str | None = None
    schema_registry: SchemaRegistryConfig | None = None
    glue: GlueConfig | None = None
    maintenance: MaintenanceConfig | None = None

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
        """Only what concerns one source cluster (what a cluster-scoped key may see)."""
        return PipelineConfig(
            source_clusters=tuple(c for c in self.source_clusters if c.name == name),
            tables=tuple(t for t in self.tables if t.source_cluster_name == name),
            destination_bucket_url=self.destination_bucket_url,
            destination=self.destination,
            warehouse=self.warehouse,
            schema_registry=self.schema_registry,
            glue=self.glue,
            maintenance=self.maintenance,
        )

    def to_json(self) -> dict[str, Any]:
        """The normalized configuration (defaults made explicit); `parse_config` reads it back equal."""
        body: dict[str, Any] = {
            "source_clusters": [_cluster_json(c) for c in self.source_clusters],
            "tables": [t.to_json() for t in self.tables],
        }
        if self.destination_bucket_url is not None:
            body["destination_bucket_url"] = self.destination_bucket_url
        if self.warehouse is not None:
            body["warehouse"] = self.warehouse
        if self.schema_registry is not None:
            body["schema_registry"] = self.schema_registry.to_json()
        if self.glue is not None:
            body["glue"] = self.glue.to_json()
        if self.maintenance is not None:
            body["maintenance"] = self.maintenance.to_json()
        return body


def _cluster_json(cluster: SourceCluster) -> dict[str, Any]:
    creds = cluster.credentials
    credentials: dict[str, Any] = {
        "use_tls": creds.use_tls,
        "tls_insecure_skip_verify": creds.tls_insecure_skip_verify,
    }
    for key in (
        "sasl_username_env",
        "sasl_password_env",
        "sasl_mechanism",
        "mtls_client_cert_env",
        "mtls_client_key_env",
        "mtls_server_ca_cert_env",
    ):
        value = getattr(creds, key)
        if value is not None:
            credentials[key] = value
    return {
        "name": cluster.name,
        "bootstrap_brokers": [{"hostname": b.hostname, "port": b.port} for b in cluster.bootstrap_brokers],
        "credentials": credentials,
    }


# -- reading values --------------------------------------------------------------------------------


def _key_path(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


_MISSING = object()
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class _Reader:
    """Reads the untyped YAML/JSON value, collecting every problem instead of stopping at the first."""

    def __init__(self) -> None:
        self.errors: list[ConfigError] = []

    def error(self, path: str, message: str) -> None:
        self.errors.append(ConfigError(path, message))

    def mapping(
        self, value: Any, path: str, allowed: Sequence[str], required: Sequence[str] = ()
    ) -> dict[str, Any] | None:
        """`value` as a mapping with only `allowed` keys (others are errors) and every `required` one."""
        if not isinstance(value, dict):
            self.error(
                path, f"expected a mapping with keys {', '.join(allowed)}; got {describe_value(value)}"
            )
            return None
        for key in value:
            if not isinstance(key, str) or key not in allowed:
                hint = difflib.get_close_matches(str(key), allowed, n=1)
                suggestion = f"; did you mean {hint[0]!r}?" if hint else f" (expected: {', '.join(allowed)})"
                self.error(_key_path(path, str(key)), f"unknown key {str(key)!r}{suggestion}")
        for key in required:
            if key not in value:
                self.error(_key_path(path, key), f"{key} is required")
        return {k: v for k, v in value.items() if isinstance(k, str) and k in allowed}

    def string(self, values: dict[str, Any], key: str, path: str, *, allow_empty: bool = False) -> str | None:
        value = values.get(key, _MISSING)
        if value is _MISSING:
            return None
        where = _key_path(path, key)
        if not isinstance(value, str):
            hint = (
                " (quote it: YAML read it as another type)" if isinstance(value, bool | int | float) else ""
            )
            self.error(where, f"expected a string; got {describe_value(value)}{hint}")
            return None
        if not allow_empty and not value.strip():
            self.error(where, "must not be empty")
            return None
        return value

    def choice(
        self,
        values: dict[str, Any],
        key: str,
        path: str,
        choices: Sequence[str],
        aliases: Mapping[str, str] | None = None,
    ) -> str | None:
        """One of `choices` (any letter case; `aliases` name some differently)."""
        value = self.string(values, key, path)
        if value is None:
            return None
        value = value.strip().lower()
        value = (aliases or {}).get(value, value)
        if value not in choices:
            self.error(_key_path(path, key), f"expected one of {', '.join(choices)}; got {value!r}")
            return None
        return value

    def integer(
        self, values: dict[str, Any], key: str, path: str, *, minimum: int, maximum: int
    ) -> int | None:
        value = values.get(key, _MISSING)
        if value is _MISSING:
            return None
        where = _key_path(path, key)
        if not isinstance(value, int) or isinstance(value, bool):
            self.error(where, f"expected an integer; got {describe_value(value)}")
            return None
        if not minimum <= value <= maximum:
            self.error(where, f"must be between {minimum} and {maximum}; got {value}")
            return None
        return value

    def boolean(self, values: dict[str, Any], key: str, path: str, default: bool = False) -> bool:
        value = values.get(key, _MISSING)
        if value is _MISSING:
            return default
        if not isinstance(value, bool):
            self.error(_key_path(path, key), f"expected true or false; got {describe_value(value)}")
            return default
        return value

    def sequence(self, values: dict[str, Any], key: str, path: str, *, non_empty: bool = False) -> list[Any]:
        value = values.get(key, _MISSING)
        if value is _MISSING:
            return []
        where = _key_path(path, key)
        if not isinstance(value, list):
            self.error(where, f"expected a list; got {describe_value(value)}")
            return []
        if non_empty and not value:
            self.error(where, "must not be empty")
        return value

    def env_name(self, values: dict[str, Any], key: str, path: str) -> str | None:
        value = self.string(values, key, path)
        if value is not None and not _ENV_NAME.match(value):
            self.error(
                _key_path(path, key),
                f"{value!r} is not an environment variable name (letters, digits and '_'): "
                "name the variable that holds the value, never the value itself",
            )
            return None
        return value

    def url(self, values: dict[str, Any], key: str, path: str) -> str | None:
        value = self.string(values, key, path)
        if value is None:
            return None
        parsed = urlsplit(value)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            self.error(_key_path(path, key), f"expected an http:// or https:// URL; got {value!r}")
            return None
        return value.rstrip("/")


# -- parsing ---------------------------------------------------------------------------------------

TOP_LEVEL_KEYS = (
    "source_clusters",
    "tables",
    "destination_bucket_url",
    "warehouse",
    "schema_registry",
    "glue",
    "maintenance",
)
CLUSTER_KEYS = ("name", "bootstrap_brokers", "credentials")
BROKER_KEYS = ("hostname", "port")
CREDENTIAL_KEYS = (
    "use_tls",
    "tls_insecure_skip_verify",
    "sasl_username_env",
    "sasl_password_env",
    "sasl_mechanism",
    "mtls_client_cert_env",
    "mtls_client_key_env",
    "mtls_server_ca_cert_env",
)
TABLE_KEYS = (
    "source_cluster_name",
    "source_topic",
    "source_format",
    "schema_mode",
    "schema",
    "partitioning_scheme",
    "schema_registry_url",
    "commit_interval_seconds",
    "avro_framing",
    "maintenance",
)
FIELD_KEYS = ("name", "id", "type", "optional", "doc", "fields")
REGISTRY_KEYS = ("url", "basic_auth_username_env", "basic_auth_password_env")
GLUE_KEYS = ("region", "catalog_id", "endpoint")
SOURCE_FORMATS = ("json", "avro", "protobuf")
SCHEMA_MODES = ("inline", "registry")
# How Avro values are framed: `confluent` (magic byte + 4-byte schema id first; in inline mode the
# prefix is stripped and the id ignored, as WarpStream does) or `raw` (plain Avro binary).
AVRO_FRAMINGS = ("confluent", "raw")
CLUSTER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
TOPIC_NAME = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
_TRANSFORM = re.compile(r"^\s*([A-Za-z_]+)\s*\(\s*(?:(-?\d+)\s*,\s*)?([^(),]+?)\s*\)\s*$")
MAX_COMMIT_INTERVAL_SECONDS = 86_400


def parse_config(data: Any) -> PipelineConfig:
    """Validate a parsed floe.yaml (or its JSON form); raises `InvalidConfig` with every problem."""
    reader = _Reader()
    config = _parse(reader, data)
    if reader.errors or config is None:
        raise InvalidConfig(reader.errors or [ConfigError("", "the configuration is empty")])
    return config


def _parse(reader: _Reader, data: Any) -> PipelineConfig | None:
    if data is None:
        reader.error("", "the configuration is empty: expected source_clusters and tables")
        return None
    top = reader.mapping(data, "", TOP_LEVEL_KEYS)
    if top is None:
        return None
    clusters = _clusters(reader, top)
    registry = _registry(reader, top)
    destination_url = reader.string(top, "destination_bucket_url", "")
    destination = _destination(reader, destination_url) if destination_url is not None else None
    warehouse = reader.string(top, "warehouse", "")
    if destination_url is not None and warehouse is not None:
        reader.error(
            "warehouse",
            "set either destination_bucket_url (floe keeps a warehouse in that bucket) or warehouse "
            "(an existing floe warehouse), not both",
        )
    glue = _glue(reader, top)
    cluster_names = {c.name for c in clusters}
    tables = [
        table
        for index, raw in enumerate(reader.sequence(top, "tables", ""))
        if (table := _table(reader, raw, f"tables[{index}]", cluster_names, registry)) is not None
    ]
    _check_table_names(reader, tables)
    return PipelineConfig(
        source_clusters=tuple(clusters),
        tables=tuple(tables),
        destination_bucket_url=destination_url,
        destination=destination,
        warehouse=warehouse,
        schema_registry=registry,
        glue=glue,
        maintenance=_maintenance(reader, top, ""),
    )


def _maintenance(reader: _Reader, values: dict[str, Any], path: str) -> MaintenanceConfig | None:
    """A `maintenance:` block (see `catalog.pipelines.maintenance`), None when absent or invalid."""
    if "maintenance" not in values:
        return None
    block, problems = parse_maintenance(values["maintenance"], _key_path(path, "maintenance"))
    for where, message in problems:
        reader.error(where, message)
    return block


def _clusters(reader: _Reader, top: dict[str, Any]) -> list[SourceCluster]:
    clusters: list[SourceCluster] = []
    seen: dict[str, str] = {}
    for index, raw in enumerate(reader.sequence(top, "source_clusters", "")):
        path = f"source_clusters[{index}]"
        values = reader.mapping(raw, path, CLUSTER_KEYS, required=("name", "bootstrap_brokers"))
        if values is None:
            continue
        name = reader.string(values, "name", path)
        if name is not None and not CLUSTER_NAME.match(name):
            reader.error(
                f"{path}.name",
                f"invalid cluster name {name!r}: use letters, digits, '_' and '-' (at most 128)",
            )
            name = None
        if name is not None and name in seen:
            reader.error(f"{path}.name", f"duplicate source cluster {name!r} (also at {seen[name]})")
            name = None
        brokers = _brokers(reader, values, path)
        credentials = _credentials(reader, values, path)
        if name is None:
            continue
        seen[name] = path
        clusters.append(SourceCluster(name, tuple(brokers), credentials, path))
    return clusters


def _brokers(reader: _Reader, values: dict[str, Any], path: str) -> list[Broker]:
    brokers: list[Broker] = []
    for index, raw in enumerate(reader.sequence(values, "bootstrap_brokers", path, non_empty=True)):
        where = f"{path}.bootstrap_brokers[{index}]"
        broker = reader.mapping(raw, where, BROKER_KEYS, required=BROKER_KEYS)
        if broker is None:
            continue
        hostname = reader.string(broker, "hostname", where)
        port = reader.integer(broker, "port", where, minimum=1, maximum=65535)
        if hostname is not None and port is not None:
            brokers.append(Broker(hostname.strip(), port))
    return brokers


def _credentials(reader: _Reader, values: dict[str, Any], path: str) -> Credentials:
    if "credentials" not in values or values["credentials"] is None:
        return Credentials()
    where = f"{path}.credentials"
    raw = reader.mapping(values["credentials"], where, CREDENTIAL_KEYS)
    if raw is None:
        return Credentials()
    use_tls = reader.boolean(raw, "use_tls", where)
    skip_verify = reader.boolean(raw, "tls_insecure_skip_verify", where)
    username = reader.env_name(raw, "sasl_username_env", where)
    password = reader.env_name(raw, "sasl_password_env", where)
    mechanism = reader.choice(raw, "sasl_mechanism", where, SASL_MECHANISMS, SASL_ALIASES)
    cert = reader.env_name(raw, "mtls_client_cert_env", where)
    key = reader.env_name(raw, "mtls_client_key_env", where)
    ca = reader.env_name(raw, "mtls_server_ca_cert_env", where)
    if ("sasl_username_env" in raw) != ("sasl_password_env" in raw):
        missing = "sasl_password_env" if "sasl_username_env" in raw else "sasl_username_env"
        reader.error(f"{where}.{missing}", "SASL needs both sasl_username_env and sasl_password_env")
    if "sasl_mechanism" in raw and "sasl_username_env" not in raw:
        reader.error(
            f"{where}.sasl_mechanism", "sasl_mechanism needs sasl_username_env and sasl_password_env"
        )
    if ("mtls_client_cert_env" in raw) != ("mtls_client_key_env" in raw):
        missing = "mtls_client_key_env" if "mtls_client_cert_env" in raw else "mtls_client_cert_env"
        reader.error(f"{where}.{missing}", "mTLS needs both mtls_client_cert_env and mtls_client_key_env")
    if not use_tls:
        for tls_key in ("mtls_client_cert_env", "mtls_client_key_env", "mtls_server_ca_cert_env"):
            if tls_key in raw:
                reader.error(f"{where}.{tls_key}", f"{tls_key} needs use_tls: true")
    if username is not None and mechanism is None:
        mechanism = "plain"  # WarpStream's default
    return Credentials(
        use_tls=use_tls,
        tls_insecure_skip_verify=skip_verify,
        sasl_username_env=username if password is not None else None,
        sasl_password_env=password if username is not None else None,
        sasl_mechanism=mechanism if username is not None and password is not None else None,
        mtls_client_cert_env=cert if key is not None else None,
        mtls_client_key_env=key if cert is not None else None,
        mtls_server_ca_cert_env=ca,
    )


def _registry(reader: _Reader, top: dict[str, Any]) -> SchemaRegistryConfig | None:
    if "schema_registry" not in top:
        return None
    raw = reader.mapping(top["schema_registry"], "schema_registry", REGISTRY_KEYS, required=("url",))
    if raw is None:
        return None
    url = reader.url(raw, "url", "schema_registry")
    username = reader.env_name(raw, "basic_auth_username_env", "schema_registry")
    password = reader.env_name(raw, "basic_auth_password_env", "schema_registry")
    if ("basic_auth_username_env" in raw) != ("basic_auth_password_env" in raw):
        missing = "basic_auth_password_env" if "basic_auth_username_env" in raw else "basic_auth_username_env"
        reader.error(
            f"schema_registry.{missing}",
            "basic authentication needs both basic_auth_username_env and basic_auth_password_env",
        )
    if url is None:
        return None
    both = username is not None and password is not None
    return SchemaRegistryConfig(url, username if both else None, password if both else None)


def _glue(reader: _Reader, top: dict[str, Any]) -> GlueConfig | None:
    if "glue" not in top:
        return None
    raw = reader.mapping(top["glue"] if top["glue"] is not None else {}, "glue", GLUE_KEYS)
    if raw is None:
        return None
    region = reader.string(raw, "region", "glue")
    catalog_id: str | None = None
    if "catalog_id" in raw:
        value = raw["catalog_id"]
        # An unquoted account id is read as a number by YAML.
        text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
        if not isinstance(text, str) or not re.fullmatch(r"\d{12}", text):
            reader.error(
                "glue.catalog_id", f"expected a 12-digit AWS account id; got {describe_value(value)}"
            )
        else:
            catalog_id = text
    endpoint = reader.url(raw, "endpoint", "glue")
    return GlueConfig(region, catalog_id, endpoint)


def _destination(reader: _Reader, url: str) -> BucketDestination | None:
    path = "destination_bucket_url"
    parsed = urlsplit(url.strip())
    if parsed.scheme not in ("s3", "file"):
        reader.error(path, f"expected an s3:// (or file://) bucket URL; got {url!r}")
        return None
    params: dict[str, str] = {}
    for key, value in parse_qsl(parsed.query, keep_blank_values=True):
        if key not in _BUCKET_PARAMETERS:
            reader.error(path, f"unknown query parameter {key!r} (expected: region, prefix, endpoint)")
            continue
        params[key] = value
    prefix = params.get("prefix", "").strip("/") or None
    path_style = any(params.get(k, "").lower() == "true" for k in ("s3ForcePathStyle", "use_path_style"))
    endpoint = params.get("endpoint") or None
    if endpoint is not None and urlsplit(endpoint).scheme not in ("http", "https"):
        reader.error(path, f"endpoint must be an http:// or https:// URL; got {endpoint!r}")
        return None
    if parsed.scheme == "s3":
        if not parsed.netloc or parsed.path not in ("", "/"):
            reader.error(path, f"expected s3://<bucket>?region=..&prefix=..; got {url!r}")
            return None
        return BucketDestination(
            url, "s3", parsed.netloc, params.get("region") or None, prefix, endpoint, path_style
        )
    if parsed.netloc or not parsed.path.startswith("/"):
        reader.error(path, f"expected file:///<absolute path>; got {url!r}")
        return None
    return BucketDestination(url, "file", parsed.path.rstrip("/") or "/", None, prefix)


def _table(
    reader: _Reader,
    raw: Any,
    path: str,
    cluster_names: set[str],
    registry: SchemaRegistryConfig | None,
) -> TableConfig | None:
    values = reader.mapping(
        raw, path, TABLE_KEYS, required=("source_cluster_name", "source_topic", "source_format", "schema")
    )
    if values is None:
        return None
    cluster = reader.string(values, "source_cluster_name", path)
    if cluster is not None and cluster not in cluster_names:
        known = ", ".join(sorted(cluster_names)) or "none are defined"
        reader.error(
            f"{path}.source_cluster_name", f"unknown source cluster {cluster!r} (source_clusters: {known})"
        )
        cluster = None
    topic = reader.string(values, "source_topic", path)
    if topic is not None and (not TOPIC_NAME.match(topic) or topic in (".", "..")):
        reader.error(
            f"{path}.source_topic",
            f"invalid Kafka topic name {topic!r}: letters, digits, '.', '_' and '-' (at most 249)",
        )
        topic = None
    source_format = reader.choice(values, "source_format", path, SOURCE_FORMATS)
    if source_format == "protobuf":
        reader.error(f"{path}.source_format", "protobuf is not supported yet: use json or avro")
        source_format = None
    schema_mode = (
        reader.choice(values, "schema_mode", path, SCHEMA_MODES) if "schema_mode" in values else "inline"
    )
    table_registry = reader.url(values, "schema_registry_url", path)
    registry_url = table_registry or (registry.url if registry is not None else None)
    if schema_mode == "registry" and registry_url is None and "schema_registry_url" not in values:
        reader.error(
            f"{path}.schema_mode",
            "schema_mode registry needs a schema registry: set schema_registry.url at the top level "
            "or schema_registry_url on the table",
        )
    if schema_mode == "inline" and "schema_registry_url" in values:
        reader.error(
            f"{path}.schema_registry_url", "schema_registry_url is only used with schema_mode: registry"
        )
    commit_interval = reader.integer(
        values, "commit_interval_seconds", path, minimum=1, maximum=MAX_COMMIT_INTERVAL_SECONDS
    )
    avro_framing = (
        reader.choice(values, "avro_framing", path, AVRO_FRAMINGS)
        if "avro_framing" in values
        else "confluent"
    )
    if "avro_framing" in values and source_format != "avro":
        reader.error(f"{path}.avro_framing", "avro_framing is only used with source_format: avro")
    if avro_framing == "raw" and schema_mode == "registry":
        reader.error(
            f"{path}.avro_framing", "schema_mode registry needs the Confluent framing (the schema id)"
        )
    fields, schema_valid = _schema(reader, values, path)
    scheme, partitioning = _partitioning(reader, values, path, fields, schema_valid)
    maintenance = _maintenance(reader, values, path)
    if None in (cluster, topic, source_format, schema_mode) or not schema_valid:
        return None
    assert cluster is not None
    assert topic is not None
    return TableConfig(
        source_cluster_name=cluster,
        source_topic=topic,
        source_format=cast(SourceFormat, source_format),
        schema_mode=cast(SchemaMode, schema_mode),
        fields=fields,
        partitioning_scheme=scheme,
        partitioning=partitioning,
        schema_registry_url=table_registry,
        commit_interval_seconds=commit_interval,
        avro_framing=cast(AvroFraming, avro_framing or "confluent"),
        registry_url=registry_url if schema_mode == "registry" else None,
        path=path,
        maintenance=maintenance,
    )


def _schema(reader: _Reader, values: dict[str, Any], path: str) -> tuple[tuple[FieldConfig, ...], bool]:
    """The schema's fields, and whether all of them are valid (else: the valid ones)."""
    if "schema" not in values:
        return (), False
    where = f"{path}.schema"
    schema = reader.mapping(values["schema"], where, ("fields",), required=("fields",))
    if schema is None or "fields" not in schema:
        return (), False
    raw_fields = reader.sequence(schema, "fields", where, non_empty=True)
    errors_before = len(reader.errors)
    ids: dict[int, str] = {}
    fields = _fields(reader, raw_fields, f"{where}.fields", ids, top_level=True)
    return fields, len(reader.errors) == errors_before and bool(fields)


def _fields(
    reader: _Reader, raw_fields: list[Any], path: str, ids: dict[int, str], *, top_level: bool = False
) -> tuple[FieldConfig, ...]:
    fields: list[FieldConfig] = []
    names: dict[str, str] = {}
    for index, raw in enumerate(raw_fields):
        parsed = _field(reader, raw, f"{path}[{index}]", ids, names, top_level=top_level)
        if parsed is not None:
            fields.append(parsed)
    return tuple(fields)


def _field(
    reader: _Reader,
    raw: Any,
    path: str,
    ids: dict[int, str],
    names: dict[str, str],
    *,
    top_level: bool,
) -> FieldConfig | None:
    values = reader.mapping(raw, path, FIELD_KEYS, required=("name", "id", "type"))
    if values is None:
        return None
    name = reader.string(values, "name", path)
    if name is not None:
        if name in names:
            reader.error(f"{path}.name", f"duplicate field name {name!r} (also at {names[name]})")
        else:
            names[name] = path
        if top_level and name == KAFKA_COLUMN:
            reader.error(f"{path}.name", f"{KAFKA_COLUMN} is reserved: floe adds it with the Kafka metadata")
    field_id = reader.integer(values, "id", path, minimum=-(2**31), maximum=2**31 - 1)
    if field_id is not None:
        if not 1 <= field_id <= MAX_USER_FIELD_ID:
            reader.error(
                f"{path}.id",
                f"field ids must be between 1 and {MAX_USER_FIELD_ID} "
                f"(ids from {MAX_USER_FIELD_ID + 1} up are reserved for floe's {KAFKA_COLUMN} column); "
                f"got {field_id}",
            )
        elif field_id in ids:
            reader.error(f"{path}.id", f"duplicate field id {field_id} (also used at {ids[field_id]})")
        else:
            ids[field_id] = f"{path}.id"
    optional = reader.boolean(values, "optional", path)
    doc = reader.string(values, "doc", path, allow_empty=True)
    type_name = _type_name(reader, values, path)
    children: tuple[FieldConfig, ...] = ()
    if type_name in NESTED_TYPES:
        if "fields" not in values:
            reader.error(f"{path}.fields", f"a {type_name} needs fields")
        else:
            raw_children = reader.sequence(values, "fields", path, non_empty=True)
            children = _fields(reader, raw_children, f"{path}.fields", ids)
            _check_container(reader, type_name, children, raw_children, path)
    elif "fields" in values and type_name is not None:
        reader.error(
            f"{path}.fields",
            f"only struct, list and map have fields; {name or 'this field'} is a {type_name}",
        )
    if name is None or field_id is None or type_name is None:
        return None
    if type_name == "map" and len(children) == 2 and children[0].name == "value":
        children = (children[1], children[0])
    return FieldConfig(field_id, name, type_name, optional, doc, children, path)


def _type_name(reader: _Reader, values: dict[str, Any], path: str) -> str | None:
    raw = reader.string(values, "type", path)
    if raw is None:
        return None
    name = raw.strip().lower()
    if name in NESTED_TYPES:
        return name
    decimal = _DECIMAL.match(name)
    precision, scale = (int(decimal.group(1)), int(decimal.group(2))) if decimal else (1, 0)
    if not (1 <= precision <= 38 and scale <= precision):
        reader.error(f"{path}.type", f"invalid {raw!r}: decimal(P,S) needs 1 <= P <= 38 and 0 <= S <= P")
        return None
    fixed = _FIXED.match(name)
    if fixed is not None and int(fixed.group(1)) < 1:
        reader.error(f"{path}.type", f"invalid {raw!r}: fixed[N] needs N >= 1")
        return None
    found = primitive_type(name)
    if found is None:
        hint = difflib.get_close_matches(name, [*PRIMITIVE_TYPES, *NESTED_TYPES], n=1)
        suggestion = f"; did you mean {hint[0]!r}?" if hint else ""
        reader.error(
            f"{path}.type", f"unknown type {raw!r} (expected one of {', '.join(TYPE_NAMES)}){suggestion}"
        )
        return None
    return str(found)


def _check_container(
    reader: _Reader, type_name: str, children: tuple[FieldConfig, ...], raw_children: list[Any], path: str
) -> None:
    names = [c.name for c in children]
    where = f"{path}.fields"
    if type_name == "list":
        if len(raw_children) != 1 or (children and names != ["element"]):
            reader.error(
                where,
                "a list has exactly one field, named element: fields: [{name: element, id: .., type: ..}]",
            )
    elif type_name == "map":
        if len(raw_children) != 2 or (len(children) == 2 and sorted(names) != ["key", "value"]):
            reader.error(where, "a map has exactly two fields, named key and value")
        for child in children:
            if child.name == "key" and child.optional:
                reader.error(f"{child.path}.optional", "map keys cannot be optional")


def _partitioning(
    reader: _Reader,
    values: dict[str, Any],
    path: str,
    fields: tuple[FieldConfig, ...],
    schema_valid: bool,
) -> tuple[str | tuple[str, ...], tuple[PartitionFieldConfig, ...]]:
    where = f"{path}.partitioning_scheme"
    raw = values.get("partitioning_scheme", "unpartitioned")
    if isinstance(raw, str):
        if raw not in SCHEMES:
            hint = " (a list of transforms, like [hour(event_time)])" if "(" in raw else ""
            reader.error(
                where,
                f"expected one of {', '.join(SCHEMES)} or a list of partition transforms{hint}; got {raw!r}",
            )
            return "unpartitioned", ()
        if raw == "unpartitioned":
            return raw, ()
        return raw, (PartitionFieldConfig(raw, KAFKA_TIMESTAMP_PATH),)
    if not isinstance(raw, list):
        reader.error(
            where,
            f"expected unpartitioned, hour, day or a list of partition transforms; got {describe_value(raw)}",
        )
        return "unpartitioned", ()
    parsed: list[PartitionFieldConfig] = []
    for index, item in enumerate(raw):
        item_path = f"{where}[{index}]"
        if not isinstance(item, str):
            reader.error(item_path, f"expected a transform like hour(event_time); got {describe_value(item)}")
            continue
        transform = _transform(reader, item, item_path)
        if transform is None:
            continue
        if not _check_partition_source(reader, transform, fields, item_path, schema_valid):
            continue
        clash = _partition_clash(transform, parsed, fields)
        if clash:
            reader.error(item_path, clash)
            continue
        parsed.append(transform)
    return tuple(str(p) for p in parsed) if len(parsed) == len(raw) else tuple(raw), tuple(parsed)


def _transform(reader: _Reader, text: str, path: str) -> PartitionFieldConfig | None:
    match = _TRANSFORM.match(text)
    examples = (
        "hour(event_time), day(x), month(x), year(x), bucket(16, user_id), truncate(4, name), identity(x)"
    )
    if match is None:
        reader.error(path, f"invalid partition transform {text!r}: expected one of {examples}")
        return None
    name, argument, source = match.group(1).lower(), match.group(2), match.group(3).strip()
    if name not in TRANSFORMS:
        reader.error(
            path, f"unknown partition transform {match.group(1)!r} (expected one of {', '.join(TRANSFORMS)})"
        )
        return None
    if name in ("bucket", "truncate"):
        if argument is None:
            reader.error(path, f"{name} needs a width: {name}({16 if name == 'bucket' else 4}, {source})")
            return None
        if int(argument) < 1 or int(argument) > 2**31 - 1:
            reader.error(path, f"{name} width must be a positive integer; got {argument}")
            return None
        return PartitionFieldConfig(name, source, int(argument))
    if argument is not None:
        reader.error(path, f"{name} takes only a column: {name}({source})")
        return None
    return PartitionFieldConfig(name, source)


def resolve_column(fields: Sequence[FieldConfig], source: str) -> IcebergType | str:
    """The type of column `source` (dotted through structs, `_kafka.timestamp` included), or why it
    cannot be used as a partition source."""
    if source == KAFKA_COLUMN or source.startswith(KAFKA_COLUMN + "."):
        rest = source[len(KAFKA_COLUMN) + 1 :]
        if not rest:
            return f"{KAFKA_COLUMN} is a struct; name one of its fields, like {KAFKA_TIMESTAMP_PATH}"
        for nested in KAFKA_STRUCT.fields:
            if nested.name == rest:
                return nested.field_type
        names = ", ".join(f"{KAFKA_COLUMN}.{f.name}" for f in KAFKA_STRUCT.fields)
        return f"no column {source!r} (the Kafka columns are {names})"
    return _resolve(fields, source, source)


def _resolve(fields: Sequence[FieldConfig], remaining: str, source: str) -> IcebergType | str:
    for candidate in fields:
        if candidate.name == remaining:
            if candidate.type in NESTED_TYPES:
                return f"{source} is a {candidate.type}; partition by a primitive column"
            return candidate.iceberg_type()
    for candidate in fields:
        if remaining.startswith(candidate.name + "."):
            rest = remaining[len(candidate.name) + 1 :]
            if candidate.type == "struct":
                return _resolve(candidate.fields, rest, source)
            if candidate.type in ("list", "map"):
                return (
                    f"{source} is inside a {candidate.type}; only top-level and struct fields can partition"
                )
    return f"no column {source!r} in the schema"


def _check_partition_source(
    reader: _Reader,
    transform: PartitionFieldConfig,
    fields: tuple[FieldConfig, ...],
    path: str,
    schema_valid: bool,
) -> bool:
    found = resolve_column(fields, transform.source)
    if isinstance(found, str):
        # With errors in the schema, the column may be one of the fields that did not parse.
        if schema_valid or not found.startswith("no column"):
            reader.error(path, found)
        return False
    if not transform.iceberg_transform().can_transform(found):
        reader.error(
            path,
            f"{transform.transform}() needs {_TRANSFORM_TYPES[transform.transform]}; "
            f"{transform.source} is {found}",
        )
        return False
    return True


def _partition_clash(
    transform: PartitionFieldConfig, earlier: list[PartitionFieldConfig], fields: Sequence[FieldConfig]
) -> str | None:
    for other in earlier:
        if other.source == transform.source and other.transform == transform.transform:
            return f"{transform} repeats {other}"
        if (
            other.source == transform.source
            and other.transform in _TIME_TRANSFORMS
            and transform.transform in _TIME_TRANSFORMS
        ):
            return f"{transform} is redundant with {other}: use one time transform per column"
        if other.name == transform.name:
            return f"{transform} and {other} would both be named {transform.name!r}"
    for candidate in fields:
        if candidate.name == transform.name and not (
            transform.transform == "identity" and transform.source == candidate.name
        ):
            return f"the partition field of {transform} would be named {transform.name!r}, like a column"
    return None


def _check_table_names(reader: _Reader, tables: list[TableConfig]) -> None:
    """No two tables (or dead-letter tables) may land on the same Iceberg table."""
    taken: dict[tuple[str, str], tuple[str, TableConfig]] = {}
    for table in tables:
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
        reader.error(f"{table.path}.source_topic", message)


# -- YAML ------------------------------------------------------------------------------------------


def load_yaml(text: str) -> PipelineConfig:
    """Parse and validate floe.yaml text; errors carry their line numbers."""
    data, marks, duplicates = read_yaml(text)
    try:
        config = parse_config(data)
    except InvalidConfig as exc:
        located = [*duplicates, *(with_line(e, marks) for e in exc.errors)]
        # Document order (Python's sort is stable: errors without a line keep their order, last).
        located.sort(key=lambda e: e.line if e.line is not None else 1 << 30)
        raise InvalidConfig(located) from None
    if duplicates:
        raise InvalidConfig(duplicates)
    return config


def read_yaml(text: str) -> tuple[Any, dict[str, tuple[int, int]], list[ConfigError]]:
    """The YAML's data, the (line, column) of every path in it, and its duplicate keys (which plain
    YAML loading silently resolves to the last one)."""
    import yaml

    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        line = mark.line + 1 if mark is not None else None
        column = mark.column + 1 if mark is not None else None
        where = f" at line {line}, column {column}" if line is not None else ""
        raise InvalidConfig([ConfigError("", f"YAML syntax error{where}: {problem}", line, column)]) from None
    except yaml.YAMLError as exc:
        raise InvalidConfig([ConfigError("", f"YAML error: {exc}")]) from None
    marks: dict[str, tuple[int, int]] = {}
    duplicates: list[ConfigError] = []
    if node is not None:
        _index(node, "", marks, duplicates)
    return data, marks, duplicates


def _index(node: Any, path: str, marks: dict[str, tuple[int, int]], duplicates: list[ConfigError]) -> None:
    import yaml

    marks.setdefault(path, (node.start_mark.line + 1, node.start_mark.column + 1))
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            key = str(key_node.value)
            child = _key_path(path, key)
            if key in seen:
                line = key_node.start_mark.line + 1
                duplicates.append(
                    ConfigError(child, f"duplicate key {key!r}", line, key_node.start_mark.column + 1)
                )
            seen.add(key)
            marks[child] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            _index(value_node, child, marks, duplicates)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _index(item, f"{path}[{index}]", marks, duplicates)


_LAST_STEP = re.compile(r"(\.[^.\[\]]+|\[\d+\])$")


def with_line(error: ConfigError, marks: Mapping[str, tuple[int, int]]) -> ConfigError:
    """`error` with the line of its path (or of the nearest enclosing value that has one)."""
    path = error.path
    while True:
        if path in marks:
            line, column = marks[path]
            return ConfigError(error.path, error.message, line, column)
        if not path:
            return error
        shorter = _LAST_STEP.sub("", path)
        path = shorter if shorter != path else ""


def field_paths(table: TableConfig) -> dict[int, str]:
    """Field id → the YAML path of the field (for errors about existing tables)."""
    return {f.id: f.path for f in table.walk_fields()}
