"""floe's JVM scan for undeclared JSON keys (ingest/jvm JsonUndeclaredKeys) gives what Spark's
`array_except(json_object_keys(value), declared)` gives, on every value `from_json` accepts, in a real
local Spark session (one per module)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from pyiceberg.types import NestedField, StringType

from ingest.json_udfs import undeclared_keys
from tests.e2e.local_spark import spark_without_tables

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DECLARED = ["a", "b_b", "é", "nested"]
VALUES = [
    '{"a": 1, "b_b": "x"}',
    '{"a":1,"zz":2,"b_b":null}',
    ' { "c" : [1, {"d": "}"}], "a": "\\"quoted\\"", "e": {"f": [1,2,{"g":3}]} } ',
    '{"a\\u0062": 1, "\\u00e9": 2, "x\\"y": 3}',
    "{'single': 'v}', 'a': 1}",
    '{"n": -1.5e10, "t": true, "f": false, "z": null, "nested": {"deep": 1}}',
    '{"dup": 1, "dup": 2, "other": 3}',
    '{"ünïcode": "ß", "a": "日本"}',
    "{}",
]
# from_json accepts NaN and Infinity (Spark's allowNonNumericNumbers); json_object_keys refused such a
# value (NULL: its undeclared keys went uncounted). The scan reads it like from_json does.
NON_NUMERIC = '{"a": NaN, "q": Infinity}'


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    with spark_without_tables("floe-json-undeclared-keys-tests") as session:
        yield session


def test_scan_matches_sparks_json_object_keys(spark: SparkSession) -> None:
    from pyspark.sql import functions as F

    fields = [NestedField(i + 1, name, StringType(), required=False) for i, name in enumerate(DECLARED)]
    frame = spark.createDataFrame([(v.encode(),) for v in VALUES], "__floe_value binary")
    declared = F.array(*[F.lit(n) for n in DECLARED])
    rows = frame.select(
        F.col("__floe_value").cast("string").alias("text"),
        undeclared_keys(spark, F.col("__floe_value"), fields).alias("scanned"),
        F.array_except(F.json_object_keys(F.col("__floe_value").cast("string")), declared).alias("spark"),
    ).collect()
    assert len(rows) == len(VALUES)
    for row in rows:
        assert row["scanned"] == row["spark"], row["text"]
    assert rows[3]["scanned"] == ["ab", 'x"y']  # escaped keys decoded (`é` is declared)
    non_numeric = spark.createDataFrame([(NON_NUMERIC.encode(),)], "__floe_value binary")
    found = non_numeric.select(undeclared_keys(spark, F.col("__floe_value"), fields).alias("k")).collect()
    assert found[0]["k"] == ["q"]
    # Values from_json refuses give NULL, never a failed job.
    broken = spark.createDataFrame(
        [(b'{"a": ',), (b"[1, 2]",), (b"not json",), (None,)], "__floe_value binary"
    )
    scanned = broken.select(undeclared_keys(spark, F.col("__floe_value"), fields).alias("k")).collect()
    assert [r["k"] for r in scanned] == [None, None, None, None]
