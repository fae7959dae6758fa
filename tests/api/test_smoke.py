"""A first end-to-end check: pyiceberg creates, appends to and scans a table through floe."""

from __future__ import annotations

import pyarrow as pa
from pyiceberg.catalog.rest import RestCatalog


def test_create_append_scan(rest_catalog: RestCatalog, namespace: str) -> None:
    data = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": pa.array(["a", "b", "c"])})
    table = rest_catalog.create_table(f"{namespace}.people", schema=data.schema)
    table.append(data)
    table.append(data)
    loaded = rest_catalog.load_table(f"{namespace}.people")
    assert loaded.scan().to_arrow().num_rows == 6
    assert len(loaded.metadata.snapshots) == 2
