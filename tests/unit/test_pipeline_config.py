"""floe.yaml without a server: parsing and validation (every error with its YAML path), the Iceberg
schemas, specs and properties of the configured tables, evolution plans applied through the pure commit
core, the Avro schema and Kafka credentials."""

from __future__ import annotations

import copy
import io
import json
import uuid
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import fastavro
import pytest
import yaml
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.transforms import BucketTransform, DayTransform, HourTransform, IdentityTransform
from pyiceberg.types import (
    BinaryType,
    IntegerType,
    ListType,
    LongType,
    NestedField,
    StringType,
    StructType,
    TimestamptzType,
)

from catalog import commit as core
from catalog.pipelines import (
    KAFKA_FIELD_ID,
    KAFKA_TIMESTAMP_ID,
    ConfigError,
    CredentialError,
    InvalidConfig,
    PipelineConfig,
    avro_schema,
    data_schema,
    dlq_schema,
    load_yaml,
    parse_config,
    partition_spec,
    plan_pipeline,
    resolve_credentials,
    table_targets,
)
from catalog.pipelines.evolution import TablePlan, plan_table

# The seed's examples (WarpStream Tableflow's documentation), joined into one file.
SEED_YAML = """\
source_clusters:
  - name: tableflow_cluster_1
    bootstrap_brokers:
      - hostname: localhost
        port: 9092
  - name: tableflow_cluster_2
    bootstrap_brokers:
      - hostname: broker1.kafkaserver.com
        port: 9092
      - hostname: broker2.kafkaserver.com
        port: 9092
    credentials:
      sasl_username_env: SASL_USERNAME_ENV_VAR
      sasl_password_env: SASL_PASSWORD_ENV_VAR
      use_tls: true
      sasl_mechanism: plain
tables:
    - source_cluster_name: tableflow_cluster_1
      source_topic: example_json_logs_topic
      source_format: json
      schema_mode: inline
      partitioning_scheme: hour
      schema:
        fields:
          - { name: environment, type: string, id: 1}
          - { name: service, type: string, id: 2}
          - { name: status, type: string, id: 3}
          - { name: message, type: string, id: 4}
    - source_cluster_name: tableflow_cluster_2
      source_topic: example_avro_events_topic
      source_format: avro
      schema_mode: inline
      schema:
        fields:
            - { name: event_id, id: 1, type: string }
            - { name: user_id, id: 2, type: long }
            - { name: session_id, id: 3, type: string }
            - name: profile
              id: 4
              type: struct
              fields:
                - { name: country, id: 5, type: string }
                - { name: language, id: 6, type: string }
            - name: device
              id: 7
              type: struct
              fields:
                - { name: type, id: 8, type: string }
                - name: os
                  id: 9
                  type: struct
                  fields:
                    - { name: name, id: 10, type: string }
                    - { name: version, id: 11, type: string }
                    - { name: vendor, id: 25, type: string, optional: true }
                - name: browser
                  id: 12
                  type: struct
                  fields:
                    - { name: name, id: 13, type: string }
                    - { name: version, id: 14, type: string }
                - name: screen
                  id: 15
                  type: struct
                  fields:
                    - { name: width, id: 16, type: int }
                    - { name: height, id: 17, type: int }
                    - { name: pixel_ratio, id: 18, type: double }
                - { name: model, id: 19, type: string, optional: true }
            - name: cookies
              id: 20
              type: list
              fields:
                - { name: element, id: 21, type: string }
            - name: event_attributes
              id: 22
              type: map
              fields:
                - { name: key, id: 23, type: string }
                - { name: value, id: 24, type: string }
destination_bucket_url: s3://my-bucket-name?region=us-east-1&prefix=tables/prod
"""


def seed() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(SEED_YAML)
    return data


def minimal(**table: Any) -> dict[str, Any]:
    """One cluster and one JSON table, with `table` overriding the table's keys."""
    base: dict[str, Any] = {
        "source_cluster_name": "c1",
        "source_topic": "events",
        "source_format": "json",
        "schema": {
            "fields": [
                {"name": "id", "id": 1, "type": "long"},
                {"name": "event_time", "id": 2, "type": "timestamptz"},
                {"name": "service", "id": 3, "type": "string"},
            ]
        },
    }
    base.update(table)
    return {
        "source_clusters": [{"name": "c1", "bootstrap_brokers": [{"hostname": "localhost", "port": 9092}]}],
        "tables": [base],
    }


def errors_of(data: Any) -> dict[str, str]:
    """Every error of an invalid configuration: YAML path -> message."""
    with pytest.raises(InvalidConfig) as caught:
        parse_config(data)
    return {e.path: e.message for e in caught.value.errors}


# -- the seed --------------------------------------------------------------------------------------


def test_the_seed_example_parses() -> None:
    config = load_yaml(SEED_YAML)
    assert [c.name for c in config.source_clusters] == ["tableflow_cluster_1", "tableflow_cluster_2"]
    second = config.source_clusters[1]
    assert second.bootstrap_servers == "broker1.kafkaserver.com:9092,broker2.kafkaserver.com:9092"
    assert second.credentials.use_tls
    assert second.credentials.sasl_mechanism == "plain"
    assert [(t.namespace, t.table_name, t.dlq_table_name) for t in config.tables] == [
        ("tableflow_cluster_1", "example_json_logs_topic", "example_json_logs_topic_dlq"),
        ("tableflow_cluster_2", "example_avro_events_topic", "example_avro_events_topic_dlq"),
    ]
    events = config.tables[1]
    assert sorted(f.id for f in events.walk_fields()) == list(range(1, 26))
    assert events.schema_mode == "inline"
    assert events.partitioning_scheme == "unpartitioned"
    assert config.destination is not None
    assert config.destination.location == "s3://my-bucket-name/tables/prod/floe"
    assert config.destination.warehouse_name == "my-bucket-name-tables-prod"
    assert config.destination.storage_properties() == {"s3.region": "us-east-1"}


def test_normalized_config_reads_back_equal() -> None:
    config = load_yaml(SEED_YAML)
    normalized = config.to_json()
    assert parse_config(json.loads(json.dumps(normalized))) == config
    # Defaults are explicit in the normalized form.
    assert normalized["tables"][1]["partitioning_scheme"] == "unpartitioned"
    assert normalized["tables"][1]["schema"]["fields"][0] == {
        "name": "event_id",
        "id": 1,
        "type": "string",
        "optional": False,
    }
    assert normalized["source_clusters"][0]["credentials"] == {
        "use_tls": False,
        "tls_insecure_skip_verify": False,
    }


def test_seed_schema_keeps_every_field_id_and_adds_kafka() -> None:
    config = load_yaml(SEED_YAML)
    schema = data_schema(config.tables[1])
    assert schema.find_field("device.os.vendor").field_id == 25
    assert not schema.find_field("device.os.vendor").required
    assert schema.find_field("device.screen.pixel_ratio").field_id == 18
    cookies = schema.find_field("cookies")
    assert isinstance(cookies.field_type, ListType)
    assert cookies.field_type.element_id == 21
    attributes = schema.find_type("event_attributes")
    assert (attributes.key_id, attributes.value_id) == (23, 24)  # type: ignore[attr-defined]
    kafka = schema.find_field("_kafka")
    assert kafka.field_id == KAFKA_FIELD_ID
    assert not kafka.required
    assert kafka.field_type == StructType(
        NestedField(2_000_000_001, "partition", IntegerType(), required=False),
        NestedField(2_000_000_002, "offset", LongType(), required=False),
        NestedField(2_000_000_003, "timestamp", TimestamptzType(), required=False),
        NestedField(2_000_000_004, "key", BinaryType(), required=False),
        NestedField(
            2_000_000_005,
            "headers",
            ListType(
                2_000_000_006,
                StructType(
                    NestedField(2_000_000_007, "key", StringType(), required=False),
                    NestedField(2_000_000_008, "value", BinaryType(), required=False),
                ),
                element_required=False,
            ),
            required=False,
        ),
    )


KAFKA_SOURCE_NAMES = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]


def test_fields_named_like_the_kafka_source_columns_are_a_valid_table() -> None:
    fields = [{"name": n, "id": i + 1, "type": "string"} for i, n in enumerate(KAFKA_SOURCE_NAMES)]
    config = parse_config(minimal(schema={"fields": fields}))
    names = [f.name for f in data_schema(config.tables[0]).fields]
    assert names == [*KAFKA_SOURCE_NAMES, "_kafka"]


def test_dlq_schema() -> None:
    schema = dlq_schema()
    assert [(f.name, str(f.field_type), f.required) for f in schema.fields] == [
        ("topic", "string", False),
        ("partition", "int", True),
        ("offset", "long", True),
        ("timestamp", "timestamptz", False),
        ("key", "binary", False),
        ("value", "binary", False),
        ("headers", "list<struct<11: key: optional string, 12: value: optional binary>>", False),
        ("error", "string", True),
        ("failed_at", "timestamptz", False),
    ]


# -- partitioning ----------------------------------------------------------------------------------


def test_partitioning_schemes() -> None:
    hourly = parse_config(minimal(partitioning_scheme="hour")).tables[0]
    spec = partition_spec(hourly)
    assert [(f.source_id, f.transform, f.name, f.field_id) for f in spec.fields] == [
        (KAFKA_TIMESTAMP_ID, HourTransform(), "_kafka_timestamp_hour", 1000)
    ]
    daily = partition_spec(parse_config(minimal(partitioning_scheme="day")).tables[0])
    assert [(f.source_id, f.transform) for f in daily.fields] == [(KAFKA_TIMESTAMP_ID, DayTransform())]
    assert partition_spec(parse_config(minimal()).tables[0]).is_unpartitioned()


def test_partition_transforms() -> None:
    data = minimal(partitioning_scheme=["day(event_time)", "bucket(16, id)", "identity( service )"])
    data["tables"][0]["schema"]["fields"].append(
        {"name": "user", "id": 4, "type": "struct", "fields": [{"name": "name", "id": 5, "type": "string"}]}
    )
    data["tables"][0]["partitioning_scheme"].append("truncate(4, user.name)")
    table = parse_config(data).tables[0]
    assert table.partitioning_scheme == (
        "day(event_time)",
        "bucket(16, id)",
        "identity(service)",
        "truncate(4, user.name)",
    )
    spec = partition_spec(table)
    assert [(f.source_id, str(f.transform), f.name) for f in spec.fields] == [
        (2, "day", "event_time_day"),
        (1, "bucket[16]", "id_bucket"),
        (3, "identity", "service"),
        (5, "truncate[4]", "user_name_trunc"),
    ]
    assert isinstance(spec.fields[1].transform, BucketTransform)
    assert isinstance(spec.fields[2].transform, IdentityTransform)


@pytest.mark.parametrize(
    ("scheme", "message"),
    [
        (["hour(service)"], "hour() needs a timestamp or timestamptz column; service is string"),
        (["bucket(id)"], "bucket needs a width: bucket(16, id)"),
        (["truncate(4, event_time)"], "truncate() needs an int, long, decimal, string or binary column"),
        (["day(nope)"], "no column 'nope' in the schema"),
        (["decade(event_time)"], "unknown partition transform 'decade'"),
        (["hour event_time"], "invalid partition transform 'hour event_time'"),
        (["day(id, event_time)"], "invalid partition transform"),
        (["identity(_kafka)"], "_kafka is a struct"),
        (["day(event_time)", "hour(event_time)"], "is redundant with day(event_time)"),
        (["identity(service)", "identity(service)"], "identity(service) repeats identity(service)"),
        (["bucket(0, id)"], "bucket width must be a positive integer"),
    ],
)
def test_bad_partitioning(scheme: list[str], message: str) -> None:
    errors = errors_of(minimal(partitioning_scheme=scheme))
    path = f"tables[0].partitioning_scheme[{len(scheme) - 1}]"
    assert path in errors, errors
    assert message in errors[path]


def test_a_transform_split_by_a_yaml_flow_list_says_how_to_quote_it() -> None:
    """`[day(event_time), bucket(16, id)]` unquoted: YAML's flow list splits `bucket(16, id)` at its comma
    into 'bucket(16' and 'id)'. One error, at the first half's path and line, shows the quoted list item."""
    text = yaml.safe_dump(minimal(partitioning_scheme="PLACEHOLDER"), sort_keys=False).replace(
        "PLACEHOLDER", "[day(event_time), bucket(16, id), truncate( 4 , service )]"
    )
    with pytest.raises(InvalidConfig) as caught:
        load_yaml(text)
    line = next(n for n, t in enumerate(text.splitlines(), 1) if "partitioning_scheme" in t)
    assert [(e.path, e.line, e.message) for e in caught.value.errors] == [
        (
            "tables[0].partitioning_scheme[1]",
            line,
            "'bucket(16' and 'id)' are one transform split at its comma by YAML's flow list: "
            'quote it — ["bucket(16, id)"]',
        ),
        (
            "tables[0].partitioning_scheme[3]",
            line,
            "'truncate( 4' and 'service )' are one transform split at its comma by YAML's flow list: "
            'quote it — ["truncate( 4, service )"]',
        ),
    ]
    quoted = text.replace("bucket(16, id)", '"bucket(16, id)"').replace(
        "truncate( 4 , service )", '"truncate(4, service)"'
    )
    assert load_yaml(quoted).tables[0].partitioning_scheme == (
        "day(event_time)",
        "bucket(16, id)",
        "truncate(4, service)",
    )


def test_partition_source_inside_a_list_is_refused() -> None:
    data = minimal(partitioning_scheme=["identity(tags.element)"])
    data["tables"][0]["schema"]["fields"].append(
        {"name": "tags", "id": 4, "type": "list", "fields": [{"name": "element", "id": 5, "type": "string"}]}
    )
    assert "inside a list" in errors_of(data)["tables[0].partitioning_scheme[0]"]


def test_unknown_partitioning_scheme() -> None:
    assert (
        "expected one of unpartitioned, hour, day"
        in errors_of(minimal(partitioning_scheme="week"))["tables[0].partitioning_scheme"]
    )


# -- validation errors, each at its YAML path ------------------------------------------------------


def _nested_duplicate_id() -> dict[str, Any]:
    data = seed()
    # tables[1].schema.fields[3] is `profile`; its first field takes id 2 (user_id's).
    data["tables"][1]["schema"]["fields"][3]["fields"][0]["id"] = 2
    return data


def _with(path: list[Any], value: Any) -> dict[str, Any]:
    data = seed()
    node: Any = data
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    return data


def _without(path: list[Any]) -> dict[str, Any]:
    data = seed()
    node: Any = data
    for step in path[:-1]:
        node = node[step]
    del node[path[-1]]
    return data


def _two_tables(first: str, second: str) -> dict[str, Any]:
    data = minimal(source_topic=first)
    data["tables"].append(copy.deepcopy(data["tables"][0]) | {"source_topic": second})
    return data


BAD_INPUTS: list[tuple[str, Any, str, str]] = [
    (
        "nested duplicate id",
        _nested_duplicate_id(),
        "tables[1].schema.fields[3].fields[0].id",
        "duplicate field id 2",
    ),
    (
        "duplicate name",
        _with(["tables", 1, "schema", "fields", 4, "fields", 1, "fields", 0, "name"], "version"),
        "tables[1].schema.fields[4].fields[1].fields[1].name",
        "duplicate field name 'version'",
    ),
    (
        "unknown type",
        _with(["tables", 0, "schema", "fields", 2, "type"], "integer"),
        "tables[0].schema.fields[2].type",
        "unknown type 'integer'",
    ),
    (
        "unknown cluster",
        _with(["tables", 0, "source_cluster_name"], "nope"),
        "tables[0].source_cluster_name",
        "unknown source cluster 'nope'",
    ),
    (
        "protobuf without its schema",
        _with(["tables", 0, "source_format"], "protobuf"),
        "tables[0].protobuf",
        "source_format protobuf with schema_mode inline needs a protobuf block",
    ),
    (
        "bad format",
        _with(["tables", 0, "source_format"], "csv"),
        "tables[0].source_format",
        "expected one of json, avro, protobuf",
    ),
    (
        "reserved id",
        _with(["tables", 0, "schema", "fields", 0, "id"], 2_000_000_000),
        "tables[0].schema.fields[0].id",
        "reserved",
    ),
    (
        "zero id",
        _with(["tables", 0, "schema", "fields", 0, "id"], 0),
        "tables[0].schema.fields[0].id",
        "between 1 and 1999999999",
    ),
    (
        "string id",
        _with(["tables", 0, "schema", "fields", 0, "id"], "one"),
        "tables[0].schema.fields[0].id",
        "expected an integer",
    ),
    (
        "reserved name",
        _with(["tables", 0, "schema", "fields", 0, "name"], "_kafka"),
        "tables[0].schema.fields[0].name",
        "reserved",
    ),
    (
        "internal name",
        _with(["tables", 0, "schema", "fields", 0, "name"], "__floe_value"),
        "tables[0].schema.fields[0].name",
        "reserved for floe's ingestion",
    ),
    (
        "boolean name",
        _with(["tables", 0, "schema", "fields", 0, "name"], True),
        "tables[0].schema.fields[0].name",
        "quote it",
    ),
    (
        "unknown table key",
        _with(["tables", 0, "source_topics"], "x"),
        "tables[0].source_topics",
        "did you mean 'source_topic'?",
    ),
    ("unknown top key", _with(["table"], []), "table", "did you mean 'tables'?"),
    (
        "unknown field key",
        _with(["tables", 0, "schema", "fields", 0, "nullable"], True),
        "tables[0].schema.fields[0].nullable",
        "unknown key 'nullable'",
    ),
    (
        "missing topic",
        _without(["tables", 0, "source_topic"]),
        "tables[0].source_topic",
        "source_topic is required",
    ),
    ("missing schema", _without(["tables", 0, "schema"]), "tables[0].schema", "schema is required"),
    (
        "empty fields",
        _with(["tables", 0, "schema", "fields"], []),
        "tables[0].schema.fields",
        "must not be empty",
    ),
    (
        "list with two fields",
        _with(
            ["tables", 1, "schema", "fields", 5, "fields"],
            [{"name": "element", "id": 21, "type": "string"}, {"name": "x", "id": 26, "type": "string"}],
        ),
        "tables[1].schema.fields[5].fields",
        "a list has exactly one field, named element",
    ),
    (
        "map key optional",
        _with(["tables", 1, "schema", "fields", 6, "fields", 0, "optional"], True),
        "tables[1].schema.fields[6].fields[0].optional",
        "map keys cannot be optional",
    ),
    (
        "map without value",
        _with(["tables", 1, "schema", "fields", 6, "fields"], [{"name": "key", "id": 23, "type": "string"}]),
        "tables[1].schema.fields[6].fields",
        "a map has exactly two fields",
    ),
    (
        "struct without fields",
        _without(["tables", 1, "schema", "fields", 3, "fields"]),
        "tables[1].schema.fields[3].fields",
        "a struct needs fields",
    ),
    (
        "primitive with fields",
        _with(["tables", 0, "schema", "fields", 0, "fields"], []),
        "tables[0].schema.fields[0].fields",
        "only struct, list and map have fields",
    ),
    (
        "decimal too wide",
        _with(["tables", 0, "schema", "fields", 0, "type"], "decimal(40, 2)"),
        "tables[0].schema.fields[0].type",
        "1 <= P <= 38",
    ),
    (
        "port",
        _with(["source_clusters", 0, "bootstrap_brokers", 0, "port"], 70000),
        "source_clusters[0].bootstrap_brokers[0].port",
        "between 1 and 65535",
    ),
    (
        "no brokers",
        _with(["source_clusters", 0, "bootstrap_brokers"], []),
        "source_clusters[0].bootstrap_brokers",
        "must not be empty",
    ),
    (
        "cluster name",
        _with(["source_clusters", 0, "name"], "bad name!"),
        "source_clusters[0].name",
        "invalid cluster name",
    ),
    (
        "sasl without password",
        _without(["source_clusters", 1, "credentials", "sasl_password_env"]),
        "source_clusters[1].credentials.sasl_password_env",
        "SASL needs both",
    ),
    (
        "sasl mechanism",
        _with(["source_clusters", 1, "credentials", "sasl_mechanism"], "gssapi"),
        "source_clusters[1].credentials.sasl_mechanism",
        "plain, scram-256, scram-512",
    ),
    (
        "secret instead of name",
        _with(["source_clusters", 1, "credentials", "sasl_password_env"], "hunter2!"),
        "source_clusters[1].credentials.sasl_password_env",
        "not an environment variable name",
    ),
    (
        "mtls without tls",
        _with(
            ["source_clusters", 0, "credentials"], {"mtls_client_cert_env": "C", "mtls_client_key_env": "K"}
        ),
        "source_clusters[0].credentials.mtls_client_cert_env",
        "needs use_tls: true",
    ),
    (
        "bucket scheme",
        _with(["destination_bucket_url"], "gs://bucket"),
        "destination_bucket_url",
        "expected an s3://",
    ),
    (
        "bucket parameter",
        _with(["destination_bucket_url"], "s3://b?regoin=x"),
        "destination_bucket_url",
        "unknown query parameter 'regoin'",
    ),
    ("warehouse and bucket", _with(["warehouse"], "default"), "warehouse", "not both"),
    (
        "commit interval",
        _with(["tables", 0, "commit_interval_seconds"], 0),
        "tables[0].commit_interval_seconds",
        "between 0.1 and 86400",
    ),
    (
        "registry without url",
        _with(["tables", 0, "schema_mode"], "registry"),
        "tables[0].schema_mode",
        "needs a schema registry",
    ),
    (
        "registry url in inline mode",
        _with(["tables", 0, "schema_registry_url"], "http://registry:8081"),
        "tables[0].schema_registry_url",
        "only used with schema_mode: registry",
    ),
    (
        "registry url",
        _with(["schema_registry"], {"url": "registry:8081"}),
        "schema_registry.url",
        "expected an http:// or https:// URL",
    ),
    ("glue account", _with(["glue"], {"catalog_id": "12"}), "glue.catalog_id", "12-digit AWS account id"),
    (
        "topic name",
        _with(["tables", 0, "source_topic"], "bad topic"),
        "tables[0].source_topic",
        "invalid Kafka topic name",
    ),
    (
        "same topic twice",
        _two_tables("events", "events"),
        "tables[1].source_topic",
        "is already configured at tables[0]",
    ),
    (
        "topics that sanitize alike",
        _two_tables("a.b", "a_b"),
        "tables[1].source_topic",
        "would become table c1.a_b",
    ),
    (
        "topic named like a dead-letter table",
        _two_tables("x", "x_dlq"),
        "tables[1].source_topic",
        "dead-letter table of topic 'x'",
    ),
    ("not a mapping", ["source_clusters"], "", "expected a mapping"),
]


@pytest.mark.parametrize(
    ("data", "path", "message"), [(d, p, m) for _, d, p, m in BAD_INPUTS], ids=[n for n, *_ in BAD_INPUTS]
)
def test_bad_input_is_reported_at_its_path(data: Any, path: str, message: str) -> None:
    errors = errors_of(data)
    assert path in errors, errors
    assert message in errors[path], errors[path]


def test_every_error_is_reported_not_just_the_first() -> None:
    data = seed()
    data["tables"][0]["schema"]["fields"][0]["type"] = "strin"
    data["tables"][0]["schema"]["fields"][1]["id"] = 1
    data["tables"][1]["source_cluster_name"] = "missing"
    data["source_clusters"][0]["bootstrap_brokers"][0]["port"] = "9092"
    errors = errors_of(data)
    assert set(errors) == {
        "source_clusters[0].bootstrap_brokers[0].port",
        "tables[0].schema.fields[0].type",
        "tables[0].schema.fields[1].id",
        "tables[1].source_cluster_name",
    }
    assert "did you mean 'string'?" in errors["tables[0].schema.fields[0].type"]
    assert "also used at tables[0].schema.fields[0].id" in errors["tables[0].schema.fields[1].id"]


def test_registry_mode() -> None:
    data = minimal(source_format="avro", schema_mode="registry")
    data["schema_registry"] = {"url": "http://registry:8081/"}
    table = parse_config(data).tables[0]
    assert table.registry_url == "http://registry:8081"
    data["tables"][0]["schema_registry_url"] = "https://other:8081"
    assert parse_config(data).tables[0].registry_url == "https://other:8081"


def test_commit_interval_takes_fractions_as_the_command_line_does() -> None:
    """One rule for floe.yaml and `--commit-interval`: 0.1 to 86400 seconds, fractions allowed."""
    config = parse_config(minimal(commit_interval_seconds=0.5))
    assert config.tables[0].commit_interval_seconds == 0.5
    assert config.to_json()["tables"][0]["commit_interval_seconds"] == 0.5
    # Whole seconds are stored as integers, as before (stored revisions and `floe apply` output).
    stored = parse_config(minimal(commit_interval_seconds=30)).to_json()["tables"][0][
        "commit_interval_seconds"
    ]
    assert stored == 30
    assert isinstance(stored, int)


def test_warehouse_extension_and_glue() -> None:
    data = minimal(commit_interval_seconds=30)
    data["warehouse"] = "analytics"
    data["glue"] = {"region": "eu-west-1", "catalog_id": 123456789012, "endpoint": "http://localhost:4566"}
    config = parse_config(data)
    assert config.warehouse == "analytics"
    assert config.destination is None
    assert config.tables[0].commit_interval_seconds == 30
    assert config.glue is not None
    assert config.glue.catalog_id == "123456789012"
    assert parse_config(config.to_json()) == config


def test_local_bucket_url() -> None:
    config = parse_config(minimal() | {"destination_bucket_url": "file:///tmp/floe-bucket?prefix=dev"})
    assert config.destination is not None
    assert config.destination.location == "file:///tmp/floe-bucket/dev/floe"
    assert config.destination.warehouse_name == "file-tmp-floe-bucket-dev"


def test_s3_compatible_bucket_url() -> None:
    url = "s3://lake?region=eu-west-1&endpoint=http://minio:9000&s3ForcePathStyle=true"
    config = parse_config(minimal() | {"destination_bucket_url": url})
    assert config.destination is not None
    assert config.destination.storage_properties() == {
        "s3.region": "eu-west-1",
        "s3.endpoint": "http://minio:9000",
        "s3.path-style-access": "true",
    }


def test_topic_names_are_sanitized() -> None:
    config = parse_config(minimal(source_topic="orders.v2-eu"))
    assert (config.tables[0].table_name, config.tables[0].dlq_table_name) == (
        "orders_v2_eu",
        "orders_v2_eu_dlq",
    )


# -- YAML --------------------------------------------------------------------------------------------


def test_yaml_syntax_error_reports_line_and_column() -> None:
    text = "source_clusters:\n  - name: c1\n    bootstrap_brokers: [\n"
    with pytest.raises(InvalidConfig) as caught:
        load_yaml(text)
    (error,) = caught.value.errors
    assert error.line == 4
    assert error.column is not None
    assert "YAML syntax error at line 4" in error.message


def test_yaml_errors_carry_lines() -> None:
    text = SEED_YAML.replace("{ name: status, type: string, id: 3}", "{ name: status, type: string, id: 2}")
    with pytest.raises(InvalidConfig) as caught:
        load_yaml(text)
    (error,) = caught.value.errors
    assert error.path == "tables[0].schema.fields[2].id"
    assert error.line == SEED_YAML.splitlines().index("          - { name: status, type: string, id: 3}") + 1
    assert str(error).startswith(f"tables[0].schema.fields[2].id (line {error.line}): duplicate field id 2")


def test_yaml_duplicate_keys_are_errors() -> None:
    text = SEED_YAML.replace(
        "      source_format: json\n", "      source_format: json\n      source_format: avro\n"
    )
    with pytest.raises(InvalidConfig) as caught:
        load_yaml(text)
    assert [(e.path, e.message) for e in caught.value.errors] == [
        ("tables[0].source_format", "duplicate key 'source_format'")
    ]


def test_empty_yaml() -> None:
    with pytest.raises(InvalidConfig, match="empty"):
        load_yaml("# nothing here\n")


# -- credentials -----------------------------------------------------------------------------------


def _cluster(credentials: dict[str, Any]) -> Any:
    data = minimal()
    data["source_clusters"][0]["credentials"] = credentials
    return parse_config(data).source_clusters[0]


def test_plaintext_cluster() -> None:
    assert resolve_credentials(_cluster({}), {}) == {
        "kafka.bootstrap.servers": "localhost:9092",
        "kafka.security.protocol": "PLAINTEXT",
    }
    assert resolve_credentials(_cluster({}), {}, "librdkafka") == {
        "bootstrap.servers": "localhost:9092",
        "security.protocol": "PLAINTEXT",
    }


def test_sasl_scram_with_the_warpstream_prefix() -> None:
    cluster = _cluster(
        {"sasl_username_env": "USER", "sasl_password_env": "PASS", "sasl_mechanism": "scram-512"}
    )
    environ = {"TABLEFLOW_USER": "alice", "PASS": 'se"cr\\et', "TABLEFLOW_PASS": "ignored"}
    spark = resolve_credentials(cluster, environ)
    assert spark["kafka.security.protocol"] == "SASL_PLAINTEXT"
    assert spark["kafka.sasl.mechanism"] == "SCRAM-SHA-512"
    assert spark["kafka.sasl.jaas.config"] == (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="alice" password="se\\"cr\\\\et";'
    )
    native = resolve_credentials(cluster, environ, "librdkafka")
    assert (native["sasl.mechanism"], native["sasl.username"], native["sasl.password"]) == (
        "SCRAM-SHA-512",
        "alice",
        'se"cr\\et',
    )


def test_missing_variable_is_named() -> None:
    cluster = _cluster({"sasl_username_env": "USER", "sasl_password_env": "PASS", "use_tls": True})
    with pytest.raises(
        CredentialError, match=r"PASS \(or TABLEFLOW_PASS\) is not set; credentials.sasl_password_env"
    ):
        resolve_credentials(cluster, {"USER": "alice"})


def test_mtls(tmp_path: Path) -> None:
    from devtools.tls import generate_certificates

    certs = generate_certificates(tmp_path / "tls")
    cert, key, ca = certs.client.certificate, certs.client.key, certs.ca.certificate
    cluster = _cluster(
        {
            "use_tls": True,
            "mtls_client_cert_env": "CERT",
            "mtls_client_key_env": "KEY",
            "mtls_server_ca_cert_env": "CA",
        }
    )
    environ = {"CERT": str(cert), "TABLEFLOW_KEY": str(key), "CA": str(ca)}
    spark = resolve_credentials(cluster, environ)
    assert spark["kafka.security.protocol"] == "SSL"
    assert spark["kafka.ssl.truststore.type"] == "PEM"
    assert spark["kafka.ssl.truststore.location"] == str(ca)
    assert spark["kafka.ssl.keystore.type"] == "PEM"
    assert spark["kafka.ssl.keystore.certificate.chain"] == cert.read_text()
    assert spark["kafka.ssl.keystore.key"] == key.read_text()
    assert "kafka.ssl.endpoint.identification.algorithm" not in spark
    native = resolve_credentials(cluster, environ, "librdkafka")
    assert native["ssl.certificate.location"] == str(cert)
    assert native["ssl.key.location"] == str(key)
    assert native["ssl.ca.location"] == str(ca)
    assert "enable.ssl.certificate.verification" not in native
    rsa_key = tmp_path / "rsa.key"
    rsa_key.write_text("-----BEGIN RSA PRIVATE KEY-----\nBBB\n-----END RSA PRIVATE KEY-----\n")
    with pytest.raises(CredentialError, match="openssl pkcs8 -topk8 -nocrypt"):
        resolve_credentials(cluster, {**environ, "TABLEFLOW_KEY": str(rsa_key)})
    with pytest.raises(CredentialError, match="cannot read the client certificate"):
        resolve_credentials(cluster, {**environ, "CERT": str(tmp_path / "missing.pem")})
    # An expired client certificate is refused by name, before any broker is asked.
    expired = {**environ, "CERT": str(certs.expired_client.certificate)}
    with pytest.raises(
        CredentialError,
        match=r"c1: the client certificate .*expired-client.pem \(from the environment variable CERT that "
        r"credentials.mtls_client_cert_env names\) expired on 20",
    ):
        resolve_credentials(cluster, expired)


def test_insecure_skip_verify_trusts_what_the_brokers_present(tmp_path: Path) -> None:
    from devtools.tls import generate_certificates

    certs = generate_certificates(tmp_path / "tls")
    presented = certs.self_signed_server.certificate.read_text()
    asked: list[str] = []

    def brokers_present(cluster: Any) -> str:
        asked.append(cluster.name)
        return presented

    cluster = _cluster({"use_tls": True, "tls_insecure_skip_verify": True})
    spark = resolve_credentials(cluster, {}, presented_certificates=brokers_present)
    # Java: no host name check, and a truststore of exactly what the brokers presented, inline.
    assert spark["kafka.ssl.endpoint.identification.algorithm"] == ""
    assert spark["kafka.ssl.truststore.type"] == "PEM"
    assert spark["kafka.ssl.truststore.certificates"] == presented
    assert "kafka.ssl.truststore.location" not in spark
    assert asked == ["c1"]
    # With a CA named too, both are trusted.
    with_ca = _cluster({"use_tls": True, "tls_insecure_skip_verify": True, "mtls_server_ca_cert_env": "CA"})
    spark = resolve_credentials(
        with_ca, {"CA": str(certs.ca.certificate)}, presented_certificates=brokers_present
    )
    assert spark["kafka.ssl.truststore.certificates"] == certs.ca.certificate.read_text() + presented
    # librdkafka has a property for each check.
    native = resolve_credentials(cluster, {}, "librdkafka")
    assert native["enable.ssl.certificate.verification"] == "false"
    assert native["ssl.endpoint.identification.algorithm"] == "none"
    # Without a way to fetch them, Java only skips the host name check.
    assert "kafka.ssl.truststore.certificates" not in resolve_credentials(cluster, {})


# -- Avro --------------------------------------------------------------------------------------------


def test_avro_schema_decodes_what_it_describes() -> None:
    data = minimal(source_format="avro")
    data["tables"][0]["schema"]["fields"] = [
        {"name": "id", "id": 1, "type": "long"},
        {"name": "at", "id": 2, "type": "timestamptz"},
        {"name": "day", "id": 3, "type": "date", "optional": True},
        {"name": "price", "id": 4, "type": "decimal(10, 2)"},
        {
            "name": "tags",
            "id": 5,
            "type": "list",
            "fields": [{"name": "element", "id": 6, "type": "string", "optional": True}],
        },
        {
            "name": "counts",
            "id": 7,
            "type": "map",
            "fields": [{"name": "value", "id": 9, "type": "int"}, {"name": "key", "id": 8, "type": "string"}],
        },
        {
            "name": "by_code",
            "id": 10,
            "type": "map",
            "fields": [
                {"name": "key", "id": 11, "type": "int"},
                {"name": "value", "id": 12, "type": "string"},
            ],
        },
        {
            "name": "address",
            "id": 13,
            "type": "struct",
            "optional": True,
            "fields": [{"name": "city", "id": 14, "type": "string"}],
        },
        {"name": "digest", "id": 15, "type": "fixed[4]"},
        {"name": "uid", "id": 16, "type": "uuid"},
    ]
    table = parse_config(data).tables[0]
    schema = avro_schema(table)
    assert schema["fields"][1] == {
        "name": "at",
        "type": {"type": "long", "logicalType": "timestamp-micros"},
        "field-id": 2,
    }
    assert schema["fields"][2]["type"] == ["null", {"type": "int", "logicalType": "date"}]
    assert schema["fields"][2]["default"] is None
    assert schema["fields"][5]["type"] == {"type": "map", "values": "int", "key-id": 8, "value-id": 9}
    parsed = fastavro.parse_schema(schema)
    record = {
        "id": 7,
        "at": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        "day": date(2026, 1, 2),
        "price": Decimal("12.34"),
        "tags": ["a", None],
        "counts": {"x": 1},
        "by_code": [{"key": 1, "value": "one"}],
        "address": {"city": "Oslo"},
        "digest": b"abcd",
        "uid": uuid.UUID("7d8e9f00-0000-4000-8000-000000000000"),
    }
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, parsed, record)
    buffer.seek(0)
    decoded = fastavro.schemaless_reader(buffer, parsed, None)
    assert decoded == record


def test_avro_schema_of_the_seed_parses() -> None:
    table = load_yaml(SEED_YAML).tables[1]
    parsed = fastavro.parse_schema(avro_schema(table))
    assert isinstance(parsed, dict)
    assert parsed["name"] == "example_avro_events_topic"


# -- evolution through the pure commit core --------------------------------------------------------


def commit(plan: TablePlan, base: TableMetadata | None) -> TableMetadata:
    """Apply a plan's commit as the catalog's commit path does."""
    return core.commit_table(
        base,
        "file:///tmp/floe-pipeline-test/t/metadata/00000-x.metadata.json" if base else None,
        core.parse_requirements(list(plan.requirements)),
        core.parse_table_updates(list(plan.updates)),
        "file:///tmp/floe-pipeline-test/t",
    )


def created(data: dict[str, Any]) -> TableMetadata:
    target = table_targets(parse_config(data))[0]
    plan = plan_table(target, None)
    assert plan.action == "create"
    return commit(plan, None)


def evolved(data: dict[str, Any], base: TableMetadata) -> TablePlan:
    return plan_table(table_targets(parse_config(data))[0], base)


def test_create_keeps_every_id_and_sets_properties() -> None:
    config = load_yaml(SEED_YAML)
    for target in table_targets(config):
        metadata = commit(plan_table(target, None), None)
        assert metadata.schema() == target.schema
        assert metadata.schema().schema_id == 0
        assert metadata.format_version == 2
        assert metadata.properties["write.format.default"] == "parquet"
        assert metadata.properties["write.parquet.compression-codec"] == "zstd"
        # A small dictionary budget: unique columns give up dictionary encoding early (ingestion CPU).
        assert metadata.properties["write.parquet.dict-size-bytes"] == str(64 * 1024)
        assert metadata.properties["write.distribution-mode"] == "none"
        assert metadata.properties["floe.source.topic"] == target.topic
        assert plan_table(target, metadata).action == "unchanged"
    hourly = commit(plan_table(table_targets(config)[0], None), None)
    assert [(f.source_id, str(f.transform)) for f in hourly.spec().fields] == [(KAFKA_TIMESTAMP_ID, "hour")]


ALLOWED: list[tuple[str, Any, list[str]]] = [
    (
        "add optional column",
        lambda f: f.append({"name": "region", "id": 9, "type": "string", "optional": True}),
        ["add column region (id 9, string)"],
    ),
    ("required to optional", lambda f: f[2].update(optional=True), ["make service optional"]),
    ("int to long", lambda f: f[3].update(type="long"), ["widen count from int to long"]),
    ("float to double", lambda f: f[4].update(type="double"), ["widen ratio from float to double"]),
    (
        "wider decimal",
        lambda f: f[5].update(type="decimal(12, 2)"),
        ["widen price from decimal(10, 2) to decimal(12, 2)"],
    ),
    ("rename", lambda f: f[2].update(name="svc"), ["rename service to svc"]),
    (
        "nested optional column",
        lambda f: f[6]["fields"].append({"name": "zip", "id": 10, "type": "string", "optional": True}),
        ["add column address.zip (id 10, string)"],
    ),
    (
        "new optional struct with required fields",
        lambda f: f.append(
            {
                "name": "geo",
                "id": 11,
                "type": "struct",
                "optional": True,
                "fields": [{"name": "lat", "id": 12, "type": "double"}],
            }
        ),
        ["add column geo (id 11, struct)"],
    ),
    ("doc", lambda f: f[0].update(doc="the key"), ["update the doc of id"]),
    ("reorder", lambda f: f.insert(0, f.pop(2)), ["reorder the columns of the table"]),
]

REFUSED: list[tuple[str, Any, str, str]] = [
    (
        "drop a column",
        lambda f: f.pop(2),
        "tables[0].schema.fields",
        "dropping service (id 3) is not supported",
    ),
    (
        "drop a nested column",
        lambda f: f[6]["fields"].pop(0),
        "tables[0].schema.fields[6].fields",
        "dropping address.city (id 8)",
    ),
    (
        "optional to required",
        lambda f: f[7].update(optional=False),
        "tables[0].schema.fields[7].optional",
        "making optional column note required",
    ),
    (
        "narrow long to int",
        lambda f: f[0].update(type="int"),
        "tables[0].schema.fields[0].type",
        "changing id from long to int",
    ),
    (
        "string to long",
        lambda f: f[2].update(type="long"),
        "tables[0].schema.fields[2].type",
        "changing service from string to long",
    ),
    (
        "decimal scale",
        lambda f: f[5].update(type="decimal(12, 3)"),
        "tables[0].schema.fields[5].type",
        "decimal(10, 2) to decimal(12, 3)",
    ),
    (
        "required new column",
        lambda f: f.append({"name": "region", "id": 9, "type": "string"}),
        "tables[0].schema.fields[8].optional",
        "new column region must be optional",
    ),
    (
        "struct to string",
        lambda f: f[6].update(type="string", fields=None) or f[6].pop("fields"),
        "tables[0].schema.fields[6].type",
        "changing address from struct to string",
    ),
    (
        "move a field",
        lambda f: (
            f.append({"name": "moved", "id": 8, "type": "string", "optional": True}) or f[6]["fields"].pop(0)
        ),
        "tables[0].schema.fields[8].id",
        "moving address.city (id 8) to moved is not supported",
    ),
]


def _evolution_base() -> dict[str, Any]:
    return minimal(
        schema={
            "fields": [
                {"name": "id", "id": 1, "type": "long"},
                {"name": "event_time", "id": 2, "type": "timestamptz"},
                {"name": "service", "id": 3, "type": "string"},
                {"name": "count", "id": 4, "type": "int"},
                {"name": "ratio", "id": 5, "type": "float"},
                {"name": "price", "id": 6, "type": "decimal(10, 2)"},
                {
                    "name": "address",
                    "id": 7,
                    "type": "struct",
                    "fields": [
                        {"name": "city", "id": 8, "type": "string"},
                        {"name": "street", "id": 14, "type": "string"},
                    ],
                },
                {"name": "note", "id": 13, "type": "string", "optional": True},
            ]
        }
    )


@pytest.mark.parametrize(("edit", "expected"), [(e, c) for _, e, c in ALLOWED], ids=[n for n, *_ in ALLOWED])
def test_allowed_evolution(edit: Any, expected: list[str]) -> None:
    data = _evolution_base()
    base = created(data)
    edit(data["tables"][0]["schema"]["fields"])
    plan = evolved(data, base)
    assert plan.action == "evolve"
    assert list(plan.changes) == expected
    assert [u["action"] for u in plan.updates] == ["add-schema", "set-current-schema"]
    assert {r["type"] for r in plan.requirements} >= {"assert-current-schema-id"}
    after = commit(plan, base)
    assert after.current_schema_id == 1
    desired = table_targets(parse_config(data))[0].schema
    assert after.schema().as_struct() == desired.as_struct()
    assert evolved(data, after).action == "unchanged"


@pytest.mark.parametrize(
    ("edit", "path", "message"), [(e, p, m) for _, e, p, m in REFUSED], ids=[n for n, *_ in REFUSED]
)
def test_destructive_evolution_is_refused(edit: Any, path: str, message: str) -> None:
    data = _evolution_base()
    base = created(data)
    edit(data["tables"][0]["schema"]["fields"])
    with pytest.raises(InvalidConfig) as caught:
        evolved(data, base)
    errors = {e.path: e.message for e in caught.value.errors}
    assert path in errors, errors
    assert message in errors[path]


def test_changing_the_partitioning_is_refused() -> None:
    data = _evolution_base()
    base = created(data)
    data["tables"][0]["partitioning_scheme"] = "hour"
    with pytest.raises(InvalidConfig) as caught:
        evolved(data, base)
    (error,) = caught.value.errors
    assert error.path == "tables[0].partitioning_scheme"
    assert "from unpartitioned to partitioned by hour(_kafka.timestamp) is not supported" in error.message


def test_changing_list_element_id_is_refused() -> None:
    data = load_yaml(SEED_YAML).to_json()
    del data["tables"][0]
    base = created(data)
    data["tables"][0]["schema"]["fields"][5]["fields"][0]["id"] = 26
    with pytest.raises(InvalidConfig) as caught:
        evolved(data, base)
    assert [(e.path, e.message.split(" is ")[0]) for e in caught.value.errors] == [
        ("tables[0].schema.fields[5].fields", "dropping cookies.element (id 21)")
    ]


def test_map_keys_cannot_widen() -> None:
    data = minimal()
    data["tables"][0]["schema"]["fields"].append(
        {
            "name": "m",
            "id": 4,
            "type": "map",
            "fields": [{"name": "key", "id": 5, "type": "int"}, {"name": "value", "id": 6, "type": "int"}],
        }
    )
    base = created(data)
    data["tables"][0]["schema"]["fields"][3]["fields"][1]["type"] = "long"
    assert list(evolved(data, base).changes) == ["widen m.value from int to long"]
    data["tables"][0]["schema"]["fields"][3]["fields"][0]["type"] = "long"
    with pytest.raises(InvalidConfig, match="map keys cannot change type"):
        evolved(data, base)


def test_ids_of_dropped_columns_are_not_reused() -> None:
    data = minimal()
    base = created(data)
    # Someone dropped `service` (id 3) outside floe: the table's current schema lacks it.
    dropped = Schema(*[f for f in base.schema().fields if f.field_id != 3], schema_id=1)
    base = base.model_copy(update={"schemas": [*base.schemas, dropped], "current_schema_id": 1})
    data["tables"][0]["schema"]["fields"][2] = {"name": "region", "id": 3, "type": "string", "optional": True}
    with pytest.raises(InvalidConfig, match="field id 3 belonged to a column this table dropped earlier"):
        evolved(data, base)


def test_source_format_change_updates_the_property() -> None:
    data = minimal()
    base = created(data)
    data["tables"][0]["source_format"] = "avro"
    plan = evolved(data, base)
    assert plan.action == "evolve"
    assert list(plan.changes) == ["set property floe.source.format=avro"]
    assert commit(plan, base).properties["floe.source.format"] == "avro"


def test_plan_lists_removed_tables() -> None:
    previous = parse_config(_two_tables("a", "b"))
    current = parse_config(minimal(source_topic="a"))
    existing = {(t.namespace, t.name): commit(plan_table(t, None), None) for t in table_targets(previous)}
    plan = plan_pipeline(current, existing, previous)
    assert [(t.table, t.action) for t in plan.tables] == [
        ("a", "unchanged"),
        ("a_dlq", "unchanged"),
        ("b", "removed"),
        ("b_dlq", "removed"),
    ]
    assert plan.commits == ()


def test_plan_reports_a_table_the_applied_revision_no_longer_ingests_as_resumed() -> None:
    # Issue 12: add.yaml (a, b) applied, then a.yaml (a only): a dry run of add.yaml must say b comes back.
    both = parse_config(_two_tables("a", "b"))
    applied = parse_config(minimal(source_topic="a"))
    existing = {(t.namespace, t.name): commit(plan_table(t, None), None) for t in table_targets(both)}
    plan = plan_pipeline(both, existing, applied)
    assert [(t.table, t.action) for t in plan.tables] == [
        ("a", "unchanged"),
        ("a_dlq", "unchanged"),
        ("b", "resumed"),
        ("b_dlq", "resumed"),
    ]
    assert plan.tables[2].changes == ("ingested again (the applied revision does not ingest it)",)
    assert plan.commits == ()


def test_plan_collects_errors_of_every_table() -> None:
    data = _two_tables("a", "b")
    config = parse_config(data)
    existing = {(t.namespace, t.name): commit(plan_table(t, None), None) for t in table_targets(config)}
    for table in data["tables"]:
        table["schema"]["fields"].pop()
    with pytest.raises(InvalidConfig) as caught:
        plan_pipeline(parse_config(data), existing)
    assert [e.path for e in caught.value.errors] == ["tables[0].schema.fields", "tables[1].schema.fields"]


def test_config_error_is_an_exception_with_path_and_message() -> None:
    error = ConfigError("tables[0].source_topic", "bad", line=3)
    assert str(error) == "tables[0].source_topic (line 3): bad"
    assert error.to_json() == {"path": "tables[0].source_topic", "message": "bad", "line": 3}
    assert isinstance(PipelineConfig(), PipelineConfig)


def test_avro_framing_is_confluent_unless_raw_is_asked_for() -> None:
    assert parse_config(minimal(source_format="avro")).tables[0].avro_framing == "confluent"
    raw = parse_config(minimal(source_format="avro", avro_framing="raw"))
    assert raw.tables[0].avro_framing == "raw"
    assert parse_config(raw.to_json()) == raw
    assert errors_of(minimal(source_format="avro", avro_framing="base64")) == {
        "tables[0].avro_framing": "expected one of confluent, raw; got 'base64'"
    }
    assert (
        "only used with source_format: avro"
        in errors_of(minimal(avro_framing="raw"))["tables[0].avro_framing"]
    )
    registry = minimal(
        source_format="avro", avro_framing="raw", schema_mode="registry", schema_registry_url="http://r:8081"
    )
    assert "Confluent framing" in errors_of(registry)["tables[0].avro_framing"]
