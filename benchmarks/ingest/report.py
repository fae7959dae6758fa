"""The ingestion benchmark's results: versions, the JSON document and the Markdown side-by-side tables."""

from __future__ import annotations

import json
import os
import statistics
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from benchmarks.catalog.report import _first_line, _package_version
from benchmarks.catalog.report import machine_info as catalog_machine_info
from benchmarks.ingest.ingesters import FLOE, PLAIN
from benchmarks.ingest.producing import ProduceResult

FLOE_AVRO, FLOE_PROTOBUF = "floe-avro", "floe-protobuf"  # run.variant(FLOE, format)
# Keyed by a run's `variant`: floe and the plain job on JSON, floe on the same records as Avro and Protobuf.
LABELS = {
    FLOE: "floe ingest, JSON",
    PLAIN: "plain Spark job, JSON",
    FLOE_AVRO: "floe ingest, Avro",
    FLOE_PROTOBUF: "floe ingest, Protobuf",
}

# Targets from the issue: reported, never asserted.
FLOE_MIB_PER_S_TARGET = 40.0
THROUGHPUT_RATIO_TARGET = 1.5
FRESHNESS_P50_TARGET_S = 5.0
PROTOBUF_VS_JSON_RECORDS_TARGET = 1.0  # issue 14: floe on Protobuf ≥ floe on JSON, in records/s

SYSTEMS = {
    FLOE: (
        "`floe ingest --cluster <c>` (`python -m floe.cli ingest`): one Structured Streaming query per "
        "table with `foreachBatch`; per batch it reads the committed offsets of the table and its "
        "dead-letter table from floe, decodes once per value (JSON with floe's decoder on Jackson's byte "
        "parser, a Catalyst expression building Spark's internal rows, which also lists undeclared keys; "
        "Avro with `from_avro`, Protobuf with floe's Java UDF, "
        "protobuf-java in the JVM) and checks "
        "required fields, and appends the rows (with the `_kafka` struct: partition, offset, timestamp, "
        "key, headers; typed as the table declares them, so Spark adds no projection) with "
        "`writeTo(...).append()` carrying the Kafka offsets in the snapshot summary "
        "(floe's exactly-once fence): after a query's first batch its only job, the offsets from Spark's "
        "offset log, the data files staged by Iceberg and committed by floe's jar with the record times "
        "and counts observed while writing, on a thread of its own while the next batch runs (a query's "
        "first batch reads its offsets and record times with a job over the raw records first); a batch "
        "with dead letters is persisted and written in two steps, dead letters first. Batches run back to "
        "back while a full batch waits (the commit interval bounds how long records wait, Kafka's "
        "`minOffsetsPerTrigger`/`maxTriggerDelay`). Table from floe.yaml: "
        "`partitioning_scheme: hour` (hours of `_kafka.timestamp`), zstd Parquet with a 64 KiB "
        "dictionary budget per column (`write.parquet.dict-size-bytes`), `write.distribution-mode=none`."
    ),
    PLAIN: (
        '`python -m benchmarks.ingest.plain_job`: `spark.readStream.format("kafka")` (startingOffsets '
        'earliest, maxOffsetsPerTrigger), `selectExpr("CAST(value AS STRING)")`, `from_json`, the fields '
        'plus the Kafka timestamp as `ts`, `writeStream.format("iceberg").outputMode("append")'
        '.trigger(processingTime=...).option("checkpointLocation", ...).toTable(...)`; table created '
        "with `CREATE TABLE ... USING iceberg PARTITIONED BY (hours(ts))` and default properties. No dead "
        "letters, no offsets in the catalog (Spark's checkpoint is its only record of progress)."
    ),
}


def machine_info() -> dict[str, Any]:
    return catalog_machine_info()


def versions(postgres_bin: Path | None) -> dict[str, Any]:
    from confluent_kafka import libversion

    from devtools.kafka_broker import KAFKA_VERSION
    from runtime.spark import ICEBERG_VERSION, SPARK_JARS

    kafka_clients = next((a.version for a in SPARK_JARS if a.name == "kafka-clients"), None)
    return {
        "python": sys.version.split()[0],
        "floe": _package_version("floe"),
        "floe commit": git_commit(),
        "pyspark": _package_version("pyspark"),
        "iceberg-spark-runtime": ICEBERG_VERSION,
        "spark kafka-clients": kafka_clients,
        "kafka broker": KAFKA_VERSION,
        "confluent-kafka": _package_version("confluent-kafka"),
        "librdkafka": libversion()[0],
        "duckdb": _package_version("duckdb"),
        "duckdb iceberg extension": _package_version("duckdb_extension_iceberg"),
        "pyiceberg": _package_version("pyiceberg"),
        "postgresql": _first_line([str(postgres_bin / "postgres"), "--version"]) if postgres_bin else None,
        "java": _first_line(["java", "-version"]),
    }


def git_commit() -> str | None:
    """The checkout's commit, and whether the measured code (ingest/, benchmarks/ingest/) was edited."""
    root = Path(__file__).resolve().parents[2]
    commit = _first_line(["git", "-C", str(root), "rev-parse", "--short", "HEAD"])
    if commit is None:
        return None
    changed = _first_line(
        ["git", "-C", str(root), "status", "--porcelain", "--", "ingest", "benchmarks/ingest"]
    )
    return f"{commit} (with local changes)" if changed else commit


def _mean(values: list[float]) -> float | None:
    return round(statistics.fmean(values), 2) if values else None


def throughput_summary(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per variant (system and format): the mean over rounds, and every round's value."""
    summary: dict[str, dict[str, Any]] = {}
    for name in LABELS:
        mine = [r for r in runs if r.get("variant", r["system"]) == name]
        if mine:
            summary[name] = {
                "rounds": len(mine),
                "records_per_s": _mean([r["records_per_s"] for r in mine]),
                "mib_per_s": _mean([r["mib_per_s"] for r in mine]),
                "mib_per_s_by_round": [r["mib_per_s"] for r in mine],
                "records_per_s_by_round": [r["records_per_s"] for r in mine],
                "ingester_cpu_s_per_100k_records": _mean(
                    [c for r in mine if (c := r["ingester_cpu_s_per_100k_records"])]
                ),
            }
    return summary


def results_document(
    *,
    settings: dict[str, Any],
    machine: dict[str, Any],
    version_info: dict[str, Any],
    backlog: ProduceResult | None,
    throughput: list[dict[str, Any]],
    backlogs: dict[str, ProduceResult] | None = None,
    freshness: list[dict[str, Any]],
    quiet: list[dict[str, Any]],
    diagnosis: dict[str, Any] | None = None,
) -> dict[str, Any]:
    summary = throughput_summary(throughput)
    floe_mib = summary.get(FLOE, {}).get("mib_per_s")
    plain_mib = summary.get(PLAIN, {}).get("mib_per_s")
    ratio = round(floe_mib / plain_mib, 2) if floe_mib and plain_mib else None
    json_records = summary.get(FLOE, {}).get("records_per_s")
    protobuf_records = summary.get(FLOE_PROTOBUF, {}).get("records_per_s")
    protobuf_ratio = round(protobuf_records / json_records, 2) if protobuf_records and json_records else None
    floe_fresh = next((f for f in freshness if f["system"] == FLOE), None)
    p50 = floe_fresh["freshness_s"]["p50"] if floe_fresh else None
    return {
        "benchmark": "ingest",
        "settings": settings,
        "machine": machine | {"load_average_after": [round(x, 2) for x in os.getloadavg()]},
        "versions": version_info,
        "systems": {name: SYSTEMS[name] for name in (FLOE, PLAIN)},
        "backlog": (
            asdict(backlog)
            | {
                "bytes_per_record": round(backlog.value_bytes / backlog.records, 1),
                "produce_mib_per_s": round(backlog.mib_per_second, 1),
            }
            if backlog
            else None
        ),
        "backlogs": {
            name: asdict(made) | {"bytes_per_record": round(made.value_bytes / made.records, 1)}
            for name, made in (backlogs or {}).items()
        },
        "throughput": throughput,
        "throughput_summary": summary,
        "freshness": freshness,
        "machine_load_between_runs": quiet,
        "diagnosis": diagnosis,
        "targets": {
            "floe_mib_per_s": floe_mib,
            "floe_mib_per_s_target": FLOE_MIB_PER_S_TARGET,
            "floe_mib_per_s_met": None if floe_mib is None else floe_mib >= FLOE_MIB_PER_S_TARGET,
            "floe_vs_plain_ratio": ratio,
            "floe_vs_plain_ratio_target": THROUGHPUT_RATIO_TARGET,
            "floe_vs_plain_ratio_met": None if ratio is None else ratio >= THROUGHPUT_RATIO_TARGET,
            "floe_freshness_p50_s": p50,
            "floe_freshness_p50_target_s": FRESHNESS_P50_TARGET_S,
            "floe_freshness_p50_met": None if p50 is None else p50 <= FRESHNESS_P50_TARGET_S,
            "floe_protobuf_vs_json_records_ratio": protobuf_ratio,
            "floe_protobuf_vs_json_records_ratio_target": PROTOBUF_VS_JSON_RECORDS_TARGET,
            "floe_protobuf_vs_json_records_ratio_met": (
                None if protobuf_ratio is None else protobuf_ratio >= PROTOBUF_VS_JSON_RECORDS_TARGET
            ),
        },
    }


def _fmt(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def _verdict(met: bool | None) -> str:
    return "not measured" if met is None else ("met" if met else "missed")


def _cores(cpu: dict[str, float], key: str) -> str:
    return _fmt(cpu.get(key), 2)


def render_markdown(doc: dict[str, Any]) -> str:
    settings, machine = doc["settings"], doc["machine"]
    backlog = doc["backlog"]
    lines = [
        "# Ingestion benchmark: floe ingest vs a plain Spark Structured Streaming job",
        "",
        f"Generated by `python -m benchmarks.ingest` on {settings['started_at']} "
        f"({settings['total_seconds']:.0f} s in all). Both ingesters run as their own Python driver with "
        f"their own Spark JVM: master `{settings['master']}`, driver memory {settings['driver_memory']}, "
        f"{settings['records_per_batch']:,} records per micro-batch at most (floe's "
        "`--max-records-per-batch`, the job's `maxOffsetsPerTrigger`), a "
        f"{settings['commit_interval_s']:g} s commit interval (floe's `--commit-interval`, the job's "
        "`processingTime` trigger), the same Kafka broker, the same floe catalog (every commit through "
        "its REST API) and hour partitioning on the Kafka timestamp. Topics have "
        f"{settings['topic_partitions']} partitions.",
        "",
    ]
    if backlog:
        lines += [
            "## Throughput into committed Iceberg tables",
            "",
            f"A backlog of {backlog['records']:,} JSON records ({backlog['bytes_per_record']:,.0f} bytes "
            f"each on average, {backlog['value_bytes'] / 2**20:,.0f} MiB) was produced before any "
            f"ingester started ({backlog['seconds']:.0f} s). Each run starts one ingester alone on the "
            "whole backlog into a fresh table; the rate counts the records committed between the "
            "table's first and last snapshot (Iceberg commit timestamps), so Spark's start-up and the "
            "first batch are left out. Rounds alternate which system goes first. MiB are of Kafka "
            "record values. "
            + _formats_sentence(doc.get("backlogs") or {})
            + "CPU in cores busy on average during that window: the ingester (driver and "
            "Spark JVM), the Kafka broker, floe's catalog with PostgreSQL, this benchmark process, and "
            "everything else on the machine (other users: high values mean a disturbed run).",
            "",
            "| Round | System | records/s | MiB/s | window s | commits | commit every (median) "
            "| records/commit | start-up s | ingester CPU | broker | catalog | other "
            "| ingester CPU s per 100k records |",
            "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in doc["throughput"]:
            cpu = r["cpu_cores"]
            lines.append(
                f"| {r['round']} | {LABELS[r.get('variant', r['system'])]} | {_fmt(r['records_per_s'], 0)} "
                f"| {_fmt(r['mib_per_s'], 1)} | {_fmt(r['window_s'], 1)} | {r['commits']} "
                f"| {_fmt(r['commit_interval_median_s'], 2)} s | {r['records_per_commit_median']:,} "
                f"| {_fmt(r['startup_s'], 1)} | {_cores(cpu, 'ingester')} | {_cores(cpu, 'broker')} "
                f"| {_cores(cpu, 'catalog')} | {_cores(cpu, 'other')} "
                f"| {_fmt(r['ingester_cpu_s_per_100k_records'], 1)} |"
            )
        lines += ["", "Mean over rounds:", ""]
        for system, s in doc["throughput_summary"].items():
            lines.append(
                f"- {LABELS[system]}: {_fmt(s['records_per_s'], 0)} records/s, "
                f"**{_fmt(s['mib_per_s'], 1)} MiB/s** (rounds: "
                + ", ".join(_fmt(v, 1) for v in s["mib_per_s_by_round"])
                + f"), {_fmt(s['ingester_cpu_s_per_100k_records'], 1)} CPU s per 100k records"
            )
        lines.append("")
    if doc["freshness"]:
        f0 = doc["freshness"][0]
        lines += [
            "## Freshness: produced → visible in DuckDB through floe's REST catalog",
            "",
            f"Records produced at {f0['rate_per_s']:g}/s (librdkafka, linger 5 ms), each carrying its "
            "produce time (`sent_at`), while one ingester runs; a DuckDB reader (iceberg extension, one "
            "thread, floe attached as an Iceberg REST catalog) queries the table every 0.2 s for records "
            "it has not seen. A record's freshness is the end of the first query that returned it minus "
            f"its `sent_at`. Measured over the records produced during {f0['window_s']:g} s, starting "
            f"{f0['warmup_s']:g} s after the first record became visible (the backlog of Spark's "
            "start-up is left out).",
            "",
            "| System | records | p50 s | p90 s | p99 s | max s | missing | commits | commit every (median) "
            "| reader query p50 | ingester CPU | other CPU |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for f in doc["freshness"]:
            fr, cpu = f["freshness_s"], f["cpu_cores"]
            lines.append(
                f"| {LABELS[f['system']]} | {f['records']:,} | {_fmt(fr['p50'], 2)} | {_fmt(fr['p90'], 2)} "
                f"| {_fmt(fr['p99'], 2)} | {_fmt(fr['max'], 2)} | {f['missing']} | {f['commits_in_window']} "
                f"| {_fmt(f['commit_interval_median_s'], 2)} s | {_fmt(f['reader_poll_s']['p50'], 3)} s "
                f"| {_cores(cpu, 'ingester')} | {_cores(cpu, 'other')} |"
            )
        lines.append("")
    lines += ["## Where the time goes", ""]
    for r in doc["throughput"] + doc["freshness"]:
        phase = f"round {r['round']}" if "round" in r else "freshness"
        notes, label = r["notes"], LABELS[r.get("variant", r["system"])]
        if "floe_ingest_batch_seconds" in notes:
            b = notes["floe_ingest_batch_seconds"]
            lines.append(
                f"- {label}, {phase}: `floe_ingest_batch_seconds` {b['count']} batches, "
                f"mean {_fmt(b['mean'], 2)} s (offsets, decode, write and commit)"
            )
        if "spark_progress" in notes:
            p = notes["spark_progress"]
            if p.get("batches"):
                durations = ", ".join(f"{k} {v:,} ms" for k, v in p["duration_ms_median"].items() if v)
                lines.append(
                    f"- {label}, {phase}: {p['batches']} batches of {p['rows_median']:,} "
                    f"rows (median); Spark's median durations: {durations}"
                )
    lines += _diagnosis_lines(doc.get("diagnosis"))
    targets = doc["targets"]
    lines += [
        "",
        "## Targets (reported, not asserted)",
        "",
        f"- floe ≥ {targets['floe_mib_per_s_target']:g} MiB/s of 1 KiB JSON on this machine: "
        f"{_fmt(targets['floe_mib_per_s'], 1)} MiB/s ({_verdict(targets['floe_mib_per_s_met'])})",
        f"- floe ≥ {targets['floe_vs_plain_ratio_target']:g}x the plain job: "
        f"{_fmt(targets['floe_vs_plain_ratio'], 2)}x ({_verdict(targets['floe_vs_plain_ratio_met'])})",
        f"- floe freshness p50 ≤ {targets['floe_freshness_p50_target_s']:g} s at a "
        f"{settings['commit_interval_s']:g} s commit interval: {_fmt(targets['floe_freshness_p50_s'], 2)} s "
        f"({_verdict(targets['floe_freshness_p50_met'])})",
        "- floe on Protobuf ≥ floe on JSON in records/s (the same records): "
        + (
            "not measured"
            if targets.get("floe_protobuf_vs_json_records_ratio") is None
            else f"{targets['floe_protobuf_vs_json_records_ratio']:.2f}x "
            f"({_verdict(targets['floe_protobuf_vs_json_records_ratio_met'])})"
        ),
        "",
        "## Systems",
        "",
    ]
    lines += [f"- {LABELS[name]}: {text}" for name, text in doc["systems"].items()]
    lines += ["", "## Machine", ""]
    lines.append(
        f"{machine['cpus']} CPUs ({machine['cpu_model']}), {machine['memory_gb']} GB RAM, {machine['os']}; "
        f"load average before {machine['load_average_before']}, after {machine['load_average_after']}. "
        "The machine is shared: cores busy outside the benchmark's processes (its idle broker and catalog "
        "excluded) in the 5 s before each run:"
    )
    lines.append("")
    lines += [f"- {q['before']}: {_fmt(q.get('other'), 2)} cores" for q in doc["machine_load_between_runs"]]
    lines += ["", "Versions: " + ", ".join(f"{k} {v}" for k, v in doc["versions"].items() if v), ""]
    return "\n".join(lines)


def _formats_sentence(backlogs: dict[str, Any]) -> str:
    """What the Avro and Protobuf backlogs are, when the run had them."""
    others = {name: b for name, b in backlogs.items() if name != "json"}
    if not others:
        return ""
    sizes = ", ".join(f"{name} {b['bytes_per_record']:,.0f} bytes" for name, b in backlogs.items())
    return (
        f"The same records were produced as {' and '.join(others)} to topics of their own (each JSON value "
        "parsed and re-encoded: the same fields, keys, partitions and `sent_at`), raw (no Confluent "
        "prefix, like the JSON values), and floe ingests each into a table of the same schema "
        "(floe.yaml inline: `avro_framing: raw`; `protobuf_framing: raw` with the `.proto` of "
        f"`benchmarks/ingest/events.py`); values per record: {sizes}. The plain job reads JSON only. "
    )


def _diagnosis_lines(diagnosis: dict[str, Any] | None) -> list[str]:
    if not diagnosis:
        return []
    from benchmarks.ingest.diagnose import VARIANTS

    settings, variants, plans = diagnosis["settings"], diagnosis["variants"], diagnosis["plans"]
    large, small = variants["large"], variants["small"]
    lines = [
        "",
        "Batch-cost diagnosis (`python -m benchmarks.ingest.diagnose`, run after the measurements in one "
        f"Spark session on `{settings['master']}`): the same Kafka slice, read as a batch DataFrame (what a "
        "micro-batch is), written by each variant; medians of "
        f"{settings['rounds']} rounds after a warm-up round, CPU = Spark JVM + Python driver. "
        f"`from_json` appears {plans['from_json_in_floe_good_rows_plan']} times in the executed plan of "
        f"floe's good rows (`decode_json(...).where(_error IS NULL)`) and "
        f"{plans['from_json_in_plain_plan']} in the plain job's.",
        "",
        f"| Variant | {settings['large']:,} records: wall s | CPU s | records/s "
        f"| {settings['small']:,} records: wall s | CPU s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, text in VARIANTS.items():
        big, little = large.get(name), small.get(name)
        if big is None or little is None:
            continue
        lines.append(
            f"| `{name}`: {text} | {_fmt(big['wall_s_median'], 2)} | {_fmt(big['cpu_s_median'], 2)} "
            f"| {_fmt(big['records_per_s'], 0)} | {_fmt(little['wall_s_median'], 2)} "
            f"| {_fmt(little['cpu_s_median'], 2)} |"
        )
    return lines


def write_results(doc: dict[str, Any], directory: Path, name: str = "ingest") -> tuple[Path, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    json_path, md_path = directory / f"{name}.json", directory / f"{name}.md"
    json_path.write_text(json.dumps(doc, indent=2) + "\n")
    md_path.write_text(render_markdown(doc))
    return json_path, md_path
