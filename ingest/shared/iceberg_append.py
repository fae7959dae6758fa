"""Appends to one Iceberg table as pure steps: write the files, describe the commit, advance on success.

`TableAppender.prepare` writes a batch's data files, one manifest for them and the new manifest list,
and returns the commit as pyiceberg's typed models (`AddSnapshotUpdate`, `SetSnapshotRefUpdate`, and
the requirements `AssertTableUUID` + `AssertRefSnapshotId` on the snapshot it builds on): the caller
sends it (with other tables' in one transaction) and calls `committed` when floe accepted it, or
`reload` when floe refused it (another writer moved the table: maintenance, an engine). Between
commits the appender keeps what the next append needs — the current snapshot, its manifests, the
table's sequence number and summary totals — so an append reads nothing back from storage or floe.

Manifests are merged as Iceberg's own merge-append does (`commit.manifest.min-count-to-merge`): once a
table's current snapshot lists that many, the next append writes one manifest holding the live entries
of those under `commit.manifest.target-size-bytes` (as EXISTING, with their snapshot ids and sequence
numbers) and its own. (Merging at 10 instead was
measured slower: re-reading the merged manifest every ten commits cost more than the longer lists.) The
entries of the manifests this appender wrote are kept as a reader would get them back (manifest files
never change), so a merge re-reads only manifests another writer wrote: reading back the 99 manifests
carried made the merging commit cost 270-350 ms of CPU, and the mean append over a cycle of 100 commits
twice the cost of one (`python -m benchmarks.many_tables.append_cost`).

Tables that start together reach the merge count together: a thousand tables started by one `floe
ingest` all merged within the same three minutes, every 100 commits (about 11 minutes), and freshness
p99 in those minutes went from ~8 s to ~19 s. `MergePacing`, shared by one process's appenders, spreads
them: a merge takes a token, and tokens come at twice the rate the tables' merges need on average, so
a wave is spread over the next few dozen rounds and stays spread; a table whose list reaches twice the
merge count merges regardless, bounding its list.
"""

from __future__ import annotations

import math
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec
import pyarrow as pa
from pyiceberg.io import FileIO
from pyiceberg.io.pyarrow import PyArrowFileIO, schema_to_pyarrow
from pyiceberg.manifest import (
    DataFile,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
)
from pyiceberg.table import CommitTableRequest, Table, TableIdentifier
from pyiceberg.table.locations import load_location_provider
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import (
    Operation,
    Snapshot,
    SnapshotSummaryCollector,
    Summary,
    update_snapshot_summaries,
)
from pyiceberg.table.update import (
    AddSnapshotUpdate,
    AssertRefSnapshotId,
    AssertTableUUID,
    SetSnapshotRefUpdate,
)
from pyiceberg.typedef import Identifier

from ingest.shared.pyiceberg_write import AvroPlans, DataFileWriter

MAIN = "main"
MIN_COUNT_TO_MERGE = "commit.manifest.min-count-to-merge"
DEFAULT_MIN_COUNT_TO_MERGE = 100  # Iceberg's default
TARGET_SIZE = "commit.manifest.target-size-bytes"
DEFAULT_TARGET_SIZE = 8 * 1024 * 1024  # Iceberg's default
AVRO_CODEC: Literal["deflate"] = "deflate"


@dataclass(frozen=True)
class PreparedAppend:
    """One append, its files written, waiting for floe to accept its commit."""

    identifier: Identifier
    request: CommitTableRequest
    snapshot_id: int
    sequence_number: int
    manifests: tuple[ManifestFile, ...]
    summary: Summary
    records: int
    files: tuple[str, ...] = field(default=())  # every file written (removed if the commit is refused)
    # The new manifest's path and its entries as a reader gets them back once the commit landed.
    entries: tuple[str, tuple[ManifestEntry, ...]] | None = None

    def change(self) -> msgspec.Raw:
        """The commit as a `table-changes` entry of floe's transaction endpoint: Iceberg's JSON, already
        encoded (the request body embeds it as it is, rather than parsing it to encode it again)."""
        return msgspec.Raw(self.request.model_dump_json().encode())


@dataclass
class MergePacing:
    """Tokens for manifest merges, shared by the appenders of one process (see module doc).

    Each append adds 2 / (its table's merge count) tokens, twice what its table's merges take on
    average, up to `burst`; a merge due takes one if there is one, else the table carries its manifests
    one commit more. One table alone is never held back: its own appends earn two tokens per merge.
    Unlimited tokens (an appender given no shared pacing) hold no merge back."""

    burst: float = 10.0
    tokens: float = 10.0
    # Appenders of different tables may prepare at once (an object store's tables, written side by side).
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def merges(self, manifests: int, merge_at: int) -> bool:
        """One append's turn: whether its table, whose new list would hold `manifests`, merges now."""
        with self._lock:
            self.tokens = min(self.burst, self.tokens + 2 / max(1, merge_at))
            if manifests < merge_at:
                return False
            if self.tokens >= 1 or manifests >= 2 * merge_at:
                self.tokens -= 1  # a forced merge takes its token too: the others wait for it
                return True
            return False


@dataclass
class _Head:
    """The table as this appender last saw it: where the next append starts."""

    snapshot_id: int | None
    sequence_number: int
    manifests: list[ManifestFile]
    summary: Mapping[str, str] | None


class TableAppender:
    """Appends Arrow rows to one table, commits described for the caller to send (see module doc)."""

    def __init__(
        self, identifier: Identifier, load: Callable[[], Table], pacing: MergePacing | None = None
    ) -> None:
        self.identifier = identifier
        self._load = load
        self._pacing = pacing or MergePacing(burst=math.inf, tokens=math.inf)  # unpaced
        self.metadata: TableMetadata
        self.io: FileIO
        self._arrow_schema: pa.Schema
        self._head: _Head
        self._loaded = False  # read from floe at the first append: an idle table costs nothing
        # The live entries of the carried manifests this appender wrote, by manifest path.
        self._entries: dict[str, tuple[ManifestEntry, ...]] = {}

    def _ensure_loaded(self) -> None:
        if not self._loaded:
            self.reload()

    def reload(self) -> None:
        """Read the table again from floe (after a refused commit, or to pick up another writer's)."""
        table = self._load()
        self._loaded = True
        self.metadata, self.io = table.metadata, table.io
        self._arrow_schema = schema_to_pyarrow(self.metadata.schema(), include_field_ids=True)
        self._files = DataFileWriter(self.metadata, self.io)
        self._avro = AvroPlans()
        self._locations = load_location_provider(self.metadata.location, self.metadata.properties)
        snapshot = self.metadata.snapshot_by_name(MAIN)
        # A manifest of an earlier snapshot holding no live file (only what a rewrite deleted) is not
        # carried, as Iceberg's and pyiceberg's appends drop it: its deletions are that snapshot's. The
        # manifests this appender lists later all hold live files, so the head is filtered once, here.
        manifests = [
            m
            for m in (snapshot.manifests(self.io) if snapshot is not None else ())
            if m.has_added_files() or m.has_existing_files()
        ]
        self._head = _Head(
            snapshot.snapshot_id if snapshot is not None else None,
            getattr(self.metadata, "last_sequence_number", 0),  # format v1 has none
            manifests,
            dict(snapshot.summary.additional_properties) | {"operation": snapshot.summary.operation.value}
            if snapshot is not None and snapshot.summary is not None
            else None,
        )
        self._keep_entries_of(manifests)

    @property
    def arrow_schema(self) -> pa.Schema:
        """The table's schema as Arrow (with field ids): what `prepare` writes."""
        self._ensure_loaded()
        return self._arrow_schema

    @property
    def on_object_store(self) -> bool:
        """Whether the table's files are uploads to an object store (its location is not a local path)."""
        self._ensure_loaded()
        scheme, _, _ = PyArrowFileIO.parse_location(self.metadata.location)
        return scheme != "file"

    @property
    def snapshot_id(self) -> int | None:
        self._ensure_loaded()
        return self._head.snapshot_id

    def rows(self, records: list[dict[str, Any]]) -> pa.Table:
        """`records` (column name → value, as pyarrow takes them) as an Arrow table of the schema."""
        self._ensure_loaded()
        return pa.Table.from_pylist(records, schema=self.arrow_schema)

    def prepare(self, rows: pa.Table | None, properties: Mapping[str, str]) -> PreparedAppend:
        """Write `rows` (None or empty: a snapshot with no new files, carrying `properties` only) and
        describe the commit of a snapshot adding them, its summary carrying `properties`."""
        self._ensure_loaded()
        head = self._head
        metadata = self.metadata
        snapshot_id = uuid.uuid4().int & ((1 << 63) - 1)
        sequence_number = head.sequence_number + 1
        commit_uuid = uuid.uuid4()
        locations = self._locations
        written: list[str] = []
        added = self._files.write(rows) if rows is not None and rows.num_rows else []
        written += [f.file_path for f in added]
        collector = SnapshotSummaryCollector()
        spec, schema = metadata.spec(), metadata.schema()
        for data_file in added:
            collector.add_file(data_file, schema, spec)
        carried = list(head.manifests)  # all hold live files (`reload`)
        merge_at = int(metadata.properties.get(MIN_COUNT_TO_MERGE, DEFAULT_MIN_COUNT_TO_MERGE))
        merged: list[ManifestEntry] = []
        if self._pacing.merges(len(carried) + 1, merge_at):
            target = int(metadata.properties.get(TARGET_SIZE, DEFAULT_TARGET_SIZE))
            mergeable = [
                m
                for m in carried
                if m.content == ManifestContent.DATA
                and m.partition_spec_id == metadata.default_spec_id
                and m.manifest_length < target
            ]
            carried = [m for m in carried if m not in mergeable]
            for manifest in mergeable:
                kept = self._entries.get(manifest.manifest_path)
                if kept is None:  # another writer's manifest
                    kept = tuple(manifest.fetch_manifest_entry(self.io, discard_deleted=True))
                merged += kept
        new_manifests: list[ManifestFile] = []
        entries: tuple[str, tuple[ManifestEntry, ...]] | None = None
        if added or merged:
            path = locations.new_metadata_location(f"{commit_uuid}-m0.avro")
            if metadata.format_version >= 2:  # v1 manifests inherit no sequence numbers: read back
                entries = (path, _as_read_back(merged, added, snapshot_id, sequence_number))
            written.append(path)
            with self._avro.manifest(
                metadata.format_version, spec, schema, self.io.new_output(path), snapshot_id, AVRO_CODEC
            ) as writer:
                for entry in merged:
                    writer.existing(entry)
                for data_file in added:
                    writer.add(_added(snapshot_id, data_file))
            new_manifests.append(writer.to_manifest_file())
        list_path = locations.new_metadata_location(f"snap-{snapshot_id}-0-{commit_uuid}.avro")
        written.append(list_path)
        manifests = new_manifests + carried
        with self._avro.manifest_list(
            metadata.format_version,
            self.io.new_output(list_path),
            snapshot_id,
            head.snapshot_id,
            sequence_number,
            AVRO_CODEC,
        ) as list_writer:
            list_writer.add_manifests(manifests)
        summary = update_snapshot_summaries(
            Summary(Operation.APPEND, **collector.build(), **properties), head.summary
        )
        snapshot = Snapshot(
            snapshot_id=snapshot_id,
            parent_snapshot_id=head.snapshot_id,
            sequence_number=sequence_number,
            manifest_list=list_path,
            summary=summary,
            schema_id=metadata.current_schema_id,
        )
        request = CommitTableRequest(
            identifier=TableIdentifier(namespace=list(self.identifier[:-1]), name=self.identifier[-1]),
            requirements=(
                AssertTableUUID(uuid=metadata.table_uuid),
                AssertRefSnapshotId(ref=MAIN, snapshot_id=head.snapshot_id),
            ),
            updates=(
                AddSnapshotUpdate(snapshot=snapshot),
                SetSnapshotRefUpdate(
                    ref_name=MAIN,
                    type="branch",
                    snapshot_id=snapshot_id,
                    max_ref_age_ms=None,
                    max_snapshot_age_ms=None,
                    min_snapshots_to_keep=None,
                ),
            ),
        )
        # The manifests as the list writer stamped them (an added manifest's sequence number assigned;
        # a carried one's was when it was first listed, and a manifest read back has its own).
        stamped = (*(_stamped(m, sequence_number) for m in new_manifests), *carried)
        records = sum(f.record_count for f in added)
        return PreparedAppend(
            self.identifier,
            request,
            snapshot_id,
            sequence_number,
            stamped,
            summary,
            records,
            tuple(written),
            entries,
        )

    def committed(self, prepared: PreparedAppend) -> None:
        """floe accepted `prepared`: the next append builds on it."""
        summary = dict(prepared.summary.additional_properties)
        summary["operation"] = prepared.summary.operation.value
        self._head = _Head(prepared.snapshot_id, prepared.sequence_number, list(prepared.manifests), summary)
        if prepared.entries is not None:
            self._entries[prepared.entries[0]] = prepared.entries[1]
        # Entries are kept only for manifests this appender wrote and carries, so more of them than
        # manifests means a merge dropped some (forgetting them walks every manifest: not every commit).
        if len(self._entries) > len(self._head.manifests):
            self._keep_entries_of(self._head.manifests)

    def _keep_entries_of(self, manifests: list[ManifestFile]) -> None:
        """Forget the entries of manifests the table no longer carries."""
        carried = {m.manifest_path for m in manifests}
        self._entries = {path: kept for path, kept in self._entries.items() if path in carried}

    def discard(self, prepared: PreparedAppend) -> None:
        """floe refused `prepared`: remove its files (best effort; orphan removal gets any left)."""
        for path in prepared.files:
            try:
                self.io.delete(path)
            except Exception:  # a file left behind is maintenance's orphan removal's
                continue


def _added(snapshot_id: int, data_file: DataFile) -> ManifestEntry:
    return ManifestEntry.from_args(
        status=ManifestEntryStatus.ADDED,
        snapshot_id=snapshot_id,
        sequence_number=None,
        file_sequence_number=None,
        data_file=data_file,
    )


def _as_read_back(
    merged: list[ManifestEntry], added: list[DataFile], snapshot_id: int, sequence_number: int
) -> tuple[ManifestEntry, ...]:
    """A new manifest's live entries as `ManifestFile.fetch_manifest_entry` gives them back once its
    commit (`snapshot_id`, `sequence_number`) landed: the merged ones EXISTING with their own snapshot
    and sequence numbers, the added ones ADDED with the commit's (inherited from the manifest list)."""
    existing = [
        ManifestEntry.from_args(
            status=ManifestEntryStatus.EXISTING,
            snapshot_id=entry.snapshot_id,
            sequence_number=entry.sequence_number,
            file_sequence_number=entry.file_sequence_number,
            data_file=entry.data_file,
        )
        for entry in merged
    ]
    new = [
        ManifestEntry.from_args(
            status=ManifestEntryStatus.ADDED,
            snapshot_id=snapshot_id,
            sequence_number=sequence_number,
            file_sequence_number=sequence_number,
            data_file=data_file,
        )
        for data_file in added
    ]
    return tuple(existing + new)


def _stamped(manifest: ManifestFile, sequence_number: int) -> ManifestFile:
    """`manifest` with an unassigned (-1) sequence number set to `sequence_number`, as the manifest
    list records it: carried into later lists, it must keep the number of the commit that added it."""
    if manifest.sequence_number == -1:
        manifest.sequence_number = sequence_number
    if manifest.min_sequence_number == -1:
        manifest.min_sequence_number = sequence_number
    return manifest
