"""The peer: a plain Spark Structured Streaming upsert job, written the way Iceberg's docs suggest.

`python -m benchmarks.upsert.plain_job --bootstrap … --topic … --table floe.bench.plain_x --checkpoint …`
with FLOE_URL, FLOE_CLIENT_ID and FLOE_CLIENT_SECRET in the environment. The SparkSession comes from
`runtime.spark.spark_session` (the jars, settings and floe catalog of `floe ingest`). The table is
created with Spark SQL (`PARTITIONED BY (bucket(16, id))`, format v2, merge-on-read: Iceberg's
documented choice for frequent row-level changes, and what floe's upsert tables use). The query reads
Kafka, parses the JSON value, and `foreachBatch` keeps the latest record per key of the batch (MERGE
refuses several source rows per target row) and runs `MERGE INTO` — update, insert, or delete for a
tombstone, whose key is the Kafka record key. Each batch's progress goes to `--progress` as JSON lines.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.ingest.plain_job import run_until_stopped
from benchmarks.upsert.workload import SPARK_DDL

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.upsert.plain_job", description=__doc__)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--table", required=True, help="catalog.namespace.table, e.g. floe.bench.plain_x")
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--progress", type=Path, required=True, help="JSON lines of each batch's progress")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="2g")
    parser.add_argument("--trigger-seconds", type=float, default=2.0)
    parser.add_argument("--max-offsets-per-trigger", type=int, default=100_000)
    parser.add_argument("--buckets", type=int, default=16)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from runtime.spark import CatalogConnection, spark_session

    connection = CatalogConnection(
        os.environ["FLOE_URL"],
        os.environ.get("FLOE_WAREHOUSE_NAME", "default"),
        os.environ["FLOE_CLIENT_ID"],
        os.environ["FLOE_CLIENT_SECRET"],
    )
    spark = spark_session(
        "plain-kafka-upsert", connection, master=args.master, conf={"spark.driver.memory": args.driver_memory}
    )
    namespace = args.table.rsplit(".", 1)[0]
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")
    spark.sql(
        f"CREATE TABLE IF NOT EXISTS {args.table} ({SPARK_DDL}) USING iceberg "
        f"PARTITIONED BY (bucket({args.buckets}, id)) TBLPROPERTIES ('format-version'='2', "
        "'write.merge.mode'='merge-on-read', 'write.update.mode'='merge-on-read', "
        "'write.delete.mode'='merge-on-read')"
    )
    changes = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
        .load()
        .select(
            F.col("key").cast("string").cast("long").alias("key_id"),
            F.from_json(F.col("value").cast("string"), SPARK_DDL).alias("data"),
            F.col("value").isNull().alias("deleted"),
            "partition",
            "offset",
        )
    )
    columns = [c.strip().split(" ")[0] for c in SPARK_DDL.split(",")]

    def upsert(batch: DataFrame, batch_id: int) -> None:
        latest = Window.partitionBy("key_id").orderBy(F.col("offset").desc())
        rows = (
            batch.withColumn("rank", F.row_number().over(latest))
            .where("rank = 1")
            .select(F.col("key_id").alias("id"), *[f"data.{c}" for c in columns if c != "id"], "deleted")
        )
        rows.createOrReplaceTempView("changes")
        assignments = ", ".join(f"t.{c} = s.{c}" for c in columns)
        values = ", ".join(f"s.{c}" for c in columns)
        rows.sparkSession.sql(
            f"MERGE INTO {args.table} t USING changes s ON t.id = s.id "
            "WHEN MATCHED AND s.deleted THEN DELETE "
            f"WHEN MATCHED THEN UPDATE SET {assignments} "
            f"WHEN NOT MATCHED AND NOT s.deleted THEN INSERT ({', '.join(columns)}) VALUES ({values})"
        )

    query = (
        changes.writeStream.foreachBatch(upsert)
        .trigger(processingTime=f"{args.trigger_seconds:g} seconds")
        .option("checkpointLocation", str(args.checkpoint))
        .start()
    )
    return run_until_stopped(spark, query, args.progress)


if __name__ == "__main__":
    raise SystemExit(main())
