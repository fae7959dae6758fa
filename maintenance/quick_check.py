"""Whether a table has nothing to compact, expire, merge or set, from its metadata alone (issue 31).

A full pass reads every manifest of a table (Python Avro decoding: the bulk of a pass over a small
table). Most of a thousand quiet tables have nothing to do most of the time, and their metadata says so
without a manifest: the compaction planner needs, in some partition, at least
`min(MIN_INPUT_FILES, hot_partition_max_files)` small data files or a delete file, and a partition never
holds more data files than the table (the current snapshot's `total-data-files`). When the worker
maintained the table before (`Memo`: the most small files any partition held, at a snapshot), the bound
is tighter: that count plus the data files the appends committed since then added (their summaries'
`added-data-files`). Expiry and the metadata properties are planned from the metadata itself; the
manifests' count (the manifest rewrite's trigger) comes from the manifest list, one small file.

Anything the summaries cannot prove (a delete file, a snapshot without counts, an operation other than
append since the memo, a missing memo snapshot) means: do the full pass.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyiceberg.manifest import ManifestContent
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Operation, Snapshot

from catalog.pipelines.maintenance import MaintenancePolicy
from maintenance.planner import METADATA_PROPERTIES, MIN_INPUT_FILES, needs_manifest_rewrite, plan_expiry
from maintenance.table_state import ManifestState, TableState, TableStats, read_table_state


@dataclass(frozen=True)
class Memo:
    """What the worker's last full pass over a table left: its current snapshot and the most small
    data files any partition held then."""

    snapshot_id: int | None
    max_small_files: int
    # The target size "small" was measured against (a changed policy makes the memo useless).
    target_file_bytes: int


def memo_of(state: TableState, target_file_bytes: int) -> Memo:
    small = max((p.small_files for p in state.partitions), default=0)
    return Memo(state.current_snapshot_id, small, target_file_bytes)


def _count(snapshot: Snapshot, key: str) -> int | None:
    if snapshot.summary is None:
        return None
    value = snapshot.summary.additional_properties.get(key)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _added_since(state: TableState, memo: Memo) -> int | None:
    """Data files the appends after `memo`'s snapshot added (None: not provable from the summaries)."""
    added = 0
    for snapshot in state.main_ancestry():
        if snapshot.snapshot_id == memo.snapshot_id:
            return added
        if snapshot.summary is None or snapshot.summary.operation is not Operation.APPEND:
            return None
        files, deletes = _count(snapshot, "added-data-files"), _count(snapshot, "added-delete-files")
        if files is None or deletes:
            return None
        added += files
    return None


def compaction_impossible(state: TableState, policy: MaintenancePolicy, memo: Memo | None) -> bool:
    """No partition can have the small files (or any delete file) the compaction planner asks for."""
    ancestry = state.main_ancestry()
    if not ancestry:
        return True
    current = ancestry[0]
    total_files, total_deletes = _count(current, "total-data-files"), _count(current, "total-delete-files")
    if total_files is None or total_deletes is None or total_deletes > 0:
        return False
    needed = min(MIN_INPUT_FILES, policy.hot_partition_max_files)
    if total_files < needed:
        return True
    if memo is None or memo.target_file_bytes != policy.target_file_size_bytes:
        return False
    added = _added_since(state, memo)
    return added is not None and memo.max_small_files + added < needed


def nothing_to_do(
    table: Table, policy: MaintenancePolicy, now_ms: int, memo: Memo | None = None
) -> TableStats | None:
    """The table's counts when a pass over `table` (as just loaded) would change nothing but old
    metadata and orphan files; None when it may (then the full pass decides)."""
    if any(key not in table.metadata.properties for key in METADATA_PROPERTIES):
        return None
    state = read_table_state(table, policy.target_file_size_bytes, with_manifests=False)
    if plan_expiry(state, policy, now_ms) is not None:
        return None
    if not compaction_impossible(state, policy, memo):
        return None
    snapshot = table.current_snapshot()
    manifests = list(snapshot.manifests(table.io)) if snapshot is not None else []
    listed = [
        ManifestState(m.manifest_path, int(m.content), m.manifest_length, m.partition_spec_id)
        for m in manifests
    ]
    if any(m.content != ManifestContent.DATA for m in manifests) or needs_manifest_rewrite(listed):
        return None
    summary = snapshot.summary if snapshot is not None else None
    properties = summary.additional_properties if summary is not None else {}
    return TableStats(
        data_files=int(properties.get("total-data-files", 0)),
        data_bytes=int(properties.get("total-files-size", 0)),
        delete_files=0,
        delete_bytes=0,
        manifests=len(listed),
        snapshots=len(state.snapshots),
    )


__all__ = ["Memo", "compaction_impossible", "memo_of", "nothing_to_do"]
