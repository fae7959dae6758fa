"""The in-process compaction's row-count check (`maintenance.inprocess.compact`): a file whose manifest
count disagrees with its rows stops the compaction before anything is committed (what it wrote is
deleted), and the error says which file and the three counts (manifest, Parquet footer, rows read). A
real table on pyiceberg's SQL catalog (SQLite, local files)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.manifest import DATA_FILE_TYPE, DEFAULT_READ_VERSION, DataFile

from maintenance import inprocess
from maintenance.planner import CompactionRun
from maintenance.table_state import PartitionState

SCHEMA = pa.schema([pa.field("id", pa.int64())])
RUNS = [CompactionRun("cold", (PartitionState(0, ()),), None, {})]


def _table(tmp_path: Path) -> Any:
    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}")
    catalog.create_namespace("n")
    table = catalog.create_table("n.t", SCHEMA)
    for i in range(3):
        table.append(pa.table({"id": [i, i + 10]}, schema=SCHEMA))
    return catalog.load_table("n.t")


def test_compaction_rewrites_when_counts_agree(tmp_path: Path) -> None:
    table = _table(tmp_path)
    outcome = inprocess.compact(table, RUNS, 64 * 1024 * 1024)
    assert outcome["rewritten_data_files_count"] == 3
    rows = table.refresh().scan().to_arrow()["id"].to_pylist()
    assert sorted(rows) == [0, 1, 2, 10, 11, 12]


def test_a_file_whose_count_disagrees_stops_the_compaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = _table(tmp_path)
    live = inprocess._live_data_files(table)
    spec_id, first = live[0]
    names = [f.name for f in DATA_FILE_TYPE[DEFAULT_READ_VERSION].fields]
    fields = {name: getattr(first, name) for name in names if hasattr(first, name)}
    wrong = DataFile.from_args(**{**fields, "record_count": 5})
    wrong.spec_id = first.spec_id
    monkeypatch.setattr(inprocess, "_live_data_files", lambda _t: [(spec_id, wrong), *live[1:]])
    before = table.metadata.current_snapshot_id
    written = set((tmp_path / "n.db" / "t" / "data").rglob("*.parquet"))

    with pytest.raises(RuntimeError) as refused:
        inprocess.compact(table, RUNS, 64 * 1024 * 1024)

    message = str(refused.value)
    name = first.file_path.rsplit("/", 1)[-1]
    assert f"{name}: manifest 5, footer 2, read 2" in message, message
    assert "3 files, manifests 9 rows, read 6" in message, message
    assert str(tmp_path) not in message  # file names, never folders
    assert table.refresh().metadata.current_snapshot_id == before  # nothing committed
    assert set((tmp_path / "n.db" / "t" / "data").rglob("*.parquet")) == written  # nothing written
