"""How in-process compaction reads the files it rewrites (`maintenance.inprocess.compact`): straight
with pyarrow when every file is in the table's current schema as written (field ids included), else
pyiceberg's scan, which projects each file by field id. Either way the rows are the table's, nulls
included, and they are written a target's worth at a time (memory bounded by the output, not by the
files read). Real tables on pyiceberg's SQL catalog (SQLite, local files)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.io.pyarrow import ArrowScan, schema_to_pyarrow
from pyiceberg.schema import Schema
from pyiceberg.types import ListType, LongType, NestedField, StringType, StructType

from maintenance import inprocess, pyiceberg_rewrite
from maintenance.planner import CompactionRun
from maintenance.table_state import PartitionState

HEADERS = ListType(3, StructType(NestedField(4, "key", StringType(), required=False)), element_required=False)
SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True), NestedField(2, "headers", HEADERS, required=False)
)
RUNS = [CompactionRun("cold", (PartitionState(0, ()),), None, {})]
TARGET = 64 * 1024 * 1024


def _table(tmp_path: Path) -> Any:
    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}")
    catalog.create_namespace("n")
    table = catalog.create_table("n.t", SCHEMA)
    for i in range(3):
        rows = {"id": [i, i + 10], "headers": [None, [{"key": str(i)}]]}
        table.append(pa.table(rows, schema=schema_to_pyarrow(SCHEMA)))
    return catalog.load_table("n.t")


def _scans(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the files read through pyiceberg's scan."""
    scanned: list[int] = []
    original = ArrowScan.to_table

    def counting(self: ArrowScan, tasks: Any) -> pa.Table:
        tasks = list(tasks)
        scanned.append(len(tasks))
        return original(self, tasks)

    monkeypatch.setattr(ArrowScan, "to_table", counting)
    return scanned


def _rows(table: Any) -> list[tuple[Any, ...]]:
    read = table.refresh().scan().to_arrow()
    columns = [read.column(n).to_pylist() for n in read.column_names]
    return sorted(tuple(repr(v) for v in row) for row in zip(*columns, strict=True))


def test_files_in_the_current_schema_are_read_straight_and_keep_their_nulls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = _table(tmp_path)
    before = _rows(table)
    scanned = _scans(monkeypatch)
    outcome = inprocess.compact(table, RUNS, TARGET)
    assert outcome["rewritten_data_files_count"] == 3
    assert scanned == []  # no file went through pyiceberg's scan
    assert _rows(table) == before
    assert "None" in {row[1] for row in before}  # the null lists are still null, not []


def test_files_from_before_a_schema_change_are_projected_by_field_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A column dropped and added again under its old name is another column (another field id): the
    old files' values must not show up in it, so they go through the scan."""
    table = _table(tmp_path)
    with table.update_schema() as update:
        update.delete_column("headers")
    with table.update_schema() as update:
        update.add_column("headers", HEADERS)
    table = table.refresh()
    new_schema = schema_to_pyarrow(table.metadata.schema())
    table.append(pa.table({"id": [100], "headers": [[{"key": "new"}]]}, schema=new_schema))
    table = table.refresh()
    scanned = _scans(monkeypatch)
    outcome = inprocess.compact(table, RUNS, TARGET)
    assert outcome["rewritten_data_files_count"] == 4
    assert scanned == [1, 1, 1, 1]  # a file at a time
    rows = _rows(table)
    assert [row for row in rows if row[1] != "None"] == [("100", "[{'key': 'new'}]")]
    assert len(rows) == 7


def _ids_table(tmp_path: Path, files: int, rows: int) -> Any:
    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}")
    catalog.create_namespace("n")
    table = catalog.create_table("n.t", SCHEMA)
    for i in range(files):
        ids = list(range(i * rows, (i + 1) * rows))
        table.append(pa.table({"id": ids, "headers": [None] * rows}, schema=schema_to_pyarrow(SCHEMA)))
    return catalog.load_table("n.t")


def _writes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, list[str]]]:
    """Each call of the data-file writer: the Arrow bytes it was given and the files it wrote."""
    calls: list[tuple[int, list[str]]] = []
    original = pyiceberg_rewrite.write_data_files  # what compaction calls (its module's name for it)

    def recording(metadata: Any, rows: pa.Table, *args: Any) -> Any:
        written = original(metadata, rows, *args)
        calls.append((rows.nbytes, [f.file_path for f in written]))
        return written

    monkeypatch.setattr(inprocess, "write_data_files", recording)
    return calls


def test_a_rewrite_larger_than_the_target_is_written_a_target_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Twelve files of 2,000 rows (16 KB of Arrow data each) and a 40 KB target: the writer is given at
    most two files' rows at a time, never the whole input, and every row stays, in commit order."""
    table = _ids_table(tmp_path, files=12, rows=2_000)
    target = 40_000
    writes = _writes(monkeypatch)
    outcome = inprocess.compact(table, RUNS, target)
    assert outcome["rewritten_data_files_count"] == 12
    assert len(writes) >= 6
    assert max(size for size, _ in writes) <= target
    assert outcome["added_data_files_count"] == sum(len(files) for _, files in writes)
    assert sorted(table.refresh().scan().to_arrow()["id"].to_pylist()) == list(range(24_000))
    # The files written, in the order written, hold the rows in commit order.
    written = [path.removeprefix("file://") for _, files in writes for path in files]
    assert [i for path in written for i in pq.read_table(path)["id"].to_pylist()] == list(range(24_000))


def test_a_file_in_another_shape_after_chunks_were_written_reads_all_through_the_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The straight reading finds a file in an older shape only after writing chunks: those files are
    deleted (nothing was committed) and every file is read again through the scan."""
    table = _ids_table(tmp_path, files=4, rows=2_000)
    with table.update_schema() as update:
        update.delete_column("headers")
    with table.update_schema() as update:
        update.add_column("headers", HEADERS)
    table = table.refresh()
    new_shape = schema_to_pyarrow(table.schema())
    for start in (-12_000, -6_000):  # two files in the current shape, each over the target
        ids = list(range(start, start + 6_000))
        table.append(pa.table({"id": ids, "headers": [[{"key": "new"}]] * 6_000}, schema=new_shape))
    table = table.refresh()
    live = inprocess._live_data_files(table)
    # The files in the current shape first: the straight reading writes one before it meets the others.
    monkeypatch.setattr(inprocess, "_live_data_files", lambda _t: [*live[-2:], *live[:-2]])
    writes = _writes(monkeypatch)
    scanned = _scans(monkeypatch)
    outcome = inprocess.compact(table, RUNS, 40_000)
    assert scanned == [1] * 6
    first_try = writes[0][1]
    assert first_try
    assert not any(Path(p.removeprefix("file://")).exists() for p in first_try)
    assert outcome["rewritten_data_files_count"] == 6
    rows = _rows(table)
    assert len(rows) == 20_000
    assert {row[1] for row in rows if int(row[0]) < 0} == {"[{'key': 'new'}]"}
    assert {row[1] for row in rows if int(row[0]) >= 0} == {"None"}
