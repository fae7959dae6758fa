"""Decoding the same logical records as Protobuf, JSON and Avro through floe's decode paths in one Spark
session (local[2]), one command: `python -m benchmarks.protobuf_decode [--records N] [--repeat R]`.

Each path turns a cached DataFrame of raw Kafka rows (the Kafka source's columns, values only differing)
into the table's rows and `_error`, written to Spark's `noop` sink, so every column is computed:

- `json`: floe's JSON path (`from_json` in the JVM), the peer.
- `avro`: floe's inline Avro path (`from_avro` in the JVM), Confluent framing.
- `protobuf`: floe's path (`ingest.protobuf_decode`): its Java UDF (ingest/jvm) parses each value with
  protobuf-java in the JVM and fills the table's struct; no Python on the executors.
- `protobuf-python`: the path that replaced (`benchmarks.protobuf_decode.python_decoder`): upb parses
  each value in the Python workers (`mapInArrow`), compiled converters fill one Arrow column per field.
- `protobuf-python-rows`: the same parse, but one dict per record and `pa.array(rows)` (row-wise).
- `protobuf-python-via-json`: the Python workers turn each value into JSON and the JVM reads it with
  floe's JSON path (reusing `from_json`).

Also the Python decoder alone (no Spark) on the same values (`python-alone`); `--paths` picks some of
them. Each path runs once untimed (warm-up), then `--repeat` times; the best run counts. Results to
benchmarks/results/protobuf-decode.{json,md}.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyiceberg.schema import Schema
from pyiceberg.types import (
    BooleanType,
    DoubleType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestamptzType,
)

from benchmarks.protobuf_decode import python_decoder
from benchmarks.protobuf_decode.python_decoder import Decoder, arrow_record_type, reader
from benchmarks.protobuf_decode.wire_format import encode_message_indexes, split_confluent
from catalog.pipelines.protobuf import build_pool, descriptor_set
from ingest.decode import ERROR_COLUMN, RECORD_COLUMN, decode_avro, decode_json, source, source_columns
from ingest.protobuf_decode import WriterSchema, decode_protobuf_table

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

RESULTS = Path(__file__).resolve().parents[1] / "results"
SCHEMA_ID = 1
PROTO = """
syntax = "proto3";
package bench;
import "google/protobuf/timestamp.proto";

enum Kind { UNKNOWN = 0; VIEW = 1; CLICK = 2; BUY = 3; }
message Event {
  int64 id = 1;
  string user = 2;
  double score = 3;
  google.protobuf.Timestamp at = 4;
  Device device = 5;
  repeated string tags = 6;
  map<string, string> attributes = 7;
  Kind kind = 8;
  bool active = 9;
  int32 amount = 10;
}
message Device { string os = 1; optional int32 version = 2; }
"""
FIELDS = [
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "user", StringType(), required=True),
    NestedField(3, "score", DoubleType(), required=False),
    NestedField(4, "at", TimestamptzType(), required=False),
    NestedField(
        5,
        "device",
        StructType(
            NestedField(6, "os", StringType(), required=True),
            NestedField(7, "version", IntegerType(), required=False),
        ),
        required=False,
    ),
    NestedField(8, "tags", ListType(9, StringType(), element_required=True), required=False),
    NestedField(
        10, "attributes", MapType(11, StringType(), 12, StringType(), value_required=True), required=False
    ),
    NestedField(13, "kind", StringType(), required=False),
    NestedField(14, "active", BooleanType(), required=False),
    NestedField(15, "amount", IntegerType(), required=False),
]
KINDS = ["UNKNOWN", "VIEW", "CLICK", "BUY"]
AVRO_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "Event",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "user", "type": "string"},
        {"name": "score", "type": ["null", "double"], "default": None},
        {
            "name": "at",
            "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}],
            "default": None,
        },
        {
            "name": "device",
            "type": [
                "null",
                {
                    "type": "record",
                    "name": "Device",
                    "fields": [
                        {"name": "os", "type": "string"},
                        {"name": "version", "type": ["null", "int"], "default": None},
                    ],
                },
            ],
            "default": None,
        },
        {"name": "tags", "type": ["null", {"type": "array", "items": "string"}], "default": None},
        {"name": "attributes", "type": ["null", {"type": "map", "values": "string"}], "default": None},
        {"name": "kind", "type": ["null", "string"], "default": None},
        {"name": "active", "type": ["null", "boolean"], "default": None},
        {"name": "amount", "type": ["null", "int"], "default": None},
    ],
}


def logical_record(i: int) -> dict[str, Any]:
    """The i-th record, format-neutral (`at` in microseconds since the epoch)."""
    return {
        "id": i,
        "user": f"user-{i % 5000:05d}",
        "score": i / 7,
        "at": 1_795_000_000_000_000 + i * 1000,
        "device": {"os": ("linux", "ios", "android")[i % 3], "version": i % 17},
        "tags": [f"t{i % 11}", "bench"],
        "attributes": {"campaign": f"c{i % 97}", "page": f"/p/{i % 1000}"},
        "kind": KINDS[i % 4],
        "active": i % 2 == 0,
        "amount": i % 10_000,
    }


def protobuf_values(count: int, writer: WriterSchema) -> list[bytes]:
    from google.protobuf import descriptor_pb2, message_factory

    pool = build_pool(descriptor_pb2.FileDescriptorSet.FromString(writer.descriptor_set))
    event = message_factory.GetMessageClass(pool.FindMessageTypeByName("bench.Event"))
    prefix = b"\x00" + SCHEMA_ID.to_bytes(4, "big") + encode_message_indexes([0])
    values = []
    for i in range(count):
        r = logical_record(i)
        at = r.pop("at")
        message = event(**r)
        message.at.seconds, message.at.nanos = divmod(at, 1_000_000)
        message.at.nanos *= 1000
        values.append(prefix + message.SerializeToString())
    return values


def json_values(count: int) -> list[bytes]:
    import datetime as dt

    values = []
    for i in range(count):
        r = logical_record(i)
        r["at"] = dt.datetime.fromtimestamp(r["at"] / 1e6, dt.UTC).isoformat()
        values.append(json.dumps(r, separators=(",", ":")).encode())
    return values


def avro_values(count: int) -> list[bytes]:
    import fastavro

    schema = fastavro.parse_schema(AVRO_SCHEMA)
    prefix = b"\x00" + SCHEMA_ID.to_bytes(4, "big")
    values = []
    for i in range(count):
        out = io.BytesIO()
        fastavro.schemaless_writer(out, schema, logical_record(i))
        values.append(prefix + out.getvalue())
    return values


def raw_frame(spark: SparkSession, values: list[bytes], partitions: int) -> DataFrame:
    """Cached rows shaped as the Kafka source's, with these values."""
    import datetime as dt

    import pyarrow as pa

    count = len(values)
    now = dt.datetime.now(dt.UTC)
    table = pa.table(
        {
            "key": pa.array([str(i).encode() for i in range(count)], pa.binary()),
            "value": pa.array(values, pa.binary()),
            "topic": pa.array(["bench"] * count),
            "partition": pa.array([i % partitions for i in range(count)], pa.int32()),
            "offset": pa.array(range(count), pa.int64()),
            "timestamp": pa.array([now] * count, pa.timestamp("us", tz="UTC")),
            "timestampType": pa.array([0] * count, pa.int32()),
            "headers": pa.array(
                [[] for _ in range(count)],
                pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])),
            ),
        }
    )
    # Under floe's internal names, as BatchWriter hands them to the decoders.
    frame = source_columns(spark.createDataFrame(table)).repartition(partitions)
    frame.cache()
    frame.count()
    return frame


def rows_variant(raw: DataFrame, writer: WriterSchema) -> DataFrame:
    """The row-wise variant: one dict per record, `pa.array(rows)`."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as st

    from ingest.decode import _finish, required_fields_error, spark_type

    record = st.StructType([st.StructField(f.name, spark_type(f.field_type), True) for f in FIELDS])
    schema = st.StructType([*raw.schema.fields, st.StructField(RECORD_COLUMN, record, True)])

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa
        from google.protobuf import descriptor_pb2, message_factory

        pool = build_pool(descriptor_pb2.FileDescriptorSet.FromString(writer.descriptor_set))
        descriptor = pool.FindMessageTypeByName("bench.Event")
        event = message_factory.GetMessageClass(descriptor)
        readers = [(f.name, reader(descriptor, f, f.name)) for f in FIELDS]
        record_type = arrow_record_type(FIELDS)
        for batch in batches:
            rows = []
            for value in batch.column(source("value")).to_pylist():
                message = event.FromString(value[split_confluent(value)[2] :])
                rows.append({name: read(message) for name, read in readers})
            yield pa.RecordBatch.from_arrays(
                [*batch.columns, pa.array(rows, type=record_type)], names=[*batch.schema.names, RECORD_COLUMN]
            )

    decoded = raw.mapInArrow(run, schema)
    schema_obj = Schema(*FIELDS)
    return _finish(decoded, FIELDS, required_fields_error(F.col(RECORD_COLUMN), schema_obj))


def via_json_variant(raw: DataFrame, writer: WriterSchema) -> DataFrame:
    """Protobuf → JSON text in the Python workers (the converters' values, `json.dumps`), then floe's
    JSON path (`from_json`) in the JVM."""
    from pyspark.sql import types as st

    schema = st.StructType(list(raw.schema.fields))

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import datetime as dt

        import pyarrow as pa
        from google.protobuf import descriptor_pb2, message_factory

        pool = build_pool(descriptor_pb2.FileDescriptorSet.FromString(writer.descriptor_set))
        descriptor = pool.FindMessageTypeByName("bench.Event")
        event = message_factory.GetMessageClass(descriptor)
        readers = [(f.name, reader(descriptor, f, f.name)) for f in FIELDS]
        epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
        for batch in batches:
            texts = []
            for value in batch.column(source("value")).to_pylist():
                message = event.FromString(value[split_confluent(value)[2] :])
                row = {name: read(message) for name, read in readers}
                if row["at"] is not None:  # JSON carries timestamps as ISO 8601 text
                    row["at"] = (epoch + dt.timedelta(microseconds=row["at"])).isoformat()
                texts.append(json.dumps(row, separators=(",", ":")).encode())
            columns = [
                pa.array(texts, pa.binary()) if name == source("value") else column
                for name, column in zip(batch.schema.names, batch.columns, strict=True)
            ]
            yield pa.RecordBatch.from_arrays(columns, names=batch.schema.names)

    return decode_json(raw.mapInArrow(run, schema), Schema(*FIELDS))


def measure(
    name: str, frame: Callable[[], DataFrame], records: int, value_bytes: int, repeat: int
) -> dict[str, Any]:
    from pyspark.sql import functions as F

    frame().write.format("noop").mode("overwrite").save()  # warm-up, untimed (JIT, Python workers)
    runs = []
    for _ in range(repeat):
        started = time.perf_counter()
        decoded = frame()
        decoded.write.format("noop").mode("overwrite").save()
        runs.append(time.perf_counter() - started)
    bad = frame().where(F.col(ERROR_COLUMN).isNotNull()).count()
    best = min(runs)
    return {
        "path": name,
        "records": records,
        "dead_letters": bad,
        "seconds": [round(r, 3) for r in runs],
        "best_seconds": round(best, 3),
        "records_per_second": round(records / best),
        "mib_per_second": round(value_bytes / best / 2**20, 2),
        "value_mib": round(value_bytes / 2**20, 2),
    }


def python_only(values: list[bytes], writer: WriterSchema, repeat: int) -> dict[str, Any]:
    """The decoder alone: values → Arrow columns, no Spark."""
    import pyarrow as pa

    runs = []
    record_type = arrow_record_type(FIELDS)
    for _ in range(repeat):
        decoder = Decoder(FIELDS, writers={SCHEMA_ID: writer})
        started = time.perf_counter()
        columns, _, _ = decoder.decode(values)
        for i, column in enumerate(columns):
            pa.array(column, type=record_type.field(i).type)
        runs.append(time.perf_counter() - started)
    best = min(runs)
    return {
        "path": "protobuf, Python decoder alone (no Spark)",
        "records": len(values),
        "best_seconds": round(best, 3),
        "records_per_second": round(len(values) / best),
        "mib_per_second": round(sum(map(len, values)) / best / 2**20, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS / "protobuf-decode")
    parser.add_argument("--paths", nargs="*", help="measure only these paths (default: all)")
    args = parser.parse_args(argv)

    from runtime.spark import CatalogConnection, spark_session

    files, main_file = descriptor_set(PROTO, {})
    writer = WriterSchema.of(files, main_file)
    schema = Schema(*FIELDS)
    spark = spark_session(
        "floe-protobuf-bench",
        CatalogConnection("http://127.0.0.1:9", "default", "unused", "unused"),
        master="local[2]",
        conf={
            "spark.driver.memory": "2g",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.defaultCatalog": "spark_catalog",
        },
    )
    results: list[dict[str, Any]] = []
    load_before = os.getloadavg()
    try:
        proto = protobuf_values(args.records, writer)
        data = {"json": json_values(args.records), "avro": avro_values(args.records), "protobuf": proto}
        frames = {name: raw_frame(spark, values, args.partitions) for name, values in data.items()}
        sizes = {name: sum(map(len, values)) for name, values in data.items()}
        n = args.records
        paths: list[tuple[str, str, Callable[[], DataFrame]]] = [
            ("json", "json", lambda: decode_json(frames["json"], schema)),
            (
                "avro",
                "avro",
                lambda: decode_avro(frames["avro"], schema, AVRO_SCHEMA, confluent_framing=True),
            ),
            (
                "protobuf",
                "protobuf",
                lambda: decode_protobuf_table(frames["protobuf"], schema, writers={SCHEMA_ID: writer}),
            ),
            (
                "protobuf-python",
                "protobuf",
                lambda: python_decoder.decode_protobuf_table(
                    frames["protobuf"], schema, writers={SCHEMA_ID: writer}
                ),
            ),
            ("protobuf-python-rows", "protobuf", lambda: rows_variant(frames["protobuf"], writer)),
            ("protobuf-python-via-json", "protobuf", lambda: via_json_variant(frames["protobuf"], writer)),
        ]
        for name, data_name, build in paths:
            if args.paths and name not in args.paths:
                continue
            result = measure(name, build, n, sizes[data_name], args.repeat)
            print(json.dumps(result), flush=True)
            results.append(result)
        if not args.paths or "python-alone" in args.paths:
            alone = python_only(proto, writer, args.repeat)
            print(json.dumps(alone), flush=True)
            results.append(alone)
    finally:
        spark.stop()
    report = {
        "command": "python -m benchmarks.protobuf_decode " + " ".join(argv or []),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            # The machine is shared: busy neighbours show here (1, 5 and 15 minute averages).
            "load_average_before": [round(x, 2) for x in load_before],
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
        },
        "spark_master": "local[2]",
        "records": args.records,
        "results": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    args.out.with_suffix(".md").write_text(markdown(report))
    return 0


def markdown(report: dict[str, Any]) -> str:
    lines = [
        "# Protobuf decode paths (benchmarks/protobuf_decode)",
        "",
        f"`{report['command'].strip()}` — {report['records']:,} records of a 10-field event, Spark "
        f"{report['spark_master']}, {report['machine']['cpus']} CPUs (shared), after a warm-up run, "
        "best of the runs.",
        "",
        *(
            [
                f"Load average before {m['load_average_before']}, after {m['load_average_after']} "
                "(other users of the machine included)."
            ]
            if "load_average_before" in (m := report["machine"])
            else []
        ),
        "",
        "| path | records/s | MiB/s of values | best s | runs (s) | dead letters |",
        "|---|---:|---:|---:|---|---:|",
    ]
    for r in report["results"]:
        runs = ", ".join(str(s) for s in r.get("seconds", [])) or "-"
        lines.append(
            f"| {r['path']} | {r['records_per_second']:,} | {r['mib_per_second']} | {r['best_seconds']} | "
            f"{runs} | {r.get('dead_letters', '-')} |"
        )
    return "\n".join(lines) + "\n"
