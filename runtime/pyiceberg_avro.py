"""Manifests and manifest lists read without converting the same Avro schema again for every file.

pyiceberg 0.12 opens every Avro file (`AvroFile.__enter__`) by building a reader for its header
(`construct_reader`), parsing the schema in it, converting that to an Iceberg schema
(`AvroFileHeader.get_schema`) and building a reader tree for it (`resolve_reader`), and only then
decodes the entries. Every manifest a writer produces carries the same header schema, and a table's
manifests are mostly tiny (one entry per ingestion commit), so that per-file work was most of reading
them: a fifth of a maintenance pass's CPU over 100 busy tables (py-spy). A local table's one-entry
manifest read in 1.75 ms before, 0.07 ms with this; a manifest list of 50 entries in 1.5 and 0.27 ms.

`reuse_avro_readers()` memoizes the three by what they depend on: the header's schema text, and the
(file schema, read schema, read types, read enums) a reader is built from. The results are immutable
(a frozen schema; a reader tree holds no state between files: it reads from the decoder it is given),
so one is shared by every file and thread. The memos are bounded (`MAX_SCHEMAS`).

Applied by floe's two pyiceberg-internals modules (ingest/shared/pyiceberg_write.py,
maintenance/pyiceberg_rewrite.py) when they are imported. pyiceberg is pinned in pyproject.toml;
tests/unit/test_pyiceberg_avro.py fails on an upgrade that stops calling the functions wrapped here,
or whose readers then read other entries than pyiceberg's own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from enum import Enum
from functools import lru_cache
from typing import Any

from pyiceberg.avro import file as avro_file
from pyiceberg.avro.reader import Reader
from pyiceberg.schema import Schema
from pyiceberg.typedef import EMPTY_DICT, StructProtocol
from pyiceberg.types import IcebergType

MAX_SCHEMAS = 64
_WRAPPED = "_floe_reuses_avro_readers"
_SCHEMA_KEY = "avro.schema"
_lock = threading.Lock()
# (id of file schema, id of read schema, read types, read enums) -> (file schema, read schema, reader):
# the schemas are held so that their ids are not reused while the entry lives.
_readers: dict[tuple[Any, ...], tuple[Schema | IcebergType, Schema | IcebergType, Reader]] = {}


def reuse_avro_readers() -> None:
    """Memoize pyiceberg's Avro header schema conversion and reader building (once per process)."""
    header = avro_file.AvroFileHeader
    original_schema: Callable[[Any], Schema] = header.get_schema
    if getattr(original_schema, _WRAPPED, False):
        return
    original_resolve: Callable[..., Reader] = avro_file.resolve_reader  # type: ignore[attr-defined]

    @lru_cache(maxsize=MAX_SCHEMAS)
    def schema_of(avro_schema: str | bytes) -> Schema:
        # The original reads the text from a header's metadata (magic, meta, sync): one of just that.
        return original_schema(header(b"Obj\x01", {_SCHEMA_KEY: avro_schema}, b""))

    def get_schema(self: Any) -> Schema:
        text = self.meta.get(_SCHEMA_KEY)
        if not isinstance(text, str | bytes):
            return original_schema(self)  # its own error for a header without a schema
        return schema_of(text)

    def resolve_reader(
        file_schema: Schema | IcebergType,
        read_schema: Schema | IcebergType,
        read_types: dict[int, Callable[..., StructProtocol]] = EMPTY_DICT,
        read_enums: dict[int, Callable[..., Enum]] = EMPTY_DICT,
    ) -> Reader:
        key = (id(file_schema), id(read_schema), tuple(read_types.items()), tuple(read_enums.items()))
        found = _readers.get(key)
        if found is not None and found[0] is file_schema and found[1] is read_schema:
            return found[2]
        reader = original_resolve(file_schema, read_schema, read_types, read_enums)
        with _lock:
            if len(_readers) >= MAX_SCHEMAS:
                _readers.clear()
            _readers[key] = (file_schema, read_schema, reader)
        return reader

    original_construct: Callable[..., Reader] = avro_file.construct_reader  # type: ignore[attr-defined]

    def construct_reader(
        file_schema: Schema | IcebergType, read_types: dict[int, Callable[..., StructProtocol]] = EMPTY_DICT
    ) -> Reader:
        # The header's reader (`AvroFile._read_header`): the original is this resolution, uncached.
        return resolve_reader(file_schema, file_schema, read_types)

    setattr(get_schema, _WRAPPED, True)
    get_schema.__wrapped__ = original_schema  # type: ignore[attr-defined]
    resolve_reader.__wrapped__ = original_resolve  # type: ignore[attr-defined]
    construct_reader.__wrapped__ = original_construct  # type: ignore[attr-defined]
    header.get_schema = get_schema  # type: ignore[method-assign]
    avro_file.resolve_reader = resolve_reader  # type: ignore[attr-defined]
    avro_file.construct_reader = construct_reader  # type: ignore[attr-defined]


__all__ = ["MAX_SCHEMAS", "reuse_avro_readers"]
