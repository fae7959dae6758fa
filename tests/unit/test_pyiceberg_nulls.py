"""pyiceberg 0.12's projection turns a null list of structs into an empty list (apache/iceberg-python#3833);
runtime/pyiceberg_nulls.py keeps it null on every path floe writes or compacts through. The first test
fails once an upgrade fixes it upstream: then the wrapper can go. Real tables on pyiceberg's SQL catalog
(SQLite, local files)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.io import pyarrow as pyiceberg_arrow
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import ListType, LongType, NestedField, StringType, StructType

from ingest.shared.pyiceberg_write import DataFileWriter
from maintenance.pyiceberg_rewrite import write_data_files
from runtime.pyiceberg_nulls import keep_null_lists, with_nulls_of

HEADERS = ListType(3, StructType(NestedField(4, "key", StringType(), required=False)), element_required=False)
SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False), NestedField(2, "headers", HEADERS, required=False)
)
IDS = [1, 2, 3]
HEADER_VALUES: list[Any] = [None, [{"key": "a"}], []]
ROWS = {"id": IDS, "headers": HEADER_VALUES}


def _table(tmp_path: Path, spec: PartitionSpec | None = None) -> Any:
    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}")
    catalog.create_namespace("n")
    if spec is None:
        return catalog.create_table("n.t", SCHEMA)
    return catalog.create_table("n.t", SCHEMA, partition_spec=spec)


def _rows() -> pa.Table:
    return pa.table(ROWS, schema=schema_to_pyarrow(SCHEMA))


def _in_file(path: str) -> list[Any]:
    headers: list[Any] = pq.read_table(path.removeprefix("file://")).column("headers").to_pylist()
    return headers


def test_pyiceberg_alone_still_turns_a_null_list_of_structs_into_an_empty_list(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fails when pyiceberg keeps the null itself: remove runtime/pyiceberg_nulls.py then."""
    keep_null_lists()
    wrapped = pyiceberg_arrow.ArrowProjectionVisitor.list
    monkeypatch.setattr(pyiceberg_arrow.ArrowProjectionVisitor, "list", wrapped.__wrapped__)  # type: ignore[attr-defined]
    table = _table(tmp_path)
    written = write_data_files(table.metadata, _rows(), table.io, uuid.uuid4())
    assert _in_file(written[0].file_path) == [[], [{"key": "a"}], []]


def test_files_written_through_pyicebergs_projection_keep_null_lists(tmp_path: Path) -> None:
    """Compaction's writer, and the shared consumer's writer of a partitioned table."""
    table = _table(tmp_path)
    written = write_data_files(table.metadata, _rows(), table.io, uuid.uuid4())
    assert _in_file(written[0].file_path) == HEADER_VALUES
    spec = PartitionSpec(PartitionField(1, 1000, IdentityTransform(), "id"))
    (tmp_path / "p").mkdir()
    partitioned = _table(tmp_path / "p", spec)
    files = DataFileWriter(partitioned.metadata, partitioned.io).write(_rows())
    assert len(files) == 3
    found = sorted(row for f in files for row in _pairs(f.file_path))
    assert found == sorted(zip(IDS, [repr(h) for h in HEADER_VALUES], strict=True))


def _pairs(path: str) -> list[tuple[int, str]]:
    """(id, repr of headers) of each row of a file: None and [] told apart."""
    read = pq.read_table(path.removeprefix("file://"))
    ids, headers = read.column("id").to_pylist(), read.column("headers").to_pylist()
    return [(i, repr(h)) for i, h in zip(ids, headers, strict=True)]


def test_a_scan_keeps_null_lists(tmp_path: Path) -> None:
    table = _table(tmp_path)
    table.append(_rows())
    scanned = table.scan().to_arrow().sort_by("id")
    assert scanned.column("headers").to_pylist() == HEADER_VALUES


def test_with_nulls_of_a_sliced_list() -> None:
    kind = pa.large_list(pa.struct([pa.field("key", pa.string())]))
    source = pa.array([[{"key": "x"}], None, [{"key": "y"}], None], kind).slice(1, 3)
    built = pa.LargeListArray.from_arrays(source.offsets, source.values)  # the nulls lost
    assert built.null_count == 0
    kept = with_nulls_of(source, built)
    assert kept.to_pylist() == [None, [{"key": "y"}], None]
    assert kept.type == kind
