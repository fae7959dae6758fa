"""Maintenance actions without Spark, for the many small tables (pyarrow + pyiceberg, commits through floe).

- Compaction of a small append-only table (`compact`): the small data files of the planned partitions
  are read (straight with pyarrow when they are in the table's current schema, else pyiceberg's reader:
  field ids, schema evolution), a file at a time, and written again as target-sized files a target's
  worth of rows at a time (memory bounded by the output, not the input), and
  committed as one `replace` snapshot that removes the inputs and adds the outputs. The commit asserts
  the branch head it was built on; when ingestion commits first, floe refuses it (409) and pyiceberg
  rebuilds it on the new head, after checking that every input file is still live and that no delete
  file was added for one (`maintenance.pyiceberg_rewrite`, Iceberg's `RewriteFiles` rules). The
  appended files stay, the inputs are removed once: nothing is lost or doubled. Kafka offsets need no
  carrying: floe keeps each table's committed offsets in its database (the exactly-once fence reads them
  there), and a replace snapshot claims none, as Iceberg's own `rewrite_data_files` does.
- Manifests (`rewrite_manifests`): the live entries of the default spec's data manifests merged into one
  manifest, in a `replace` snapshot with no file change (rebuilt on the fresh head after a race).
- Snapshot expiry (`expire_snapshots`): a `remove-snapshots` commit (no requirement but the table's
  uuid: floe applies it to whatever the table is then), then the files only the expired snapshots
  reached — manifest lists, manifests, data and delete files — that no remaining snapshot or metadata
  file references are deleted (Iceberg's reachable-file cleanup).
- Table properties (`set_properties`): a plain property update.

Tables with delete files, older partition specs, format v3 or more than `MAX_BYTES` of small files to
rewrite go to Spark (`maintenance.spark_actions`).
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io import FileIO
from pyiceberg.io.pyarrow import ArrowScan, schema_to_pyarrow
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestFile,
    read_manifest_list,
)
from pyiceberg.table import FileScanTask, Table
from pyiceberg.table.update import AssertTableUUID, RemoveSnapshotsUpdate

from maintenance import orphans
from maintenance.planner import CompactionRun, ExpireRun
from maintenance.pyiceberg_rewrite import commit_updates, replace_files, write_data_files
from maintenance.table_state import TableState, small_file_bytes

# Small files a table's compaction may rewrite in this process, on one thread; larger rewrites go to
# Spark, which spreads them over its cores or executors. (Memory does not bound it: rows are written a
# target's worth at a time.)
MAX_BYTES = 256 * 1024 * 1024
# A file to rewrite up to this size is read whole; a larger one a batch of `BATCH_ROWS` rows at a time.
READ_WHOLE_BYTES = 8 * 1024 * 1024
BATCH_ROWS = 128 * 1024


def compacts_in_process(state: TableState, runs: Iterable[CompactionRun], max_bytes: int = MAX_BYTES) -> bool:
    """Whether the planned compaction can run here: an append-only table (no delete file anywhere),
    format v1/v2, every planned partition in the default spec, and at most `max_bytes` to rewrite."""
    chosen = [p for run in runs for p in run.partitions]
    if not chosen or state.format_version > 2:
        return False
    if any(p.delete_files for p in state.partitions):
        return False
    if any(p.spec_id != state.default_spec_id for p in chosen):
        return False
    return sum(p.small_bytes for p in chosen) <= max_bytes


def _live_data_files(table: Table) -> list[tuple[int, DataFile]]:
    """The current snapshot's live data files with their spec ids, oldest first (by data sequence
    number: a manifest list puts the newest manifest first), so a rewrite keeps the rows in commit
    order: Kafka offsets and timestamps ascending through the output, their column bounds narrow."""
    snapshot = table.current_snapshot()
    if snapshot is None:
        return []
    found: list[tuple[int, int, DataFile]] = []
    for manifest in snapshot.manifests(table.io):
        if manifest.content != ManifestContent.DATA:
            continue
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            if entry.data_file.content == DataFileContent.DATA:
                found.append((entry.sequence_number or 0, manifest.partition_spec_id, entry.data_file))
    found.sort(key=lambda item: item[0])  # stable: one commit's files keep their order
    return [(spec_id, data_file) for _, spec_id, data_file in found]


def _values(data_file: DataFile) -> tuple[Any, ...]:
    record = data_file.partition
    return tuple(record[i] for i in range(len(record))) if record is not None else ()


def _row_count_report(scan: ArrowScan, io: FileIO, files: list[DataFile], read: int) -> str:
    """Which files disagree, and with what: each file's manifest count, its Parquet footer's and the
    rows the reader returned (file names only, never their folders)."""
    import pyarrow.parquet as pq

    disagreeing = []
    for data_file in files:
        with io.new_input(data_file.file_path).open() as stream:
            footer = pq.ParquetFile(stream).metadata.num_rows
        alone = scan.to_table([FileScanTask(data_file)]).num_rows
        if not data_file.record_count == footer == alone:
            name = data_file.file_path.rsplit("/", 1)[-1]
            disagreeing.append(f"{name}: manifest {data_file.record_count}, footer {footer}, read {alone}")
    listed = "; ".join(disagreeing[:5]) or "every file agrees when read alone"
    total = sum(f.record_count for f in files)
    return f"{len(files)} files, manifests {total} rows, read {read} ({listed})"


class _OtherShape(Exception):
    """A file to rewrite is not in the table's current schema as written: read them all by field id."""


def straight_parts(io: FileIO, files: list[DataFile], as_written: pa.Schema) -> Iterator[pa.Table]:
    """The rows of `files`, in order, a file (or, for a large one, a batch) at a time, read straight
    with pyarrow; `_OtherShape` at the first file whose schema is not exactly the table's current one
    as floe and pyiceberg write it (`as_written`: names, types, nullability, field ids), before its
    rows are read. pyiceberg's scan pays a projection per file: 129 files of a table ingested for 20
    minutes took 552 ms through it and 85 ms read straight, and compaction's reads were half of a
    maintenance pass's CPU over 1,000 busy tables."""
    # Field metadata (field ids) compared; the schema-level metadata is each writer's own.
    expected = as_written.remove_metadata()
    for data_file in files:
        if data_file.file_format != FileFormat.PARQUET:
            raise _OtherShape(data_file.file_path)
        with io.new_input(data_file.file_path).open() as stream:
            parquet = pq.ParquetFile(stream)
            if not parquet.schema_arrow.remove_metadata().equals(expected, check_metadata=True):
                raise _OtherShape(data_file.file_path)
            if data_file.file_size_in_bytes <= READ_WHOLE_BYTES:
                yield parquet.read(use_threads=False)
                continue
            for batch in parquet.iter_batches(batch_size=BATCH_ROWS, use_threads=False):
                yield pa.Table.from_batches([batch])


def scanned_parts(scan: ArrowScan, files: list[DataFile]) -> Iterator[pa.Table]:
    """The rows of `files`, in order, a file at a time, through pyiceberg's scan, which projects each
    file onto the table's schema by field id (files written before a schema change, by other writers)."""
    for data_file in files:
        yield scan.to_table([FileScanTask(data_file)])


def _write_in_chunks(
    parts: Iterable[pa.Table],
    write: Callable[[pa.Table], list[DataFile]],
    chunk_bytes: int,
    written: list[DataFile],
) -> int:
    """Write the rows `parts` yield, at most `chunk_bytes` of Arrow data at a time (the files added to
    `written`, as they are), so a rewrite holds about one output file's rows however many it reads:
    small files compress 10-50x, and a busy table's 256 MiB of them read at once took a maintainer to
    23 GiB. The rows read."""
    buffered: list[pa.Table] = []
    size = read = 0

    def flush() -> None:
        # One chunk: pyiceberg's writer projects every record batch onto the schema on its own
        # (`_to_requested_schema`), so 150 one-row chunks cost 150 projections (12 % of the
        # maintainer's CPU beside 1,000 busy tables); one chunk, one projection per output file.
        rows = pa.concat_tables(buffered).combine_chunks()
        buffered.clear()
        out = write(rows)
        written.extend(out)
        if sum(f.record_count for f in out) != rows.num_rows:
            raise RuntimeError("compaction wrote a different number of rows than it read")

    for part in parts:
        if buffered and size + part.nbytes > chunk_bytes:
            flush()
            size = 0
        buffered.append(part)
        size += part.nbytes
        read += part.num_rows
    if buffered:
        flush()
    return read


def _rewrite_group(
    table: Table,
    files: list[DataFile],
    reading: tuple[ArrowScan, pa.Schema],
    write: Callable[[pa.Table], list[DataFile]],
    chunk_bytes: int,
) -> list[DataFile]:
    """`files` (one partition's, oldest first: rows keep their commit order) written again through
    `write`: read straight when every file is in the current schema as written (`reading`'s schema),
    else all through `reading`'s scan."""
    scan, as_written = reading
    written: list[DataFile] = []
    try:
        try:
            read = _write_in_chunks(straight_parts(table.io, files, as_written), write, chunk_bytes, written)
        except _OtherShape:
            orphans.delete_files(table.io, [f.file_path for f in written])
            written.clear()
            read = _write_in_chunks(scanned_parts(scan, files), write, chunk_bytes, written)
        if read != sum(f.record_count for f in files):
            raise RuntimeError(
                "compaction read a different number of rows than the files hold: "
                + _row_count_report(scan, table.io, files, read)
            )
    except BaseException:
        # Nothing committed: the files written so far are this rewrite's own.
        orphans.delete_files(table.io, [f.file_path for f in written])
        raise
    return written


def compact(table: Table, runs: Iterable[CompactionRun], target_file_bytes: int) -> dict[str, Any]:
    """Rewrite the small data files of the runs' partitions of `table` (as just loaded) into
    target-sized files, in one `replace` commit. Returns Iceberg's `rewrite_data_files` counts."""
    wanted = {(p.spec_id, p.values) for run in runs for p in run.partitions}
    small = small_file_bytes(target_file_bytes)
    groups: dict[tuple[int, tuple[Any, ...]], list[DataFile]] = {}
    for spec_id, data_file in _live_data_files(table):
        key = (spec_id, _values(data_file))
        if key in wanted and data_file.file_size_in_bytes < small:
            groups.setdefault(key, []).append(data_file)
    groups = {key: files for key, files in groups.items() if len(files) >= 2}
    if not groups:
        return {"rewritten_data_files_count": 0, "added_data_files_count": 0, "rewritten_bytes_count": 0}
    metadata = table.metadata
    # The writer's target is the policy's (a table property may say otherwise).
    write_metadata = metadata.model_copy(
        update={"properties": {**metadata.properties, "write.target-file-size-bytes": str(target_file_bytes)}}
    )
    schema = metadata.schema()
    # Built once for every partition's rewrite: the scan projects files by field id, the Arrow schema
    # is the shape a file must have to be read straight.
    reading = (
        ArrowScan(metadata, table.io, schema, AlwaysTrue()),
        schema_to_pyarrow(schema, include_field_ids=True),
    )
    write_uuid, counter = uuid.uuid4(), itertools.count(0)

    def write(rows: pa.Table) -> list[DataFile]:
        return write_data_files(write_metadata, rows, table.io, write_uuid, counter)

    removed: list[DataFile] = []
    added: list[DataFile] = []
    try:
        for files in groups.values():
            # pyiceberg's writer also packs files by Arrow bytes: a chunk of the target is one file.
            added += _rewrite_group(table, files, reading, write, target_file_bytes)
            removed += files
        replace_files(table, removed, added, merge_manifests=True)
    except Exception:
        # The commit did not land (pyiceberg deleted its manifests): the data files written are ours.
        orphans.delete_files(table.io, [f.file_path for f in added])
        raise
    return {
        "rewritten_data_files_count": len(removed),
        "added_data_files_count": len(added),
        "rewritten_bytes_count": sum(f.file_size_in_bytes for f in removed),
        "engine": "in-process",
    }


def rewrite_manifests(table: Table) -> dict[str, Any]:
    """Merge the default spec's data manifests into one (a `replace` snapshot changing no file)."""
    snapshot = table.current_snapshot()
    if snapshot is None:
        return {"rewritten_manifests_count": 0, "added_manifests_count": 0}
    spec = table.metadata.default_spec_id
    before = [
        m
        for m in snapshot.manifests(table.io)
        if m.content == ManifestContent.DATA and m.partition_spec_id == spec
    ]
    if len(before) < 2:
        return {"rewritten_manifests_count": 0, "added_manifests_count": 0}
    replace_files(table, [], [], merge_manifests=True)
    return {"rewritten_manifests_count": len(before), "added_manifests_count": 1, "engine": "in-process"}


def set_properties(table: Table, properties: dict[str, str]) -> dict[str, Any]:
    with table.transaction() as transaction:
        transaction.set_properties(properties)
    return {"properties": ",".join(sorted(properties)), "engine": "in-process"}


def _manifests_of(io: FileIO, manifest_lists: Iterable[str]) -> dict[str, ManifestFile]:
    found: dict[str, ManifestFile] = {}
    for manifest_list in sorted(set(manifest_lists)):
        for manifest in read_manifest_list(io.new_input(manifest_list)):
            found.setdefault(manifest.manifest_path, manifest)
    return found


def _paths(io: FileIO, manifests: Iterable[ManifestFile], *, live_only: bool) -> set[str]:
    return {
        entry.data_file.file_path
        for manifest in manifests
        for entry in manifest.fetch_manifest_entry(io, discard_deleted=live_only)
    }


def expire_snapshots(table: Table, run: ExpireRun) -> dict[str, Any]:
    """Remove the run's snapshots from `table` (as last loaded or committed), then delete the files
    only they reached (Iceberg's reachable-file cleanup)."""
    protected = {ref.snapshot_id for ref in table.metadata.refs.values()}
    wanted = set(run.snapshot_ids)
    expired = [
        s for s in table.metadata.snapshots if s.snapshot_id in wanted and s.snapshot_id not in protected
    ]
    if not expired:
        return {"expired_snapshots_count": 0}
    # One `remove-snapshots` update asserting only the table's identity (pyiceberg's builder copies the
    # whole metadata per snapshot id).
    commit_updates(
        table,
        (RemoveSnapshotsUpdate(snapshot_ids=[s.snapshot_id for s in expired]),),
        (AssertTableUUID(uuid=table.metadata.table_uuid),),
    )
    # The metadata the commit returned (pyiceberg's `Table` takes it on): whatever the remaining
    # snapshots read (a commit that landed before this one included) stays; a file only listed as
    # deleted by a kept snapshot was read by expired ones only. A commit landing after this one builds
    # on a kept head: it lists files of kept manifests, or new ones.
    io = table.io
    kept = table.metadata.snapshots
    kept_lists = {s.manifest_list for s in kept if s.manifest_list}
    kept_manifests = _manifests_of(io, kept_lists)
    gone_lists = {s.manifest_list for s in expired if s.manifest_list} - kept_lists
    gone_manifests = {
        path: m for path, m in _manifests_of(io, gone_lists).items() if path not in kept_manifests
    }
    gone_files: set[str] = set()
    if gone_manifests:
        candidates = _paths(io, gone_manifests.values(), live_only=False)
        live = {orphans.file_key(p) for p in _paths(io, kept_manifests.values(), live_only=True)}
        gone_files = {p for p in candidates if orphans.file_key(p) not in live}
    # Data first, then what lists it: an interrupted cleanup leaves only unreferenced files (orphans).
    orphans.delete_files(io, sorted(gone_files))
    orphans.delete_files(io, sorted(gone_manifests))
    orphans.delete_files(io, sorted(gone_lists))
    return {
        "expired_snapshots_count": len(expired),
        "deleted_data_files_count": len(gone_files),
        "deleted_manifest_files_count": len(gone_manifests),
        "deleted_manifest_lists_count": len(gone_lists),
        "engine": "in-process",
    }


__all__ = [
    "MAX_BYTES",
    "compact",
    "compacts_in_process",
    "expire_snapshots",
    "rewrite_manifests",
    "set_properties",
]
