"""The ingestion benchmark run: floe's `floe ingest` and a plain Spark Structured Streaming job, measured
side by side on the same broker, catalog and machine, and written to `ingest.json` and `ingest.md`.

1. Throughput: a backlog of 1 KiB JSON records is produced first (so the producer does not compete with
   the ingesters for CPU), and the same records as raw Avro and raw Protobuf to topics of their own;
   then, in rounds that alternate which run goes first, each ingester is started alone on the whole
   backlog into a fresh table (floe on each format, the plain job on JSON). The rate is measured between
   the table's first and last snapshot (Iceberg's own commit timestamps), which leaves Spark's start-up
   out.
2. Freshness: each ingester runs alone while records are produced at a steady rate, each carrying its
   produce time; a DuckDB reader polls the table through floe's REST catalog and notes when every
   record first becomes visible.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import itertools
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import NoSuchTableError

from benchmarks.ingest import report
from benchmarks.ingest.diagnose import diagnosis_cluster, diagnosis_table, run_diagnosis
from benchmarks.ingest.environment import Environment, apply_pipeline, environment, floe_table
from benchmarks.ingest.events import (
    AVRO,
    FLOE_FIELDS,
    FORMATS,
    JSON,
    PROTO,
    PROTO_MESSAGE,
    PROTOBUF,
    RECORD_BYTES,
    EventFactory,
    Reencoder,
)
from benchmarks.ingest.freshness import VisibilityProbe
from benchmarks.ingest.ingesters import FLOE, PLAIN, FloeIngester, Ingester, PlainJob, SparkSettings
from benchmarks.ingest.producing import ProduceResult, SteadyProducer, produce_backlogs
from benchmarks.ingest.sampling import CpuSampler

RESULTS_DIR = Path(__file__).resolve().parent.parent / "results"
PARTITIONS = 4
PLAIN_NAMESPACE = "bench"
BACKLOG_TOPICS = {JSON: "bench.events", AVRO: "bench.events_avro", PROTOBUF: "bench.events_protobuf"}
BACKLOG_TOPIC = BACKLOG_TOPICS[JSON]
FRESHNESS_TOPICS = {FLOE: "bench.fresh_floe", PLAIN: "bench.fresh_plain"}
FRESHNESS_CLUSTER = "fresh"
STARTUP_TIMEOUT_S = 240.0


def throughput_cluster(round_index: int, source_format: str = JSON) -> str:
    """floe's source cluster (hence namespace) of a round and format: each round ingests the backlog
    afresh, and `floe ingest --cluster` runs one format's table alone."""
    suffix = "" if source_format == JSON else f"_{source_format}"
    return f"tput{round_index + 1}{suffix}"


def variant(system: str, source_format: str) -> str:
    """The key of a (system, format) pair in the results: `floe` and `plain` are the JSON runs."""
    return system if source_format == JSON else f"{system}-{source_format}"


def _poll(sampler: CpuSampler, seconds: float) -> None:
    sampler.sample()
    time.sleep(seconds)


# -- throughput -------------------------------------------------------------------------------------


def _snapshots(catalog: RestCatalog, identifier: str) -> list[tuple[float, int, int]]:
    """(commit time, total records, added records) of every snapshot, oldest first."""
    table = catalog.load_table(identifier)
    rows = []
    for snapshot in table.metadata.snapshots:
        summary = snapshot.summary
        total = int(summary.get("total-records") or 0) if summary else 0
        added = int(summary.get("added-records") or 0) if summary else 0
        rows.append((snapshot.timestamp_ms / 1000, total, added))
    return sorted(rows)


def _data_file_bytes(catalog: RestCatalog, identifier: str) -> int:
    """The total size of the table's live data files (its current snapshot's `total-files-size`)."""
    snapshot = catalog.load_table(identifier).current_snapshot()
    summary = snapshot.summary if snapshot is not None else None
    return int(summary.get("total-files-size") or 0) if summary is not None else 0


# What a reader pays for the writer's settings: DuckDB queries over the whole table after the ingester
# stopped (a column aggregate, a group-by, the wide text column, one row by `seq`).
READER_QUERIES = {
    "sum_amount": "SELECT count(*), sum(amount) FROM {table}",
    "group_by_type": "SELECT event_type, count(*), avg(amount) FROM {table} GROUP BY event_type",
    "text_column": "SELECT max(length(properties)) FROM {table}",
    "one_row": "SELECT CAST(t AS VARCHAR) FROM {table} t WHERE seq = 123457",
}


def reader_query_ms(env: Environment, identifier: str, duckdb_dir: Path, repeat: int = 3) -> dict[str, float]:
    """The median wall milliseconds of each of READER_QUERIES on the table, DuckDB with two threads
    attached to floe (each query after one warm-up run, which also loads the table's metadata)."""
    duck = env.duckdb(duckdb_dir, threads=2)
    timings: dict[str, float] = {}
    try:
        for name, query in READER_QUERIES.items():
            sql = query.format(table=f"floe.{identifier}")
            duck.execute(sql).fetchall()
            runs = []
            for _ in range(repeat):
                started = time.perf_counter()
                duck.execute(sql).fetchall()
                runs.append((time.perf_counter() - started) * 1000)
            timings[name] = round(statistics.median(runs), 1)
    finally:
        duck.close()
    return timings


def _committed_records(env: Environment, system: str, identifier: str, topic: str) -> int:
    """Records committed so far: floe's Kafka offsets for floe, the table's snapshot for the plain job."""
    namespace, table = identifier.split(".")
    if system == FLOE:
        return sum(env.control.next_offsets("default", (namespace,), table, topic).values())
    try:
        snapshot = env.catalog.load_table(identifier).current_snapshot()
    except NoSuchTableError:
        return 0
    if snapshot is None or snapshot.summary is None:
        return 0
    return int(snapshot.summary.get("total-records") or 0)


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


def measure_throughput(
    env: Environment,
    ingester: Ingester,
    identifier: str,
    backlog: ProduceResult,
    round_index: int,
    timeout_s: float,
    source_format: str = JSON,
) -> dict[str, Any]:
    """Run one ingester on the whole backlog of one format; the rate between its first and last commit."""
    topic = BACKLOG_TOPICS[source_format]
    print(
        f"round {round_index + 1}: {ingester.kind} ingests {backlog.records:,} {source_format} records ...",
        flush=True,
    )
    sampler = env.sampler(ingester)
    started = time.time()
    ingester.start()
    deadline = time.monotonic() + timeout_s
    committed = 0
    try:
        while committed < backlog.records:
            if ingester.exited():
                raise RuntimeError(f"{ingester.kind} exited early:\n{ingester.log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{ingester.kind} committed {committed:,} of {backlog.records:,} records in "
                    f"{timeout_s:g} s:\n{ingester.log_tail()}"
                )
            _poll(sampler, 0.5)
            committed = _committed_records(env, ingester.kind, identifier, topic)
        finished = time.time()
        sampler.sample()
        # floe's metrics endpoint goes away with it; the plain job writes its last progress as it stops.
        notes = _ingester_notes(ingester) if isinstance(ingester, FloeIngester) else {}
    finally:
        ingester.stop()
    notes = notes or _ingester_notes(ingester)
    snapshots = _snapshots(env.catalog, identifier)
    first, last = snapshots[0], snapshots[-1]
    data_file_bytes = _data_file_bytes(env.catalog, identifier)
    reader_ms = reader_query_ms(env, identifier, env.work / "duckdb-reader")
    window_s = last[0] - first[0]
    window_records = last[1] - first[1]
    bytes_per_record = backlog.value_bytes / backlog.records
    rate = window_records / window_s if window_s > 0 else 0.0
    intervals = [b[0] - a[0] for a, b in itertools.pairwise(snapshots)]
    cores = sampler.cores(first[0], last[0])
    ingester_core_s = cores.get("ingester", 0.0) * window_s
    result: dict[str, Any] = {
        "system": ingester.kind,
        "format": source_format,
        "variant": variant(ingester.kind, source_format),
        "round": round_index + 1,
        "table": identifier,
        "records": last[1],
        "startup_s": round(first[0] - started, 1),
        "first_batch_records": first[1],
        "window_s": round(window_s, 2),
        "window_records": window_records,
        "records_per_s": round(rate, 1),
        "mib_per_s": round(rate * bytes_per_record / 2**20, 2),
        "commits": len(snapshots),
        "commit_interval_median_s": _round(statistics.median(intervals) if intervals else None),
        "commit_interval_p90_s": _round(_percentile(intervals, 90)),
        "records_per_commit_median": int(statistics.median([s[2] for s in snapshots])),
        "all_committed_after_s": round(finished - started, 1),
        "cpu_cores": cores,
        "ingester_cpu_s_per_100k_records": (
            round(ingester_core_s / window_records * 100_000, 2) if window_records else None
        ),
        # What readers pay for the writer's settings: the table's data files, bytes per record.
        "data_file_bytes": data_file_bytes,
        "data_file_bytes_per_record": round(data_file_bytes / last[1], 1) if last[1] else None,
        "duckdb_query_ms": reader_ms,
        "notes": notes,
    }
    print(
        f"  {result['variant']}: {result['records_per_s']:,.0f} records/s = {result['mib_per_s']} MiB/s over "
        f"{window_s:.1f} s ({len(snapshots)} commits, start-up {result['startup_s']} s); cores {cores}; "
        f"{result['ingester_cpu_s_per_100k_records']} ingester CPU s per 100k records; "
        f"data files {data_file_bytes / 2**20:.1f} MiB; DuckDB ms {reader_ms}",
        flush=True,
    )
    return result


def _round(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def _ingester_notes(ingester: Ingester) -> dict[str, Any]:
    """Where the time goes inside the ingester: floe's batch histogram, Spark's per-batch timings."""
    if isinstance(ingester, FloeIngester):
        batches = ingester.batch_seconds()
        count = batches.get("count", 0)
        return {
            "floe_ingest_batch_seconds": {
                "count": count,
                "sum": round(batches.get("sum", 0.0), 2),
                "mean": round(batches["sum"] / count, 2) if count else None,
                "buckets": batches.get("buckets", {}),
            }
        }
    if isinstance(ingester, PlainJob):
        return {"spark_progress": summarize_progress(ingester.progress())}
    return {}


def summarize_progress(progress: list[dict[str, Any]]) -> dict[str, Any]:
    """Median and total of Spark's per-batch durations (ms) over the batches that read records."""
    batches = [p for p in progress if int(p.get("numInputRows") or 0) > 0]
    if not batches:
        return {"batches": 0}
    keys = sorted({k for p in batches for k in (p.get("durationMs") or {})})
    return {
        "batches": len(batches),
        "rows_median": int(statistics.median(int(p["numInputRows"]) for p in batches)),
        "duration_ms_median": {
            k: int(statistics.median(int(p["durationMs"].get(k, 0)) for p in batches)) for k in keys
        },
        "duration_ms_total": {k: sum(int(p["durationMs"].get(k, 0)) for p in batches) for k in keys},
    }


# -- freshness --------------------------------------------------------------------------------------


def measure_freshness(
    env: Environment,
    ingester: Ingester,
    identifier: str,
    topic: str,
    *,
    rate: float,
    warmup_s: float,
    duration_s: float,
    duckdb_dir: Path,
) -> dict[str, Any]:
    """Produce `rate` records/s while `ingester` runs; freshness of the records produced during
    `duration_s` seconds, starting `warmup_s` after the first record became visible."""
    print(f"freshness: {ingester.kind} at {rate:g} records/s for {duration_s:g} s ...", flush=True)
    duck = env.duckdb(duckdb_dir)
    probe = VisibilityProbe(duck, f"floe.{identifier}")
    producer = SteadyProducer(env.kafka.bootstrap_servers, topic, rate, EventFactory(seed=11))
    sampler = env.sampler(ingester)
    started = time.time()
    ingester.start()
    producer.start()
    last_sample = 0.0
    window: tuple[float, float] | None = None
    produced = None
    try:
        while True:
            poll_started = time.time()
            if ingester.exited():
                raise RuntimeError(f"{ingester.kind} exited early:\n{ingester.log_tail()}")
            probe.poll()
            if poll_started - last_sample >= 0.5:
                sampler.sample()
                last_sample = poll_started
            first = probe.visibility.first_visible_at
            if first is None and poll_started - started > STARTUP_TIMEOUT_S:
                raise RuntimeError(
                    f"nothing visible after {STARTUP_TIMEOUT_S:g} s ({probe.visibility.last_error}):\n"
                    f"{ingester.log_tail()}"
                )
            if first is not None and window is None:
                window = (first + warmup_s, first + warmup_s + duration_s)
            if window is not None and produced is None and poll_started > window[1] + 0.5:
                produced = producer.stop()
            if produced is not None:
                in_window = _window_seqs(producer.sent_times, window)  # type: ignore[arg-type]
                if all(s in probe.visibility.seen_at for s in in_window):
                    break
                if poll_started > window[1] + 60:  # type: ignore[index]
                    break
            time.sleep(max(0.0, 0.2 - (time.time() - poll_started)))
        sampler.sample()
        notes = _ingester_notes(ingester) if isinstance(ingester, FloeIngester) else {}
    finally:
        ingester.stop()
        duck.close()
        if produced is None:
            with contextlib.suppress(Exception):
                producer.stop()
    assert window is not None
    notes = notes or _ingester_notes(ingester)
    seqs = _window_seqs(producer.sent_times, window)
    freshness = probe.visibility.freshness(seqs)
    snapshots = [s for s in _snapshots(env.catalog, identifier) if window[0] <= s[0] <= window[1]]
    intervals = [b[0] - a[0] for a, b in itertools.pairwise(snapshots)]
    polls = probe.visibility.poll_seconds
    result: dict[str, Any] = {
        "system": ingester.kind,
        "table": identifier,
        "rate_per_s": rate,
        "startup_s": round((probe.visibility.first_visible_at or started) - started, 1),
        "warmup_s": warmup_s,
        "window_s": duration_s,
        "records": len(seqs),
        "missing": len(seqs) - len(freshness),
        "freshness_s": {
            "p50": _round(_percentile(freshness, 50)),
            "p90": _round(_percentile(freshness, 90)),
            "p99": _round(_percentile(freshness, 99)),
            "max": _round(max(freshness) if freshness else None),
            "min": _round(min(freshness) if freshness else None),
        },
        "commits_in_window": len(snapshots),
        "commit_interval_median_s": _round(statistics.median(intervals) if intervals else None),
        "commit_interval_max_s": _round(max(intervals) if intervals else None),
        "reader_poll_s": {"p50": _round(_percentile(polls, 50), 3), "p99": _round(_percentile(polls, 99), 3)},
        "reader_poll_errors": probe.visibility.poll_errors,
        "cpu_cores": sampler.cores(*window),
        "notes": notes,
    }
    print(
        f"  {ingester.kind}: freshness p50 {result['freshness_s']['p50']} s, "
        f"p99 {result['freshness_s']['p99']} s over {len(seqs):,} records "
        f"({result['missing']} missing); cores {result['cpu_cores']}",
        flush=True,
    )
    return result


def _window_seqs(sent_times: list[float], window: tuple[float, float]) -> list[int]:
    return [seq for seq, sent in enumerate(sent_times) if window[0] <= sent <= window[1]]


# -- the run ----------------------------------------------------------------------------------------


def format_settings(source_format: str) -> dict[str, Any]:
    """floe.yaml's format keys of a backlog table: inline schemas, raw values (no Confluent prefix)."""
    if source_format == AVRO:
        return {"source_format": "avro", "schema_mode": "inline", "avro_framing": "raw"}
    if source_format == PROTOBUF:
        return {
            "source_format": "protobuf",
            "schema_mode": "inline",
            "protobuf_framing": "raw",
            "protobuf": {"message": PROTO_MESSAGE, "schema": PROTO},
        }
    return {"source_format": "json", "schema_mode": "inline"}


def pipeline_config(
    bootstrap: str, rounds: int, diagnosis: bool, formats: tuple[str, ...] = (JSON,)
) -> dict[str, Any]:
    """floe.yaml: one source cluster per throughput round and format (each its own table of that
    format's backlog topic), one for freshness and one for the diagnosis; every table hour-partitioned
    on the Kafka timestamp."""
    host, port = bootstrap.split(":")
    runs = [(r, f) for r in range(rounds) for f in formats]
    clusters = [throughput_cluster(r, f) for r, f in runs] + [FRESHNESS_CLUSTER]
    table: dict[str, Any] = {
        "source_format": "json",
        "schema_mode": "inline",
        "partitioning_scheme": "hour",
        "schema": {"fields": FLOE_FIELDS},
    }
    config: dict[str, Any] = {
        "source_clusters": [
            {"name": name, "bootstrap_brokers": [{"hostname": host, "port": int(port)}]} for name in clusters
        ],
        "tables": [
            {
                "source_cluster_name": throughput_cluster(r, f),
                "source_topic": BACKLOG_TOPICS[f],
                **table,
                **format_settings(f),
            }
            for r, f in runs
        ]
        + [{"source_cluster_name": FRESHNESS_CLUSTER, "source_topic": FRESHNESS_TOPICS[FLOE], **table}],
    }
    if diagnosis:
        config["source_clusters"].append(diagnosis_cluster(bootstrap))
        config["tables"].append(diagnosis_table())
    return config


def wait_for_quiet(env: Environment, seconds: float) -> dict[str, float]:
    """Let the previous JVM's exit settle; the machine's load meanwhile (`other`: the shared machine's
    other users, with this benchmark's idle broker and catalog counted apart)."""
    sampler = env.sampler(None)
    sampler.sample()
    time.sleep(seconds)
    sampler.sample()
    return sampler.cores(sampler.times[0], sampler.times[-1])


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ingest", description=__doc__)
    parser.add_argument(
        "--records", type=int, default=2_000_000, help="backlog records (1 KiB JSON, per format)"
    )
    parser.add_argument("--rounds", type=int, default=2, help="throughput rounds, alternating who goes first")
    parser.add_argument("--records-per-batch", type=int, default=SparkSettings.records_per_batch)
    parser.add_argument("--commit-interval", type=float, default=SparkSettings.commit_interval_s)
    parser.add_argument("--master", default=SparkSettings.master)
    parser.add_argument("--driver-memory", default=SparkSettings.driver_memory)
    parser.add_argument("--freshness-rate", type=float, default=500.0, help="records per second")
    parser.add_argument("--freshness-seconds", type=float, default=60.0, help="measured seconds")
    parser.add_argument(
        "--freshness-warmup", type=float, default=15.0, help="seconds after the first visible record"
    )
    parser.add_argument(
        "--diagnosis-rounds",
        type=int,
        default=2,
        help="rounds of the batch-cost diagnosis (benchmarks.ingest.diagnose; 0: skip it)",
    )
    parser.add_argument(
        "--diagnosis-small", type=int, default=2_000, help="records of the diagnosis's small batches"
    )
    parser.add_argument(
        "--formats",
        default=",".join(FORMATS),
        help="backlog formats floe ingests, comma-separated (the same records; the plain job reads JSON)",
    )
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-freshness", action="store_true")
    parser.add_argument("--only", choices=[FLOE, PLAIN], default=None, help="measure one system only")
    parser.add_argument("--kafka-heap", default="1g")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per throughput run")
    parser.add_argument("--output", type=Path, default=RESULTS_DIR, help="directory for the results")
    parser.add_argument("--name", default="ingest", help="results file name (without extension)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs, data)")
    parser.add_argument(
        "--flight-recording",
        action="store_true",
        help="profile: each ingester's JVM writes <work>/<run>/profile.jfr (use with --keep)",
    )
    parser.add_argument(
        "--floe-spark-conf",
        action="append",
        default=[],
        help="an extra KEY=VALUE Spark setting for floe ingest (repeatable; the plain job keeps defaults)",
    )
    parser.add_argument(
        "--floe-table-property",
        action="append",
        default=[],
        help="a KEY=VALUE table property set on floe's throughput tables after floe created them "
        "(repeatable; experiments with the Parquet writer; the plain job's table keeps floe's defaults)",
    )
    return parser.parse_args(argv)


def table_properties(pairs: list[str]) -> dict[str, str]:
    """`--floe-table-property KEY=VALUE` options as table properties."""
    properties: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"--floe-table-property: expected KEY=VALUE, got {pair!r}")
        properties[key] = value
    return properties


def set_table_properties(env: Environment, identifiers: list[str], properties: dict[str, str]) -> None:
    """Set `properties` on each of floe's tables (through floe's REST catalog, as any client would)."""
    for identifier in identifiers:
        with env.catalog.load_table(identifier).transaction() as transaction:
            transaction.set_properties(properties)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    settings = SparkSettings(
        args.master,
        args.driver_memory,
        args.records_per_batch,
        args.commit_interval,
        flight_recording=args.flight_recording,
        floe_spark_conf=tuple(args.floe_spark_conf),
    )
    systems = [args.only] if args.only else [FLOE, PLAIN]
    extra_properties = table_properties(args.floe_table_property)
    formats = tuple(f.strip() for f in args.formats.split(",") if f.strip())
    unknown = [f for f in formats if f not in FORMATS]
    if unknown or not formats:
        raise SystemExit(f"--formats: {args.formats!r}: choose from {', '.join(FORMATS)}")
    if JSON not in formats:
        formats = (JSON, *formats)  # the plain job's backlog, and the peer of the other formats
    # floe on every format, the plain job on JSON (it is written for JSON only).
    runs = [(s, f) for s in systems for f in formats if s == FLOE or f == JSON]
    formats = tuple(dict.fromkeys(f for _, f in runs))  # only the backlogs some run reads
    machine = report.machine_info()
    work = Path(tempfile.mkdtemp(prefix="floe-ingest-bench-"))
    print(f"work directory {work}; load average {machine['load_average_before']}", flush=True)
    throughput: list[dict[str, Any]] = []
    freshness: list[dict[str, Any]] = []
    backlog: ProduceResult | None = None
    backlogs: dict[str, ProduceResult] = {}
    quiet: list[dict[str, Any]] = []
    diagnosis: dict[str, Any] | None = None
    try:
        with environment(work, args.kafka_heap) as env:
            kafka = env.kafka
            for source_format in formats:
                kafka.create_topic(BACKLOG_TOPICS[source_format], PARTITIONS)
            for topic in FRESHNESS_TOPICS.values():
                kafka.create_topic(topic, PARTITIONS)
            apply_pipeline(
                env.server,
                pipeline_config(kafka.bootstrap_servers, args.rounds, args.diagnosis_rounds > 0, formats),
            )
            if extra_properties:
                set_table_properties(
                    env,
                    [
                        floe_table(throughput_cluster(r, f), BACKLOG_TOPICS[f])
                        for r in range(args.rounds)
                        for f in formats
                    ],
                    extra_properties,
                )
            if not args.skip_throughput:
                print(
                    f"producing {args.records:,} records of ~{RECORD_BYTES} bytes "
                    f"as {', '.join(formats)} ...",
                    flush=True,
                )
                produced = produce_backlogs(
                    kafka.bootstrap_servers,
                    {BACKLOG_TOPICS[f]: Reencoder(f) for f in formats},
                    args.records,
                    EventFactory(),
                )
                backlogs = {f: produced[BACKLOG_TOPICS[f]] for f in formats}
                backlog = backlogs[JSON]
                for source_format, made in backlogs.items():
                    print(
                        f"  {source_format}: {made.value_bytes / made.records:,.0f} bytes per record, "
                        f"{made.value_bytes / 2**20:,.0f} MiB",
                        flush=True,
                    )
                print(f"  produced in {backlog.seconds:.1f} s", flush=True)
                for round_index in range(args.rounds):
                    order = runs if round_index % 2 == 0 else runs[::-1]
                    for system, source_format in order:
                        name = variant(system, source_format)
                        quiet.append({"before": f"{name} round {round_index + 1}"} | wait_for_quiet(env, 5))
                        home = work / f"{name}-r{round_index + 1}"
                        ingester: Ingester
                        if system == FLOE:
                            cluster = throughput_cluster(round_index, source_format)
                            identifier = floe_table(cluster, BACKLOG_TOPICS[source_format])
                            ingester = FloeIngester(env.server, home, cluster, settings)
                        else:
                            identifier = f"{PLAIN_NAMESPACE}.plain_r{round_index + 1}"
                            ingester = PlainJob(
                                env.server, home, kafka.bootstrap_servers, BACKLOG_TOPIC, identifier, settings
                            )
                        throughput.append(
                            measure_throughput(
                                env,
                                ingester,
                                identifier,
                                backlogs[source_format],
                                round_index,
                                args.timeout,
                                source_format,
                            )
                        )
            if not args.skip_freshness:
                for system in systems:
                    quiet.append({"before": f"{system} freshness"} | wait_for_quiet(env, 5))
                    home = work / f"{system}-fresh"
                    topic = FRESHNESS_TOPICS[system]
                    if system == FLOE:
                        identifier = floe_table(FRESHNESS_CLUSTER, topic)
                        ingester = FloeIngester(env.server, home, FRESHNESS_CLUSTER, settings)
                    else:
                        identifier = f"{PLAIN_NAMESPACE}.plain_fresh"
                        # Before DuckDB attaches: it lists the catalog's namespaces once, and without a
                        # throughput phase the job would create this one only after.
                        env.catalog.create_namespace_if_not_exists(PLAIN_NAMESPACE)
                        ingester = PlainJob(
                            env.server, home, kafka.bootstrap_servers, topic, identifier, settings
                        )
                    freshness.append(
                        measure_freshness(
                            env,
                            ingester,
                            identifier,
                            topic,
                            rate=args.freshness_rate,
                            warmup_s=args.freshness_warmup,
                            duration_s=args.freshness_seconds,
                            duckdb_dir=work / "duckdb",
                        )
                    )
            if args.diagnosis_rounds > 0:
                quiet.append({"before": "diagnosis"} | wait_for_quiet(env, 5))
                diagnosis = run_diagnosis(
                    env,
                    large=args.records_per_batch,
                    small=args.diagnosis_small,
                    rounds=args.diagnosis_rounds,
                    master=args.master,
                    driver_memory=args.driver_memory,
                )
            postgres_bin = env.postgres.bin
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    doc = report.results_document(
        settings={
            "started_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "total_seconds": round(time.perf_counter() - started, 1),
            "master": settings.master,
            "driver_memory": settings.driver_memory,
            "records_per_batch": settings.records_per_batch,
            "commit_interval_s": settings.commit_interval_s,
            "floe_spark_conf": list(settings.floe_spark_conf),
            "floe_table_properties": extra_properties,
            "flight_recording": settings.flight_recording,
            "topic_partitions": PARTITIONS,
            "backlog_records": args.records if backlog else None,
            "backlog_formats": list(formats) if backlog else [],
            "rounds": args.rounds,
            "freshness_rate_per_s": args.freshness_rate,
            "freshness_window_s": args.freshness_seconds,
            "freshness_warmup_s": args.freshness_warmup,
            "kafka_heap": args.kafka_heap,
        },
        machine=machine,
        version_info=report.versions(postgres_bin),
        backlog=backlog,
        backlogs=backlogs,
        throughput=throughput,
        freshness=freshness,
        quiet=quiet,
        diagnosis=diagnosis,
    )
    json_path, md_path = report.write_results(doc, args.output, args.name)
    print(report.render_markdown(doc))
    print(f"wrote {json_path} and {md_path}")
    return 0
