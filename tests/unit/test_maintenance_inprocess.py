"""Which tables `floe maintain` compacts without Spark (`maintenance.inprocess`), and the snapshots an
in-process expiry removes: the pure decisions. The actions themselves, racing `floe ingest`, are in
tests/e2e/test_maintenance_inprocess.py (and every pass of tests/e2e/test_maintenance.py runs them)."""

from __future__ import annotations

from pyiceberg.partitioning import PartitionSpec

from catalog.pipelines.maintenance import MaintenancePolicy
from maintenance.inprocess import compacts_in_process
from maintenance.planner import plan_compaction, plan_expiry
from maintenance.spark_actions import is_commit_conflict
from tests.unit.test_maintenance import NOW_MS, partition, snapshot, state_of

POLICY = MaintenancePolicy(cold_after=900, hot_partition_max_files=50)


def test_small_append_only_tables_compact_in_process() -> None:
    state = state_of([partition(19_000, 10, 3_600), partition(18_999, 8, 7_200)])
    runs = plan_compaction(state, POLICY, NOW_MS, functions_catalog="c")
    assert runs
    assert compacts_in_process(state, runs)
    # Nothing planned: nothing to run here either.
    assert not compacts_in_process(state, [])
    # More small bytes than the limit: Spark.
    assert not compacts_in_process(state, runs, max_bytes=17_999)
    assert compacts_in_process(state, runs, max_bytes=18_000)


def test_tables_with_deletes_older_specs_or_v3_go_to_spark() -> None:
    # A delete file anywhere in the table (an upsert table): Spark applies deletes.
    with_deletes = state_of([partition(19_000, 10, 3_600), partition(18_000, 1, 86_400, delete_files=1)])
    runs = plan_compaction(with_deletes, POLICY, NOW_MS, functions_catalog="c")
    assert runs
    assert not compacts_in_process(with_deletes, runs)
    # Partitions of an older spec: the in-process writer writes the default spec only.
    evolved = state_of([partition(19_000, 10, 3_600)], default_spec_id=1)
    evolved.specs[1] = PartitionSpec(spec_id=1)
    runs = plan_compaction(evolved, POLICY, NOW_MS, functions_catalog="c")
    assert runs
    assert not compacts_in_process(evolved, runs)
    v3 = state_of([partition(19_000, 10, 3_600)], format_version=3)
    assert not compacts_in_process(v3, plan_compaction(v3, POLICY, NOW_MS, functions_catalog="c"))


def test_expiry_names_exactly_the_snapshots_it_removes() -> None:
    chain = [snapshot(i, i - 1 if i > 1 else None, age_seconds=10_000 - i) for i in range(1, 11)]
    run = plan_expiry(
        state_of([], chain), MaintenancePolicy(snapshot_retention=3600, min_snapshots_to_keep=3), NOW_MS
    )
    assert run is not None
    assert run.snapshot_ids == tuple(range(1, 8))
    assert run.expirable == len(run.snapshot_ids)


def test_pyiceberg_commit_races_are_conflicts() -> None:
    from pyiceberg.exceptions import CommitFailedException, ValidationException

    assert is_commit_conflict(CommitFailedException("Requirement failed: branch main has changed"))
    assert is_commit_conflict(ValidationException("Missing required files to delete: x.parquet"))
    assert not is_commit_conflict(RuntimeError("disk full"))
