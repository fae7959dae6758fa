"""pyiceberg's RestCatalog against a real floe server: writing and reading data through catalog commits.

Appends, overwrites, deletes, upserts, schema and partition evolution, partitioned writes, snapshots,
time travel, branches and tags, concurrent writers and the `snapshots=refs` loading mode.
"""

from __future__ import annotations

import datetime as dt
import itertools
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.transforms import DayTransform, HourTransform, IdentityTransform, Transform
from pyiceberg.types import (
    DoubleType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    TimestampType,
    TimestamptzType,
)

from devtools.catalog_server import CatalogProcess

PEOPLE = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())])


def people(ids: list[int], names: list[str] | None = None) -> pa.Table:
    return pa.table(
        {"id": pa.array(ids, pa.int64()), "name": pa.array(names or [f"n{i}" for i in ids], pa.string())},
        schema=PEOPLE,
    )


def rows(table: Table, **scan_args: object) -> list[tuple[object, ...]]:
    """All rows of a scan, sorted, as tuples in column order."""
    result = table.scan(**scan_args).to_arrow()  # type: ignore[arg-type]
    return sorted(zip(*(result.column(i).to_pylist() for i in range(result.num_columns)), strict=True))


def local_path(uri: str) -> Path:
    parsed = urlparse(uri)
    assert parsed.scheme in ("file", ""), uri
    return Path(unquote(parsed.path))


def test_append_and_scan_exact_rows(rest_catalog: RestCatalog, namespace: str) -> None:
    table = rest_catalog.create_table((namespace, "t"), schema=PEOPLE)
    assert table.current_snapshot() is None
    assert table.scan().to_arrow().num_rows == 0

    table.append(people([1, 2, 3], ["ann", "bob", "cy"]))
    table.append(people([4], ["dee"]))

    loaded = rest_catalog.load_table((namespace, "t"))
    assert rows(loaded) == [(1, "ann"), (2, "bob"), (3, "cy"), (4, "dee")]
    assert rows(loaded, row_filter="id >= 3") == [(3, "cy"), (4, "dee")]
    assert rows(loaded, selected_fields=("name",), row_filter="name == 'bob'") == [("bob",)]
    assert loaded.scan().count() == 4
    assert len(loaded.snapshots()) == 2
    current = loaded.current_snapshot()
    assert current is not None
    assert current.summary is not None
    assert current.summary["total-records"] == "4"
    assert current.summary["added-records"] == "1"
    # The writer's in-memory table and the catalog agree on the current metadata file.
    assert loaded.metadata_location == table.metadata_location
    assert local_path(loaded.metadata_location).is_file()


def test_overwrite_and_delete(rest_catalog: RestCatalog, namespace: str) -> None:
    table = rest_catalog.create_table((namespace, "t"), schema=PEOPLE)
    table.append(people([1, 2, 3, 4, 5]))

    table.delete(delete_filter="id > 3")
    assert rows(rest_catalog.load_table((namespace, "t"))) == [(1, "n1"), (2, "n2"), (3, "n3")]

    table.overwrite(people([2], ["two"]), overwrite_filter="id == 2")
    assert rows(rest_catalog.load_table((namespace, "t"))) == [(1, "n1"), (2, "two"), (3, "n3")]

    table.overwrite(people([9], ["nine"]))
    loaded = rest_catalog.load_table((namespace, "t"))
    assert rows(loaded) == [(9, "nine")]
    operations = [s.summary.operation.value for s in loaded.snapshots() if s.summary is not None]
    assert operations[0] == "append"
    assert "delete" in operations
    assert operations[-1] in ("overwrite", "append")
    # Every snapshot after the first names its predecessor.
    snapshots = loaded.snapshots()
    for parent, child in itertools.pairwise(snapshots):
        assert child.parent_snapshot_id == parent.snapshot_id


def test_upsert(rest_catalog: RestCatalog, namespace: str) -> None:
    table = rest_catalog.create_table(
        (namespace, "t"),
        schema=Schema(
            NestedField(1, "id", LongType(), required=True),
            NestedField(2, "name", StringType(), required=False),
            identifier_field_ids=[1],
        ),
    )
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])
    table.append(pa.table({"id": [1, 2], "name": ["a", "b"]}, schema=schema))
    result = table.upsert(pa.table({"id": [2, 3], "name": ["B", "c"]}, schema=schema))
    assert (result.rows_updated, result.rows_inserted) == (1, 1)
    assert rows(rest_catalog.load_table((namespace, "t"))) == [(1, "a"), (2, "B"), (3, "c")]


def test_schema_evolution_then_append(rest_catalog: RestCatalog, namespace: str) -> None:
    schema = pa.schema([pa.field("id", pa.int32()), pa.field("name", pa.string())])
    table = rest_catalog.create_table((namespace, "t"), schema=schema)
    table.append(pa.table({"id": pa.array([1, 2], pa.int32()), "name": ["a", "b"]}, schema=schema))
    old_schema_id = table.schema().schema_id

    with table.update_schema() as update:
        update.add_column("score", DoubleType(), doc="added later")
        update.rename_column("name", "full_name")
        update.update_column("id", field_type=LongType())

    loaded = rest_catalog.load_table((namespace, "t"))
    current = loaded.schema()
    assert current.schema_id != old_schema_id
    assert [(f.name, str(f.field_type)) for f in current.fields] == [
        ("id", "long"),
        ("full_name", "string"),
        ("score", "double"),
    ]
    assert current.find_field("score").doc == "added later"
    # Old schemas stay in the metadata for old snapshots.
    assert old_schema_id in loaded.schemas()

    new_schema = pa.schema(
        [pa.field("id", pa.int64()), pa.field("full_name", pa.string()), pa.field("score", pa.float64())]
    )
    loaded.append(
        pa.table({"id": [3_000_000_000], "full_name": ["c"], "score": [1.5]}, schema=new_schema),
    )
    reread = rest_catalog.load_table((namespace, "t"))
    arrow = reread.scan().to_arrow()
    assert arrow.schema.field("id").type == pa.int64()
    assert rows(reread) == [(1, "a", None), (2, "b", None), (3_000_000_000, "c", 1.5)]

    # Adding a field whose name is taken is refused by pyiceberg before any request; dropping works.
    with reread.update_schema() as update:
        update.delete_column("score")
    assert [f.name for f in rest_catalog.load_table((namespace, "t")).schema().fields] == ["id", "full_name"]


def test_stale_schema_update_is_rejected(rest_catalog: RestCatalog, namespace: str) -> None:
    table = rest_catalog.create_table((namespace, "t"), schema=PEOPLE)
    stale = rest_catalog.load_table((namespace, "t"))
    with table.update_schema() as update:
        update.add_column("a", IntegerType())
    # The second writer's base schema is outdated: the server checks assert-current-schema-id.
    with pytest.raises(CommitFailedException, match="schema"), stale.update_schema() as update:
        update.add_column("b", IntegerType())
    assert [f.name for f in rest_catalog.load_table((namespace, "t")).schema().fields] == ["id", "name", "a"]


EVENTS = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "category", StringType(), required=False),
    NestedField(3, "ts", TimestampType(), required=False),
    NestedField(4, "at", TimestamptzType(), required=False),
)


def events() -> pa.Table:
    utc = dt.UTC
    return pa.table(
        {
            "id": pa.array([1, 2, 3, 4, 5], pa.int64()),
            "category": ["a", "a", "b", "c", "b"],
            "ts": pa.array(
                [
                    dt.datetime(2024, 1, 1, 10),
                    dt.datetime(2024, 1, 1, 23),
                    dt.datetime(2024, 1, 2, 0),
                    dt.datetime(2024, 1, 3, 5),
                    dt.datetime(2024, 1, 2, 12),
                ],
                pa.timestamp("us"),
            ),
            "at": pa.array(
                [
                    dt.datetime(2024, 1, 1, 10, 5, tzinfo=utc),
                    dt.datetime(2024, 1, 1, 10, 55, tzinfo=utc),
                    dt.datetime(2024, 1, 1, 11, 0, tzinfo=utc),
                    dt.datetime(2024, 1, 1, 12, 0, tzinfo=utc),
                    dt.datetime(2024, 1, 1, 11, 30, tzinfo=utc),
                ],
                pa.timestamp("us", tz="UTC"),
            ),
        }
    )


def data_file_paths(table: Table, row_filter: str = "true") -> list[str]:
    return sorted(task.file.file_path for task in table.scan(row_filter=row_filter).plan_files())


@pytest.mark.parametrize(
    ("field", "transform", "partition_name", "expected_partitions"),
    [
        pytest.param("category", IdentityTransform(), "category", {"a", "b", "c"}, id="identity"),
        pytest.param("ts", DayTransform(), "ts_day", {"2024-01-01", "2024-01-02", "2024-01-03"}, id="day"),
        pytest.param(
            "at", HourTransform(), "at_hour", {"2024-01-01-10", "2024-01-01-11", "2024-01-01-12"}, id="hour"
        ),
    ],
)
def test_partitioned_table(
    rest_catalog: RestCatalog,
    namespace: str,
    field: str,
    transform: Transform[Any, Any],
    partition_name: str,
    expected_partitions: set[str],
) -> None:
    source_id = EVENTS.find_field(field).field_id
    spec = PartitionSpec(
        PartitionField(source_id=source_id, field_id=1000, transform=transform, name=partition_name)
    )
    table = rest_catalog.create_table((namespace, "events"), schema=EVENTS, partition_spec=spec)
    loaded_spec = table.spec()
    assert [(f.name, str(f.transform)) for f in loaded_spec.fields] == [(partition_name, str(transform))]
    assert loaded_spec.fields[0].source_id == table.schema().find_field(field).field_id

    table.append(events())
    loaded = rest_catalog.load_table((namespace, "events"))
    assert loaded.scan().count() == 5
    assert sorted(loaded.scan().to_arrow().column("id").to_pylist()) == [1, 2, 3, 4, 5]

    # One data file per partition, in a Hive-style `name=value` folder.
    paths = data_file_paths(loaded)
    assert len(paths) == len(expected_partitions)
    folders = {Path(local_path(p)).parent.name for p in paths}
    assert folders == {f"{partition_name}={value}" for value in expected_partitions}
    assert all(local_path(p).is_file() for p in paths)
    assert loaded.inspect.partitions().num_rows == len(expected_partitions)

    # A filter on the partition source prunes files at planning time.
    if field == "category":
        row_filter, expected_ids = "category == 'b'", [3, 5]
    elif field == "ts":
        row_filter, expected_ids = "ts >= '2024-01-02T00:00:00' and ts < '2024-01-03T00:00:00'", [3, 5]
    else:
        row_filter, expected_ids = (
            "at >= '2024-01-01T11:00:00+00:00' and at < '2024-01-01T12:00:00+00:00'",
            [3, 5],
        )
    assert len(data_file_paths(loaded, row_filter)) == 1
    assert sorted(loaded.scan(row_filter=row_filter).to_arrow().column("id").to_pylist()) == expected_ids


def test_partition_evolution_and_sort_order(rest_catalog: RestCatalog, namespace: str) -> None:
    table = rest_catalog.create_table((namespace, "events"), schema=EVENTS)
    table.append(events())
    with table.update_spec() as update:
        update.add_identity("category")
    with table.update_sort_order() as order:
        order.asc("id", IdentityTransform())
    table.append(events())

    loaded = rest_catalog.load_table((namespace, "events"))
    assert len(loaded.specs()) == 2
    assert [f.name for f in loaded.spec().fields] == ["category"]
    assert [f.source_id for f in loaded.sort_order().fields] == [loaded.schema().find_field("id").field_id]
    assert loaded.scan().count() == 10
    # The first append wrote one unpartitioned file, the second one file per category.
    assert len(data_file_paths(loaded)) == 1 + 3
    assert sorted(loaded.scan(row_filter="category == 'a'").to_arrow().column("id").to_pylist()) == [
        1,
        1,
        2,
        2,
    ]


def test_time_travel_by_snapshot_id_and_timestamp(rest_catalog: RestCatalog, namespace: str) -> None:
    table = rest_catalog.create_table((namespace, "t"), schema=PEOPLE)
    table.append(people([1]))
    first = table.current_snapshot()
    table.append(people([2]))
    second = table.current_snapshot()
    table.delete(delete_filter="id == 1")
    assert first is not None
    assert second is not None

    loaded = rest_catalog.load_table((namespace, "t"))
    assert rows(loaded) == [(2, "n2")]
    assert rows(loaded, snapshot_id=first.snapshot_id) == [(1, "n1")]
    assert rows(loaded, snapshot_id=second.snapshot_id) == [(1, "n1"), (2, "n2")]
    as_of = loaded.snapshot_as_of_timestamp(second.timestamp_ms)
    assert as_of is not None
    assert as_of.snapshot_id == second.snapshot_id
    assert [entry.snapshot_id for entry in loaded.history()][:2] == [first.snapshot_id, second.snapshot_id]


def test_tags_branches_and_rollback(rest_catalog: RestCatalog, namespace: str) -> None:
    table = rest_catalog.create_table((namespace, "t"), schema=PEOPLE)
    table.append(people([1]))
    first = table.current_snapshot()
    assert first is not None
    table.append(people([2]))

    table.manage_snapshots().create_tag(first.snapshot_id, "v1").create_branch(
        first.snapshot_id, "dev"
    ).commit()
    loaded = rest_catalog.load_table((namespace, "t"))
    assert set(loaded.refs()) == {"main", "v1", "dev"}
    assert loaded.scan().use_ref("v1").to_arrow().column("id").to_pylist() == [1]
    v1 = loaded.snapshot_by_name("v1")
    assert v1 is not None
    assert rows(loaded, snapshot_id=v1.snapshot_id) == [(1, "n1")]

    # Writing to the branch leaves main untouched.
    loaded.append(people([3]), branch="dev")
    reread = rest_catalog.load_table((namespace, "t"))
    dev = reread.snapshot_by_name("dev")
    assert dev is not None
    assert rows(reread, snapshot_id=dev.snapshot_id) == [(1, "n1"), (3, "n3")]
    assert rows(reread) == [(1, "n1"), (2, "n2")]

    reread.manage_snapshots().rollback_to_snapshot(first.snapshot_id).remove_tag("v1").commit()
    final = rest_catalog.load_table((namespace, "t"))
    assert rows(final) == [(1, "n1")]
    assert set(final.refs()) == {"main", "dev"}


def test_concurrent_appends_both_land(rest_catalog: RestCatalog, namespace: str) -> None:
    rest_catalog.create_table((namespace, "t"), schema=PEOPLE)
    writer_a = rest_catalog.load_table((namespace, "t"))
    writer_b = rest_catalog.load_table((namespace, "t"))
    writer_a.append(people([1]))
    # writer_b's base is stale: the server answers 409 and pyiceberg re-applies the append on the new base.
    writer_b.append(people([2]))
    loaded = rest_catalog.load_table((namespace, "t"))
    assert rows(loaded) == [(1, "n1"), (2, "n2")]
    first, second = loaded.snapshots()
    assert second.parent_snapshot_id == first.snapshot_id


def test_snapshot_loading_mode_refs(
    catalog_server: CatalogProcess, rest_catalog: RestCatalog, namespace: str
) -> None:
    table = rest_catalog.create_table((namespace, "t"), schema=PEOPLE)
    for i in range(3):
        table.append(people([i]))
    first = table.snapshots()[0]
    table.manage_snapshots().create_tag(first.snapshot_id, "first").commit()

    refs_catalog = catalog_server.catalog(**{"snapshot-loading-mode": "refs"})
    partial = refs_catalog.load_table((namespace, "t"))
    current = partial.current_snapshot()
    assert current is not None
    # Only the snapshots a branch or tag points at come back; the data is all still readable.
    assert {s.snapshot_id for s in partial.snapshots()} == {first.snapshot_id, current.snapshot_id}
    assert rows(partial) == [(0, "n0"), (1, "n1"), (2, "n2")]

    # A commit from the partial view must not drop the snapshots it did not see.
    partial.append(people([3]))
    full = rest_catalog.load_table((namespace, "t"))
    assert len(full.snapshots()) == 4
    assert rows(full) == [(0, "n0"), (1, "n1"), (2, "n2"), (3, "n3")]
