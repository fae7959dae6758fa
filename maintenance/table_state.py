"""What a table needs, read from its metadata: files per partition, manifests, snapshots (pyiceberg).

Only the current snapshot's manifest list and manifests are read (no data file, no Spark job): per
partition the live data and delete files, their sizes and when the partition was last written (the
newest snapshot that added one of its files, compactions excluded: a compaction is not new data).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from pyiceberg.manifest import DataFileContent, ManifestContent, ManifestEntry, ManifestFile
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Operation, Snapshot

# Reading manifests is I/O bound: a few in parallel, not one thread per manifest.
MANIFEST_READERS = 4


class CommittedTable:
    """A table as this pass last loaded or committed it. pyiceberg's `Table` takes on the metadata each
    of its own commits returns, so a pass plans its next action on it without loading the table again
    (a busy table's visit loaded it 9 times); after a Spark action, a failed one, or for an action's
    run again after a lost commit race, the table is loaded afresh."""

    def __init__(self, load: Callable[[], Table]) -> None:
        self._load = load
        self.table = load()
        self.current = True

    def get(self) -> Table:
        """The table as last loaded or committed here (loaded again when that may be stale)."""
        if not self.current:
            self.table = self._load()
            self.current = True
        return self.table

    def for_action(self) -> Table:
        """The table for one run of an action: `get()`, and a fresh load for the next run unless the
        action is then marked done (`current = True`)."""
        table = self.get()
        self.current = False
        return table


@dataclass
class PartitionState:
    """One partition (of one partition spec) of the current snapshot."""

    spec_id: int
    values: tuple[Any, ...]
    data_files: int = 0
    data_bytes: int = 0
    # Data files below the compaction threshold (see `small_file_bytes`), and their bytes.
    small_files: int = 0
    small_bytes: int = 0
    delete_files: int = 0
    position_delete_files: int = 0
    delete_bytes: int = 0
    # When new data last landed in the partition (ms since epoch); None: not known (its snapshots are
    # expired or it holds only compacted files), which counts as cold.
    last_write_ms: int | None = None


@dataclass(frozen=True)
class ManifestState:
    path: str
    content: int
    length: int
    spec_id: int


@dataclass(frozen=True)
class TableStats:
    """The totals a pass records before and after (the `TableStats` of the management API)."""

    data_files: int
    data_bytes: int
    delete_files: int
    delete_bytes: int
    manifests: int
    snapshots: int

    @property
    def average_data_file_bytes(self) -> float:
        return self.data_bytes / self.data_files if self.data_files else 0.0

    def to_json(self) -> dict[str, int]:
        return {
            "data_files": self.data_files,
            "data_bytes": self.data_bytes,
            "delete_files": self.delete_files,
            "delete_bytes": self.delete_bytes,
            "manifests": self.manifests,
            "snapshots": self.snapshots,
        }


@dataclass
class TableState:
    """Everything the planner looks at (pure data: tests build it by hand)."""

    location: str
    format_version: int
    properties: dict[str, str]
    schema: Schema
    specs: dict[int, PartitionSpec]
    snapshots: list[Snapshot]
    current_snapshot_id: int | None
    # Snapshot ids every branch and tag points at (never expired by retention).
    referenced_snapshot_ids: frozenset[int]
    metadata_location: str | None
    metadata_log: list[str]
    partitions: list[PartitionState] = field(default_factory=list)
    manifests: list[ManifestState] = field(default_factory=list)
    default_spec_id: int = 0

    @property
    def stats(self) -> TableStats:
        return TableStats(
            data_files=sum(p.data_files for p in self.partitions),
            data_bytes=sum(p.data_bytes for p in self.partitions),
            delete_files=sum(p.delete_files for p in self.partitions),
            delete_bytes=sum(p.delete_bytes for p in self.partitions),
            manifests=len(self.manifests),
            snapshots=len(self.snapshots),
        )

    def main_ancestry(self) -> list[Snapshot]:
        """The current snapshot and its ancestors, newest first."""
        by_id = {s.snapshot_id: s for s in self.snapshots}
        chain: list[Snapshot] = []
        current = by_id.get(self.current_snapshot_id) if self.current_snapshot_id is not None else None
        while current is not None and len(chain) < len(by_id):
            chain.append(current)
            current = by_id.get(current.parent_snapshot_id) if current.parent_snapshot_id else None
        return chain


def small_file_bytes(target_bytes: int) -> int:
    """Files below this are rewritten by compaction (Iceberg binpack's own default: 75% of the target)."""
    return target_bytes * 3 // 4


def _is_new_data(snapshot: Snapshot | None) -> bool:
    if snapshot is None or snapshot.summary is None:
        return False
    return snapshot.summary.operation is not Operation.REPLACE


def _manifest_entries(
    table: Table, manifests: list[ManifestFile]
) -> list[tuple[ManifestFile, ManifestEntry]]:
    def read(manifest: ManifestFile) -> list[tuple[ManifestFile, ManifestEntry]]:
        return [(manifest, entry) for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True)]

    if len(manifests) <= 1:
        return [pair for manifest in manifests for pair in read(manifest)]
    with ThreadPoolExecutor(max_workers=MANIFEST_READERS) as pool:
        return [pair for pairs in pool.map(read, manifests) for pair in pairs]


def read_table_state(
    table: Table, target_file_bytes: int, *, with_files: bool = True, with_manifests: bool = True
) -> TableState:
    """The state of `table` (as just loaded); `with_files=False` reads only the manifest list,
    `with_manifests=False` not even that (the table metadata only)."""
    metadata = table.metadata
    snapshot = table.current_snapshot()
    refs = frozenset(ref.snapshot_id for ref in metadata.refs.values())
    state = TableState(
        location=metadata.location,
        format_version=metadata.format_version,
        properties=dict(metadata.properties),
        schema=metadata.schema(),
        specs=dict(metadata.specs()),
        snapshots=list(metadata.snapshots),
        current_snapshot_id=snapshot.snapshot_id if snapshot is not None else None,
        referenced_snapshot_ids=refs,
        metadata_location=table.metadata_location,
        metadata_log=[entry.metadata_file for entry in metadata.metadata_log],
        default_spec_id=metadata.default_spec_id,
    )
    if snapshot is None or not with_manifests:
        return state
    manifests = list(snapshot.manifests(table.io))
    state.manifests = [
        ManifestState(m.manifest_path, int(m.content), m.manifest_length, m.partition_spec_id)
        for m in manifests
    ]
    if with_files:
        state.partitions = partitions_of(
            _manifest_entries(table, manifests),
            {s.snapshot_id: s for s in metadata.snapshots},
            target_file_bytes,
        )
    return state


def partitions_of(
    entries: Iterable[tuple[ManifestFile, ManifestEntry]],
    snapshots: dict[int, Snapshot],
    target_file_bytes: int,
) -> list[PartitionState]:
    """Live files grouped by (spec, partition values)."""
    small = small_file_bytes(target_file_bytes)
    partitions: dict[tuple[int, tuple[Any, ...]], PartitionState] = {}
    for manifest, entry in entries:
        data_file = entry.data_file
        record = data_file.partition
        values = tuple(record[i] for i in range(len(record))) if record is not None else ()
        key = (manifest.partition_spec_id, values)
        partition = partitions.get(key)
        if partition is None:
            partition = partitions[key] = PartitionState(manifest.partition_spec_id, values)
        size = int(data_file.file_size_in_bytes)
        if manifest.content == ManifestContent.DATA and data_file.content == DataFileContent.DATA:
            partition.data_files += 1
            partition.data_bytes += size
            if size < small:
                partition.small_files += 1
                partition.small_bytes += size
            added_by = snapshots.get(entry.snapshot_id) if entry.snapshot_id is not None else None
            if _is_new_data(added_by):
                assert added_by is not None
                if partition.last_write_ms is None or added_by.timestamp_ms > partition.last_write_ms:
                    partition.last_write_ms = added_by.timestamp_ms
        else:
            partition.delete_files += 1
            partition.delete_bytes += size
            if data_file.content == DataFileContent.POSITION_DELETES:
                partition.position_delete_files += 1
    return list(partitions.values())


__all__ = [
    "CommittedTable",
    "ManifestState",
    "PartitionState",
    "TableState",
    "TableStats",
    "partitions_of",
    "read_table_state",
    "small_file_bytes",
]
