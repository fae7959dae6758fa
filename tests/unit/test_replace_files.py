"""In-process compaction's commit (`maintenance.pyiceberg_rewrite.replace_files`) on a table whose
snapshots carry manifests of no live file: what an earlier rewrite deleted, which floe's ingestion
appender carried until it drops them too. Two of them once made the merge write a manifest of no
entry, and every compaction of the table failed ("An empty manifest file has been written", found in a
100-table maintenance benchmark). Real tables on pyiceberg's SQL catalog (SQLite, local files)."""

from __future__ import annotations

import itertools
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.manifest import DataFile

from maintenance.pyiceberg_rewrite import replace_files, write_data_files

ARROW = pa.schema([("id", pa.int64())])


def _table(tmp_path: Path) -> Any:
    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}")
    catalog.create_namespace("n")
    table = catalog.create_table("n.t", ARROW)
    for i in range(3):
        table.append(pa.table({"id": [i]}, schema=ARROW))
    return table


def _live(table: Any) -> list[DataFile]:
    snapshot = table.current_snapshot()
    return [e.data_file for m in snapshot.manifests(table.io) for e in m.fetch_manifest_entry(table.io)]


def _rewrite_all(table: Any) -> None:
    """Every live file of `table` rewritten into one, the data manifests merged."""
    written = write_data_files(
        table.metadata, table.scan().to_arrow(), table.io, uuid.uuid4(), itertools.count(0)
    )
    replace_files(table, _live(table), written, merge_manifests=True)


def test_manifests_of_no_live_file_are_not_carried_nor_merged(tmp_path: Path) -> None:
    table = _table(tmp_path)
    # Three files into one, then that one rewritten again and again: each rewrite leaves a manifest of
    # deleted entries only. Before, the third rewrite merged two of them and failed.
    for _ in range(4):
        _rewrite_all(table)
    manifests = table.current_snapshot().manifests(table.io)
    # The new file's manifest and the last commit's deletions; none of an earlier rewrite's.
    counts = sorted((m.added_files_count, m.existing_files_count, m.deleted_files_count) for m in manifests)
    assert counts == [(0, 0, 1), (1, 0, 0)]
    assert sorted(table.scan().to_arrow()["id"].to_pylist()) == [0, 1, 2]
