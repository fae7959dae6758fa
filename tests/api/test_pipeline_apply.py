"""`floe apply` through the API on both backends: PUT/GET /management/v1/pipeline (the command line is in
tests/e2e/test_pipeline_apply.py).

Tables are created with exactly the configured field ids plus `_kafka`, and a `_dlq` table each;
re-applying is a no-op; allowed evolutions land; destructive ones are refused with nothing applied;
dry runs change nothing; only global administrators apply; cluster keys read their own tables.

The pipeline is one desired state per catalog: every test applies a configuration of its own, with
clusters named uniquely, and asserts only about its own tables.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import NoSuchTableError

from catalog.pipelines import KAFKA_FIELD_ID, KAFKA_TIMESTAMP_ID, dlq_schema
from devtools.catalog_server import CatalogProcess
from tests.api.catalog_thread import CatalogThread
from tests.unit.test_pipeline_config import SEED_YAML

PIPELINE = "/management/v1/pipeline"


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def seed_config() -> dict[str, Any]:
    """The seed's example with clusters of this test's own, in floe's default warehouse."""
    data: dict[str, Any] = yaml.safe_load(SEED_YAML)
    del data["destination_bucket_url"]
    renames = {c["name"]: unique(c["name"]) for c in data["source_clusters"]}
    for cluster in data["source_clusters"]:
        cluster["name"] = renames[cluster["name"]]
    for table in data["tables"]:
        table["source_cluster_name"] = renames[table["source_cluster_name"]]
    return data


def one_table(fields: list[dict[str, Any]], **table: Any) -> dict[str, Any]:
    cluster = unique("kafka")
    return {
        "source_clusters": [
            {"name": cluster, "bootstrap_brokers": [{"hostname": "localhost", "port": 9092}]}
        ],
        "tables": [
            {
                "source_cluster_name": cluster,
                "source_topic": "events",
                "source_format": "json",
                "schema": {"fields": fields},
                **table,
            }
        ],
    }


def apply(http: httpx.Client, config: dict[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
    response = http.put(PIPELINE, json={"config": config, "dry_run": dry_run})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def refused(http: httpx.Client, config: dict[str, Any]) -> dict[str, str]:
    """Apply a configuration that must be refused: its errors, YAML path -> message."""
    response = http.put(PIPELINE, json={"config": config})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == "BadRequestException"
    assert error["code"] == 400
    for entry in error["errors"]:
        assert entry["path"] in error["message"]
    return {e["path"]: e["message"] for e in error["errors"]}


def revision(http: httpx.Client) -> int | None:
    response = http.get(PIPELINE)
    if response.status_code == 404:
        return None
    assert response.status_code == 200, response.text
    return int(response.json()["revision"])


def plan_of(body: dict[str, Any], namespace: str) -> dict[str, tuple[str, list[str]]]:
    """This test's part of a plan: table -> (action, changes)."""
    return {e["table"]: (e["action"], e["changes"]) for e in body["plan"] if e["namespace"] == namespace}


def metadata_location(rest_catalog: RestCatalog, namespace: str, table: str) -> str:
    return str(rest_catalog.load_table((namespace, table)).metadata_location)


# -- create, re-apply, read back -------------------------------------------------------------------


def test_apply_creates_tables_with_the_configured_ids(http: httpx.Client, rest_catalog: RestCatalog) -> None:
    config = seed_config()
    first, second = (c["name"] for c in config["source_clusters"])
    before = revision(http)
    body = apply(http, config)
    assert body["applied"]
    assert body["warehouse"] == "default"
    assert body["revision"] == (before or 0) + 1
    assert plan_of(body, first) == {
        "example_json_logs_topic": (
            "create",
            ["create with 5 columns, partitioned by hour(_kafka.timestamp)"],
        ),
        "example_json_logs_topic_dlq": ("create", ["create with 9 columns, unpartitioned"]),
    }
    events = rest_catalog.load_table((second, "example_avro_events_topic"))
    schema = events.schema()
    ids = {name: schema.find_field(name).field_id for name in ("event_id", "user_id", "device.os.vendor")}
    assert ids == {"event_id": 1, "user_id": 2, "device.os.vendor": 25}
    expected = sorted([*range(1, 26), *range(KAFKA_FIELD_ID, KAFKA_FIELD_ID + 9)])
    assert sorted(schema._lazy_id_to_field) == expected
    assert schema.find_field("device.os.vendor").required is False
    assert schema.find_field("device.screen.width").required is True
    assert schema.find_field("_kafka").required is False
    assert schema.find_field("_kafka.timestamp").field_id == KAFKA_TIMESTAMP_ID
    assert events.properties["write.format.default"] == "parquet"
    assert events.properties["write.parquet.compression-codec"] == "zstd"
    assert events.properties["write.distribution-mode"] == "none"
    assert events.properties["floe.source.cluster"] == second
    assert events.properties["floe.source.topic"] == "example_avro_events_topic"
    assert events.properties["floe.source.format"] == "avro"
    assert events.spec().is_unpartitioned()
    logs = rest_catalog.load_table((first, "example_json_logs_topic"))
    assert [(f.source_id, str(f.transform)) for f in logs.spec().fields] == [(KAFKA_TIMESTAMP_ID, "hour")]
    dlq = rest_catalog.load_table((second, "example_avro_events_topic_dlq"))
    assert dlq.schema().as_struct() == dlq_schema().as_struct()
    # Each source cluster became a floe cluster (with its namespace).
    clusters = http.get("/management/v1/clusters").json()["clusters"]
    assert {first, second} <= {c["name"] for c in clusters}
    state = http.get(PIPELINE).json()
    assert state["revision"] == body["revision"]
    assert state["applied_by"] == "floe-admin"
    assert state["config"]["tables"][1]["schema"]["fields"][0] == {
        "name": "event_id",
        "id": 1,
        "type": "string",
        "optional": False,
    }
    assert [t["table"] for t in state["tables"]] == ["example_json_logs_topic", "example_avro_events_topic"]
    assert state["tables"][1] == {
        "cluster": second,
        "topic": "example_avro_events_topic",
        "namespace": second,
        "table": "example_avro_events_topic",
        "dlq_table": "example_avro_events_topic_dlq",
        "warehouse": "default",
        "source_format": "avro",
        "schema_mode": "inline",
        "schema_registry_url": None,
        "commit_interval_seconds": None,
        "partitioning": [],
    }


def test_reapply_is_a_noop(http: httpx.Client, rest_catalog: RestCatalog) -> None:
    config = seed_config()
    first = config["source_clusters"][0]["name"]
    applied = apply(http, config)
    location = metadata_location(rest_catalog, first, "example_json_logs_topic")
    again = apply(http, copy.deepcopy(config))
    assert not again["applied"]
    assert again["revision"] == applied["revision"]
    assert {action for action, _ in plan_of(again, first).values()} == {"unchanged"}
    assert metadata_location(rest_catalog, first, "example_json_logs_topic") == location
    assert revision(http) == applied["revision"]


# -- evolution -------------------------------------------------------------------------------------

BASE_FIELDS: list[dict[str, Any]] = [
    {"name": "id", "id": 1, "type": "long"},
    {"name": "service", "id": 2, "type": "string"},
    {"name": "count", "id": 3, "type": "int"},
    {"name": "ratio", "id": 4, "type": "float"},
    {"name": "price", "id": 5, "type": "decimal(9, 2)"},
    {"name": "note", "id": 6, "type": "string", "optional": True},
    {"name": "at", "id": 7, "type": "timestamptz"},
]

Edit = Callable[[dict[str, Any]], Any]


def table_fields(config: dict[str, Any]) -> list[dict[str, Any]]:
    fields: list[dict[str, Any]] = config["tables"][0]["schema"]["fields"]
    return fields


ALLOWED: list[tuple[str, Edit, str, Callable[[Any], bool]]] = [
    (
        "add an optional column",
        lambda c: table_fields(c).append({"name": "region", "id": 8, "type": "string", "optional": True}),
        "add column region (id 8, string)",
        lambda s: s.find_field("region").field_id == 8 and not s.find_field("region").required,
    ),
    (
        "required to optional",
        lambda c: table_fields(c)[1].update(optional=True),
        "make service optional",
        lambda s: not s.find_field("service").required,
    ),
    (
        "int to long",
        lambda c: table_fields(c)[2].update(type="long"),
        "widen count from int to long",
        lambda s: str(s.find_field("count").field_type) == "long",
    ),
    (
        "float to double",
        lambda c: table_fields(c)[3].update(type="double"),
        "widen ratio from float to double",
        lambda s: str(s.find_field("ratio").field_type) == "double",
    ),
    (
        "wider decimal",
        lambda c: table_fields(c)[4].update(type="decimal(18, 2)"),
        "widen price from decimal(9, 2) to decimal(18, 2)",
        lambda s: str(s.find_field("price").field_type) == "decimal(18, 2)",
    ),
    (
        "rename",
        lambda c: table_fields(c)[1].update(name="svc"),
        "rename service to svc",
        lambda s: s.find_field("svc").field_id == 2,
    ),
]


@pytest.mark.parametrize(
    ("edit", "change", "check"), [(e, c, k) for _, e, c, k in ALLOWED], ids=[n for n, *_ in ALLOWED]
)
def test_allowed_evolution_lands(
    http: httpx.Client, rest_catalog: RestCatalog, edit: Edit, change: str, check: Callable[[Any], bool]
) -> None:
    config = one_table(copy.deepcopy(BASE_FIELDS))
    namespace = config["source_clusters"][0]["name"]
    apply(http, config)
    edit(config)
    body = apply(http, config)
    assert body["applied"]
    assert plan_of(body, namespace) == {"events": ("evolve", [change]), "events_dlq": ("unchanged", [])}
    table = rest_catalog.load_table((namespace, "events"))
    assert table.metadata.current_schema_id == 1
    assert check(table.schema())
    assert table.schema().find_field("_kafka").field_id == KAFKA_FIELD_ID
    # The configured ids stay where they were.
    assert [f.field_id for f in table.schema().fields][:7] == [1, 2, 3, 4, 5, 6, 7]
    assert plan_of(apply(http, config), namespace)["events"] == ("unchanged", [])


REFUSED: list[tuple[str, Edit, str, str]] = [
    ("drop a column", lambda c: table_fields(c).pop(1), "tables[0].schema.fields", "dropping service (id 2)"),
    (
        "optional to required",
        lambda c: table_fields(c)[5].update(optional=False),
        "tables[0].schema.fields[5].optional",
        "making optional column note required",
    ),
    (
        "narrow long to int",
        lambda c: table_fields(c)[0].update(type="int"),
        "tables[0].schema.fields[0].type",
        "changing id from long to int",
    ),
    (
        "string to long",
        lambda c: table_fields(c)[1].update(type="long"),
        "tables[0].schema.fields[1].type",
        "changing service from string to long",
    ),
    (
        "required new column",
        lambda c: table_fields(c).append({"name": "region", "id": 8, "type": "string"}),
        "tables[0].schema.fields[7].optional",
        "new column region must be optional",
    ),
    (
        "change the partitioning",
        lambda c: c["tables"][0].update(partitioning_scheme="day"),
        "tables[0].partitioning_scheme",
        "changing the partitioning",
    ),
]


@pytest.mark.parametrize(
    ("edit", "path", "message"), [(e, p, m) for _, e, p, m in REFUSED], ids=[n for n, *_ in REFUSED]
)
def test_destructive_change_is_refused_and_nothing_applied(
    http: httpx.Client, rest_catalog: RestCatalog, edit: Edit, path: str, message: str
) -> None:
    config = one_table(copy.deepcopy(BASE_FIELDS))
    namespace = config["source_clusters"][0]["name"]
    applied = apply(http, config)
    location = metadata_location(rest_catalog, namespace, "events")
    edit(config)
    # A valid new table in the same configuration is not created either: all or nothing.
    config["tables"].append(copy.deepcopy(config["tables"][0]) | {"source_topic": "other"})
    config["tables"][1]["schema"]["fields"] = copy.deepcopy(BASE_FIELDS)
    config["tables"][1]["partitioning_scheme"] = "unpartitioned"
    errors = refused(http, config)
    assert path in errors, errors
    assert message in errors[path]
    assert metadata_location(rest_catalog, namespace, "events") == location
    with pytest.raises(NoSuchTableError):
        rest_catalog.load_table((namespace, "other"))
    assert revision(http) == applied["revision"]


def test_removed_tables_are_kept(http: httpx.Client, rest_catalog: RestCatalog) -> None:
    config = one_table(copy.deepcopy(BASE_FIELDS))
    namespace = config["source_clusters"][0]["name"]
    config["tables"].append(copy.deepcopy(config["tables"][0]) | {"source_topic": "audit.log"})
    apply(http, config)
    del config["tables"][1]
    body = apply(http, config)
    assert body["applied"]
    assert plan_of(body, namespace) == {
        "events": ("unchanged", []),
        "events_dlq": ("unchanged", []),
        "audit_log": ("removed", ["kept with its data; no longer ingested"]),
        "audit_log_dlq": ("removed", ["kept with its data; no longer ingested"]),
    }
    rest_catalog.load_table((namespace, "audit_log"))
    rest_catalog.load_table((namespace, "audit_log_dlq"))
    state = http.get(PIPELINE).json()
    assert [(t["namespace"], t["table"]) for t in state["tables"]] == [(namespace, "events")]


# -- dry run, bad input, authorization -------------------------------------------------------------


def test_dry_run_changes_nothing(http: httpx.Client, rest_catalog: RestCatalog) -> None:
    before = revision(http)
    config = one_table(copy.deepcopy(BASE_FIELDS), partitioning_scheme=["day(at)", "bucket(8, id)"])
    namespace = config["source_clusters"][0]["name"]
    body = apply(http, config, dry_run=True)
    assert body["dry_run"]
    assert not body["applied"]
    assert body["revision"] == before
    assert plan_of(body, namespace) == {
        "events": ("create", ["create with 8 columns, partitioned by day(at), bucket[8](id)"]),
        "events_dlq": ("create", ["create with 9 columns, unpartitioned"]),
    }
    assert http.get(f"/management/v1/clusters/{namespace}").status_code == 404
    assert namespace not in [ns[0] for ns in rest_catalog.list_namespaces()]
    assert revision(http) == before
    # And a dry run of an evolution leaves the table as it is.
    apply(http, config)
    location = metadata_location(rest_catalog, namespace, "events")
    table_fields(config).append({"name": "region", "id": 8, "type": "string", "optional": True})
    body = apply(http, config, dry_run=True)
    assert plan_of(body, namespace)["events"] == ("evolve", ["add column region (id 8, string)"])
    assert metadata_location(rest_catalog, namespace, "events") == location


def test_every_error_is_listed_with_its_path(http: httpx.Client) -> None:
    before = revision(http)
    config = seed_config()
    config["tables"][0]["source_format"] = "csv"
    config["tables"][1]["schema"]["fields"][3]["fields"][0]["id"] = 2
    config["tables"][1]["partitioning_scheme"] = ["hour(user_id)"]
    config["tables"][1]["bogus"] = True
    errors = refused(http, config)
    assert set(errors) == {
        "tables[0].source_format",
        "tables[1].schema.fields[3].fields[0].id",
        "tables[1].partitioning_scheme[0]",
        "tables[1].bogus",
    }
    assert "expected one of json, avro, protobuf; got 'csv'" in errors["tables[0].source_format"]
    assert revision(http) == before


def test_malformed_body_is_400(http: httpx.Client) -> None:
    response = http.put(PIPELINE, json={"config": ["not", "a", "mapping"]})
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "BadRequestException"


def test_only_global_admins_apply(http: httpx.Client, catalog_server: CatalogProcess) -> None:
    config = one_table(copy.deepcopy(BASE_FIELDS))
    cluster = config["source_clusters"][0]["name"]
    apply(http, config)
    before = revision(http)
    for role in ("admin", "writer", "reader"):
        key = http.post("/management/v1/keys", json={"cluster": cluster, "role": role}).json()
        token = catalog_server.token(key["client_id"], key["client_secret"])
        response = httpx.put(
            f"{catalog_server.url}{PIPELINE}",
            json={"config": config},
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
        assert response.status_code == 403, response.text
        assert response.json()["error"]["type"] == "ForbiddenException"
    assert revision(http) == before
    response = httpx.put(f"{catalog_server.url}{PIPELINE}", json={"config": config}, timeout=30)
    assert response.status_code == 401


def test_cluster_keys_read_their_own_tables(http: httpx.Client, catalog_server: CatalogProcess) -> None:
    config = seed_config()
    first, second = (c["name"] for c in config["source_clusters"])
    apply(http, config)
    for role in ("writer", "admin"):
        key = http.post("/management/v1/keys", json={"cluster": second, "role": role}).json()
        token = catalog_server.token(key["client_id"], key["client_secret"])
        state = httpx.get(
            f"{catalog_server.url}{PIPELINE}", headers={"Authorization": f"Bearer {token}"}, timeout=30
        ).json()
        assert [(t["namespace"], t["table"]) for t in state["tables"]] == [
            (second, "example_avro_events_topic")
        ]
        assert [c["name"] for c in state["config"]["source_clusters"]] == [second]
        assert first not in str(state)
    reader = http.post("/management/v1/keys", json={"cluster": second, "role": "reader"}).json()
    token = catalog_server.token(reader["client_id"], reader["client_secret"])
    response = httpx.get(
        f"{catalog_server.url}{PIPELINE}", headers={"Authorization": f"Bearer {token}"}, timeout=30
    )
    assert response.status_code == 403


def test_cluster_in_another_warehouse_is_refused(http: httpx.Client, tmp_path: Path) -> None:
    config = one_table(copy.deepcopy(BASE_FIELDS))
    apply(http, config)
    config["destination_bucket_url"] = f"file://{tmp_path}/bucket"
    errors = refused(http, config)
    assert "already exists with its tables in warehouse 'default'" in errors["source_clusters[0].name"]


def test_destination_bucket_url_makes_a_warehouse(http: httpx.Client, tmp_path: Path) -> None:
    config = one_table(copy.deepcopy(BASE_FIELDS))
    namespace = config["source_clusters"][0]["name"]
    bucket = tmp_path / "bucket"
    config["destination_bucket_url"] = f"file://{bucket}?prefix=lake"
    body = apply(http, config)
    warehouse = body["warehouse"]
    assert warehouse == f"file-{str(bucket).strip('/').replace('/', '-')}-lake"
    catalog_config = http.get("/v1/config", params={"warehouse": warehouse})
    assert catalog_config.status_code == 200
    loaded = http.get(f"/v1/{warehouse}/namespaces/{namespace}/tables/events").json()
    assert loaded["metadata"]["location"].startswith(f"file://{bucket}/lake/floe/{namespace}/events-")
    assert (bucket / "lake" / "floe" / namespace).is_dir()
    state = http.get(PIPELINE).json()
    assert state["warehouse"] == warehouse
    assert state["tables"][0]["warehouse"] == warehouse


def test_unknown_warehouse_is_refused(http: httpx.Client) -> None:
    config = one_table(copy.deepcopy(BASE_FIELDS))
    config["warehouse"] = unique("nowhere")
    assert "does not exist" in refused(http, config)["warehouse"]


def test_no_pipeline_yet_is_404(fresh_database_url: str, tmp_path: Path) -> None:
    with CatalogThread(fresh_database_url, home=tmp_path / "home") as server:
        headers = {"Authorization": f"Bearer {server.token()}"}
        response = httpx.get(f"{server.url}{PIPELINE}", headers=headers, timeout=30)
        assert response.status_code == 404
        assert response.json()["error"]["type"] == "NotFoundException"
        assert "No pipeline configuration has been applied yet" in response.json()["error"]["message"]


def test_upsert_table_is_created_keyed_and_its_mode_cannot_change(
    http: httpx.Client, rest_catalog: RestCatalog
) -> None:
    fields = [
        {"name": "customer_id", "id": 1, "type": "long"},
        {"name": "email", "id": 2, "type": "string", "optional": True},
    ]
    config = one_table(fields, table_mode="upsert", key_fields=["customer_id"])
    namespace = config["source_clusters"][0]["name"]
    applied = apply(http, config)
    table = rest_catalog.load_table((namespace, "events"))
    assert table.schema().identifier_field_ids == [1]
    assert table.properties["floe.table-mode"] == "upsert"
    assert table.properties["write.merge.mode"] == "merge-on-read"
    location = table.metadata_location
    assert apply(http, config)["plan"][0]["action"] == "unchanged"

    append = copy.deepcopy(config)
    del append["tables"][0]["table_mode"], append["tables"][0]["key_fields"]
    errors = refused(http, append)
    assert "is an upsert table: its table_mode cannot change to append" in errors["tables[0].table_mode"]
    rekeyed = copy.deepcopy(config)
    rekeyed["tables"][0]["schema"]["fields"][1]["optional"] = False
    rekeyed["tables"][0]["key_fields"] = ["customer_id", "email"]
    errors = refused(http, rekeyed)
    assert "key_fields cannot change" in errors["tables[0].key_fields"]
    assert metadata_location(rest_catalog, namespace, "events") == location
    assert revision(http) == applied["revision"]


def test_record_key_tables_partition_by_key_and_debezium_without_key_fields_is_refused(
    http: httpx.Client, rest_catalog: RestCatalog
) -> None:
    from pyiceberg.transforms import BucketTransform

    from catalog.pipelines.columns import KEY_FIELD_ID

    fields = [{"name": "id", "id": 1, "type": "int"}, {"name": "email", "id": 2, "type": "string"}]
    config = one_table(fields, table_mode="upsert", partitioning_scheme=["bucket(16, _key)"])
    namespace = config["source_clusters"][0]["name"]
    apply(http, config)
    table = rest_catalog.load_table((namespace, "events"))
    assert table.schema().identifier_field_ids == [KEY_FIELD_ID]
    (partition,) = table.spec().fields
    assert (partition.source_id, partition.transform, partition.name) == (
        KEY_FIELD_ID,
        BucketTransform(16),
        "_key_bucket",
    )
    assert apply(http, config)["plan"][0]["action"] == "unchanged"

    # Debezium keyed by the record key's bytes is refused, nothing applied: its JSON key embeds its
    # schema (an Avro key its schema id), so the same row's key bytes change with the converter.
    debezium = one_table(fields, table_mode="upsert", envelope="debezium")
    errors = refused(http, debezium)
    assert "envelope debezium needs key_fields" in errors["tables[0].envelope"]
    assert "key_fields: [id]" in errors["tables[0].envelope"]
    with pytest.raises(NoSuchTableError):
        rest_catalog.load_table((debezium["source_clusters"][0]["name"], "events"))
    keyed = one_table(fields, table_mode="upsert", key_fields=["id"], partitioning_scheme=["bucket(4, _key)"])
    errors = refused(http, keyed)
    assert "keyed by id: partition by them" in errors["tables[0].partitioning_scheme[0]"]


def test_format_version_upgrades_an_existing_table_and_never_goes_down(
    http: httpx.Client, rest_catalog: RestCatalog
) -> None:
    fields = [
        {"name": "customer_id", "id": 1, "type": "long"},
        {"name": "email", "id": 2, "type": "string", "optional": True},
    ]
    config = one_table(fields, table_mode="upsert", key_fields=["customer_id"])
    namespace = config["source_clusters"][0]["name"]
    apply(http, config)
    assert rest_catalog.load_table((namespace, "events")).format_version == 2
    assert rest_catalog.load_table((namespace, "events_dlq")).format_version == 2

    upgraded = copy.deepcopy(config)
    upgraded["tables"][0]["format_version"] = 3
    applied = apply(http, upgraded)
    by_table = {p["table"]: p for p in applied["plan"]}
    assert by_table["events"]["action"] == "evolve"
    assert by_table["events"]["changes"] == ["upgrade the format version from 2 to 3"]
    assert by_table["events_dlq"]["action"] == "unchanged"
    table = rest_catalog.load_table((namespace, "events"))
    assert table.format_version == 3
    assert table.schema().identifier_field_ids == [1]
    assert rest_catalog.load_table((namespace, "events_dlq")).format_version == 2
    location = table.metadata_location
    assert apply(http, upgraded)["plan"][0]["action"] == "unchanged"

    errors = refused(http, config)  # format_version back to 2 (the default)
    assert (
        "is an Iceberg format version 3 table: its format_version cannot go down to 2"
        in (errors["tables[0].format_version"])
    )
    assert metadata_location(rest_catalog, namespace, "events") == location
