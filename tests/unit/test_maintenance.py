"""`floe maintain`: policies in floe.yaml, the planner, pass records, and one real pass with Spark.

The pass test runs a real `floe serve` of its own per backend (so the pipeline and the tables it sees
are this test's) and one Spark session (local[2]) for the whole module: 200 small appends become one
file per partition, queries answer the same before and after (DuckDB and pyiceberg), snapshots are
expired per policy, an old orphan file is removed while a fresh unreferenced file (a commit in flight)
and every referenced file stay, and each table's pass is recorded in floe.
"""

from __future__ import annotations

import datetime as dt
import os
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx
import msgspec
import pyarrow as pa
import pytest
from click.testing import CliRunner
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.manifest import ManifestContent
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Operation, Snapshot, Summary
from pyiceberg.transforms import BucketTransform, DayTransform, HourTransform, IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType, StructType, TimestamptzType

from catalog.pipelines import InvalidConfig, load_yaml, parse_config
from catalog.pipelines.maintenance import (
    DEFAULT_POLICY,
    MaintenancePolicy,
    format_duration,
    parse_duration,
    resolve_policy,
)
from devtools.catalog_server import CatalogProcess
from maintenance.planner import (
    MIN_INPUT_FILES,
    needs_manifest_rewrite,
    partition_predicate,
    plan_compaction,
    plan_expiry,
    plan_table,
    stale_metadata_files,
)
from maintenance.table_state import ManifestState, PartitionState, TableState
from maintenance.worker import MaintenanceWorker, WorkerOptions
from tests.duckdb_client import attach_catalog, connect, quote

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PASSES = "/management/v1/maintenance/passes"
PIPELINE_YAML = """\
source_clusters:
  - name: {cluster}
    bootstrap_brokers: [{{hostname: localhost, port: 9092}}]
maintenance:
  orphan_file_age: 1h
  snapshot_retention: 7d
tables:
  - source_cluster_name: {cluster}
    source_topic: events
    source_format: json
    partitioning_scheme: day
    schema:
      fields:
        - {{name: id, id: 1, type: long}}
        - {{name: name, id: 2, type: string, optional: true}}
    maintenance:
      target_file_size_mb: 1
      snapshot_retention: 1s
      min_snapshots_to_keep: 3
      cold_after: 0s
"""

# -- floe.yaml policies ----------------------------------------------------------------------------


def test_policy_blocks_resolve_table_over_top_level_over_defaults() -> None:
    config = load_yaml(PIPELINE_YAML.format(cluster="c1"))
    table = config.tables[0]
    policy = resolve_policy(config.maintenance, table.maintenance)
    assert policy == MaintenancePolicy(
        target_file_size_mb=1,
        snapshot_retention=1,
        min_snapshots_to_keep=3,
        orphan_file_age=3600,
        interval=DEFAULT_POLICY.interval,
        cold_after=0,
        hot_partition_max_files=DEFAULT_POLICY.hot_partition_max_files,
    )
    # A table outside floe.yaml: the top-level block over the defaults.
    assert resolve_policy(config.maintenance, None).snapshot_retention == 7 * 86_400
    assert resolve_policy(None, None) == DEFAULT_POLICY
    # The normalized form reads back equal (what `floe apply` stores and the worker reads).
    normalized = config.to_json()
    assert normalized["tables"][0]["maintenance"] == {
        "target_file_size_mb": 1,
        "snapshot_retention": "1s",
        "min_snapshots_to_keep": 3,
        "cold_after": "0s",
    }
    assert normalized["maintenance"] == {"snapshot_retention": "7d", "orphan_file_age": "1h"}
    assert parse_config(normalized) == config


def test_durations() -> None:
    assert parse_duration("90s") == 90
    assert parse_duration("1h30m") == 5400
    assert parse_duration("7d") == 7 * 86_400
    assert parse_duration("2w") == 14 * 86_400
    for bad in ("", "1", "h", "1.5h", "-1h", "1y", "forever"):
        assert parse_duration(bad) is None, bad
    assert format_duration(5400) == "1h30m"
    assert format_duration(0) == "0s"
    assert format_duration(14 * 86_400) == "14d"


def test_bad_maintenance_policy_gives_its_yaml_path() -> None:
    text = PIPELINE_YAML.format(cluster="c1").replace("snapshot_retention: 1s", "snapshot_retention: forever")
    text = text.replace("cold_after: 0s", "cold_after: 0s\n      orphan_file_age: 10m\n      keep: 3")
    text = text.replace("  snapshot_retention: 7d\n", "  snapshot_retention: 7d\n  interval: 600\n")
    with pytest.raises(InvalidConfig) as raised:
        load_yaml(text)
    errors = {e.path: e for e in raised.value.errors}
    assert set(errors) == {
        "maintenance.interval",
        "tables[0].maintenance.snapshot_retention",
        "tables[0].maintenance.orphan_file_age",
        "tables[0].maintenance.keep",
    }
    lines = text.splitlines()
    for error in errors.values():
        assert error.line is not None
        assert error.path.rsplit(".", 1)[-1] in lines[error.line - 1], error
    assert "add a unit" in errors["maintenance.interval"].message
    assert "invalid duration 'forever'" in errors["tables[0].maintenance.snapshot_retention"].message
    assert "in flight" in errors["tables[0].maintenance.orphan_file_age"].message
    assert "unknown key 'keep'" in errors["tables[0].maintenance.keep"].message
    with pytest.raises(InvalidConfig) as raised:
        parse_config({**load_yaml(PIPELINE_YAML.format(cluster="c1")).to_json(), "maintenance": [1]})
    assert [e.path for e in raised.value.errors] == ["maintenance"]


def test_bad_maintenance_policy_is_refused_by_apply(http: httpx.Client) -> None:
    config = load_yaml(PIPELINE_YAML.format(cluster=f"c_{uuid.uuid4().hex[:8]}")).to_json()
    config["tables"][0]["maintenance"]["min_snapshots_to_keep"] = 0
    response = http.put("/management/v1/pipeline", json={"config": config})
    assert response.status_code == 400, response.text
    errors = {e["path"]: e["message"] for e in response.json()["error"]["errors"]}
    assert set(errors) == {"tables[0].maintenance.min_snapshots_to_keep"}
    assert "must be between 1 and" in errors["tables[0].maintenance.min_snapshots_to_keep"]


# -- the planner (pure) ----------------------------------------------------------------------------

NOW_MS = 1_700_000_000_000
KAFKA = StructType(NestedField(11, "timestamp", TimestamptzType(), required=False))
SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "name", StringType(), required=False),
    NestedField(3, "_kafka", KAFKA, required=False),
)
DAY_SPEC = PartitionSpec(PartitionField(11, 1000, DayTransform(), "_kafka_timestamp_day"), spec_id=0)


def snapshot(snapshot_id: int, parent: int | None, age_seconds: float, operation: str = "append") -> Snapshot:
    return Snapshot(
        snapshot_id=snapshot_id,
        parent_snapshot_id=parent,
        sequence_number=snapshot_id,
        timestamp_ms=int(NOW_MS - age_seconds * 1000),
        manifest_list=f"file:///t/metadata/snap-{snapshot_id}.avro",
        summary=Summary(Operation(operation)),
        schema_id=0,
    )


def state_of(
    partitions: list[PartitionState],
    snapshots: list[Snapshot] | None = None,
    spec: PartitionSpec = DAY_SPEC,
    **changes: Any,
) -> TableState:
    snapshots = snapshots if snapshots is not None else [snapshot(1, None, 60)]
    state = TableState(
        location="file:///t",
        format_version=2,
        properties={},
        schema=SCHEMA,
        specs={spec.spec_id: spec},
        snapshots=snapshots,
        current_snapshot_id=snapshots[-1].snapshot_id if snapshots else None,
        referenced_snapshot_ids=frozenset({snapshots[-1].snapshot_id}) if snapshots else frozenset(),
        metadata_location="file:///t/metadata/00009-a.metadata.json",
        metadata_log=[f"file:///t/metadata/0000{v}-a.metadata.json" for v in (6, 7, 8)],
        partitions=partitions,
    )
    for key, value in changes.items():
        setattr(state, key, value)
    return state


def partition(day: int, small_files: int, age_seconds: float | None, **counts: int) -> PartitionState:
    return PartitionState(
        spec_id=0,
        values=(day,),
        data_files=small_files + counts.get("big_files", 0),
        data_bytes=small_files * 1000,
        small_files=small_files,
        small_bytes=small_files * 1000,
        delete_files=counts.get("delete_files", 0),
        position_delete_files=counts.get("delete_files", 0),
        last_write_ms=None if age_seconds is None else int(NOW_MS - age_seconds * 1000),
    )


def test_cold_partitions_first_and_hot_only_when_very_fragmented() -> None:
    policy = MaintenancePolicy(cold_after=900, hot_partition_max_files=50)
    old, older, hot, busy_hot, few = (
        partition(19_000, 10, 3_600),
        partition(18_999, 8, 7_200),
        partition(19_001, 20, 10),
        partition(19_002, 60, 5),
        partition(18_000, MIN_INPUT_FILES - 1, 86_400),
    )
    runs = plan_compaction(state_of([old, hot, older, busy_hot, few]), policy, NOW_MS, functions_catalog="c")
    assert [(run.kind, [p.values for p in run.partitions]) for run in runs] == [
        ("cold", [(18_999,), (19_000,)]),
        ("hot", [(19_002,)]),
    ]
    cold_where = runs[0].where
    assert cold_where == (
        "(`_kafka`.`timestamp` >= TIMESTAMP '2022-01-07 00:00:00+00:00' AND "
        "`_kafka`.`timestamp` < TIMESTAMP '2022-01-08 00:00:00+00:00') OR "
        "(`_kafka`.`timestamp` >= TIMESTAMP '2022-01-08 00:00:00+00:00' AND "
        "`_kafka`.`timestamp` < TIMESTAMP '2022-01-09 00:00:00+00:00')"
    )
    assert runs[0].options["target-file-size-bytes"] == str(policy.target_file_size_bytes)
    assert runs[0].options["partial-progress.enabled"] == "true"
    # Every partition that can be compacted is cold: no predicate at all.
    only_cold = plan_compaction(state_of([old, older]), policy, NOW_MS, functions_catalog="c")
    assert [(run.kind, run.where) for run in only_cold] == [("cold", None)]
    # Nothing fragmented enough: nothing to do.
    assert plan_compaction(state_of([few, hot]), policy, NOW_MS, functions_catalog="c") == []


def test_partition_predicates_per_transform() -> None:
    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "name", StringType(), required=False),
        NestedField(3, "at", TimestamptzType(), required=False),
    )
    spec = PartitionSpec(
        PartitionField(3, 1000, HourTransform(), "at_hour"),
        PartitionField(2, 1001, IdentityTransform(), "name"),
        PartitionField(1, 1002, BucketTransform(8), "id_bucket"),
        spec_id=3,
    )
    state = state_of([], spec=spec, schema=schema)
    hour = 473_000  # 2023-12-17 08:00 UTC
    where = partition_predicate(state, PartitionState(3, (hour, "it's\\", 5)), "floe_x")
    assert where == (
        "`at` >= TIMESTAMP '2023-12-17 08:00:00+00:00' AND `at` < TIMESTAMP '2023-12-17 09:00:00+00:00' "
        "AND `name` = 'it\\'s\\\\' AND `floe_x`.system.bucket(8, `id`) = 5"
    )
    assert partition_predicate(state, PartitionState(3, (None, None, 1)), "c") == (
        "`at` IS NULL AND `name` IS NULL AND `c`.system.bucket(8, `id`) = 1"
    )
    # An unpartitioned table's only partition needs no predicate.
    assert partition_predicate(state_of([], spec=PartitionSpec(spec_id=0)), PartitionState(0, ()), "c") == ""


def test_snapshot_expiry_keeps_the_newest_and_referenced() -> None:
    chain = [snapshot(i, i - 1 if i > 1 else None, age_seconds=10_000 - i) for i in range(1, 11)]
    state = state_of([], chain)
    policy = MaintenancePolicy(snapshot_retention=3600, min_snapshots_to_keep=3)
    run = plan_expiry(state, policy, NOW_MS)
    assert run is not None
    assert (run.retain_last, run.expirable) == (3, 7)
    assert run.older_than_ms == NOW_MS - 3_600_000
    # Young snapshots are kept whatever their number.
    assert plan_expiry(state, MaintenancePolicy(snapshot_retention=86_400), NOW_MS) is None
    # A tagged snapshot is never expirable.
    tagged = state_of([], chain, referenced_snapshot_ids=frozenset({10, 1, 2, 3, 4, 5, 6, 7}))
    assert plan_expiry(tagged, policy, NOW_MS) is None


def test_expiry_and_orphans_and_properties_in_the_plan() -> None:
    chain = [snapshot(i, i - 1 if i > 1 else None, age_seconds=10_000 - i) for i in range(1, 11)]
    tagged = state_of([], chain, referenced_snapshot_ids=frozenset({10, 1, 2, 3, 4, 5, 6}))
    policy = MaintenancePolicy(snapshot_retention=3600, min_snapshots_to_keep=3)
    expire = plan_expiry(tagged, policy, NOW_MS)
    assert expire is not None
    assert expire.expirable == 1  # snapshot 7: neither tagged nor among the newest three
    plan = plan_table(tagged, policy, NOW_MS, functions_catalog="c")
    assert plan.remove_orphans_older_than_ms == NOW_MS - policy.orphan_file_age * 1000
    assert plan.set_properties == {
        "write.metadata.delete-after-commit.enabled": "true",
        "write.metadata.previous-versions-max": "20",
    }
    configured = state_of([], chain, properties={"write.metadata.delete-after-commit.enabled": "false"})
    assert set(plan_table(configured, policy, NOW_MS, functions_catalog="c").set_properties) == {
        "write.metadata.previous-versions-max"
    }
    assert (
        plan_table(
            tagged, policy, NOW_MS, functions_catalog="c", scan_orphans=False
        ).remove_orphans_older_than_ms
        is None
    )


def test_delete_files_are_applied_then_dropped() -> None:
    policy = MaintenancePolicy(cold_after=900)
    with_deletes = partition(19_000, 3, 10, delete_files=10)
    plan = plan_table(state_of([with_deletes]), policy, NOW_MS, functions_catalog="c")
    assert [run.kind for run in plan.compactions] == ["hot"]
    options = plan.compactions[0].options
    assert options["delete-file-threshold"] == "1"
    assert options["use-starting-sequence-number"] == "false"
    assert plan.rewrite_position_deletes
    # A few file-scoped deletes in a hot partition: left for later.
    few = plan_table(
        state_of([partition(19_000, 3, 10, delete_files=2)]), policy, NOW_MS, functions_catalog="c"
    )
    assert (few.compactions, few.rewrite_position_deletes) == ([], False)
    # Partition-scoped deletes merge.
    scoped = state_of(
        [partition(19_000, 3, 10, delete_files=2)], properties={"write.delete.granularity": "partition"}
    )
    assert plan_table(scoped, policy, NOW_MS, functions_catalog="c").rewrite_position_deletes


def test_manifest_rewrite_and_stale_metadata_files() -> None:
    small = [ManifestState(f"m{i}.avro", 0, 8_000, 0) for i in range(12)]
    assert needs_manifest_rewrite(small)
    assert not needs_manifest_rewrite(small[:5])
    assert not needs_manifest_rewrite([ManifestState(f"m{i}.avro", 0, 8 << 20, 0) for i in range(12)])
    state = state_of([])
    listed = [f"file:/t/metadata/{v:05d}-{uuid.uuid4()}.metadata.json" for v in range(12)]
    listed += ["file:/t/metadata/snap-1.avro", "file:/t/metadata/00007-a.metadata.json"]
    stale = stale_metadata_files(listed, state)
    # Below version 6 (the oldest the log keeps) only; newer ones may belong to commits in flight.
    assert sorted(stale) == sorted(listed[:6])


# -- pass records (both backends, the session server) -----------------------------------------------


def pass_body(namespace: list[str], table: str, **changes: Any) -> dict[str, Any]:
    stats = {"data_files": 3, "data_bytes": 300, "delete_files": 0, "delete_bytes": 0, "manifests": 3}
    body = {
        "warehouse": "default",
        "namespace": namespace,
        "table": table,
        "started_at": dt.datetime.now(dt.UTC).isoformat(),
        "duration_seconds": 2.5,
        "actions": [
            {
                "name": "rewrite_data_files",
                "duration_seconds": 2.0,
                "result": {"rewritten_data_files_count": 3},
            },
            {"name": "expire_snapshots", "duration_seconds": 0.5, "error": "boom"},
        ],
        "before": {**stats, "snapshots": 5},
        "after": {**stats, "data_files": 1, "snapshots": 2},
        "error": None,
    }
    return {**body, **changes}


def test_pass_records_through_the_management_api(catalog_server: CatalogProcess, http: httpx.Client) -> None:
    namespace = f"ns_{uuid.uuid4().hex[:8]}"
    recorded = http.post(PASSES, json=pass_body([namespace], "t1"))
    assert recorded.status_code == 201, recorded.text
    record = recorded.json()
    assert record["recorded_by"] == catalog_server.admin_client_id
    assert record["actions"][1] == {"name": "expire_snapshots", "duration_seconds": 0.5, "error": "boom"}
    assert http.post(PASSES, json=pass_body([namespace], "t2", error="table gone")).status_code == 201
    assert http.post(PASSES, json=pass_body([namespace, "deep"], "t1")).status_code == 201

    listed = http.get(PASSES, params={"namespace": namespace}).json()["passes"]
    assert [(p["table"], p["error"]) for p in listed] == [("t2", "table gone"), ("t1", None)]
    assert listed[1]["before"]["snapshots"] == 5
    assert listed[1]["after"]["data_files"] == 1
    only = http.get(PASSES, params={"namespace": namespace, "table": "t1", "limit": 1}).json()["passes"]
    assert [p["id"] for p in only] == [record["id"]]
    deep = http.get(PASSES, params={"namespace": f"{namespace}\x1fdeep"}).json()["passes"]
    assert [p["namespace"] for p in deep] == [[namespace, "deep"]]

    for body, status in (
        (pass_body([], "t"), 400),
        (pass_body([namespace], ""), 400),
        (pass_body([namespace], "t", duration_seconds=-1), 400),
        (pass_body([namespace], "t", warehouse="nowhere"), 404),
    ):
        response = http.post(PASSES, json=body)
        assert response.status_code == status, response.text
    assert http.get(PASSES, params={"limit": 0}).status_code == 400


def test_cluster_keys_record_and_read_their_own_passes(
    catalog_server: CatalogProcess, http: httpx.Client
) -> None:
    cluster = f"k_{uuid.uuid4().hex[:8]}"
    assert http.post("/management/v1/clusters", json={"name": cluster}).status_code == 201
    other = f"ns_{uuid.uuid4().hex[:8]}"
    assert http.post(PASSES, json=pass_body([other], "t")).status_code == 201

    def client(role: str) -> httpx.Client:
        key = http.post("/management/v1/keys", json={"cluster": cluster, "role": role}).json()
        token = catalog_server.token(key["client_id"], key["client_secret"])
        return httpx.Client(base_url=catalog_server.url, headers={"Authorization": f"Bearer {token}"})

    with client("writer") as writer, client("reader") as reader:
        assert writer.post(PASSES, json=pass_body([cluster], "t")).status_code == 201
        assert writer.post(PASSES, json=pass_body([cluster, "sub"], "t")).status_code == 201
        # Outside its cluster a key learns nothing: the namespace "does not exist".
        assert writer.post(PASSES, json=pass_body([other], "t")).status_code == 404
        assert reader.post(PASSES, json=pass_body([cluster], "t")).status_code == 403
        seen = reader.get(PASSES).json()["passes"]
        assert {tuple(p["namespace"]) for p in seen} == {(cluster,), (cluster, "sub")}
        assert reader.get(PASSES, params={"namespace": other}).status_code == 404


# -- one real pass with Spark ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    """One Spark session (local[2]) for the module; the worker binds its own catalogs on it."""
    from runtime.spark import CatalogConnection, spark_session

    session = spark_session(
        "floe-maintain-tests",
        # Never used: the worker registers a catalog per floe URL and warehouse.
        CatalogConnection("http://127.0.0.1:9", "default", "unused", "unused"),
        master="local[2]",
        conf={
            "spark.driver.memory": "1g",
            "spark.ui.showConsoleProgress": "false",
            # Resolving a procedure's table argument initializes the default catalog: Spark's own.
            "spark.sql.defaultCatalog": "spark_catalog",
        },
    )
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture
def maintained_server(fresh_database_url: str, tmp_path: Path) -> Iterator[CatalogProcess]:
    with CatalogProcess(fresh_database_url, home=tmp_path / "floe-home") as server:
        yield server


def kafka_rows(schema: pa.Schema, start: int, count: int, day: int) -> pa.Table:
    at = dt.datetime(2024, 3, 1 + day, 12, tzinfo=dt.UTC)
    rows = [
        {
            "id": i,
            "name": f"name-{i}",
            "_kafka": {"partition": 0, "offset": i, "timestamp": at, "key": None, "headers": []},
        }
        for i in range(start, start + count)
    ]
    return pa.Table.from_pylist(rows, schema=schema)


def local_path(location: str) -> Path:
    return Path(urlsplit(location).path)


def referenced_files(table: Table) -> set[Path]:
    """Every file the table's metadata references: metadata files, manifest lists, manifests, data and
    delete files of every snapshot."""
    io = table.io
    found = {local_path(e.metadata_file) for e in table.metadata.metadata_log}
    found.add(local_path(str(table.metadata_location)))
    for snap in table.metadata.snapshots:
        found.add(local_path(snap.manifest_list))
        for manifest in snap.manifests(io):
            found.add(local_path(manifest.manifest_path))
            for entry in manifest.fetch_manifest_entry(io, discard_deleted=True):
                found.add(local_path(entry.data_file.file_path))
    return found


def data_file_count(table: Table, content: ManifestContent = ManifestContent.DATA) -> int:
    snap = table.current_snapshot()
    if snap is None:
        return 0
    return sum(
        len(m.fetch_manifest_entry(table.io)) for m in snap.manifests(table.io) if m.content == content
    )


def duck_rows(server: CatalogProcess, extensions: Path, ref: str) -> list[tuple[Any, ...]]:
    connection = connect(extensions)
    try:
        attach_catalog(
            connection,
            endpoint=server.url,
            warehouse="default",
            client_id=server.admin_client_id,
            client_secret=server.admin_client_secret,
        )
        rows: list[tuple[Any, ...]] = connection.execute(
            f"SELECT id, name, _kafka.offset, epoch_us(_kafka.timestamp) FROM {ref} ORDER BY id"
        ).fetchall()
        return rows
    finally:
        connection.close()


def backdate(folder: Path, seconds: float) -> None:
    moment = time.time() - seconds
    for path in folder.rglob("*"):
        if path.is_file():
            os.utime(path, (moment, moment))


@pytest.mark.e2e
def test_one_pass_compacts_expires_and_removes_orphans(
    spark: SparkSession, maintained_server: CatalogProcess, tmp_path: Path
) -> None:
    from catalog.cli.maintain import maintain_command
    from maintenance.metrics import REGISTRY
    from maintenance.spark_actions import SparkActions
    from runtime.spark import CatalogConnection

    server = maintained_server
    cluster = "c1"
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {server.token()}"}, timeout=60
    ) as http:
        applied = http.put(
            "/management/v1/pipeline",
            json={"config": load_yaml(PIPELINE_YAML.format(cluster=cluster)).to_json()},
        )
        assert applied.status_code == 200, applied.text
        catalog: RestCatalog = server.catalog()
        events = catalog.load_table((cluster, "events"))
        arrow_schema = events.schema().as_arrow()
        for i in range(200):
            events.append(kafka_rows(arrow_schema, i, 1, day=i % 4))
        # A table outside floe.yaml (top-level policy: snapshots kept 7 days), written just now.
        catalog.create_namespace("other")
        other = catalog.create_table(
            ("other", "events"), Schema(NestedField(1, "id", LongType(), required=False))
        )
        for i in range(12):
            other.append(pa.table({"id": pa.array([i], pa.int64())}))
        # A table with position delete files (Spark's merge-on-read DELETE): one per data file, ten in
        # its (hot) partition, enough to compact it.
        deletes = catalog.create_table(
            ("other", "deletes"),
            Schema(NestedField(1, "id", LongType(), required=False)),
            properties={"write.delete.mode": "merge-on-read"},
        )
        for i in range(20):
            deletes.append(pa.table({"id": pa.array([i], pa.int64())}))
        spark_catalog = SparkActions(spark).catalog(
            CatalogConnection(server.url, "default", server.admin_client_id, server.admin_client_secret)
        )
        spark.sql(f"DELETE FROM `{spark_catalog}`.`other`.`deletes` WHERE id % 2 = 0")
        deletes = catalog.load_table(("other", "deletes"))
        assert data_file_count(deletes, ManifestContent.DELETES) == 10

        events = catalog.load_table((cluster, "events"))
        assert data_file_count(events) == 200
        assert len(events.metadata.snapshots) == 200
        ref = f"floe.{quote(cluster)}.{quote('events')}"
        extensions = tmp_path / "duckdb-extensions"
        duck_before = duck_rows(server, extensions, ref)
        arrow_before = events.scan().to_arrow().sort_by("id").to_pylist()
        assert len(duck_before) == 200

        # Everything the table holds is two days old; one unreferenced file is too (an orphan),
        # another was written a moment ago (a commit in flight): only the old one may go.
        folder = local_path(events.location())
        backdate(folder, 2 * 86_400)
        orphan = folder / "data" / f"orphan-{uuid.uuid4().hex}.parquet"
        orphan.write_bytes(b"not referenced")
        os.utime(orphan, (time.time() - 2 * 86_400,) * 2)
        in_flight = folder / "data" / f"in-flight-{uuid.uuid4().hex}.parquet"
        in_flight.write_bytes(b"a commit still in flight")

        pass_started_ms = int(time.time() * 1000)
        result = CliRunner().invoke(
            maintain_command,
            ["--once", "--url", server.url, "--metrics-port", "0"],
            env={
                "FLOE_CLIENT_ID": server.admin_client_id,
                "FLOE_CLIENT_SECRET": server.admin_client_secret,
            },
            catch_exceptions=False,
        )
        assert result.exit_code == 0, result.output

        # One file per partition (4 days), the same rows for DuckDB and pyiceberg.
        events = catalog.load_table((cluster, "events"))
        assert data_file_count(events) == 4
        assert duck_rows(server, extensions, ref) == duck_before
        assert events.scan().to_arrow().sort_by("id").to_pylist() == arrow_before

        # Snapshots older than the pass are gone but for the newest three (the policy).
        ancestry = [s.snapshot_id for s in events.snapshots()][::-1]
        snapshots = events.metadata.snapshots
        kept_old = {s.snapshot_id for s in snapshots if s.timestamp_ms < pass_started_ms}
        assert kept_old <= set(ancestry[:3])
        assert len(snapshots) < 10

        # The old orphan is removed; the fresh file and everything referenced stay.
        assert not orphan.exists()
        assert in_flight.exists()
        missing = [p for p in referenced_files(events) if not p.exists()]
        assert not missing

        # The table outside floe.yaml was written just now (a hot partition with few files: not
        # compacted) and keeps its snapshots for 7 days (its 12 small manifests may be rewritten).
        other = catalog.load_table(("other", "events"))
        assert data_file_count(other) == 12
        assert len(other.metadata.snapshots) >= 12
        assert sorted(other.scan().to_arrow()["id"].to_pylist()) == list(range(12))

        # The deletes are applied by compaction and the delete files dropped; the rows stay the same.
        deletes = catalog.load_table(("other", "deletes"))
        assert data_file_count(deletes, ManifestContent.DELETES) == 0, str(
            http.get(PASSES, params={"table": "deletes"}).json()["passes"][0]["actions"]
        )
        assert data_file_count(deletes) == 1
        assert sorted(deletes.scan().to_arrow()["id"].to_pylist()) == list(range(1, 20, 2))

        # Every table's pass is recorded in floe.
        passes = http.get(PASSES, params={"limit": 100}).json()["passes"]
        by_table = {(tuple(p["namespace"]), p["table"]): p for p in passes}
        assert set(by_table) == {
            ((cluster,), "events"),
            ((cluster,), "events_dlq"),
            (("other",), "events"),
            (("other",), "deletes"),
        }
        record = by_table[((cluster,), "events")]
        assert record["error"] is None
        actions = {a["name"]: a for a in record["actions"]}
        assert all("error" not in a for a in record["actions"]), record["actions"]
        assert {"rewrite_data_files", "expire_snapshots", "remove_orphan_files"} <= set(actions)
        assert actions["rewrite_data_files"]["result"]["rewritten_data_files_count"] == 200
        assert actions["remove_orphan_files"]["result"]["orphan_files_removed"] == 1
        assert [local_path(p) for p in actions["remove_orphan_files"]["result"]["removed"]] == [orphan]
        assert (record["before"]["data_files"], record["after"]["data_files"]) == (200, 4)
        assert record["before"]["snapshots"] == 200
        assert record["after"]["snapshots"] == len(snapshots)
        assert "rewrite_data_files" not in {a["name"] for a in by_table[(("other",), "events")]["actions"]}
        assert "expire_snapshots" not in {a["name"] for a in by_table[(("other",), "events")]["actions"]}

    labels = {"warehouse": "default", "table": f"{cluster}.events"}
    assert REGISTRY.get_sample_value("floe_maintenance_data_files", labels) == 4
    assert REGISTRY.get_sample_value("floe_maintenance_snapshots", labels) == len(snapshots)
    assert (REGISTRY.get_sample_value("floe_maintenance_last_pass_timestamp_seconds", labels) or 0) > (
        pass_started_ms / 1000
    )

    # The long-running worker: a pass over every table right away, the next one an interval later.
    worker = MaintenanceWorker(
        spark, WorkerOptions(server.url, server.admin_client_id, server.admin_client_secret)
    )
    stop = threading.Event()
    loop = threading.Thread(target=worker.run_forever, args=(stop,), daemon=True)
    loop.start()
    try:
        deadline = time.monotonic() + 300
        recorded: list[dict[str, Any]] = []
        while time.monotonic() < deadline and len(recorded) < 2 * len(by_table):
            time.sleep(1)
            recorded = [msgspec.to_builtins(p) for p in worker.control.passes(limit=100)]
        assert len(recorded) == 2 * len(by_table)
        newest = recorded[: len(by_table)]
        assert {(tuple(p["namespace"]), p["table"]) for p in newest} == set(by_table)
        assert all(p["error"] is None for p in newest)
        # Compacted and expired already: only the metadata properties are in place now.
        again = {
            a["name"]
            for a in next(p for p in newest if p["table"] == "events" and p["namespace"] == [cluster])[
                "actions"
            ]
        }
        assert "rewrite_data_files" not in again
        assert "set_properties" not in again
    finally:
        stop.set()
        loop.join(timeout=120)
        worker.close()
    assert not loop.is_alive()


# -- the benchmark, tiny ---------------------------------------------------------------------------


@pytest.mark.e2e
def test_the_benchmark_runs(spark: SparkSession, tmp_path: Path) -> None:
    """`python -m benchmarks.maintenance` at a tiny size, on the module's Spark session, so its code does
    not rot; no timing is asserted."""
    import json

    from benchmarks.maintenance.report import render_markdown, write_results
    from benchmarks.maintenance.run import parse_args, run

    args = parse_args(["--files", "20", "--rows-per-file", "10", "--repetitions", "2"])
    doc = run(args, spark)
    table = doc["table"]
    assert (table["before"]["data_files"], table["after"]["data_files"]) == (20, 4)
    assert {q["key"] for q in doc["queries"]} == {"count", "aggregate", "filter", "one_day"}
    assert all(q["before_median_ms"] > 0 and q["after_median_ms"] > 0 for q in doc["queries"])
    assert doc["maintenance"]["peak_rss_mb"]["spark_jvm"] > 0
    assert "rewrite_data_files" in doc["maintenance"]["actions"]
    json_path, md_path = write_results(doc, tmp_path)
    assert json.loads(json_path.read_text())["table"]["after"]["data_files"] == 4
    assert md_path.read_text() == render_markdown(doc)


@pytest.mark.e2e
def test_an_action_that_loses_a_commit_race_runs_again(
    spark: SparkSession, maintained_server: CatalogProcess
) -> None:
    """The race CI once hit with ingestion: a manifest rewrite planned on a snapshot with a manifest
    that lists only deleted files, then an append (which drops such manifests), then the rewrite's
    commit, which Iceberg refuses without retrying. The worker runs the action again on the table as
    it is now."""
    from maintenance.spark_actions import TableRef, describe_error, is_commit_conflict
    from maintenance.worker import MaintainedTable, PassResult
    from runtime.spark import CatalogConnection

    server = maintained_server
    worker = MaintenanceWorker(
        spark, WorkerOptions(server.url, server.admin_client_id, server.admin_client_secret)
    )
    spark_catalog = worker.actions.catalog(
        CatalogConnection(server.url, "default", server.admin_client_id, server.admin_client_secret)
    )
    name = f"`{spark_catalog}`.`race`.`events`"
    spark.sql(f"CREATE NAMESPACE `{spark_catalog}`.`race`")
    spark.sql(f"CREATE TABLE {name} (id BIGINT) USING iceberg")
    spark.sql(f"INSERT INTO {name} VALUES (1), (2)")
    spark.sql(f"INSERT INTO {name} VALUES (3)")
    # A metadata-only delete of the first file: its manifest now lists one deleted file.
    spark.sql(f"DELETE FROM {name} WHERE id IN (1, 2)")
    jvm: Any = spark._jvm
    table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, name)
    manifests = table.currentSnapshot().dataManifests(table.io())
    deleted_only = [
        m for m in manifests if not m.hasAddedFiles() and not m.hasExistingFiles() and m.hasDeletedFiles()
    ]
    assert len(deleted_only) == 1
    # Ingestion appends: Iceberg leaves manifests of only deleted files out of the new snapshot.
    spark.sql(f"INSERT INTO {name} VALUES (4)")

    attempts: list[str] = []

    def rewrite_manifests() -> dict[str, Any]:
        if not attempts:
            attempts.append("stale")
            table.refresh()
            stale = table.rewriteManifests()
            stale.deleteManifest(deleted_only[0])
            stale.commit()  # planned before the append: Iceberg refuses it
        attempts.append("fresh")
        return worker.actions.rewrite_manifests(TableRef(spark_catalog, ("race",), "events"))

    result = PassResult(
        MaintainedTable("default", ("race",), "events", DEFAULT_POLICY), dt.datetime.now(dt.UTC)
    )
    assert worker.run_action(result, "rewrite_manifests", rewrite_manifests)
    assert attempts == ["stale", "fresh"]
    [outcome] = result.actions
    assert outcome.error is None, outcome
    assert outcome.result["attempts"] == 2, outcome
    assert int(outcome.result["rewritten_manifests_count"]) >= 2
    assert sorted(r.id for r in spark.sql(f"SELECT id FROM {name}").collect()) == [3, 4]

    # What Iceberg raised is a conflict; an error that is not one is recorded at once.
    stale = table.rewriteManifests()
    stale.deleteManifest(deleted_only[0])
    with pytest.raises(Exception, match="could not be found in the latest snapshot") as raised:
        stale.commit()
    assert is_commit_conflict(raised.value), describe_error(raised.value)

    calls: list[int] = []

    def missing_table() -> dict[str, Any]:
        calls.append(1)
        return worker.actions.rewrite_manifests(TableRef(spark_catalog, ("race",), "missing"))

    assert not worker.run_action(result, "rewrite_manifests", missing_table)
    assert len(calls) == 1
    assert result.actions[-1].error
    assert "attempts" not in result.actions[-1].result
    worker.close()
