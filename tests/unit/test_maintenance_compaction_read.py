"""How in-process compaction reads the files it rewrites (`maintenance.inprocess.read_files`): straight
with pyarrow when every file is in the table's current schema as written (field ids included), else
pyiceberg's scan, which projects each file by field id. Either way the rows are the table's, nulls
included. Real tables on pyiceberg's SQL catalog (SQLite, local files)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.io.pyarrow import ArrowScan, schema_to_pyarrow
from pyiceberg.schema import Schema
from pyiceberg.types import ListType, LongType, NestedField, StringType, StructType

from maintenance import inprocess
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
    assert scanned == [4]
    rows = _rows(table)
    assert [row for row in rows if row[1] != "None"] == [("100", "[{'key': 'new'}]")]
    assert len(rows) == 7
