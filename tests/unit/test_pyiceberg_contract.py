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
from pyiceberg.table.metadata import TableMetadata, new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.types import LongType, NestedField, StringType

from ingest.shared.iceberg_append import _added
from ingest.shared.pyiceberg_write import PLAIN_MAX_BYTES, DataFileWriter

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False), NestedField(2, "name", StringType(), required=False)
)


def _table(tmp_path: Path) -> tuple[TableMetadata, PyArrowFileIO, pa.Schema]:
    """An empty unpartitioned table of SCHEMA under `tmp_path`, its FileIO and its Arrow schema."""
    metadata = new_table_metadata(
        SCHEMA, UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, str(tmp_path / "t"), {}
    )
    return metadata, PyArrowFileIO(), schema_to_pyarrow(metadata.schema(), include_field_ids=True)


def test_the_internal_signatures_are_the_ones_used() -> None:
    parameters = list(inspect.signature(_dataframe_to_data_files).parameters)
    assert parameters[:4] == ["table_metadata", "df", "io", "write_uuid"]
    kwargs = _get_parquet_writer_kwargs({})
    assert {"compression", "data_page_size", "dictionary_pagesize_limit"} <= set(kwargs)
    # The manifest list's writer deflates at its own level when the file's codec is pyiceberg's deflate
    # class (`_PlannedManifestList.write_block`); any other answer would fall back to pyiceberg's level.
    from pyiceberg.avro.codecs.deflate import DeflateCodec
    from pyiceberg.avro.file import AvroOutputFile

    listed = AvroOutputFile.__new__(AvroOutputFile)
    listed.metadata = {"avro.codec": "deflate"}
    assert listed.compression_codec() is DeflateCodec


def test_floes_writer_gives_the_data_file_pyiceberg_gives(tmp_path: Path) -> None:
    metadata, io, arrow = _table(tmp_path)
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


def test_a_small_batch_is_written_plain_a_larger_one_with_the_tables_codec(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    metadata, io, arrow = _table(tmp_path)
    writer = DataFileWriter(metadata, io)
    small = pa.Table.from_pydict({"id": [1, 2, None], "name": ["a", None, "c"]}, schema=arrow)
    large = pa.Table.from_pydict(
        {"id": list(range(500)), "name": [f"n{i % 7}" for i in range(500)]}, schema=arrow
    )
    assert small.nbytes <= PLAIN_MAX_BYTES < large.nbytes
    for rows, codec, dictionary in ((small, "UNCOMPRESSED", False), (large, "ZSTD", True)):
        [data_file] = writer.write(rows)
        [theirs] = _dataframe_to_data_files(metadata, rows, io)
        parquet = pq.ParquetFile(data_file.file_path)
        for column in range(2):
            chunk = parquet.metadata.row_group(0).column(column)
            assert chunk.compression == codec
            assert chunk.has_dictionary_page is dictionary
        assert parquet.read().equals(pq.read_table(theirs.file_path))
        for name in ("record_count", "value_counts", "null_value_counts", "lower_bounds", "upper_bounds"):
            assert getattr(data_file, name) == getattr(theirs, name), name
        assert data_file.file_size_in_bytes == Path(data_file.file_path).stat().st_size


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
        read_manifest_list,
        write_manifest,
        write_manifest_list,
    )

    from ingest.shared.pyiceberg_write import AvroPlans

    metadata, io, arrow = _table(tmp_path)
    rows = pa.Table.from_pydict({"id": [1, 2], "name": ["a", "b"]}, schema=arrow)
    [data_file] = DataFileWriter(metadata, io).write(rows)
    entry = _added(7, data_file)
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


def test_a_carried_manifests_record_is_encoded_once_and_lists_read_back_as_pyicebergs(
    tmp_path: Path,
) -> None:
    """A table's manifest lists carry its manifests from commit to commit: `AvroPlans` encodes each
    manifest's record once and reuses the bytes, and every list still reads back, record for record
    and header for header, as the one pyiceberg's own writer makes from the same manifests."""
    from pyiceberg.manifest import (
        ManifestFile,
        read_manifest_list,
        write_manifest,
        write_manifest_list,
    )

    from ingest.shared.pyiceberg_write import AvroPlans

    metadata, io, arrow = _table(tmp_path)
    spec, schema = metadata.spec(), metadata.schema()
    plans = AvroPlans()
    carried: list[ManifestFile] = []
    for commit in range(1, 5):
        snapshot_id = 100 + commit
        rows = pa.Table.from_pydict({"id": [commit], "name": [f"n{commit}"]}, schema=arrow)
        [data_file] = DataFileWriter(metadata, io).write(rows)
        entry = _added(snapshot_id, data_file)
        with write_manifest(
            2, spec, schema, io.new_output(str(tmp_path / f"m{commit}.avro")), snapshot_id, "deflate"
        ) as mw:
            mw.add(entry)
        manifests = [mw.to_manifest_file(), *carried]
        parent = snapshot_id - 1 if carried else None
        ours, theirs = (
            str(tmp_path / f"snap-{commit}-ours.avro"),
            str(tmp_path / f"snap-{commit}-theirs.avro"),
        )
        with write_manifest_list(2, io.new_output(theirs), snapshot_id, parent, commit, "deflate") as writer:
            writer.add_manifests(manifests)
        before = dict(plans._list_records._encoded)
        with plans.manifest_list(2, io.new_output(ours), snapshot_id, parent, commit, "deflate") as writer:
            writer.add_manifests(manifests)
        after = plans._list_records._encoded
        assert all(after[key] is encoded for key, encoded in before.items())  # not encoded again
        read = list(read_manifest_list(io.new_input(ours)))
        assert read == list(read_manifest_list(io.new_input(theirs)))
        assert _header(Path(ours)) == _header(Path(theirs))
        assert [m.sequence_number for m in read] == list(range(commit, 0, -1))
        # The next commit carries them as listed (sequence numbers assigned): encoded already.
        carried = read
    assert len(plans._list_records._encoded) == 4  # this list's records: what the next one carries


def test_the_internals_maintenance_rewrites_with_are_there() -> None:
    """maintenance/pyiceberg_rewrite.py's `_Replace` builds on `_OverwriteFiles`' fields and hooks,
    pyiceberg's rewrite validations and `Table._do_commit` (the e2e test
    tests/e2e/test_maintenance_inprocess.py runs them against floe and a racing ingestion)."""
    from pyiceberg.table import Table, Transaction
    from pyiceberg.table.update import validate
    from pyiceberg.table.update.snapshot import _OverwriteFiles, _SnapshotProducer

    hints = _SnapshotProducer.__annotations__
    assert {"_operation", "_commit_window", "_deleted_data_files"} <= set(hints)
    for name in ("_summary", "_existing_manifests", "_validate_concurrency", "new_manifest_writer", "spec"):
        assert callable(getattr(_OverwriteFiles, name)), name
    assert list(inspect.signature(_OverwriteFiles._summary).parameters) == ["self", "snapshot_properties"]
    exist = list(inspect.signature(validate._validate_data_files_exist).parameters)
    assert exist == ["table", "starting_snapshot", "data_files", "parent_snapshot"]
    deletes = list(inspect.signature(validate._validate_no_new_deletes_for_data_files).parameters)
    assert deletes == ["table", "starting_snapshot", "data_filter", "data_files", "parent_snapshot"]
    assert list(inspect.signature(Table._do_commit).parameters) == ["self", "updates", "requirements"]
    # `FloeRestCatalog` turns off the client's deletion of dropped metadata files by overriding it.
    from pyiceberg.catalog import Catalog

    deletes_old = inspect.getattr_static(Catalog, "_delete_old_metadata")
    assert isinstance(deletes_old, staticmethod)
    assert list(inspect.signature(Catalog._delete_old_metadata).parameters) == ["io", "base", "metadata"]
    assert "self.catalog._delete_old_metadata(" in inspect.getsource(Table._do_commit)
    transaction = inspect.getsource(Transaction)
    assert "self._updates" in transaction
    assert "self._table" in transaction
