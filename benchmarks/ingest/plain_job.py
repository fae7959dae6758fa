"""The peer: a plain Spark Structured Streaming Kafka → Iceberg job, written the way public guides write it.

`python -m benchmarks.ingest.plain_job --bootstrap … --topic … --table floe.bench.plain_x --checkpoint …`
with FLOE_URL, FLOE_CLIENT_ID and FLOE_CLIENT_SECRET in the environment. The SparkSession comes from
`runtime.spark.spark_session`, so the jars, the catalog `floe` (floe's REST API) and the session settings
are the ones `floe ingest` runs with. The table is created as guides create it (`CREATE TABLE … USING
iceberg PARTITIONED BY (hours(ts))`, default properties); the query reads Kafka, casts the value to a
string, parses it with `from_json`, keeps the fields and the Kafka timestamp, and appends to the table
every trigger. Each micro-batch's progress (Spark's own timings) goes to `--progress` as JSON lines.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import threading
import time
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from benchmarks.ingest.events import SPARK_DDL

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ingest.plain_job", description=__doc__)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--table", required=True, help="catalog.namespace.table, e.g. floe.bench.plain_x")
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--progress", type=Path, required=True, help="JSON lines of each batch's progress")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="2g")
    parser.add_argument("--trigger-seconds", type=float, default=2.0)
    parser.add_argument("--max-offsets-per-trigger", type=int, default=500_000)
    parser.add_argument("--java-options", default=None, help="driver JVM options (profiling only)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from pyspark.sql.functions import col, from_json

    from runtime.spark import CatalogConnection, spark_session

    connection = CatalogConnection(
        os.environ["FLOE_URL"],
        os.environ.get("FLOE_WAREHOUSE_NAME", "default"),
        os.environ["FLOE_CLIENT_ID"],
        os.environ["FLOE_CLIENT_SECRET"],
    )
    spark = spark_session(
        "plain-kafka-to-iceberg",
        connection,
        master=args.master,
        conf={"spark.driver.memory": args.driver_memory}
        | ({"spark.driver.extraJavaOptions": args.java_options} if args.java_options else {}),
    )
    namespace = args.table.rsplit(".", 1)[0]
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")
    spark.sql(
        f"CREATE TABLE IF NOT EXISTS {args.table} ({SPARK_DDL}, ts TIMESTAMP) "
        "USING iceberg PARTITIONED BY (hours(ts))"
    )

    events = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
        .load()
        .selectExpr("CAST(value AS STRING) AS json", "timestamp")
        .select(from_json(col("json"), SPARK_DDL).alias("data"), col("timestamp").alias("ts"))
        .select("data.*", "ts")
    )
    query = (
        events.writeStream.format("iceberg")
        .outputMode("append")
        .trigger(processingTime=f"{args.trigger_seconds:g} seconds")
        .option("checkpointLocation", str(args.checkpoint))
        .toTable(args.table)
    )

    return run_until_stopped(spark, query, args.progress)


def run_until_stopped(spark: SparkSession, query: StreamingQuery, progress_path: Path) -> int:
    """Run `query` until SIGTERM/SIGINT, appending each batch's progress to `progress_path` as a JSON
    line; 1 when the query failed. Shared by the benchmarks' plain peer jobs."""
    stop = threading.Event()

    def _stop(signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    written: set[int] = set()
    with progress_path.open("a") as progress:

        def record_progress() -> None:
            # recentProgress keeps the last 100 batches: polled every second, none is missed.
            for entry in query.recentProgress:
                batch = int(entry.batchId)
                if batch not in written:
                    written.add(batch)
                    progress.write(json.dumps(json.loads(entry.json)) + "\n")
                    progress.flush()

        while not stop.is_set() and query.isActive:
            record_progress()
            stop.wait(1.0)
        # Asked to stop right after a batch's Iceberg commit: its progress is reported only when the
        # batch ends (offsets committed), so let a running trigger finish before the last record.
        deadline = time.monotonic() + 15
        while query.isActive and query.status.get("isTriggerActive") and time.monotonic() < deadline:
            time.sleep(0.1)
        record_progress()
    error = query.exception()
    query.stop()
    spark.stop()
    if error is not None:
        print(f"query failed: {error}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
