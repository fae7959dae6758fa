"""The metadata-only check that lets a maintenance pass skip a table with nothing to do
(`maintenance.quick_check`, issue 31): whenever it says compaction is impossible, the planner, given the
table's real partitions, plans none."""

from __future__ import annotations

import random

from pyiceberg.table.snapshots import Operation, Snapshot, Summary

from catalog.pipelines.maintenance import MaintenancePolicy
from maintenance.planner import MIN_INPUT_FILES, plan_compaction
from maintenance.quick_check import Memo, compaction_impossible, memo_of
from maintenance.table_state import PartitionState
from tests.unit.test_maintenance import NOW_MS, partition, state_of

POLICY = MaintenancePolicy(cold_after=900, hot_partition_max_files=10)
TARGET = POLICY.target_file_size_bytes


def counted(
    snapshot_id: int,
    parent: int | None,
    total: int,
    added: int,
    operation: str = "append",
    deletes: int = 0,
) -> Snapshot:
    summary = Summary(
        Operation(operation),
        **{
            "added-data-files": str(added),
            "total-data-files": str(total),
            "total-delete-files": str(deletes),
            "added-delete-files": str(deletes),
        },
    )
    return Snapshot(
        snapshot_id=snapshot_id,
        parent_snapshot_id=parent,
        sequence_number=snapshot_id,
        timestamp_ms=NOW_MS - 60_000 + snapshot_id,
        manifest_list=f"file:///t/metadata/snap-{snapshot_id}.avro",
        summary=summary,
        schema_id=0,
    )


def test_few_files_in_the_whole_table_cannot_be_compacted() -> None:
    parts = [partition(19_000, 2, 3_600), partition(19_001, 2, 10)]
    state = state_of(parts, [counted(1, None, 4, 4)])
    assert compaction_impossible(state, POLICY, None)
    assert not plan_compaction(state, POLICY, NOW_MS, functions_catalog="c")
    # As many files as a cold partition needs: only the manifests can tell.
    state = state_of(parts, [counted(1, None, MIN_INPUT_FILES, MIN_INPUT_FILES)])
    assert not compaction_impossible(state, POLICY, None)
    # A delete file, or a snapshot without counts: not provable.
    assert not compaction_impossible(state_of(parts, [counted(1, None, 2, 2, deletes=1)]), POLICY, None)
    bare = Snapshot(snapshot_id=1, sequence_number=1, timestamp_ms=NOW_MS, manifest_list="x")
    assert not compaction_impossible(state_of(parts, [bare]), POLICY, None)
    # An empty table has nothing to compact.
    assert compaction_impossible(state_of([], []), POLICY, None)


def test_a_memo_bounds_what_appends_since_added() -> None:
    chain = [counted(1, None, 40, 40), counted(2, 1, 41, 1), counted(3, 2, 43, 2)]
    state = state_of([partition(19_000, 2, 10), partition(18_000, 1, None, big_files=38)], chain)
    memo = Memo(1, max_small_files=1, target_file_bytes=TARGET)
    assert compaction_impossible(state, POLICY, memo)  # 1 + 3 added < 5
    assert not compaction_impossible(state, POLICY, Memo(1, 2, TARGET))  # 2 + 3 >= 5
    assert not compaction_impossible(state, POLICY, Memo(1, 1, TARGET // 2))  # another target
    assert not compaction_impossible(state, POLICY, Memo(99, 0, TARGET))  # not in the ancestry
    assert compaction_impossible(state, POLICY, Memo(3, 4, TARGET))  # nothing since
    # A replace (someone else's compaction) or a delete since the memo: not provable.
    replaced = [*chain[:2], counted(3, 2, 43, 2, operation="replace")]
    assert not compaction_impossible(state_of(state.partitions, replaced), POLICY, memo)
    deleting = [*chain[:2], counted(3, 2, 43, 2, deletes=1)]
    assert not compaction_impossible(state_of(state.partitions, deleting), POLICY, memo)


def test_never_skips_a_table_the_planner_would_compact() -> None:
    rng = random.Random(31)
    policies = [POLICY, MaintenancePolicy(cold_after=900, hot_partition_max_files=3)]
    skipped = 0
    for _ in range(2_000):
        policy = rng.choice(policies)
        before = [
            partition(
                19_000 + i, rng.randint(0, 4), rng.choice([None, 10, 3_600]), big_files=rng.randint(0, 3)
            )
            for i in range(rng.randint(0, 4))
        ]
        memo = memo_of(state_of(before), TARGET)
        after = [PartitionState(**vars(p)) for p in before]
        chain = [counted(1, None, sum(p.data_files for p in before), 0)]
        for snapshot_id in range(2, 2 + rng.randint(0, 3)):
            added = rng.randint(0, 2) if after else 0
            for _ in range(added):
                grown = rng.choice(after)
                grown.data_files += 1
                grown.small_files += 1
                grown.small_bytes += 1000
            total = sum(p.data_files for p in after)
            chain.append(counted(snapshot_id, snapshot_id - 1, total, added))
        state = state_of(after, chain)
        for known in (None, memo):
            if compaction_impossible(state, policy, known):
                skipped += 1
                assert not plan_compaction(state, policy, NOW_MS, functions_catalog="c"), (after, known)
    assert skipped > 100  # the check does skip tables
