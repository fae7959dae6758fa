"""Where floe's micro-batch time goes: the same Kafka slice written by floe's `BatchWriter` and by
simpler variants, in one Spark session, timed in wall and CPU seconds (JVM + Python driver).

`python -m benchmarks.ingest.diagnose` (about 3 minutes; `python -m benchmarks.ingest` runs it too).
Variants, on batches of `--large` records (throughput) and `--small` records (freshness: the
per-batch fixed cost):

- plain: what the plain job does (`CAST(value AS STRING)`, `from_json`, fields + `ts`, append)
- floe_decode_write_unfiltered: floe's `decode_json` and row shape, every row appended (no
  `_error IS NULL` filter)
- floe_decode_write: floe's `decode_json` (PERMISSIVE, required-field checks, `_kafka` struct with
  headers), good rows appended; no offsets read, no persist, no statistics. The decode is gated on
  a non-deterministic condition (`ingest.decode.evaluated_once`), so the filter is not pushed below
  it and `from_json` runs once per value (it ran 10 times before)
- floe_decode_stats_write: the same plus floe's per-partition statistics job, without persisting the
  batch (the decode runs twice)
- floe_persist_then_filter: BatchWriter's steps (persist, statistics, append of the good rows) with
  the decoded batch persisted before it is filtered (no offsets read from floe)
- floe_observe_write: floe_decode_write with the statistics observed during the append
  (`DataFrame.observe`) instead of a job of their own
- floe_two_pass_writer: `BatchWriter`'s two-pass path, forced (offsets from floe, decode, persist
  MEMORY_AND_DISK, statistics job, append with offsets in the summary): what every batch ran before
  the one-pass path, and what a batch with dead letters runs now
- floe_batch_writer: `ingest.batches.BatchWriter.write` as `floe ingest` runs a query's first batch
  (offsets from floe, a job over the raw records for the summary's offsets and record times, decode
  once, counts observed during the append with offsets in the summary); later batches take their range
  from Spark's offset log and need no job before the write
- floe_batch_writer_spark_keys / floe_batch_writer_filtered: the same with one change undone each (the
  undeclared JSON keys by Spark's `json_object_keys`; the offsets filter on every batch), for a same-run
  before/after of each

Each variant reads the slice with a batch `spark.read.format("kafka")` (the micro-batch's DataFrame);
the plain variant's table has `write.distribution-mode=none` like floe's, so both write without a
shuffle. Rounds interleave the variants so machine load hits all alike.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from unittest import mock

from benchmarks.catalog.procstat import cpu_seconds, tree_pids
from benchmarks.ingest.environment import Environment, apply_pipeline, environment, floe_table
from benchmarks.ingest.events import FLOE_FIELDS, SPARK_DDL, EventFactory
from benchmarks.ingest.producing import produce_backlog

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

PARTITIONS = 4
TOPIC = "diag.events"
VARIANTS = {
    "plain": "the plain job's steps: CAST(value AS STRING), from_json, fields + ts, append",
    "floe_decode_write_unfiltered": "floe's decode_json and row shape (_kafka struct), every row appended",
    "floe_decode_write": "the same, only good rows (`_error IS NULL`) appended",
    "floe_decode_stats_write": "the same plus floe's per-partition statistics job (no persist)",
    "floe_persist_then_filter": "decode, persist, statistics, good rows appended: persisted before filtering",
    "floe_observe_write": "floe_decode_write with the statistics observed during the append",
    "floe_two_pass_writer": "BatchWriter's two-pass path (persist, statistics job, append), forced",
    "floe_batch_writer": "ingest.batches.BatchWriter.write, as `floe ingest` runs it per batch",
    "floe_batch_writer_spark_keys": "the same with undeclared keys by Spark's json_object_keys (before)",
    "floe_batch_writer_filtered": "the same with the offsets filter on every batch (before)",
}
CLUSTER = "diag"


def spark_jvm_pid() -> int:
    """The Spark driver JVM this process launched (PySpark starts it as a child)."""
    for pid in tree_pids([os.getpid()]):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"org.apache.spark.deploy.SparkSubmit" in command:
            return pid
    raise RuntimeError("no Spark JVM among this process's children")


def _slice(spark: SparkSession, bootstrap: str, start: int, per_partition: int, headers: bool) -> DataFrame:
    starting = {TOPIC: {str(p): start for p in range(PARTITIONS)}}
    ending = {TOPIC: {str(p): start + per_partition for p in range(PARTITIONS)}}
    return (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", TOPIC)
        .option("startingOffsets", json.dumps(starting))
        .option("endingOffsets", json.dumps(ending))
        .option("includeHeaders", str(headers).lower())
        .load()
    )


def diagnosis_cluster(bootstrap: str) -> dict[str, Any]:
    host, port = bootstrap.split(":")
    return {"name": CLUSTER, "bootstrap_brokers": [{"hostname": host, "port": int(port)}]}


def diagnosis_table() -> dict[str, Any]:
    """The floe.yaml table the diagnosis writes (like the benchmark's: JSON, hour partitioning)."""
    return {
        "source_cluster_name": CLUSTER,
        "source_topic": TOPIC,
        "source_format": "json",
        "schema_mode": "inline",
        "partitioning_scheme": "hour",
        "schema": {"fields": FLOE_FIELDS},
    }


def run_diagnosis(
    env: Environment,
    *,
    large: int = 100_000,
    small: int = 2_000,
    rounds: int = 2,
    master: str = "local[2]",
    driver_memory: str = "2g",
    only: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Time every variant on `large` and `small` batches (the floe.yaml applied to `env` must hold
    `diagnosis_table()`); the median wall and CPU seconds of `rounds` rounds after one warm-up round."""
    from pyspark import StorageLevel
    from pyspark.sql import Observation
    from pyspark.sql import functions as F
    from pyspark.sql.functions import col, from_json

    from ingest.batches import BatchWriter
    from ingest.decode import ERROR_COLUMN, KAFKA_COLUMN, decode_json, source, source_columns, user_fields
    from ingest.tables import ingest_tables
    from runtime.spark import CatalogConnection, spark_session

    sizes = {"large": large, "small": small}
    # The writers consume fresh consecutive slices (their offsets fence); the others reuse slice 0.
    writers = 1 + sum(name.startswith("floe_batch_writer_") for name in (only or VARIANTS))
    needed = (1 + writers) * (rounds + 1) * (large + small) + large
    env.kafka.create_topic(TOPIC, PARTITIONS)
    print(f"diagnosis: producing {needed:,} records ...", flush=True)
    produce_backlog(env.kafka.bootstrap_servers, TOPIC, needed, EventFactory(), round_robin=PARTITIONS)
    connection = CatalogConnection(
        env.server.url, "default", env.server.admin_client_id, env.server.admin_client_secret
    )
    spark = spark_session(
        "floe-ingest-diagnose", connection, master=master, conf={"spark.driver.memory": driver_memory}
    )
    pipeline = env.control.pipeline()
    assert pipeline is not None
    table = next(t for t in ingest_tables(pipeline) if t.name == floe_table(CLUSTER, TOPIC))
    spark.sql(
        f"CREATE TABLE floe.{CLUSTER}.plain ({SPARK_DDL}, ts TIMESTAMP) USING iceberg "
        "PARTITIONED BY (hours(ts)) TBLPROPERTIES ('write.distribution-mode'='none')"
    )
    writer = BatchWriter(table, env.control)
    jvm = spark_jvm_pid()
    bootstrap = env.kafka.bootstrap_servers
    cursor = [0]  # per-partition offset where floe_batch_writer's next slice starts
    is_good = F.col(ERROR_COLUMN).isNull()

    def plain_rows(size: int) -> DataFrame:
        raw = _slice(spark, bootstrap, 0, size // PARTITIONS, headers=False)
        return (
            raw.selectExpr("CAST(value AS STRING) AS json", "timestamp")
            .select(from_json(col("json"), SPARK_DDL).alias("data"), col("timestamp").alias("ts"))
            .select("data.*", "ts")
        )

    def plain(size: int) -> None:
        plain_rows(size).writeTo(f"floe.{CLUSTER}.plain").append()

    def floe_rows(size: int) -> DataFrame:
        raw = _slice(spark, bootstrap, 0, size // PARTITIONS, headers=True)
        return decode_json(source_columns(raw), table.schema)

    def row_columns() -> list[Column]:
        return [col(f.name) for f in user_fields(table.schema)] + [col(KAFKA_COLUMN)]

    def write_good(decoded: DataFrame) -> None:
        decoded.where(is_good).select(*row_columns()).writeTo(table.spark_name()).append()

    def statistics_of(decoded: DataFrame) -> None:
        # floe's per-partition statistics (ingest/batches.py).
        decoded.groupBy(source("partition")).agg(
            F.max(source("offset")).alias("max_offset"),
            F.max(source("timestamp")).alias("max_ts"),
            F.count_if(is_good).alias("good"),
            F.count_if(~is_good).alias("bad"),
            F.sum(F.when(is_good, F.length(source("value"))).otherwise(0)).alias("bytes"),
        ).collect()

    def floe_decode_write_unfiltered(size: int) -> None:
        # Every row, no `_error IS NULL` filter: the optimizer then has no predicate to push below
        # the parse (pushed down, the filter inlines `from_json` once per required-field check).
        floe_rows(size).select(*row_columns()).writeTo(table.spark_name()).append()

    def floe_decode_write(size: int) -> None:
        write_good(floe_rows(size))

    def floe_decode_stats_write(size: int) -> None:
        decoded = floe_rows(size)
        statistics_of(decoded)
        write_good(decoded)

    def floe_persist_then_filter(size: int) -> None:
        # BatchWriter's steps with the decoded batch persisted *before* any filter: the cached plan
        # parses each value once, and the statistics and the good-row filter read the cache.
        decoded = floe_rows(size).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            statistics_of(decoded)
            write_good(decoded)
        finally:
            decoded.unpersist()

    def floe_observe_write(size: int) -> None:
        observation = Observation(f"diagnosis-{time.monotonic_ns()}")
        observed = floe_rows(size).observe(
            observation,
            F.count(F.lit(1)).alias("records"),
            F.count_if(~is_good).alias("bad"),
            F.sum(F.length(source("value"))).alias("bytes"),
            *[
                F.max(F.when(F.col(source("partition")) == p, F.unix_micros(source("timestamp")))).alias(
                    f"ts_{p}"
                )
                for p in range(PARTITIONS)
            ],
        )
        write_good(observed)
        if observation.get["records"] != size:
            raise RuntimeError(f"observed {observation.get['records']} records of {size}")

    def next_slice(size: int) -> DataFrame:
        per_partition = size // PARTITIONS
        raw = _slice(spark, bootstrap, cursor[0], per_partition, headers=True)
        cursor[0] += per_partition
        return raw

    def floe_two_pass_writer(size: int) -> None:
        t = table
        main = env.control.next_offsets(t.warehouse, t.namespace, t.table, t.topic)
        dlq = env.control.next_offsets(t.warehouse, t.namespace, t.dlq_table, t.topic)
        result = writer._write_in_two_passes(next_slice(size), main, dlq)
        if result.records != size:
            raise RuntimeError(f"BatchWriter (two passes) committed {result.records} of {size}")

    def floe_batch_writer(size: int) -> None:
        one_pass = writer.one_pass_batches
        result = writer.write(next_slice(size))
        if result.records != size:
            raise RuntimeError(f"BatchWriter committed {result.records} of {size}")
        if writer.one_pass_batches != one_pass + 1:
            raise RuntimeError("BatchWriter did not write the batch in one pass")

    def spark_keys(spark_session: SparkSession, value: Column, fields: list[Any]) -> Column:
        # What ingest.decode.undeclared_keys did before floe's JVM scan.
        declared = F.array(*[F.lit(f.name) for f in fields])
        return F.array_except(F.json_object_keys(value.cast("string")), declared)

    def floe_batch_writer_spark_keys(size: int) -> None:
        with mock.patch("ingest.decode.undeclared_keys", spark_keys):
            floe_batch_writer(size)

    def floe_batch_writer_filtered(size: int) -> None:
        with mock.patch("ingest.batches.starts_after", return_value=False):
            floe_batch_writer(size)

    variants: dict[str, Callable[[int], None]] = {
        "plain": plain,
        "floe_decode_write_unfiltered": floe_decode_write_unfiltered,
        "floe_decode_write": floe_decode_write,
        "floe_decode_stats_write": floe_decode_stats_write,
        "floe_persist_then_filter": floe_persist_then_filter,
        "floe_observe_write": floe_observe_write,
        "floe_two_pass_writer": floe_two_pass_writer,
        "floe_batch_writer": floe_batch_writer,
        "floe_batch_writer_spark_keys": floe_batch_writer_spark_keys,
        "floe_batch_writer_filtered": floe_batch_writer_filtered,
    }
    if only:
        variants = {name: run for name, run in variants.items() if name in only}
    timings: dict[str, dict[str, list[tuple[float, float]]]] = {
        size: {name: [] for name in variants} for size in sizes
    }
    plans = {
        "from_json_in_plain_plan": _plan(plain_rows(4)).count("from_json("),
        "from_json_in_floe_good_rows_plan": _plan(floe_rows(4).where(is_good)).count("from_json("),
    }
    try:
        for round_index in range(rounds + 1):  # round 0 warms the JIT up, unmeasured
            for size_name, size in sizes.items():
                for name, run in variants.items():
                    cpu0, py0, wall0 = cpu_seconds([jvm]), time.process_time(), time.perf_counter()
                    run(size)
                    wall = time.perf_counter() - wall0
                    cpu = cpu_seconds([jvm]) - cpu0 + time.process_time() - py0
                    if round_index:
                        timings[size_name][name].append((wall, cpu))
                    print(
                        f"  diagnosis round {round_index} {size_name:5} {name:28} "
                        f"wall {wall:6.2f} s  cpu {cpu:6.2f} s",
                        flush=True,
                    )
    finally:
        spark.stop()
    return {
        "settings": {"large": large, "small": small, "rounds": rounds, "master": master},
        "plans": plans,
        "variants": {
            size_name: {
                name: {
                    "records": sizes[size_name],
                    "wall_s_median": round(statistics.median(w for w, _ in runs), 2),
                    "cpu_s_median": round(statistics.median(c for _, c in runs), 2),
                    "records_per_s": round(sizes[size_name] / statistics.median(w for w, _ in runs)),
                }
                for name, runs in by_variant.items()
            }
            for size_name, by_variant in timings.items()
        },
    }


def _plan(frame: DataFrame) -> str:
    """The executed plan's text (how often an expression is evaluated shows there)."""
    return str(frame._jdf.queryExecution().executedPlan().toString())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ingest.diagnose", description=__doc__)
    parser.add_argument("--large", type=int, default=100_000, help="records per large batch")
    parser.add_argument("--small", type=int, default=2_000, help="records per small batch")
    parser.add_argument("--rounds", type=int, default=2, help="measured rounds (after one warm-up)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="2g")
    parser.add_argument(
        "--only", nargs="+", choices=list(VARIANTS), default=[], help="run these variants only"
    )
    parser.add_argument("--output", type=Path, default=None, help="write the results as JSON here")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="floe-ingest-diagnose-"))
    try:
        with environment(work, "1g") as env:
            apply_pipeline(
                env.server,
                {
                    "source_clusters": [diagnosis_cluster(env.kafka.bootstrap_servers)],
                    "tables": [diagnosis_table()],
                },
            )
            result = run_diagnosis(
                env,
                large=args.large,
                small=args.small,
                rounds=args.rounds,
                master=args.master,
                driver_memory=args.driver_memory,
                only=tuple(args.only),
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result, indent=2))
    if args.output:
        args.output.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
