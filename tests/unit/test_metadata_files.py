"""catalog/metadata_files.py: a table's metadata codec names and encodes its metadata files as Iceberg's
readers expect (pyiceberg's own reader checked here), and reading one back is bounded before it inflates."""

from __future__ import annotations

import gzip
import json
import uuid
import zlib
from pathlib import Path

import pytest
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.schema import Schema
from pyiceberg.serializers import FromInputFile
from pyiceberg.table.metadata import TableMetadata, new_table_metadata
from pyiceberg.table.snapshots import MetadataLogEntry
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.types import LongType, NestedField, StringType

from catalog.errors import BadRequest
from catalog.metadata_files import (
    DELETE_AFTER_COMMIT,
    GZIP_SUFFIX,
    METADATA_CODEC,
    PLAIN_SUFFIX,
    MetadataFileTooLarge,
    check_metadata_codec,
    decode_metadata_file,
    encode_metadata_file,
    metadata_file_suffix,
    obsolete_metadata_files,
)
from catalog.storage import MetadataFileError, Storage


def a_table() -> TableMetadata:
    schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "name", StringType()))
    properties = {f"note.{i}": "a streaming table's metadata" for i in range(100)}
    return new_table_metadata(
        schema, UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, "file:///w/t", properties
    )


def test_the_codec_names_the_file() -> None:
    assert metadata_file_suffix({}) == PLAIN_SUFFIX == ".metadata.json"
    assert metadata_file_suffix({METADATA_CODEC: "none"}) == PLAIN_SUFFIX
    assert metadata_file_suffix({METADATA_CODEC: "gzip"}) == GZIP_SUFFIX == ".gz.metadata.json"
    assert metadata_file_suffix({METADATA_CODEC: " GZIP "}) == GZIP_SUFFIX  # as Java's Codec.fromName


@pytest.mark.parametrize("value", ["zstd", "", "gzip2", "x" * 10_000])
def test_a_codec_iceberg_does_not_know_is_a_bad_request(value: str) -> None:
    with pytest.raises(BadRequest) as raised:
        check_metadata_codec({METADATA_CODEC: value})
    message = str(raised.value)
    assert METADATA_CODEC in message
    assert "gzip or none" in message
    assert len(message) < 200  # the value is cut, not echoed whole
    check_metadata_codec({"owner": "x"})  # no codec named: nothing to check


def test_a_gzip_file_is_what_pyiceberg_reads(tmp_path: Path) -> None:
    metadata = a_table()
    text = metadata.model_dump_json()
    path = tmp_path / f"00001-abc{GZIP_SUFFIX}"
    content = encode_metadata_file(str(path), text)
    assert content[:2] == b"\x1f\x8b"  # gzip's magic
    assert len(content) < len(text) / 3
    path.write_bytes(content)
    read = FromInputFile.table_metadata(PyArrowFileIO().new_input(str(path)))
    assert read == metadata
    assert decode_metadata_file(str(path), content, len(text)) == text.encode()
    # A plain name is written and read as it is.
    plain = str(tmp_path / f"00002-abc{PLAIN_SUFFIX}")
    assert encode_metadata_file(plain, text) == text.encode()
    assert decode_metadata_file(plain, text.encode(), 10) == text.encode()  # bounded by the read


def test_inflating_stops_at_the_bound() -> None:
    bomb = gzip.compress(b" " * 50_000_000)  # 50 MB of JSON whitespace in ~50 KB
    assert len(bomb) < 100_000
    with pytest.raises(MetadataFileTooLarge):
        decode_metadata_file(f"x{GZIP_SUFFIX}", bomb, 1_000_000)
    with pytest.raises(zlib.error):  # cut short
        decode_metadata_file(f"x{GZIP_SUFFIX}", gzip.compress(b'{"a": 1}' * 1000)[:40], 1_000_000)
    with pytest.raises(zlib.error):  # not gzip at all
        decode_metadata_file(f"x{GZIP_SUFFIX}", b'{"format-version": 2}', 1_000_000)


def test_storage_reads_a_gzip_metadata_file_within_its_bound(tmp_path: Path) -> None:
    storage = Storage(tmp_path.as_uri())
    document = json.dumps({"format-version": 2, "padding": " " * 5_000})
    good = tmp_path / f"00001-a{GZIP_SUFFIX}"
    good.write_bytes(gzip.compress(document.encode()))
    assert storage.read_metadata_file(good.as_uri(), 10_000) == document.encode()
    with pytest.raises(MetadataFileError, match="larger than 1000 bytes"):
        storage.read_metadata_file(good.as_uri(), 1_000)  # small compressed, large inflated
    broken = tmp_path / f"00002-a{GZIP_SUFFIX}"
    broken.write_bytes(b"not gzip")
    with pytest.raises(MetadataFileError, match="not a readable metadata file"):
        storage.read_metadata_file(broken.as_uri(), 10_000)


def test_obsolete_files_are_those_the_log_drops_in_the_tables_own_folder() -> None:
    def logged(*paths: str) -> list[MetadataLogEntry]:
        return [MetadataLogEntry(metadata_file=p, timestamp_ms=1) for p in paths]

    folder = "file:///w/t/metadata"
    suffixes = [PLAIN_SUFFIX, GZIP_SUFFIX] * 2
    old = [f"{folder}/{v:05d}-{uuid.uuid4()}{suffix}" for v, suffix in enumerate(suffixes)]
    elsewhere = f"file:///w/other/metadata/00000-{uuid.uuid4()}.metadata.json"  # a registered table's
    unnamed = f"{folder}/v1.metadata.json"
    base = a_table().model_copy(update={"metadata_log": logged(elsewhere, unnamed, *old)})
    new = base.model_copy(update={"metadata_log": logged(*old[2:])})
    assert obsolete_metadata_files(base, new) == ()  # off by default
    on = new.model_copy(update={"properties": {**new.properties, DELETE_AFTER_COMMIT: "true"}})
    assert obsolete_metadata_files(base, on) == tuple(old[:2])
    moved = {**on.properties, "write.metadata.path": "file:///w/elsewhere"}
    assert obsolete_metadata_files(base, on.model_copy(update={"properties": moved})) == ()
