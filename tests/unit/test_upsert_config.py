"""Upsert and CDC tables in floe.yaml without a server: `table_mode`, `key_fields` and `envelope`, each
error at its YAML path; the Iceberg schema (identifier fields, `_cdc`), properties, and the evolution
rules (mode and key of an existing table cannot change)."""

from __future__ import annotations

from typing import Any

import pytest

from catalog.pipelines import InvalidConfig, data_properties, data_schema, parse_config, table_targets
from catalog.pipelines.columns import CDC_COLUMN, CDC_FIELD_ID, KAFKA_FIELD_ID, KEY_COLUMN, KEY_FIELD_ID
from catalog.pipelines.evolution import plan_table
from tests.unit.test_pipeline_config import commit, created, errors_of, evolved, minimal

FIELDS = [
    {"name": "customer_id", "id": 1, "type": "long"},
    {"name": "region", "id": 2, "type": "string"},
    {"name": "email", "id": 3, "type": "string", "optional": True},
    {"name": "score", "id": 4, "type": "double"},
    {"name": "address", "id": 5, "type": "struct", "fields": [{"name": "city", "id": 6, "type": "string"}]},
]


def upsert(**table: Any) -> dict[str, Any]:
    return minimal(schema={"fields": [dict(f) for f in FIELDS]}, table_mode="upsert", **table)


def test_upsert_table_has_identifier_fields_and_merge_on_read() -> None:
    config = parse_config(upsert(key_fields=["customer_id", "region"]))
    (table,) = config.tables
    assert table.is_upsert
    assert table.key_fields == ("customer_id", "region")
    schema = data_schema(table)
    assert schema.identifier_field_ids == [1, 2]
    assert [f.field_id for f in schema.fields][-1] == KAFKA_FIELD_ID
    properties = data_properties(table)
    assert properties["floe.table-mode"] == "upsert"
    assert properties["write.merge.mode"] == "merge-on-read"
    assert properties["write.delete.mode"] == "merge-on-read"
    assert properties["write.delete.granularity"] == "partition"
    assert properties["write.update.mode"] == "merge-on-read"
    # Small files are packed into few Spark tasks when a merge scans the table.
    assert properties["read.split.open-file-cost"] == "65536"
    # The normalized form keeps the keys and parses back equal.
    normalized = config.to_json()
    assert normalized["tables"][0]["table_mode"] == "upsert"
    assert normalized["tables"][0]["key_fields"] == ["customer_id", "region"]
    assert parse_config(normalized) == config


def test_append_tables_keep_their_normalized_form() -> None:
    """Tables configured before upsert existed store (and fingerprint) exactly as before."""
    config = parse_config(minimal())
    table = config.to_json()["tables"][0]
    assert not {"table_mode", "key_fields", "envelope"} & set(table)
    assert data_schema(config.tables[0]).identifier_field_ids == []
    assert "floe.table-mode" not in data_properties(config.tables[0])
    explicit = parse_config(minimal(table_mode="APPEND", envelope="none"))
    assert explicit == config


def test_debezium_table_gets_the_cdc_column() -> None:
    (table,) = parse_config(upsert(key_fields=["customer_id"], envelope="debezium")).tables
    schema = data_schema(table)
    cdc = schema.find_field(CDC_COLUMN)
    assert cdc.field_id == CDC_FIELD_ID
    assert not cdc.required
    assert [f.name for f in cdc.field_type.fields] == ["op", "ts_ms", "source"]  # type: ignore[attr-defined]
    assert schema.identifier_field_ids == [1]


@pytest.mark.parametrize(
    ("table", "path", "message"),
    [
        ({"table_mode": "merge"}, "tables[0].table_mode", "expected one of append, upsert; got 'merge'"),
        ({"key_fields": ["id"]}, "tables[0].key_fields", "key_fields is only used with table_mode: upsert"),
        (
            {"table_mode": "upsert", "key_fields": []},
            "tables[0].key_fields",
            "must not be empty",
        ),
        (
            {"table_mode": "upsert", "key_fields": "id"},
            "tables[0].key_fields",
            "expected a list; got a string",
        ),
        (
            {"table_mode": "upsert", "key_fields": ["id", "nope"]},
            "tables[0].key_fields[1]",
            "unknown field 'nope'; the schema's fields: id, event_time, service",
        ),
        (
            {"table_mode": "upsert", "key_fields": ["id", "id"]},
            "tables[0].key_fields[1]",
            "key field 'id' is listed twice",
        ),
        ({"envelope": "debezium"}, "tables[0].envelope", "envelope debezium needs table_mode: upsert"),
        ({"envelope": "maxwell"}, "tables[0].envelope", "expected one of none, debezium; got 'maxwell'"),
    ],
)
def test_upsert_settings_are_validated_at_their_paths(table: dict[str, Any], path: str, message: str) -> None:
    errors = errors_of(minimal(**table))
    assert path in errors, errors
    assert message in errors[path], errors[path]


@pytest.mark.parametrize(
    ("key", "message"),
    [
        (
            "email",
            "key field 'email' must be required: remove optional: true from tables[0].schema.fields[2]",
        ),
        ("address", "key field 'address' must be a primitive type; it is a struct"),
        ("score", "key field 'score' cannot be a double"),
        ("address.city", "unknown field 'address.city' (key fields are top-level fields)"),
    ],
)
def test_key_fields_must_be_required_primitive_top_level_fields(key: str, message: str) -> None:
    errors = errors_of(upsert(key_fields=["customer_id", key]))
    assert list(errors) == ["tables[0].key_fields[1]"], errors
    assert message in errors["tables[0].key_fields[1]"]


def test_debezium_rules() -> None:
    errors = errors_of(
        minimal(
            source_format="avro",
            table_mode="upsert",
            key_fields=["id"],
            envelope="debezium",
            schema={
                "fields": [
                    {"name": "id", "id": 1, "type": "long"},
                    {"name": "_cdc", "id": 2, "type": "string"},
                ]
            },
        )
    )
    assert "or Avro ones through a schema registry" in errors["tables[0].envelope"]
    assert "_cdc is reserved" in errors["tables[0].schema.fields[1].name"]


def test_an_upsert_table_without_key_fields_is_keyed_by_the_record_key() -> None:
    config = parse_config(upsert())
    (table,) = config.tables
    assert table.keyed_by_record_key
    schema = data_schema(table)
    key = schema.find_field(KEY_COLUMN)
    assert (key.field_id, str(key.field_type), key.required) == (KEY_FIELD_ID, "binary", True)
    assert schema.identifier_field_ids == [KEY_FIELD_ID]
    assert [f.field_id for f in schema.fields][-2:] == [KEY_FIELD_ID, KAFKA_FIELD_ID]
    assert "key_fields" not in config.to_json()["tables"][0]
    assert parse_config(config.to_json()) == config
    assert not parse_config(upsert(key_fields=["customer_id"])).tables[0].keyed_by_record_key


def test_record_key_tables_partition_by_the_key_column() -> None:
    """`bucket(16, _key)` spreads a record-key table's keys (so a merge touches few files); `_key` is
    no column of any other table unless it declares one."""
    from pyiceberg.transforms import BucketTransform, TruncateTransform

    from catalog.pipelines import partition_spec

    (table,) = parse_config(upsert(partitioning_scheme=["bucket(16, _key)", "truncate(2, _key)"])).tables
    spec = partition_spec(table)
    assert [(f.source_id, f.transform, f.name) for f in spec.fields] == [
        (KEY_FIELD_ID, BucketTransform(16), "_key_bucket"),
        (KEY_FIELD_ID, TruncateTransform(2), "_key_trunc"),
    ]
    assert spec.partition_type(data_schema(table))  # binds against the schema's `_key`
    errors = errors_of(upsert(key_fields=["customer_id"], partitioning_scheme=["bucket(16, _key)"]))
    keyed = errors["tables[0].partitioning_scheme[0]"]
    assert "this table is keyed by customer_id: partition by them" in keyed
    errors = errors_of(minimal(partitioning_scheme=["hour(_kafka.timestamp)", "bucket(4, _key)"]))
    assert (
        "_key is the record key column of upsert tables without key_fields"
        in (errors["tables[0].partitioning_scheme[1]"])
    )
    assert (
        "hour() needs"
        in errors_of(upsert(partitioning_scheme=["hour(_key)"]))["tables[0].partitioning_scheme[0]"]
    )
    # An append table's own `_key` field is a column like any other.
    fields = [{"name": "_key", "id": 1, "type": "long"}]
    (own,) = parse_config(minimal(schema={"fields": fields}, partitioning_scheme=["bucket(4, _key)"])).tables
    assert partition_spec(own).fields[0].source_id == 1


def test_record_key_tables_reserve_key_and_debezium_needs_key_fields() -> None:
    data = upsert()
    data["tables"][0]["schema"]["fields"].append({"name": "_key", "id": 9, "type": "string"})
    errors = errors_of(data)
    assert "_key is reserved" in errors["tables[0].schema.fields[5].name"]
    assert (
        parse_config(upsert(key_fields=["customer_id"], envelope="debezium")).tables[0].envelope == "debezium"
    )
    errors = errors_of(upsert(envelope="debezium"))
    assert "envelope debezium needs key_fields" in errors["tables[0].envelope"]


def test_debezium_avro_needs_the_registry() -> None:
    registry = {"schema_mode": "registry", "schema_registry_url": "http://127.0.0.1:8081"}
    table = upsert(key_fields=["customer_id"], envelope="debezium", source_format="avro", **registry)
    assert parse_config(table).tables[0].envelope == "debezium"
    errors = errors_of(upsert(key_fields=["customer_id"], envelope="debezium", source_format="avro"))
    assert "through a schema registry" in errors["tables[0].envelope"]


def test_every_upsert_problem_is_reported() -> None:
    errors = errors_of(upsert(key_fields=["email", "score"], envelope="debezium", source_format="avro"))
    assert set(errors) == {"tables[0].key_fields[0]", "tables[0].key_fields[1]", "tables[0].envelope"}


# -- evolution of existing tables ------------------------------------------------------------------


def test_changing_table_mode_is_refused_both_ways() -> None:
    append = minimal(schema={"fields": [dict(f) for f in FIELDS]})
    base = created(append)
    with pytest.raises(InvalidConfig) as caught:
        evolved(upsert(key_fields=["customer_id"]), base)
    (error,) = caught.value.errors
    assert error.path == "tables[0].table_mode"
    assert "c1.events is an append table: its table_mode cannot change to upsert" in error.message

    keyed = created(upsert(key_fields=["customer_id"]))
    with pytest.raises(InvalidConfig) as caught:
        evolved(append, keyed)
    (error,) = caught.value.errors
    assert error.path == "tables[0].table_mode"
    assert "is an upsert table: its table_mode cannot change to append" in error.message


def test_changing_key_fields_is_refused_renaming_one_is_not() -> None:
    data = upsert(key_fields=["customer_id"])
    base = created(data)
    assert base.schema().identifier_field_ids == [1]
    assert evolved(data, base).action == "unchanged"
    with pytest.raises(InvalidConfig) as caught:
        evolved(upsert(key_fields=["customer_id", "region"]), base)
    (error,) = caught.value.errors
    assert error.path == "tables[0].key_fields"
    assert "keyed by [customer_id] (field ids [1]): key_fields cannot change to [customer_id, region]" in (
        error.message
    )
    renamed = upsert(key_fields=["id"])
    renamed["tables"][0]["schema"]["fields"][0]["name"] = "id"
    plan = evolved(renamed, base)
    assert plan.changes == ("rename customer_id to id",)
    after = commit(plan, base)
    assert after.schema().identifier_field_ids == [1]


def test_switching_between_record_key_and_key_fields_is_refused() -> None:
    base = created(upsert())
    assert base.schema().identifier_field_ids == [KEY_FIELD_ID]
    assert evolved(upsert(), base).action == "unchanged"
    with pytest.raises(InvalidConfig) as caught:
        evolved(upsert(key_fields=["customer_id"]), base)
    (error,) = caught.value.errors
    assert "keyed by [_key]" in error.message
    keyed = created(upsert(key_fields=["customer_id"]))
    with pytest.raises(InvalidConfig) as caught:
        evolved(upsert(), keyed)
    (error,) = caught.value.errors
    assert "cannot change to [the Kafka record key (_key)]" in error.message


def test_adding_a_column_keeps_the_key() -> None:
    data = upsert(key_fields=["customer_id"])
    base = created(data)
    data["tables"][0]["schema"]["fields"].append({"name": "tier", "id": 7, "type": "int", "optional": True})
    after = commit(evolved(data, base), base)
    assert after.schema().identifier_field_ids == [1]
    assert after.schema().find_field("tier").field_id == 7


def test_adding_the_debezium_envelope_adds_cdc() -> None:
    data = upsert(key_fields=["customer_id"])
    base = created(data)
    plan = evolved(upsert(key_fields=["customer_id"], envelope="debezium"), base)
    assert "add column _cdc (id 2000000100, struct)" in plan.changes
    target = table_targets(parse_config(upsert(key_fields=["customer_id"], envelope="debezium")))[0]
    after = commit(plan, base)
    assert plan_table(target, after).action == "unchanged"


# -- format version: deletion vectors on v3 --------------------------------------------------------


def test_format_version_3_creates_a_v3_table_and_keeps_the_default_form() -> None:
    data = upsert(key_fields=["customer_id"], format_version=3)
    config = parse_config(data)
    assert config.tables[0].format_version == 3
    assert config.to_json()["tables"][0]["format_version"] == 3
    assert parse_config(config.to_json()) == config
    metadata = created(data)
    assert metadata.format_version == 3
    assert metadata.properties["write.merge.mode"] == "merge-on-read"
    assert evolved(data, metadata).action == "unchanged"
    # The dead-letter table stays v2 (appends only; no deletes to write).
    dlq = table_targets(config)[1]
    assert dlq.kind == "dlq"
    assert commit(plan_table(dlq, None), None).format_version == 2
    # v2 is the default and, like every default, not in the normalized form (no fingerprint change).
    default = parse_config(upsert(key_fields=["customer_id"], format_version=2))
    assert "format_version" not in default.to_json()["tables"][0]
    assert default == parse_config(upsert(key_fields=["customer_id"]))
    assert created(upsert(key_fields=["customer_id"])).format_version == 2


@pytest.mark.parametrize("value", [1, 4, "3", True, None, 2.5])
def test_format_version_must_be_2_or_3(value: Any) -> None:
    assert errors_of(upsert(key_fields=["customer_id"], format_version=value)) == {
        "tables[0].format_version": f"expected 2 or 3 (the Iceberg format version); got {value!r}"
    }


def test_format_version_upgrades_2_to_3_and_refuses_to_go_down() -> None:
    v2 = upsert(key_fields=["customer_id"])
    base = created(v2)
    v3 = upsert(key_fields=["customer_id"], format_version=3)
    plan = evolved(v3, base)
    assert plan.action == "evolve"
    assert plan.changes == ("upgrade the format version from 2 to 3",)
    upgraded = commit(plan, base)
    assert upgraded.format_version == 3
    assert upgraded.schema().identifier_field_ids == [1]
    assert evolved(v3, upgraded).action == "unchanged"
    # An upgrade together with a new column: one commit.
    v3["tables"][0]["schema"]["fields"].append({"name": "tier", "id": 7, "type": "int", "optional": True})
    both = evolved(v3, base)
    assert both.changes == ("upgrade the format version from 2 to 3", "add column tier (id 7, int)")
    assert commit(both, base).format_version == 3
    with pytest.raises(InvalidConfig) as caught:
        evolved(v2, upgraded)
    (error,) = caught.value.errors
    assert error.path == "tables[0].format_version"
    assert "c1.events is an Iceberg format version 3 table: its format_version cannot go down to 2" in (
        error.message
    )
