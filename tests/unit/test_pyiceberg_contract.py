"""The pyiceberg internals floe relies on (ingest/shared/pyiceberg_write.py) still exist and behave as
used: fails on a pyiceberg upgrade that breaks them, before any ingestion does."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

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


def _header(path: Path) -> dict[str, str]:
    """An Avro file's header metadata (its schema, codec and Iceberg keys)."""
    from pyiceberg.avro.file import AvroFile
    from pyiceberg.io.pyarrow import PyArrowFileIO as IO

    with AvroFile[Any](IO().new_input(str(path))) as avro:
        return dict(avro.header.meta)


def test_planned_manifest_writers_write_what_pyicebergs_write(tmp_path: Path) -> None:
    """`AvroPlans` hands pyiceberg's manifest and manifest-list writers a planned Avro file: the
    files read back the same, with the same header, as the ones pyiceberg's own writers make."""
    from pyiceberg.manifest import (
        ManifestEntry,
        ManifestEntryStatus,
        read_manifest_list,
        write_manifest,
        write_manifest_list,
    )

    from ingest.shared.pyiceberg_write import AvroPlans

    metadata = new_table_metadata(
        SCHEMA, UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, str(tmp_path / "t"), {}
    )
    io = PyArrowFileIO()
    arrow = schema_to_pyarrow(metadata.schema(), include_field_ids=True)
    rows = pa.Table.from_pydict({"id": [1, 2], "name": ["a", "b"]}, schema=arrow)
    [data_file] = DataFileWriter(metadata, io).write(rows)
    entry = ManifestEntry.from_args(
        status=ManifestEntryStatus.ADDED,
        snapshot_id=7,
        sequence_number=None,
        file_sequence_number=None,
        data_file=data_file,
    )
    spec, schema = metadata.spec(), metadata.schema()
    plans = AvroPlans()
    manifests = {}
    for name in ("theirs", "ours", "ours-again"):  # the second planned file reuses the plan
        output = io.new_output(str(tmp_path / f"{name}-m0.avro"))
        if name == "theirs":
            with write_manifest(2, spec, schema, output, 7, "deflate") as writer:
                writer.add(entry)
        else:
            with plans.manifest(2, spec, schema, output, 7, "deflate") as writer:
                writer.add(entry)
        manifests[name] = writer.to_manifest_file()
    for name in ("ours", "ours-again"):
        assert _header(tmp_path / f"{name}-m0.avro") == _header(tmp_path / "theirs-m0.avro")
        read = manifests[name].fetch_manifest_entry(io)
        assert read == manifests["theirs"].fetch_manifest_entry(io)
        assert read[0].data_file.record_count == 2

    lists = {}
    for name in ("theirs", "ours", "ours-again"):
        path = str(tmp_path / f"snap-{name}.avro")
        if name == "theirs":
            with write_manifest_list(2, io.new_output(path), 7, 6, 3, "deflate") as list_writer:
                list_writer.add_manifests([manifests["theirs"]])
        else:
            with plans.manifest_list(2, io.new_output(path), 7, 6, 3, "deflate") as list_writer:
                list_writer.add_manifests([manifests["theirs"]])
        lists[name] = list(read_manifest_list(io.new_input(path)))
    assert lists["ours"] == lists["ours-again"] == lists["theirs"]
    assert _header(tmp_path / "snap-ours.avro") == _header(tmp_path / "snap-theirs.avro")
    assert _header(tmp_path / "snap-ours.avro")["sequence-number"] == "3"
