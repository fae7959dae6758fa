"""DuckDB 1.5.5 (iceberg extension) as a real client of floe: attach, list, read pyiceberg's tables,
create, insert, evolve, read partitioned tables and drop — checked from both sides."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.snapshots import Operation
from pyiceberg.transforms import DayTransform, IdentityTransform
from pyiceberg.types import (
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    TimestampType,
)

from catalog.settings import DEFAULT_WAREHOUSE_NAME
from devtools.catalog_server import CatalogProcess
from tests.e2e.duckdb_client import attach_catalog, connect, quote

# DuckDB engine runs against a real floe: `pytest -m "not e2e"` skips them.
pytestmark = pytest.mark.e2e

DuckRows = list[tuple[Any, ...]]


@pytest.fixture
def duck(catalog_server: CatalogProcess, duckdb_extensions: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """A fresh DuckDB with floe's default warehouse attached as `floe`."""
    connection = connect(duckdb_extensions)
    attach_catalog(
        connection,
        endpoint=catalog_server.url,
        warehouse=DEFAULT_WAREHOUSE_NAME,
        client_id=catalog_server.admin_client_id,
        client_secret=catalog_server.admin_client_secret,
    )
    try:
        yield connection
    finally:
        connection.close()


def rows(connection: duckdb.DuckDBPyConnection, sql: str) -> DuckRows:
    return connection.execute(sql).fetchall()


def columns(connection: duckdb.DuckDBPyConnection, sql: str) -> list[str]:
    description = connection.execute(sql).description
    assert description is not None
    return [str(column[0]) for column in description]


def table_ref(namespace: str, table: str) -> str:
    return f"floe.{quote(namespace)}.{quote(table)}"


PEOPLE_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("age", pa.int32()),
        pa.field("score", pa.float64()),
        pa.field("active", pa.bool_()),
        pa.field("born", pa.date32()),
        pa.field("seen_at", pa.timestamp("us")),
        pa.field("balance", pa.decimal128(10, 2)),
    ]
)
PEOPLE_BATCHES: list[DuckRows] = [
    [
        (1, "ada", 36, 9.5, True, dt.date(1990, 1, 2), dt.datetime(2024, 1, 1, 12, 0, 0), Decimal("10.25")),
        (2, "bob", None, 7.25, False, dt.date(1985, 6, 30), dt.datetime(2024, 2, 29, 23, 59, 59), None),
    ],
    [
        (3, "cy", 41, None, None, None, dt.datetime(2024, 3, 1, 0, 0, 0, 123456), Decimal("-3.50")),
        (4, None, 19, 1.0, True, dt.date(2005, 12, 31), None, Decimal("0.00")),
    ],
]


def arrow_rows(schema: pa.Schema, records: list[tuple[Any, ...]]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(schema.names, record, strict=True)) for record in records], schema)


def test_reads_table_written_by_pyiceberg(
    duck: duckdb.DuckDBPyConnection, rest_catalog: RestCatalog, namespace: str
) -> None:
    table = rest_catalog.create_table(f"{namespace}.people", schema=PEOPLE_SCHEMA)
    for batch in PEOPLE_BATCHES:
        table.append(arrow_rows(PEOPLE_SCHEMA, batch))

    people = table_ref(namespace, "people")
    assert rows(duck, f"SELECT count(*) FROM {people}") == [(4,)]
    assert rows(duck, f"SELECT * FROM {people} ORDER BY id") == PEOPLE_BATCHES[0] + PEOPLE_BATCHES[1]
    assert columns(duck, f"SELECT * FROM {people}") == PEOPLE_SCHEMA.names
    assert rows(duck, f"SELECT name FROM {people} WHERE age > 30 ORDER BY id") == [("ada",), ("cy",)]
    # Both of pyiceberg's snapshots are visible to DuckDB's metadata functions.
    snapshots = rows(duck, f"SELECT snapshot_id FROM iceberg_snapshots({people}) ORDER BY sequence_number")
    assert [row[0] for row in snapshots] == [s.snapshot_id for s in table.refresh().metadata.snapshots]


def test_reads_and_writes_a_table_whose_metadata_files_are_gzip(
    duck: duckdb.DuckDBPyConnection, rest_catalog: RestCatalog, namespace: str
) -> None:
    codec = {"write.metadata.compression-codec": "gzip"}  # Iceberg's table property
    table = rest_catalog.create_table(f"{namespace}.gz", schema=PEOPLE_SCHEMA, properties=codec)
    table.append(arrow_rows(PEOPLE_SCHEMA, PEOPLE_BATCHES[0]))
    people = table_ref(namespace, "gz")
    assert rows(duck, f"SELECT id, name FROM {people} ORDER BY id") == [(1, "ada"), (2, "bob")]
    duck.execute(
        f"INSERT INTO {people} VALUES (5, 'eve', 30, 1.5, true, DATE '2000-01-01', "
        "TIMESTAMP '2024-01-01 00:00:00', 1.00)"
    )
    reloaded = rest_catalog.load_table(f"{namespace}.gz")
    assert reloaded.metadata_location.endswith(".gz.metadata.json")  # DuckDB's commit, floe's file
    assert sorted(reloaded.scan().to_arrow().column("id").to_pylist()) == [1, 2, 5]
    # The file itself, as DuckDB reads a metadata file named to it.
    path = reloaded.metadata_location.removeprefix("file://")
    scanned = rows(
        duck, f"SELECT id FROM iceberg_scan('{path}', metadata_compression_codec => 'gzip') ORDER BY id"
    )
    assert scanned == [(1,), (2,), (5,)]


def test_lists_namespaces_and_tables(
    duck: duckdb.DuckDBPyConnection, rest_catalog: RestCatalog, namespace: str
) -> None:
    schema = pa.schema([pa.field("id", pa.int64())])
    for name in ("alpha", "beta"):
        rest_catalog.create_table(f"{namespace}.{name}", schema=schema)
    other = f"ns_{uuid.uuid4().hex[:10]}"
    rest_catalog.create_namespace(other)
    rest_catalog.create_table(f"{other}.gamma", schema=schema)

    schemas = {
        row[0] for row in rows(duck, "SELECT schema_name FROM duckdb_schemas() WHERE database_name = 'floe'")
    }
    assert {namespace, other} <= schemas
    listed = {(str(row[0]), str(row[1]), str(row[2])) for row in rows(duck, "SHOW ALL TABLES")}
    mine = {entry for entry in listed if entry[1] in (namespace, other)}
    assert mine == {("floe", namespace, "alpha"), ("floe", namespace, "beta"), ("floe", other, "gamma")}
    in_namespace = rows(
        duck,
        "SELECT table_name FROM information_schema.tables "
        f"WHERE table_catalog = 'floe' AND table_schema = '{namespace}' ORDER BY table_name",
    )
    assert in_namespace == [("alpha",), ("beta",)]


def test_duckdb_creates_and_inserts_pyiceberg_reads(
    duck: duckdb.DuckDBPyConnection, rest_catalog: RestCatalog
) -> None:
    namespace = f"duck_{uuid.uuid4().hex[:10]}"
    duck.execute(f"CREATE SCHEMA floe.{quote(namespace)}")
    assert rest_catalog.namespace_exists(namespace)

    orders = table_ref(namespace, "orders")
    duck.execute(
        f"CREATE TABLE {orders} (id BIGINT, customer VARCHAR, amount DECIMAL(10, 2), "
        "placed_at TIMESTAMP, shipped BOOLEAN, qty INTEGER)"
    )
    created = rest_catalog.load_table(f"{namespace}.orders")
    assert created.schema() == Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "customer", StringType(), required=False),
        NestedField(3, "amount", DecimalType(10, 2), required=False),
        NestedField(4, "placed_at", TimestampType(), required=False),
        NestedField(5, "shipped", BooleanType(), required=False),
        NestedField(6, "qty", IntegerType(), required=False),
    )
    assert created.metadata.snapshots == []
    assert created.spec().is_unpartitioned()

    first = rows(
        duck,
        f"INSERT INTO {orders} VALUES "
        "(1, 'acme', 19.99, TIMESTAMP '2024-05-01 08:30:00', true, 3), "
        "(2, 'globex', 5.00, NULL, false, NULL)",
    )
    assert first == [(2,)]
    after_first = rest_catalog.load_table(f"{namespace}.orders")
    assert len(after_first.metadata.snapshots) == 1
    assert after_first.scan().to_arrow().sort_by("id").to_pylist() == [
        {
            "id": 1,
            "customer": "acme",
            "amount": Decimal("19.99"),
            "placed_at": dt.datetime(2024, 5, 1, 8, 30),
            "shipped": True,
            "qty": 3,
        },
        {
            "id": 2,
            "customer": "globex",
            "amount": Decimal("5.00"),
            "placed_at": None,
            "shipped": False,
            "qty": None,
        },
    ]

    second = rows(
        duck, f"INSERT INTO {orders} VALUES (3, 'initech', NULL, TIMESTAMP '2024-05-02 00:00:01', NULL, 7)"
    )
    assert second == [(1,)]
    loaded = rest_catalog.load_table(f"{namespace}.orders")
    snapshots = loaded.metadata.snapshots
    assert len(snapshots) == 2
    assert snapshots[1].parent_snapshot_id == snapshots[0].snapshot_id
    assert loaded.metadata.current_snapshot_id == snapshots[1].snapshot_id
    assert [s.sequence_number for s in snapshots] == [1, 2]
    for snapshot in snapshots:
        assert snapshot.summary is not None
        assert snapshot.summary.operation == Operation.APPEND
    assert snapshots[1].summary is not None
    assert snapshots[1].summary["added-records"] == "1"
    assert snapshots[1].summary["total-records"] == "3"
    assert loaded.scan().to_arrow().sort_by("id").column("customer").to_pylist() == [
        "acme",
        "globex",
        "initech",
    ]
    # pyiceberg can still read the first snapshot alone.
    assert loaded.scan(snapshot_id=snapshots[0].snapshot_id).to_arrow().num_rows == 2

    assert rows(duck, f"SELECT id, customer, amount, qty FROM {orders} ORDER BY id") == [
        (1, "acme", Decimal("19.99"), 3),
        (2, "globex", Decimal("5.00"), None),
        (3, "initech", None, 7),
    ]


def test_reads_after_pyiceberg_schema_evolution(
    duck: duckdb.DuckDBPyConnection, rest_catalog: RestCatalog, namespace: str
) -> None:
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("label", pa.string())])
    table = rest_catalog.create_table(f"{namespace}.evolving", schema=schema)
    table.append(arrow_rows(schema, [(1, "one"), (2, "two")]))
    evolving = table_ref(namespace, "evolving")
    # DuckDB reads the table before the change, so a stale cached schema would show up below.
    assert rows(duck, f"SELECT * FROM {evolving} ORDER BY id") == [(1, "one"), (2, "two")]

    with table.update_schema() as update:
        update.add_column("weight", DoubleType())
        update.rename_column("label", "title")
    evolved = pa.schema(
        [pa.field("id", pa.int64()), pa.field("title", pa.string()), pa.field("weight", pa.float64())]
    )
    table.append(arrow_rows(evolved, [(3, "three", 3.5)]))

    assert columns(duck, f"SELECT * FROM {evolving}") == ["id", "title", "weight"]
    assert rows(duck, f"SELECT * FROM {evolving} ORDER BY id") == [
        (1, "one", None),
        (2, "two", None),
        (3, "three", 3.5),
    ]

    with table.update_schema() as update:
        update.delete_column("weight")
    assert rows(duck, f"SELECT * FROM {evolving} ORDER BY id") == [(1, "one"), (2, "two"), (3, "three")]


def test_reads_and_writes_partitioned_table(
    duck: duckdb.DuckDBPyConnection, rest_catalog: RestCatalog, namespace: str
) -> None:
    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "category", StringType(), required=False),
        NestedField(3, "ts", TimestampType(), required=False),
        NestedField(4, "day_of", DateType(), required=False),
    )
    spec = PartitionSpec(
        PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="category"),
        PartitionField(source_id=3, field_id=1001, transform=DayTransform(), name="ts_day"),
    )
    table = rest_catalog.create_table(f"{namespace}.events", schema=schema, partition_spec=spec)
    arrow_schema = pa.schema(
        [
            pa.field("id", pa.int64()),
            pa.field("category", pa.string()),
            pa.field("ts", pa.timestamp("us")),
            pa.field("day_of", pa.date32()),
        ]
    )
    written = [
        (1, "a", dt.datetime(2024, 1, 1, 1), dt.date(2024, 1, 1)),
        (2, "b", dt.datetime(2024, 1, 2, 1), dt.date(2024, 1, 2)),
        (3, "a", dt.datetime(2024, 1, 2, 5), dt.date(2024, 1, 2)),
        (4, "c", dt.datetime(2024, 1, 3, 9), dt.date(2024, 1, 3)),
    ]
    table.append(arrow_rows(arrow_schema, written))

    events = table_ref(namespace, "events")
    assert rows(duck, f"SELECT * FROM {events} ORDER BY id") == written
    assert rows(duck, f"SELECT id FROM {events} WHERE category = 'a' ORDER BY id") == [(1,), (3,)]
    assert rows(duck, f"SELECT id FROM {events} WHERE ts >= TIMESTAMP '2024-01-02 00:00:00' ORDER BY id") == [
        (2,),
        (3,),
        (4,),
    ]
    assert rows(duck, f"SELECT category, count(*) FROM {events} GROUP BY category ORDER BY category") == [
        ("a", 2),
        ("b", 1),
        ("c", 1),
    ]

    # DuckDB writes into the partitioned table; pyiceberg sees the row with its partition values.
    duck.execute(f"INSERT INTO {events} VALUES (5, 'z', TIMESTAMP '2024-05-05 05:05:05', DATE '2024-05-05')")
    loaded = rest_catalog.load_table(f"{namespace}.events")
    assert len(loaded.metadata.snapshots) == 2
    from_pyiceberg = loaded.scan(row_filter="category == 'z'").to_arrow().to_pylist()
    assert from_pyiceberg == [
        {"id": 5, "category": "z", "ts": dt.datetime(2024, 5, 5, 5, 5, 5), "day_of": dt.date(2024, 5, 5)}
    ]
    partitions = sorted(
        (row["partition"]["category"], row["partition"]["ts_day"], row["record_count"])
        for row in loaded.inspect.files().to_pylist()
    )
    assert partitions == [
        ("a", dt.date(2024, 1, 1), 1),
        ("a", dt.date(2024, 1, 2), 1),
        ("b", dt.date(2024, 1, 2), 1),
        ("c", dt.date(2024, 1, 3), 1),
        ("z", dt.date(2024, 5, 5), 1),
    ]
    assert rows(duck, f"SELECT count(*) FROM {events}") == [(5,)]


def test_drop_table_and_schema(duck: duckdb.DuckDBPyConnection, rest_catalog: RestCatalog) -> None:
    namespace = f"duck_{uuid.uuid4().hex[:10]}"
    duck.execute(f"CREATE SCHEMA floe.{quote(namespace)}")
    doomed = table_ref(namespace, "doomed")
    duck.execute(f"CREATE TABLE {doomed} (id BIGINT)")
    duck.execute(f"INSERT INTO {doomed} VALUES (1), (2)")
    assert rest_catalog.table_exists(f"{namespace}.doomed")

    duck.execute(f"DROP TABLE {doomed}")
    assert not rest_catalog.table_exists(f"{namespace}.doomed")
    assert rest_catalog.list_tables(namespace) == []
    with pytest.raises(duckdb.CatalogException):
        duck.execute(f"SELECT * FROM {doomed}")
    listed = {(str(row[1]), str(row[2])) for row in rows(duck, "SHOW ALL TABLES")}
    assert (namespace, "doomed") not in listed

    duck.execute(f"DROP SCHEMA floe.{quote(namespace)}")
    assert not rest_catalog.namespace_exists(namespace)


def test_create_table_as_select_and_transaction(
    duck: duckdb.DuckDBPyConnection, rest_catalog: RestCatalog, namespace: str
) -> None:
    """A table created and filled in one DuckDB transaction (CTAS; BEGIN … COMMIT) is one create commit."""
    squares = table_ref(namespace, "squares")
    duck.execute(f"CREATE TABLE {squares} AS SELECT i AS n, i * i AS sq FROM range(1, 6) t(i)")
    loaded = rest_catalog.load_table(f"{namespace}.squares")
    assert len(loaded.metadata.snapshots) == 1
    assert loaded.scan().to_arrow().sort_by("n").to_pylist() == [{"n": i, "sq": i * i} for i in range(1, 6)]

    staged = table_ref(namespace, "staged")
    duck.execute("BEGIN")
    duck.execute(f"CREATE TABLE {staged} (id INTEGER, tag VARCHAR)")
    duck.execute(f"INSERT INTO {staged} VALUES (1, 'x'), (2, 'y')")
    # Not visible to other clients before DuckDB commits.
    assert not rest_catalog.table_exists(f"{namespace}.staged")
    duck.execute("COMMIT")
    assert rest_catalog.load_table(f"{namespace}.staged").scan().to_arrow().sort_by("id").to_pylist() == [
        {"id": 1, "tag": "x"},
        {"id": 2, "tag": "y"},
    ]
    assert rows(duck, f"SELECT * FROM {staged} ORDER BY id") == [(1, "x"), (2, "y")]
