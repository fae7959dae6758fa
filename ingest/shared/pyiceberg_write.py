"""The one pyiceberg internal floe uses: writing an Arrow table as an Iceberg table's data files.

`pyiceberg.io.pyarrow._dataframe_to_data_files` is what `Table.append` writes with: Parquet files laid
out by the table's location provider and properties (codec, target size), split by its partition spec,
each returned as a `DataFile` with its column statistics. floe commits those files itself
(`ingest.shared.iceberg_append`), so it needs this step without `Table.append`'s transaction (which
deep-copies the table's metadata several times per append: ~70 % of its time on a table with a few
hundred snapshots). pyiceberg is pinned in pyproject.toml; tests/unit/test_pyiceberg_contract.py fails
on an upgrade that changes what is used here.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

import pyarrow as pa
from pyiceberg.io import FileIO
from pyiceberg.io.pyarrow import _dataframe_to_data_files
from pyiceberg.manifest import DataFile
from pyiceberg.table.metadata import TableMetadata


def data_files(metadata: TableMetadata, rows: pa.Table, io: FileIO) -> list[DataFile]:
    """Write `rows` (the table's current schema, as `schema_to_pyarrow` gives it) as data files."""
    written: Iterable[DataFile] = _dataframe_to_data_files(
        table_metadata=metadata, df=rows, io=io, write_uuid=uuid.uuid4()
    )
    return list(written)
