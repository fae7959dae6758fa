"""Where a Spark JVM's CPU goes: the execution samples of a Java Flight Recording, aggregated.

`python -m benchmarks.ingest.profile <recording.jfr> [--top 30]` (recordings from
`python -m benchmarks.ingest --flight-recording --keep`). Prints the top leaf methods (self time), the
top frames counted once per sample they appear in (inclusive time) and the share per area (JSON parsing,
Parquet encoding, compression, Kafka client, ...) by the innermost frame that names one.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from runtime.java import spark_java_home

# Areas by frame prefix, the first match from the leaf up names the sample's area.
AREAS: tuple[tuple[str, str], ...] = (
    ("com.github.luben.zstd", "zstd compression"),
    ("org.xerial.snappy", "snappy compression"),
    ("net.jpountz.lz4", "lz4 compression"),
    ("io.airlift.compress", "aircompressor"),
    ("org.apache.parquet.column.values.dictionary", "Parquet dictionary encoding"),
    ("org.apache.parquet", "Parquet writer (other)"),
    ("org.apache.iceberg.parquet", "Iceberg Parquet writer"),
    ("org.apache.iceberg", "Iceberg (other)"),
    ("com.fasterxml.jackson", "Jackson (JSON tokens)"),
    ("org.apache.spark.sql.catalyst.json", "Spark JSON (JacksonParser)"),
    ("org.apache.kafka", "Kafka client"),
    ("org.apache.spark.sql.kafka010", "Spark Kafka source"),
    ("org.apache.spark.sql.catalyst.expressions.GeneratedClass", "generated code (projections)"),
    ("org.apache.spark.unsafe", "UnsafeRow / UTF8String"),
    ("org.apache.spark.sql.catalyst", "Spark catalyst (other)"),
    ("org.apache.spark", "Spark (other)"),
    ("java.util.zip", "java.util.zip"),
    ("sun.nio", "NIO"),
    ("java.", "JDK"),
    ("jdk.", "JDK"),
)


def _samples(recording: Path, depth: int) -> Iterator[tuple[str, list[str]]]:
    """(thread name, frames leaf first) of each execution sample."""
    out = subprocess.run(
        [
            str(Path(spark_java_home()) / "bin" / "jfr"),
            "print",
            "--json",
            "--stack-depth",
            str(depth),
            "--events",
            "jdk.ExecutionSample",
            str(recording),
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    events: list[dict[str, Any]] = json.loads(out)["recording"]["events"]
    for event in events:
        values = event["values"]
        thread = (values.get("sampledThread") or {}).get("javaName") or ""
        frames = [
            f"{f['method']['type']['name'].replace('/', '.')}.{f['method']['name']}"
            for f in (values.get("stackTrace") or {}).get("frames", [])
        ]
        yield thread, frames


def area(frames: list[str]) -> str:
    for frame in frames:
        for prefix, name in AREAS:
            if frame.startswith(prefix):
                return name
    return "other"


def summarize(recording: Path, top: int = 30, depth: int = 64) -> dict[str, Any]:
    leaves: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    areas: Counter[str] = Counter()
    threads: Counter[str] = Counter()
    total = 0
    for thread, frames in _samples(recording, depth):
        if not frames:
            continue
        total += 1
        leaves[frames[0]] += 1
        inclusive.update(set(frames))
        areas[area(frames)] += 1
        threads["executor task" if thread.startswith("Executor task launch") else thread.split(" ")[0]] += 1

    def shares(counter: Counter[str], n: int) -> list[tuple[str, float]]:
        return [(name, round(100 * count / total, 1)) for name, count in counter.most_common(n)]

    return {
        "samples": total,
        "areas": shares(areas, 40),
        "threads": shares(threads, 10),
        "leaf": shares(leaves, top),
        "inclusive": shares(inclusive, top),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ingest.profile", description=__doc__)
    parser.add_argument("recording", type=Path)
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args(argv)
    found = summarize(args.recording, args.top)
    print(f"{found['samples']} samples")
    for title in ("areas", "threads", "leaf", "inclusive"):
        print(f"\n{title} (% of samples)")
        for name, share in found[title]:
            print(f"  {share:5.1f}  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
