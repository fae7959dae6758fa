"""`floe maintain`, the pure pieces: policies in floe.yaml and the planner.

Pass records through the API are in tests/api/test_maintenance.py; one real pass with Spark in
tests/e2e/test_maintenance.py.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pytest
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.snapshots import Operation, Snapshot, Summary
from pyiceberg.transforms import BucketTransform, DayTransform, HourTransform, IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType, StructType, TimestamptzType

from catalog.pipelines import InvalidConfig, load_yaml, parse_config
from catalog.pipelines.maintenance import (
    DEFAULT_POLICY,
    MaintenanceConfig,
    MaintenancePolicy,
    defaults_for_mode,
    format_duration,
    parse_duration,
    resolve_policy,
)
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

if TYPE_CHECKING:
    pass

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
    # An append-only table: one commit (appends never conflict with a rewrite).
    assert "partial-progress.enabled" not in runs[0].options
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
    # A record-key upsert table partitioned by its binary `_key`: the bucket, or the bytes as a literal.
    from catalog.pipelines.columns import KEY_FIELD

    by_key = PartitionSpec(
        PartitionField(KEY_FIELD.field_id, 1000, BucketTransform(16), "_key_bucket"),
        PartitionField(KEY_FIELD.field_id, 1001, IdentityTransform(), "_key"),
        spec_id=1,
    )
    keyed = state_of([], spec=by_key, schema=Schema(KEY_FIELD))
    assert partition_predicate(keyed, PartitionState(1, (7, b"\xff\x00'")), "c") == (
        "`c`.system.bucket(16, `_key`) = 7 AND `_key` = X'ff0027'"
    )


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


def test_max_snapshots_bounds_the_history_whatever_its_age() -> None:
    # Ten snapshots a second apart, all younger than the retention.
    chain = [snapshot(i, i - 1 if i > 1 else None, age_seconds=20 - i) for i in range(1, 11)]
    state = state_of([], chain)
    policy = MaintenancePolicy(snapshot_retention=3600, min_snapshots_to_keep=2, max_snapshots=4)
    run = plan_expiry(state, policy, NOW_MS)
    assert run is not None
    # Iceberg expires what is older than the oldest of the newest four (snapshot 7).
    assert (run.older_than_ms, run.retain_last, run.expirable) == (chain[6].timestamp_ms, 2, 6)
    # No limit (0), or no more snapshots than it: the age alone decides.
    assert plan_expiry(state, replace(policy, max_snapshots=0), NOW_MS) is None
    assert plan_expiry(state, replace(policy, max_snapshots=10), NOW_MS) is None
    # min_snapshots_to_keep above the limit wins: Iceberg's retain_last keeps them.
    run = plan_expiry(state, replace(policy, min_snapshots_to_keep=6), NOW_MS)
    assert run is not None
    assert (run.retain_last, run.expirable) == (6, 4)
    # Snapshots past the retention go whatever their number: the later of the two cutoffs.
    old = [snapshot(i, i - 1 if i > 1 else None, age_seconds=10_000 - i) for i in range(1, 11)]
    run = plan_expiry(state_of([], old), policy, NOW_MS)
    assert run is not None
    assert (run.older_than_ms, run.expirable) == (NOW_MS - 3_600_000, 8)
    # A tagged snapshot beyond the limit is kept (not expirable).
    tagged = state_of([], chain, referenced_snapshot_ids=frozenset({1, 2, 3, 4, 5, 6}))
    assert plan_expiry(tagged, policy, NOW_MS) is None


def test_upsert_tables_start_from_their_own_defaults() -> None:
    upsert = defaults_for_mode(DEFAULT_POLICY, "upsert")
    assert (upsert.interval, upsert.hot_partition_max_files, upsert.max_snapshots) == (60, 20, 50)
    assert upsert.snapshot_retention == DEFAULT_POLICY.snapshot_retention
    assert defaults_for_mode(DEFAULT_POLICY, "append") == DEFAULT_POLICY
    # floe.yaml's blocks override them: the top level, then the table's own.
    config = load_yaml(
        PIPELINE_YAML.format(cluster="c1").replace(
            "  orphan_file_age: 1h\n", "  orphan_file_age: 1h\n  interval: 5m\n"
        )
    )
    policy = resolve_policy(config.maintenance, config.tables[0].maintenance, upsert)
    assert (policy.interval, policy.max_snapshots, policy.snapshot_retention) == (300, 50, 1)
    table = MaintenanceConfig.model_validate({"max_snapshots": 0})
    assert resolve_policy(None, table, upsert).max_snapshots == 0  # 0: no limit, explicitly


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
    # Upserts race the rewrite: a group that loses costs only itself.
    assert options["partial-progress.enabled"] == "true"
    assert plan.rewrite_position_deletes
    # A few file-scoped deletes in a hot partition: left for later.
    few = plan_table(
        state_of([partition(19_000, 3, 10, delete_files=2)]), policy, NOW_MS, functions_catalog="c"
    )
    assert (few.compactions, few.rewrite_position_deletes) == ([], False)
    # The same partition once cold (an upsert table no longer merged into): its deletes are applied,
    # however few, and the position delete files dropped.
    cold = plan_table(
        state_of([partition(19_000, 1, 3_600, delete_files=2)]), policy, NOW_MS, functions_catalog="c"
    )
    assert [run.kind for run in cold.compactions] == ["cold"]
    assert cold.compactions[0].options["delete-file-threshold"] == "1"
    assert cold.rewrite_position_deletes
    # A cold partition with neither deletes nor enough small files: nothing.
    quiet = plan_table(state_of([partition(19_000, 4, 3_600)]), policy, NOW_MS, functions_catalog="c")
    assert (quiet.compactions, quiet.rewrite_position_deletes) == ([], False)
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
    # Right after a compaction, two small data manifests are packed (delete manifests do not count).
    assert needs_manifest_rewrite(small[:2], compacted=True)
    assert not needs_manifest_rewrite([small[0], ManifestState("d.avro", 1, 8_000, 0)], compacted=True)
    assert not needs_manifest_rewrite(
        [ManifestState(f"m{i}.avro", 0, 8 << 20, 0) for i in range(2)], compacted=True
    )
    state = state_of([])
    listed = [f"file:/t/metadata/{v:05d}-{uuid.uuid4()}.metadata.json" for v in range(12)]
    listed += ["file:/t/metadata/snap-1.avro", "file:/t/metadata/00007-a.metadata.json"]
    stale = stale_metadata_files(listed, state)
    # Below version 6 (the oldest the log keeps) only; newer ones may belong to commits in flight.
    assert sorted(stale) == sorted(listed[:6])
    # A table whose metadata codec is gzip (`write.metadata.compression-codec`), and one that switched:
    # every codec's name counts, in the log and in the listing; a file not named as a writer names one
    # (below the log's oldest or not) is left alone.
    current = f"file:/t/metadata/00006-{uuid.uuid4()}.gz.metadata.json"
    gzip_state = state_of(
        [],
        metadata_log=[f"file:/t/metadata/{v:05d}-{uuid.uuid4()}.gz.metadata.json" for v in (4, 5)],
        metadata_location=current,
    )
    old = [
        f"file:/t/metadata/00000-{uuid.uuid4()}.metadata.json",
        f"file:/t/metadata/00001-{uuid.uuid4()}.gz.metadata.json",
        f"file:/t/metadata/00002-{uuid.uuid4()}.metadata.json.gz",
    ]
    kept = ["file:/t/metadata/00003-x.gz.metadata.json", "file:/t/metadata/v3.gz.metadata.json"]
    listed = [*old, *kept, *gzip_state.metadata_log, current]
    assert sorted(stale_metadata_files(listed, gzip_state)) == sorted(old)
