"""The pyiceberg internals floe relies on (ingest/shared/pyiceberg_write.py) still exist and behave as
used: fails on a pyiceberg upgrade that breaks them, before any ingestion does."""

from __future__ import annotations

import inspect
from pathlib import Path

import pyarrow as pa
from pyiceberg.io.pyarrow import (
    PyArrowFileIO,
    _dataframe_to_data_files,
    _get_parquet_writer_kwargs,
    schema_to_pyarrow,
)
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.types import LongType, NestedField, StringType

from ingest.shared.pyiceberg_write import DataFileWriter

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False), NestedField(2, "name", StringType(), required=False)
)


def test_the_internal_signatures_are_the_ones_used() -> None:
    parameters = list(inspect.signature(_dataframe_to_data_files).parameters)
    assert parameters[:4] == ["table_metadata", "df", "io", "write_uuid"]
    kwargs = _get_parquet_writer_kwargs({})
    assert {"compression", "data_page_size", "dictionary_pagesize_limit"} <= set(kwargs)


def test_floes_writer_gives_the_data_file_pyiceberg_gives(tmp_path: Path) -> None:
    metadata = new_table_metadata(
        SCHEMA, UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, str(tmp_path / "t"), {}
    )
    io = PyArrowFileIO()
    arrow = schema_to_pyarrow(metadata.schema(), include_field_ids=True)
    rows = pa.Table.from_pydict({"id": [1, 2, None], "name": ["a", None, "c"]}, schema=arrow)
    ours = DataFileWriter(metadata, io).write(rows)
    theirs = list(_dataframe_to_data_files(metadata, rows, io))
    assert len(ours) == len(theirs) == 1
    for name in (
        "content",
        "file_format",
        "record_count",
        "value_counts",
        "null_value_counts",
        "lower_bounds",
        "upper_bounds",
        "split_offsets",
    ):
        assert getattr(ours[0], name) == getattr(theirs[0], name), name
    assert ours[0].spec_id == metadata.default_spec_id
    assert ours[0].file_path.startswith(str(tmp_path / "t" / "data"))
