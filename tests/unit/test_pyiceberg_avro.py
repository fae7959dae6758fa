"""runtime/pyiceberg_avro.py: pyiceberg's Avro files (manifests, manifest lists) read with one schema
conversion and one reader tree per schema, and the same entries as pyiceberg reads on its own. Fails on
a pyiceberg upgrade that no longer opens files through the two functions memoized there. Real tables
on pyiceberg's SQL catalog (SQLite, local files)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.avro import file as avro_file
from pyiceberg.avro.file import AvroFile
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestEntry,
    ManifestEntryStatus,
    read_manifest_list,
)
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import LongType, NestedField, StringType

from runtime import pyiceberg_avro
from runtime.pyiceberg_avro import reuse_avro_readers

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False), NestedField(2, "s", StringType(), required=False)
)
ARROW = pa.schema([("id", pa.int64()), ("s", pa.string())])


def _tables(tmp_path: Path) -> list[Any]:
    """An unpartitioned and a partitioned table (manifests of two schemas), three appends each."""
    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}")
    catalog.create_namespace("n")
    plain = catalog.create_table("n.plain", SCHEMA)
    spec = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "s"))
    by_s = catalog.create_table("n.by_s", SCHEMA, partition_spec=spec)
    for table in (plain, by_s):
        for i in range(3):
            table.append(pa.table({"id": [i, i + 10], "s": [f"v{i}", None]}, schema=ARROW))
    return [catalog.load_table("n.plain"), catalog.load_table("n.by_s")]


def _plain(value: Any) -> Any:
    """A record as nested lists and dicts (every field; lazy maps read)."""
    if isinstance(value, Record):
        return [type(value).__name__, *(_plain(v) for v in value._data)]
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _read_all(tables: list[Any]) -> list[Any]:
    """Every manifest list's and manifest's entries (every field, inherited ones included)."""
    read: list[Any] = []
    for table in tables:
        for snapshot in table.metadata.snapshots:
            manifests = list(read_manifest_list(table.io.new_input(snapshot.manifest_list)))
            read += [_plain(m) for m in manifests]
            for manifest in manifests:
                read += [_plain(e) for e in manifest.fetch_manifest_entry(table.io, discard_deleted=False)]
    return read


def _open(table: Any, path: str) -> AvroFile[ManifestEntry]:
    return AvroFile[ManifestEntry](
        table.io.new_input(path),
        None,
        read_types={-1: ManifestEntry, 2: DataFile},
        read_enums={0: ManifestEntryStatus, 101: FileFormat, 134: DataFileContent},
    )


def test_same_entries_as_pyiceberg_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reuse_avro_readers()
    tables = _tables(tmp_path)
    with_reuse = _read_all(tables)
    # pyiceberg's own functions, as they were before the wrapping.
    wrapped: dict[str, Any] = {
        "get_schema": avro_file.AvroFileHeader.get_schema,
        "resolve_reader": vars(avro_file)["resolve_reader"],
        "construct_reader": vars(avro_file)["construct_reader"],
    }
    monkeypatch.setattr(avro_file.AvroFileHeader, "get_schema", wrapped["get_schema"].__wrapped__)
    monkeypatch.setattr(avro_file, "resolve_reader", wrapped["resolve_reader"].__wrapped__)
    monkeypatch.setattr(avro_file, "construct_reader", wrapped["construct_reader"].__wrapped__)
    alone = _read_all(tables)
    assert with_reuse == alone
    # 6 manifest list entries per table; 6 manifest entries of the plain table, 12 of the partitioned
    # one (each append writes a file per value of `s`).
    assert len(alone) == 6 + 6 + 6 + 12


def test_one_conversion_per_schema(tmp_path: Path) -> None:
    """The files of one table share one schema object and one reader tree; the two tables' manifests
    (different partition types) do not share them."""
    reuse_avro_readers()
    plain, by_s = _tables(tmp_path)
    opened: dict[str, list[AvroFile[ManifestEntry]]] = {}
    for name, table in (("plain", plain), ("by_s", by_s)):
        paths = {m.manifest_path for m in table.current_snapshot().manifests(table.io)}
        assert len(paths) == 3
        for path in sorted(paths):
            with _open(table, path) as avro:
                opened.setdefault(name, []).append(avro)
    header_reader = vars(avro_file)["construct_reader"](avro_file.META_SCHEMA, {-1: avro_file.AvroFileHeader})
    assert (
        vars(avro_file)["construct_reader"](avro_file.META_SCHEMA, {-1: avro_file.AvroFileHeader})
        is header_reader
    )
    for files in opened.values():
        assert all(f.schema is files[0].schema for f in files)
        assert all(f.reader is files[0].reader for f in files)
    assert opened["plain"][0].schema is not opened["by_s"][0].schema
    assert opened["plain"][0].reader is not opened["by_s"][0].reader


def test_applied_once_and_bounded(tmp_path: Path) -> None:
    reuse_avro_readers()
    wrapped = avro_file.AvroFileHeader.get_schema
    reuse_avro_readers()
    assert avro_file.AvroFileHeader.get_schema is wrapped
    _read_all(_tables(tmp_path))
    assert 0 < len(pyiceberg_avro._readers) <= pyiceberg_avro.MAX_SCHEMAS


def test_a_header_without_schema_is_pyiceberg_s_error() -> None:
    reuse_avro_readers()
    header = avro_file.AvroFileHeader(b"Obj\x01", {}, b"\x00" * 16)
    with pytest.raises(ValueError, match="No schema found"):
        header.get_schema()
