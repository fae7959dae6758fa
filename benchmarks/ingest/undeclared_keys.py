"""The cost of finding undeclared JSON keys: Spark's `array_except(json_object_keys(value), declared)`
against floe's JVM byte scan (`ingest.json_udfs.undeclared_keys`), and `from_json` alone for scale.

`python -m benchmarks.ingest.undeclared_keys [--records 200000] [--rounds 3]`: the benchmark's 1 KiB
JSON events, cached in one local Spark session (no Kafka, no writes), each expression counted over them
in interleaved rounds after a warm-up; JVM CPU seconds per 100k records, medians.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column

from benchmarks.catalog.procstat import cpu_seconds
from benchmarks.ingest.diagnose import spark_jvm_pid
from benchmarks.ingest.events import FLOE_FIELDS, SPARK_DDL, EventFactory


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ingest.undeclared_keys", description=__doc__)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--master", default="local[1]")
    args = parser.parse_args(argv)

    from pyiceberg.types import NestedField, StringType
    from pyspark.sql import functions as F

    from ingest.json_udfs import undeclared_keys
    from runtime.spark import CatalogConnection, spark_session

    spark = spark_session(
        "floe-undeclared-keys-bench",
        CatalogConnection("http://127.0.0.1:9", "default", "unused", "unused"),  # no table is used
        master=args.master,
        conf={"spark.driver.memory": "2g", "spark.ui.showConsoleProgress": "false"},
    )
    events = EventFactory()
    now = time.time()
    values = [(events.value(seq, now),) for seq in range(args.records)]
    frame = spark.createDataFrame(values, "__floe_value binary").repartition(1).cache()
    frame.count()
    names = [str(f["name"]) for f in FLOE_FIELDS]
    fields = [NestedField(i + 1, n, StringType(), required=False) for i, n in enumerate(names)]
    value = F.col("__floe_value")
    declared = F.array(*[F.lit(n) for n in names])
    expressions: dict[str, Callable[[], Column]] = {
        "json_object_keys": lambda: F.array_except(F.json_object_keys(value.cast("string")), declared),
        "floe_scan": lambda: undeclared_keys(spark, value, fields),
        "from_json": lambda: F.from_json(value.cast("string"), SPARK_DDL),
    }
    jvm = spark_jvm_pid()
    cpu: dict[str, list[float]] = {name: [] for name in expressions}
    for round_index in range(args.rounds + 1):
        for name, make in expressions.items():
            column = make()
            before = cpu_seconds([jvm])
            # A non-null count reads every result (nothing is pruned).
            frame.select(F.count_if(column.isNotNull())).collect()
            spent = cpu_seconds([jvm]) - before
            if round_index:
                cpu[name].append(spent)
            print(f"round {round_index} {name:18} {spent:6.2f} CPU s", flush=True)
    spark.stop()
    for name, rounds in cpu.items():
        per_100k = statistics.median(rounds) * 100_000 / args.records
        print(f"{name:18} {per_100k:5.2f} CPU s per 100k records (median of {len(rounds)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
