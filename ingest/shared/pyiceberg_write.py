"""The pyiceberg internals floe uses to write an Iceberg table's data files, in one place.

`pyiceberg.io.pyarrow._dataframe_to_data_files` is what `Table.append` writes with: Parquet files laid
out by the table's location provider and properties (codec, target size), split by its partition spec,
each returned as a `DataFile` with its column statistics. floe commits those files itself
(`ingest.shared.iceberg_append`), so it needs this step without `Table.append`'s transaction (which
deep-copies the table's metadata several times per append: ~70 % of its time on a table with a few
hundred snapshots). For an unpartitioned table a batch is one file, written here with the same writer
settings (`_get_parquet_writer_kwargs`) and statistics as pyiceberg's, with what depends only on the
table (the statistics plan, the column mapping, the writer settings) worked out once per table rather
than per file: ~7 ms a file less, which at a thousand tables a round is seconds.

Manifests and manifest lists are pyiceberg's writers too (`write_manifest`, `write_manifest_list`),
but pyiceberg works out each file's Avro writer tree and header schema from the Iceberg schemas again
for every file: half of an append's CPU for a one-record batch. `AvroPlans` works them out once per
table (manifests) or once per format version (manifest lists) and hands the writers a planned
`AvroOutputFile` (`_PlannedAvroFile`): the bytes written are pyiceberg's. A table's manifest list names
every manifest it carries (up to `commit.manifest.min-count-to-merge`, 100) and is written anew at every
commit, so its records are encoded once per manifest (`_ListRecords`; a carried manifest's record never
changes) rather than once per commit: encoding them was half of a steady-state append.

pyiceberg is pinned in pyproject.toml; tests/unit/test_pyiceberg_contract.py fails on an upgrade that
changes what is used here.
"""

from __future__ import annotations

import io
import json
import os
import uuid
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, TypeVar, cast

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.avro.codecs import AVRO_CODEC_KEY, CODEC_MAPPING_ICEBERG_TO_AVRO
from pyiceberg.avro.codecs.deflate import DeflateCodec
from pyiceberg.avro.encoder import BinaryEncoder
from pyiceberg.avro.file import MAGIC, META_SCHEMA, SYNC_SIZE, AvroFileHeader, AvroOutputFile
from pyiceberg.avro.resolver import construct_writer, resolve_writer
from pyiceberg.avro.writer import Writer
from pyiceberg.io import FileIO, InputFile, OutputFile, OutputStream
from pyiceberg.io.pyarrow import (
    _dataframe_to_data_files,
    _get_parquet_writer_kwargs,
    compute_statistics_plan,
    data_file_statistics_from_parquet_metadata,
    parquet_path_to_id_mapping,
)
from pyiceberg.manifest import (
    DEFAULT_READ_VERSION,
    MANIFEST_LIST_FILE_SCHEMAS,
    UNASSIGNED_SEQ,
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestFile,
    ManifestListWriter,
    ManifestWriter,
    write_manifest,
    write_manifest_list,
)
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import TableProperties
from pyiceberg.table.locations import load_location_provider
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.typedef import Record, StructProtocol, TableVersion
from pyiceberg.utils.schema_conversion import AvroSchemaConversion

from runtime.pyiceberg_avro import reuse_avro_readers
from runtime.pyiceberg_nulls import keep_null_lists

# A partitioned table's files go through pyiceberg's projection, which lost null lists of structs.
keep_null_lists()
# Each commit reads the parent's manifest list (and maintenance every manifest): one schema conversion.
reuse_avro_readers()

D = TypeVar("D", bound=StructProtocol)

# A batch of at most this many bytes of Arrow data is written without compression or dictionaries: its
# file is mostly its footer, so neither saves bytes (one record: 3.9 KB with zstd and dictionaries, 3.5 KB
# without), and they cost a quarter of writing it (zstd sets up a compressor for every column chunk; a
# dictionary adds a page to each): `DataFileWriter.write` of one record 1.62 -> 1.25 ms of CPU, of ten
# 1.82 -> 1.40 ms (benchmarks/many_tables/small_files.py). At a thousand quiet tables a round writes a
# thousand such files. Larger batches keep the table's codec; compaction rewrites small files with it.
PLAIN_MAX_BYTES = 2048
PLAIN = {"compression": "none", "use_dictionary": False}


class DataFileWriter:
    """Writes Arrow tables (the table's schema, as `schema_to_pyarrow` gives it) as one table's data
    files: one Parquet file per call for an unpartitioned table, pyiceberg's own split otherwise."""

    def __init__(self, metadata: TableMetadata, io: FileIO) -> None:
        self.metadata = metadata
        self.io = io
        schema = metadata.schema()
        self.partitioned = not metadata.spec().is_unpartitioned()
        self._locations = load_location_provider(metadata.location, metadata.properties)
        self._plan = compute_statistics_plan(schema, metadata.properties)
        self._mapping = parquet_path_to_id_mapping(schema)
        self._kwargs: dict[str, Any] = _get_parquet_writer_kwargs(metadata.properties)
        self._plain_kwargs = {**self._kwargs, **PLAIN}

    def write(self, rows: pa.Table) -> list[DataFile]:
        if self.partitioned:
            return list(_dataframe_to_data_files(self.metadata, rows, self.io, write_uuid=uuid.uuid4()))
        path = self._locations.new_data_location(f"00000-0-{uuid.uuid4()}.parquet")
        output = self.io.new_output(path)
        with output.create(overwrite=True) as stream:
            kwargs = self._plain_kwargs if rows.nbytes <= PLAIN_MAX_BYTES else self._kwargs
            writer = pq.ParquetWriter(
                cast(Any, stream), schema=rows.schema, store_decimal_as_integer=True, **kwargs
            )
            writer.write(rows)
            writer.close()
            size = stream.tell()  # the file's length: no request to storage for it
        statistics = data_file_statistics_from_parquet_metadata(
            parquet_metadata=writer.writer.metadata,
            stats_columns=self._plan,
            parquet_column_mapping=self._mapping,
        )
        data_file = DataFile.from_args(
            content=DataFileContent.DATA,
            file_path=path,
            file_format=FileFormat.PARQUET,
            partition=Record(),
            file_size_in_bytes=size,
            sort_order_id=None,
            spec_id=self.metadata.default_spec_id,
            equality_ids=None,
            key_metadata=None,
            **statistics.to_serialized_dict(),
        )
        data_file.spec_id = self.metadata.default_spec_id
        return [data_file]


class _CountedStream:
    """An output stream that keeps its length when closed."""

    def __init__(self, stream: OutputStream) -> None:
        self._stream = stream
        self.length: int | None = None

    def write(self, b: bytes) -> int:
        return self._stream.write(b)

    def tell(self) -> int:
        return self._stream.tell()

    def close(self) -> None:
        self.length = self._stream.tell()
        self._stream.close()

    def __enter__(self) -> _CountedStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _SizedOutput(OutputFile):
    """An output file whose length, once written, is what was written: pyiceberg's manifest writer asks
    for it (`len(output_file)`), which on an object store is a request to it (a HEAD)."""

    def __init__(self, output: OutputFile) -> None:
        super().__init__(output.location)
        self._output = output
        self._stream: _CountedStream | None = None

    def __len__(self) -> int:
        if self._stream is not None and self._stream.length is not None:
            return self._stream.length
        return len(self._output)

    def exists(self) -> bool:
        return self._output.exists()

    def to_input_file(self) -> InputFile:
        return self._output.to_input_file()

    def create(self, overwrite: bool = False) -> OutputStream:
        self._stream = _CountedStream(self._output.create(overwrite=overwrite))
        return self._stream


@dataclass(frozen=True)
class _AvroPlan:
    """What an Avro file of one schema needs beyond its records: worked out once."""

    file_schema: Schema
    writer: Writer
    schema_json: str
    schema_name: str


def _plan(record_schema: Schema, file_schema: Schema, schema_name: str) -> _AvroPlan:
    schema_json = json.dumps(AvroSchemaConversion().iceberg_to_avro(file_schema, schema_name=schema_name))
    writer = resolve_writer(record_schema=record_schema, file_schema=file_schema)
    return _AvroPlan(file_schema, writer, schema_json, schema_name)


_HEADER_WRITER = construct_writer(META_SCHEMA)


class _PlannedAvroFile(AvroOutputFile[D]):
    """pyiceberg's `AvroOutputFile` with its writer tree and header schema from a plan."""

    def __init__(self, output_file: OutputFile, plan: _AvroPlan, metadata: dict[str, str]) -> None:
        # AvroOutputFile.__init__ but for resolving the writer (the plan's).
        self.output_file = output_file
        self.file_schema = plan.file_schema
        self.schema_name = plan.schema_name
        self.sync_bytes = os.urandom(SYNC_SIZE)
        self.writer = plan.writer
        self.metadata = metadata
        self._schema_json = plan.schema_json

    def _write_header(self) -> None:
        # AvroOutputFile._write_header with the plan's schema JSON.
        codec_name = self.metadata.get(AVRO_CODEC_KEY, TableProperties.WRITE_AVRO_COMPRESSION_DEFAULT)
        codec_name = CODEC_MAPPING_ICEBERG_TO_AVRO.get(codec_name) or codec_name
        meta = {**self.metadata, "avro.schema": self._schema_json, AVRO_CODEC_KEY: codec_name}
        _HEADER_WRITER.write(self.encoder, AvroFileHeader(MAGIC, meta, self.sync_bytes))


class _ListRecords:
    """One table's manifest-list records as Avro bytes, by manifest: a manifest file never changes, and
    the list fields that are not the file's own (its sequence numbers, assigned when it is first listed)
    are part of the key. Holds the records of the last list written: what the next one carries.

    An append lists its new manifest before the ones it carries, so its list is usually the last one
    with records put in front: that is recognized by comparing the manifests' keys in C, and the last
    list's records are reused as they are (looking each manifest up was a Python loop over up to 100 of
    them at every commit). Any other list (after a merge, another writer's) looks each manifest up."""

    def __init__(self) -> None:
        self._keys: list[tuple[str, int, int]] = []  # the last list's manifests, in order
        self._records: list[bytes] = []  # their records, in the same order

    @property
    def _encoded(self) -> dict[tuple[str, int, int], bytes]:
        """The last list's records by manifest key."""
        return dict(zip(self._keys, self._records, strict=True))

    def block(self, writer: Writer, manifests: list[ManifestFile]) -> bytes:
        """The block content of `manifests` (their records, concatenated, as `writer` encodes them)."""
        keys = list(map(_LIST_KEY, manifests))
        added = len(keys) - len(self._keys)
        if self._keys and added >= 0 and keys[added:] == self._keys:
            records = [_encode(writer, manifest) for manifest in manifests[:added]] + self._records
        else:
            known = self._encoded
            records = [
                encoded if (encoded := known.get(key)) is not None else _encode(writer, manifest)
                for key, manifest in zip(keys, manifests, strict=True)
            ]
        self._keys, self._records = keys, records
        return b"".join(records)


_LIST_KEY = attrgetter("manifest_path", "sequence_number", "min_sequence_number")


def _encode(writer: Writer, manifest: ManifestFile) -> bytes:
    buffer = io.BytesIO()
    writer.write(BinaryEncoder(buffer), manifest)
    return buffer.getvalue()


class _PlannedManifestList(_PlannedAvroFile[ManifestFile]):
    """A planned manifest-list file whose records come from the table's `_ListRecords`."""

    def __init__(
        self, output_file: OutputFile, plan: _AvroPlan, metadata: dict[str, str], records: _ListRecords
    ) -> None:
        super().__init__(output_file, plan, metadata)
        self._records = records

    def write_block(self, objects: list[ManifestFile]) -> None:
        # AvroOutputFile.write_block (the Avro container's block: count, size, content, sync marker)
        # with the content from the kept records.
        content = self._records.block(self.writer, objects)
        length = len(content)
        if (codec := self.compression_codec()) is DeflateCodec:
            content = _deflate_fast(content)
            length = len(content)
        elif codec:
            content, length = codec.compress(content)
        self.encoder.write_int(len(objects))
        self.encoder.write_int(length)
        self.encoder.write(content)
        self.encoder.write(self.sync_bytes)


def _deflate_fast(content: bytes) -> bytes:
    """`content` as Avro's deflate codec stores it (raw deflate), at zlib's fastest level rather than
    pyiceberg's default 6: a table's list is rewritten at every commit, and its records (paths with
    UUIDs, ids) compress little better slower. A 100-manifest list: 386 against 686 us, 8.3 against
    8.0 KB. Any level reads back alike."""
    compressor = zlib.compressobj(1, zlib.DEFLATED, -15)
    return compressor.compress(content) + compressor.flush()


# Manifest lists have one schema per format version, whatever the table.
_LIST_PLANS: dict[int, _AvroPlan] = {}


class AvroPlans:
    """One table's manifest and manifest list writers, with their Avro plans worked out once (for
    the table's spec and schema as loaded: a reloaded table gets a new `AvroPlans`)."""

    def __init__(self) -> None:
        self._manifest: _AvroPlan | None = None
        self._manifest_meta: dict[str, str] | None = None
        self._list_records = _ListRecords()

    @contextmanager
    def manifest(
        self,
        format_version: TableVersion,
        spec: PartitionSpec,
        schema: Schema,
        output_file: OutputFile,
        snapshot_id: int,
        codec: Any,
    ) -> Iterator[ManifestWriter]:
        """`write_manifest(...)`, entered."""
        writer = write_manifest(format_version, spec, schema, output_file, snapshot_id, codec)
        if self._manifest is None or self._manifest_meta is None:
            file_schema = writer._with_partition(writer.version)
            record_schema = writer._with_partition(DEFAULT_READ_VERSION)
            self._manifest = _plan(record_schema, file_schema, "manifest_entry")
            self._manifest_meta = writer._meta
        plan, meta, sized = self._manifest, self._manifest_meta, _SizedOutput(output_file)
        writer.new_writer = lambda: _PlannedAvroFile(sized, plan, meta)  # type: ignore[method-assign]
        with writer:
            yield writer

    @contextmanager
    def manifest_list(
        self,
        format_version: TableVersion,
        output_file: OutputFile,
        snapshot_id: int,
        parent_snapshot_id: int | None,
        sequence_number: int,
        codec: Any,
    ) -> Iterator[ManifestListWriter]:
        """`write_manifest_list(...)`, entered."""
        writer = write_manifest_list(
            format_version, output_file, snapshot_id, parent_snapshot_id, sequence_number, codec
        )
        plan = _LIST_PLANS.get(format_version)
        if plan is None:
            plan = _LIST_PLANS[format_version] = _plan(
                MANIFEST_LIST_FILE_SCHEMAS[DEFAULT_READ_VERSION],
                MANIFEST_LIST_FILE_SCHEMAS[format_version],
                "manifest_file",
            )
        if format_version == 2:
            # A carried manifest's sequence numbers were assigned when it was first listed: v2's
            # `prepare_manifest` would return a copy of it unchanged (a copy per manifest per commit).
            assign = writer.prepare_manifest

            def prepare_manifest(manifest_file: ManifestFile) -> ManifestFile:
                if UNASSIGNED_SEQ in (manifest_file.sequence_number, manifest_file.min_sequence_number):
                    return assign(manifest_file)
                return manifest_file

            writer.prepare_manifest = prepare_manifest  # type: ignore[method-assign]
        # ManifestListWriter.__enter__ with the planned file.
        writer._writer = _PlannedManifestList(output_file, plan, writer._meta, self._list_records)
        writer._writer.__enter__()
        try:
            yield writer
        finally:
            writer.__exit__(None, None, None)
