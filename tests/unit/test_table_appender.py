"""The shared consumer's appends (`ingest.shared.iceberg_append.TableAppender`) across Iceberg's manifest
merge: the entries of the manifests it wrote are kept in memory as a reader gets them back, so a merge
reads back only manifests it did not write, and what it writes is what reading them back would give.

One table on a local warehouse, each commit taken as accepted (no catalog), past two merges
(`commit.manifest.min-count-to-merge`, 100).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.manifest import ManifestContent, ManifestEntry, ManifestEntryStatus, ManifestFile
from pyiceberg.table import Table
from pyiceberg.table.refs import SnapshotRef
from pyiceberg.table.snapshots import Snapshot

from benchmarks.many_tables.append_cost import one_record, table_at
from ingest.shared.iceberg_append import MergePacing, PreparedAppend, TableAppender

READ_BACK = ManifestFile.fetch_manifest_entry


def _appender(tmp_path: Path, pacing: MergePacing | None = None) -> TableAppender:
    table = SimpleNamespace(metadata=table_at(f"file://{tmp_path}/ns/t"), io=PyArrowFileIO())
    return TableAppender(("ns", "t"), lambda: cast(Table, table), pacing)


def _append(appender: TableAppender, n: int) -> PreparedAppend:
    rows = one_record(appender.arrow_schema, n)
    prepared = appender.prepare(rows, {"kafka.end-offsets": json.dumps({"0": n + 1})})
    appender.committed(prepared)
    return prepared


def _described(entry: ManifestEntry) -> tuple[Any, ...]:
    data = entry.data_file
    return (
        entry.status,
        entry.snapshot_id,
        entry.sequence_number,
        entry.file_sequence_number,
        data.file_path,
        data.record_count,
        data.file_size_in_bytes,
        data.lower_bounds,
        data.upper_bounds,
        data.null_value_counts,
    )


def _live(appender: TableAppender) -> dict[str, ManifestEntry]:
    """Every live entry of the table's current snapshot, read back from its manifests' files."""
    io = appender.io
    return {
        e.data_file.file_path: e
        for manifest in appender._head.manifests
        for e in READ_BACK(manifest, io, discard_deleted=True)
    }


def test_merges_write_what_reading_back_would_give(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    appender = _appender(tmp_path)
    added: dict[str, tuple[int, int]] = {}  # data file → (snapshot id, sequence number) that added it

    def refuse(*_: object, **__: object) -> list[ManifestEntry]:
        raise AssertionError("a manifest this appender wrote was read back")

    monkeypatch.setattr(ManifestFile, "fetch_manifest_entry", refuse)
    for n in range(150):
        prepared = _append(appender, n)
        (data_file,) = [f for f in prepared.files if f.endswith(".parquet")]
        added[data_file] = (prepared.snapshot_id, prepared.sequence_number)
    monkeypatch.setattr(ManifestFile, "fetch_manifest_entry", READ_BACK)
    # The merge happened (99 carried manifests became one) without reading any back.
    assert len(appender._head.manifests) == 51

    live = _live(appender)
    assert set(live) == set(added)
    for path, entry in live.items():
        snapshot_id, sequence_number = added[path]
        assert (entry.snapshot_id, entry.sequence_number, entry.file_sequence_number) == (
            snapshot_id,
            sequence_number,
            sequence_number,
        )
    merged_in = {p for p, e in live.items() if e.status == ManifestEntryStatus.EXISTING}
    assert len(merged_in) == 99  # the files of the first 99 commits, carried in the merged manifest

    # The entries kept in memory are, field for field, what reading each manifest back gives.
    for manifest in appender._head.manifests:
        kept = appender._entries[manifest.manifest_path]
        assert [_described(e) for e in kept] == [_described(e) for e in READ_BACK(manifest, appender.io)]


def test_a_manifest_it_did_not_write_is_read_back_when_merged(tmp_path: Path) -> None:
    appender = _appender(tmp_path)
    for n in range(120):
        _append(appender, n)
    # As after another writer's commit (maintenance, a redrive): manifests this appender knows nothing of.
    appender._entries.clear()
    expected = {p: _described(e) for p, e in _live(appender).items()}
    for n in range(120, 230):
        _append(appender, n)
    live = _live(appender)
    assert len(live) == 230
    for path, before in expected.items():  # merged again (EXISTING), with the numbers it had
        assert _described(live[path])[1:] == before[1:]
        assert live[path].status == ManifestEntryStatus.EXISTING


def test_a_manifest_of_no_live_file_is_not_carried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As Iceberg's appends: a manifest of an earlier snapshot that lists only deleted files (a
    compaction's deletions) is dropped from the next snapshot; carried, two of them once broke every
    in-process compaction of the table (tests/unit/test_replace_files.py). Such a manifest comes from
    another writer's snapshot, which the appender reads when it reloads the table."""
    appender = _appender(tmp_path)
    for n in range(3):
        _append(appender, n)
    deletions = ManifestFile.from_args(
        manifest_path=f"file://{tmp_path}/ns/t/metadata/deletions-m1.avro",
        manifest_length=1000,
        partition_spec_id=0,
        content=ManifestContent.DATA,
        sequence_number=3,
        min_sequence_number=1,
        added_snapshot_id=1,
        added_files_count=0,
        existing_files_count=0,
        deleted_files_count=2,
        added_rows_count=0,
        existing_rows_count=0,
        deleted_rows_count=2,
    )
    # The table as the other writer left it: its snapshot lists the appends' manifests and the deletions.
    listed = [*appender._head.manifests, deletions]
    snapshot = Snapshot(
        snapshot_id=7, sequence_number=4, timestamp_ms=1, manifest_list="unused", summary=None, schema_id=0
    )
    metadata = appender.metadata.model_copy(
        update={
            "snapshots": [snapshot],
            "refs": {"main": SnapshotRef.model_validate({"snapshot-id": 7, "type": "branch"})},
            "current_snapshot_id": 7,
            "last_sequence_number": 4,
        }
    )
    table = SimpleNamespace(metadata=metadata, io=appender.io)
    appender._load = lambda: cast(Table, table)
    monkeypatch.setattr(Snapshot, "manifests", lambda self, io: listed)
    appender.reload()
    prepared = _append(appender, 3)
    carried = [m.manifest_path for m in prepared.manifests]
    assert deletions.manifest_path not in carried
    assert len(carried) == 4  # the three appends' manifests and this one's


def test_a_table_held_back_by_the_pacing_merges_later_or_at_twice_the_count(tmp_path: Path) -> None:
    pacing = MergePacing(burst=1, tokens=0)
    appender = _appender(tmp_path, pacing)
    for n in range(99):
        _append(appender, n)
    # Its own 99 appends earned 1.98 tokens (capped at 1): the merge due at the 100th append happens.
    _append(appender, 99)
    assert len(appender._head.manifests) == 1  # the merged manifest holds the new file too
    # Other tables took every token (as in a wave): the next merge waits, at most to twice the count.
    longest = 0
    for n in range(100, 300):
        pacing.tokens = -1000
        _append(appender, n)
        longest = max(longest, len(appender._head.manifests))
        assert len(appender._head.manifests) <= 200
    assert longest > 100  # held back past the merge count
    assert len(_live(appender)) == 300


def test_a_wave_of_merges_is_spread_and_stays_spread() -> None:
    """A thousand tables started together, each committing once a round, merge count 100: without
    pacing all thousand merge in the same round, every 100 rounds."""
    pacing = MergePacing()
    tables, merge_at = 1000, 100
    manifests = [1] * tables
    merges_per_round: list[int] = []
    for _ in range(600):
        merges = 0
        for t in range(tables):
            if pacing.merges(manifests[t] + 1, merge_at):
                manifests[t] = 1
                merges += 1
            else:
                manifests[t] += 1
        merges_per_round.append(merges)
        assert max(manifests) < 2 * merge_at
    assert max(merges_per_round) <= 30  # at most 20 a round, plus the burst
    # Every table keeps merging: 1,000 tables over the last 200 rounds merge about 2,000 times.
    assert 1900 <= sum(merges_per_round[-200:]) <= 2100
