"""The columns a batch writes (`ingest.decode.written_columns`) are typed exactly as the table declares
them, so Spark's write takes the rows as they are: no `assertnotnull`, no struct rebuilt, no lambda over
the headers (those ran outside Spark's generated code). Checked on a real Iceberg table in a local Spark
session, for every type floe maps, required at the top level and inside structs; a required field inside
a list is left for Spark to check, and the rows read back are the rows written."""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
)

from catalog.pipelines.columns import KAFKA_FIELD
from ingest.decode import spark_type, written_columns
from tests.e2e.local_spark import spark_without_tables

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.e2e

REQUIRED_TYPES = {
    "b": BooleanType(),
    "i": IntegerType(),
    "l": LongType(),
    "f": FloatType(),
    "d": DoubleType(),
    "dec": DecimalType(10, 2),
    "day": DateType(),
    "ts": TimestamptzType(),
    "ntz": TimestampType(),
    "s": StringType(),
    "bin": BinaryType(),
    "tags": ListType(100, StringType(), element_required=False),
    "props": MapType(101, StringType(), 102, StringType(), value_required=False),
}

SCHEMA = Schema(
    *[NestedField(n, name, kind, required=True) for n, (name, kind) in enumerate(REQUIRED_TYPES.items(), 1)],
    NestedField(20, "note", StringType(), required=False),
    NestedField(
        21,
        "device",
        StructType(
            NestedField(22, "os", StringType(), required=True),
            NestedField(23, "version", LongType(), required=False),
            NestedField(
                24,
                "screen",
                StructType(NestedField(25, "width", IntegerType(), required=True)),
                required=False,
            ),
        ),
        required=False,
    ),
    KAFKA_FIELD,
)
ROW = (
    True,
    7,
    8,
    1.5,
    2.5,
    decimal.Decimal("3.25"),
    datetime.date(2026, 11, 25),
    datetime.datetime(2026, 11, 25, 1, 2, 3, tzinfo=datetime.UTC),
    datetime.datetime(2026, 11, 25, 1, 2, 3),
    "x",
    bytearray(b"\x00\x01"),
    ["a", None],
    {"k": "v", "n": None},
    None,
    ("linux", None, (1920,)),
    (3, 42, datetime.datetime(2026, 11, 25, tzinfo=datetime.UTC), b"key", [("h", b"v")]),
)


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    warehouse: Path = tmp_path_factory.mktemp("warehouse")
    with spark_without_tables("floe-written-columns") as session:
        session.conf.set("spark.sql.catalog.scratch", "org.apache.iceberg.spark.SparkCatalog")
        session.conf.set("spark.sql.catalog.scratch.type", "hadoop")
        session.conf.set("spark.sql.catalog.scratch.warehouse", warehouse.as_uri())
        session.conf.set("spark.sql.session.timeZone", "UTC")
        yield session


def _decoded(spark: SparkSession, schema: Schema, row: tuple[Any, ...] = ROW) -> DataFrame:
    """A batch of `row` as the decoder leaves it: every field nullable, a record may lack any of them
    (`spark_type` makes struct fields nullable too)."""
    from pyspark.sql import types as st

    fields = [st.StructField(f.name, spark_type(f.field_type), True) for f in schema.fields]
    return spark.createDataFrame([row], st.StructType(fields))


def _ddl(kind: IcebergType) -> str:
    """The Spark DDL of an Iceberg type, NOT NULL on the required fields of its structs."""
    if isinstance(kind, StructType):
        fields = [
            f"`{f.name}`: {_ddl(f.field_type)}" + (" NOT NULL" if f.required else "") for f in kind.fields
        ]
        return f"struct<{', '.join(fields)}>"
    if isinstance(kind, ListType):
        return f"array<{_ddl(kind.element_type)}>"
    if isinstance(kind, MapType):
        return f"map<{_ddl(kind.key_type)}, {_ddl(kind.value_type)}>"
    return str(spark_type(kind).simpleString())


def _create(spark: SparkSession, name: str, schema: Schema) -> str:
    columns = [
        f"`{f.name}` {_ddl(f.field_type)}" + (" NOT NULL" if f.required else "") for f in schema.fields
    ]
    table = f"scratch.db.{name}"
    spark.sql(f"DROP TABLE IF EXISTS {table}")
    spark.sql(f"CREATE TABLE {table} ({', '.join(columns)}) USING iceberg")
    return table


def _write_plan(spark: SparkSession, rows: DataFrame, table: str) -> str:
    """The analyzed plan of appending `rows` to `table` by name (as `writeTo(...).append()` does)."""
    rows.createOrReplaceTempView("batch")
    return str(spark.sql(f"EXPLAIN EXTENDED INSERT INTO {table} BY NAME SELECT * FROM batch").collect()[0][0])


def test_the_written_columns_need_no_projection_by_spark(spark: SparkSession) -> None:
    table = _create(spark, "typed", SCHEMA)
    decoded = _decoded(spark, SCHEMA)
    # As the decoder leaves them, Spark would check and rebuild them itself.
    assert "assertnotnull" in _write_plan(spark, decoded, table)
    written = decoded.select(*written_columns(SCHEMA))
    plan = _write_plan(spark, written, table)
    analyzed = plan.split("== Analyzed Logical Plan ==")[1].split("== Optimized Logical Plan ==")[0]
    assert "assertnotnull" not in analyzed, analyzed
    assert "lambdafunction" not in analyzed, analyzed  # the headers list is not copied
    written.writeTo(table).append()
    assert [tuple(r) for r in spark.table(table).collect()] == [tuple(r) for r in decoded.collect()]


def test_a_required_field_in_a_list_is_left_for_spark_to_check(spark: SparkSession) -> None:
    schema = Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(
            2,
            "items",
            ListType(
                3, StructType(NestedField(4, "sku", StringType(), required=True)), element_required=False
            ),
            required=False,
        ),
        KAFKA_FIELD,  # every table floe ingests into has it
    )
    table = _create(spark, "listed", schema)
    rows = _decoded(spark, schema, (1, [("a",)], ROW[-1]))
    written = rows.select(*written_columns(schema))
    assert "assertnotnull" in _write_plan(spark, written, table)  # Spark still checks the element's field
    written.writeTo(table).append()
    assert spark.table(table).collect()[0]["items"][0]["sku"] == "a"
